"""Deterministic samples from a strategy, for commands that run outside a Hypothesis test
(``agentprop run`` needs a few paraphrases per case, the same ones on every run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from agentprop.strategies._internal.paraphrase import Paraphrase, paraphrases

if TYPE_CHECKING:  # Hypothesis is imported where a sample is drawn: a run of MFT cases needs none
    from hypothesis import strategies as st

T = TypeVar("T")


class _Enough(Exception):
    """Raised by :func:`sample`'s test once it holds ``n`` values: Hypothesis stops generating
    at the first failing example when the shrink phase is off."""


def sample(
    strategy: st.SearchStrategy[T], n: int, *, seed_value: int = 0, tries: int = 8
) -> list[T]:
    """Up to ``n`` distinct values drawn from ``strategy`` with a fixed seed (same seed, same
    values), through Hypothesis's public API only.

    Hypothesis draws up to ``n * tries`` examples, but stops as soon as ``n`` distinct values
    are in: the test raises once it has them, and with generation the only phase, the first
    failure ends the run (Hypothesis replays that example once, which adds nothing). The
    settings, ``max_examples`` included, are those of a full run, so the examples drawn before
    the stop, and the values kept, are the same as if all ``n * tries`` had been drawn."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    found: list[T] = []

    @seed(seed_value)
    @settings(
        max_examples=max(n * tries, 1),
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: T) -> None:
        if len(found) < n and value not in found:
            found.append(value)
        if len(found) >= n:
            raise _Enough

    try:
        collect()
    except _Enough:
        pass
    return found


def paraphrase_variants(
    text: str, n: int = 2, *, seed_value: int = 0, lang: str = "en", **kwargs: Any
) -> list[Paraphrase]:
    """``n`` paraphrases of ``text`` that differ from it by more than spacing and case
    (deterministic for a seed)."""
    drawn = sample(paraphrases(text, lang=lang, **kwargs), n * 4, seed_value=seed_value)
    norm = " ".join(text.split()).lower()
    out = [p for p in drawn if " ".join(p.text.split()).lower() != norm]
    return out[:n]
