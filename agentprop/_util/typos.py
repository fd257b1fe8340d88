"""Reading a message the way a person does, for simulated agents, test doubles and the
grounding of a run's facts (public as :mod:`agentprop.testing.typos`).

:func:`correct_typos` puts a word within one edit of a known word back; :func:`as_corrected`
reads a self-repaired message by what follows its last repair; :func:`as_simplified` reads
traditional Chinese as simplified.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from agentprop._util.hanzi import to_simplified

_WORD = re.compile(r"[A-Za-z]+")


def within_one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are at most one edit apart: equal, or one letter replaced,
    inserted or dropped, or two adjacent letters swapped (a Damerau-Levenshtein distance of at
    most 1, without a library: a run reads every user message through this)."""
    if a == b:
        return True
    if len(a) == len(b):
        diffs = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if len(diffs) == 1:
            return True
        i = diffs[0]
        return len(diffs) == 2 and diffs[1] == i + 1 and a[i] == b[i + 1] and a[i + 1] == b[i]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    if len(long) - len(short) != 1:
        return False
    i = 0
    while i < len(short) and short[i] == long[i]:
        i += 1
    return short[i:] == long[i + 1 :]


def _match_case(source: str, word: str) -> str:
    if source.isupper() and len(source) > 1:
        return word.upper()
    if source[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def correct_typos(text: str, vocabulary: Iterable[str], *, min_length: int = 3) -> str:
    """``text`` with each word of at least ``min_length`` letters that is not in
    ``vocabulary`` but one edit (a swap, a slip, a dropped or doubled letter) from exactly one
    vocabulary word of four letters or more replaced by that word, in the same letter case."""
    vocab = sorted({w.lower() for w in vocabulary if len(w) >= 4})
    known = set(vocab)

    def fix(m: re.Match[str]) -> str:
        word = m.group()
        low = word.lower()
        if len(low) < min_length or low in known:
            return word
        near = [v for v in vocab if abs(len(v) - len(low)) <= 1 and within_one_edit(low, v)]
        return _match_case(word, near[0]) if len(near) == 1 else word

    return _WORD.sub(fix, text)


_REPAIR = re.compile(
    r"\b(?:sorry,?\s+i\s+mean(?:t)?|no\s+wait\b[^:.]*[.,]?\s*it\s+should\s+be|actually,?\s+i\s+meant|correction)\s*[:：]"
    r"|不对[，,]?\s*(?:我说错了[，,]?\s*)?(?:应该)?是\s*[:：]",
    re.IGNORECASE,
)


_REPAIR_WORDS = ("sorry", "mean", "meant", "actually", "correction", "wait", "should")
"""The words a self-repair is made of, each read through one slip ("Srory, I mean:")."""


def _repair_words_read(text: str) -> tuple[str, list[int]]:
    """``text`` with each word one slip from one of :data:`_REPAIR_WORDS` (and not one of them)
    read as that word, and for each position of the result (and its end) the position of
    ``text`` it comes from. Only a whole repair phrase counts (:data:`_REPAIR`), so a word read
    this way outside one changes nothing."""
    out: list[str] = []
    where: list[int] = []
    done = 0
    for m in _WORD.finditer(text):
        low = m.group().lower()
        if len(low) < 3 or low in _REPAIR_WORDS:
            continue
        near = [w for w in _REPAIR_WORDS if abs(len(w) - len(low)) <= 1 and within_one_edit(low, w)]
        if not near:
            continue
        out.append(text[done : m.start()])
        where.extend(range(done, m.start()))
        word = _match_case(m.group(), near[0])
        out.append(word)
        where.extend(m.start() + min(j, len(low) - 1) for j in range(len(word)))
        done = m.end()
    out.append(text[done:])
    where.extend(range(done, len(text) + 1))
    return "".join(out), where


@functools.lru_cache(maxsize=4096)
def _repaired(text: str) -> tuple[str, str]:
    """(what follows ``text``'s last self-repair, what precedes it), both stripped; ``("", "")``
    without one. Kept per text: every run of a case reads the same user messages."""
    read, where = _repair_words_read(text)
    repairs = list(_REPAIR.finditer(read))
    if not repairs:
        return "", ""
    last = repairs[-1]
    return text[where[last.end()] :].strip(), text[: where[last.start()]].strip()


def as_corrected(text: str) -> str:
    """``text`` as its writer corrected it: what follows its last self-repair ("Sorry, I mean:",
    "no wait, that's wrong. It should be:", "不对，我说错了，是：", a slip in one of its words
    read through: "Srory, I mean:") when something does, else ``text``. A person reads the value
    after the repair, not the one it takes back."""
    return _repaired(text)[0] or text


def withdrawn_part(text: str) -> str:
    """What ``text`` takes back: everything before its last self-repair (empty when it has
    none), the complement of :func:`as_corrected`."""
    after, before = _repaired(text)
    return before if after else ""


def as_simplified(text: str) -> str:
    """``text`` with traditional Chinese characters in their simplified forms (訂單 -> 订单),
    for the pairs that convert one to one (:mod:`agentprop._util.hanzi`)."""
    return to_simplified(text)
