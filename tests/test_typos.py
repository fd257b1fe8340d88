"""One slip without a library: :func:`agentprop._util.typos.within_one_edit` against rapidfuzz's
Damerau-Levenshtein distance, which it replaced in a run's reading of user messages."""

from __future__ import annotations

import random

import pytest
from rapidfuzz.distance import DamerauLevenshtein

from agentprop._util.typos import within_one_edit
from agentprop.testing import correct_typos


def _near(rng: random.Random, word: str) -> str:
    """``word`` with zero to two random edits (replace, insert, drop, swap) over a small alphabet,
    so that most pairs are within two edits of each other."""
    for _ in range(rng.randint(0, 2)):
        i = rng.randint(0, len(word))
        edit = rng.choice("rids")
        letter = rng.choice("abc")
        if edit == "r" and i < len(word):
            word = word[:i] + letter + word[i + 1 :]
        elif edit == "i":
            word = word[:i] + letter + word[i:]
        elif edit == "d" and i < len(word):
            word = word[:i] + word[i + 1 :]
        elif edit == "s" and i + 1 < len(word):
            word = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word


def test_within_one_edit_is_a_damerau_levenshtein_distance_of_at_most_one() -> None:
    rng = random.Random(31)
    near = 0
    for _ in range(20_000):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 7)))
        b = _near(rng, a) if rng.random() < 0.8 else "".join(rng.choice("abc") for _ in range(4))
        expected = DamerauLevenshtein.distance(a, b) <= 1
        near += expected
        assert within_one_edit(a, b) == expected, (a, b)
        assert within_one_edit(b, a) == expected, (b, a)
    assert 5_000 < near < 19_000  # both answers were asked many times


def test_the_slips_a_reader_forgives() -> None:
    assert within_one_edit("cancel", "cancle")  # two letters swapped
    assert within_one_edit("cancel", "cancell")  # a doubled letter
    assert within_one_edit("cancel", "cancl")  # a dropped one
    assert within_one_edit("cancel", "cancal")  # a wrong one
    assert not within_one_edit("cancel", "cnacle")  # two swaps
    assert not within_one_edit("cancel", "acnel")  # a swap and a drop
    assert not within_one_edit("ab", "ba" + "x")
    assert correct_typos("Plese cancle it", ["please", "cancel"]) == "Please cancel it"


def test_a_message_is_read_for_its_repair_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every run of a case reads the same user messages, as corrected and for what they take
    # back: the reading is kept per text
    from agentprop._util import typos

    read: list[str] = []
    original = typos._repair_words_read

    def counting(text: str) -> tuple[str, list[int]]:
        read.append(text)
        return original(text)

    monkeypatch.setattr(typos, "_repair_words_read", counting)
    text = "Cancel O-1001, srory, I mean: O-1002 (test_typos, read once)"
    for _ in range(3):
        assert typos.as_corrected(text) == "O-1002 (test_typos, read once)"
        assert typos.withdrawn_part(text) == "Cancel O-1001,"
    assert read == [text]
