"""Deterministic samples of a strategy (agentprop.strategies._internal.variants): the same values as
a full draw of ``n * tries`` examples, drawn with no more examples than it takes to find them."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from agentprop.strategies._internal.paraphrase import paraphrases
from agentprop.strategies._internal.variants import paraphrase_variants, sample


def full_draw(
    strategy: st.SearchStrategy[Any], n: int, *, seed_value: int = 0, tries: int = 8
) -> tuple[list[Any], int]:
    """What ``sample`` returned before it stopped early: all ``n * tries`` examples drawn, the
    first ``n`` distinct ones kept; also how many examples were drawn."""
    found: list[Any] = []
    drawn = 0

    @seed(seed_value)
    @settings(
        max_examples=max(n * tries, 1),
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        nonlocal drawn
        drawn += 1
        if len(found) < n and value not in found:
            found.append(value)

    collect()
    return found, drawn


def counting(strategy: st.SearchStrategy[Any]) -> tuple[st.SearchStrategy[Any], list[int]]:
    calls = [0]

    def count(value: Any) -> Any:
        calls[0] += 1
        return value

    return strategy.map(count), calls


def test_sample_stops_once_it_has_n_distinct_values_and_keeps_the_same_ones() -> None:
    strategy, calls = counting(st.integers(0, 10_000))
    got = sample(strategy, 3, seed_value=5)
    expected, drawn = full_draw(st.integers(0, 10_000), 3, seed_value=5)
    assert got == expected and len(got) == 3
    # a full draw stops at max_examples (n * tries); the sample needs far fewer
    assert 3 <= drawn <= 24
    assert calls[0] < 10, f"{calls[0]} examples drawn for 3 distinct values"


def test_sample_of_a_small_space_returns_what_a_full_draw_finds() -> None:
    # two values only: the sample cannot stop early, and must not invent a third
    assert sample(st.booleans(), 3, seed_value=1) == full_draw(st.booleans(), 3, seed_value=1)[0]


def test_paraphrase_variants_are_the_full_draws_first_distinct_values() -> None:
    text = "Please cancel my order O-1001 - card last4 4242, zip 94107."
    for seed_value in (0, 3):
        strategy, calls = counting(paraphrases(text))
        drawn = sample(strategy, 8, seed_value=seed_value)
        expected, _ = full_draw(paraphrases(text), 8, seed_value=seed_value)
        assert [p.text for p in drawn] == [p.text for p in expected]
        assert calls[0] < 64
        variants = paraphrase_variants(text, 2, seed_value=seed_value)
        norm = " ".join(text.split()).lower()
        assert [v.text for v in variants] == [
            p.text for p in expected if " ".join(p.text.split()).lower() != norm
        ][:2]
