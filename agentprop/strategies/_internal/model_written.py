"""Model-written realisations of a template, drawn by the strategies when an input model is in
force (opt-in: ``pytest --agentprop-input-model``; the writer lives in ``agentprop._decide``).

Invariants: with no realiser in force nothing is drawn differently; a realiser returns, for one
template, a fixed tuple of screened texts (fetched once, then remembered), so a drawn text is an
integer choice that Hypothesis shrinks away from (to the template itself) without asking the
model again.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "Realisation",
    "Realiser",
    "current_realiser",
    "realising",
    "reset_realiser",
    "set_realiser",
]


@dataclass(frozen=True)
class Realisation:
    """One screened text a model wrote for a template, and the family it was asked in
    (``template``: any natural wording; ``user:PERSONA``: a simulated user's answer)."""

    family: str
    text: str


class Realiser(Protocol):
    """What the strategies ask for model-written texts (see the module docstring)."""

    def realisations(
        self,
        text: str,
        *,
        lang: str,
        protect: Sequence[str],
        role: str = "request",
        goal: str = "",
    ) -> tuple[Realisation, ...]:
        """The screened texts for ``text`` (a turn of ``role``; ``goal``: the conversation's
        first message), in a fixed order; the same arguments give the same tuple."""
        ...


_realiser: contextvars.ContextVar[Realiser | None] = contextvars.ContextVar(
    "agentprop_realiser", default=None
)


def current_realiser() -> Realiser | None:
    """The realiser in force (``None``: strategies draw templates and packs only)."""
    return _realiser.get()


def set_realiser(realiser: Realiser | None) -> contextvars.Token[Realiser | None]:
    return _realiser.set(realiser)


def reset_realiser(token: contextvars.Token[Realiser | None]) -> None:
    _realiser.reset(token)


@contextlib.contextmanager
def realising(realiser: Realiser | None) -> Iterator[None]:
    """Within the block, the strategies also draw ``realiser``'s texts."""
    token = set_realiser(realiser)
    try:
        yield
    finally:
        reset_realiser(token)
