"""Protected slots: the parts of an utterance that a paraphrase must never touch.

Ids, amounts, numbers, dates, times, e-mails, URLs, placeholders and ``protect=[...]`` spans.
Before any transform runs each slot is masked to one private-use character (:func:`mask`), so
transforms can move a slot but never change it; :func:`unmask` restores it. Detection is
deliberately generous.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from agentprop.errors import InvalidArgument

SlotKind = Literal["template", "email", "url", "money", "date", "time", "id", "number", "protected"]

#: First code point used for placeholders (the Basic Multilingual Plane private-use area).
PLACEHOLDER_BASE = 0xE000
#: Last usable placeholder code point.
PLACEHOLDER_LAST = 0xF8FF
#: A regex character class matching any placeholder.
PLACEHOLDER_CLASS = "\ue000-\uf8ff"


@dataclass(frozen=True, order=True)
class Slot:
    """A protected span ``text[start:end]`` of the original text."""

    start: int
    end: int
    text: str
    kind: SlotKind


# --- patterns -------------------------------------------------------------------------------

_ALNUM = "A-Za-z0-9\uff10-\uff19\uff21-\uff3a\uff41-\uff5a"  # ASCII and full-width letters/digits
_DIGIT = re.compile("[0-9\uff10-\uff19]")
_LETTER = re.compile("[A-Za-z\uff21-\uff3a\uff41-\uff5a]")

# A run of letters/digits joined by connectors ("O-1001", "2024-01-05", "1,234.50", "10:30",
# "last4", "A1"); it is a slot when it contains a digit. A sign is included when it stands
# after whitespace, a bracket or the start ("-5", "+3").
_TOKEN = re.compile(
    rf"(?:(?<![^\s(\[])[-+\u2212])?#?[{_ALNUM}]+(?:[-_/.:,][{_ALNUM}]+)*(?:\s?(?:%|\uff05))?"
)
# Upper-case codes without digits: "RCP-HIGH", "SKU_ABC".
_CODE = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)+(?![A-Za-z0-9])")
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'\uff0c\u3002\uff01\uff1f\u3001]+")
_TEMPLATE = re.compile(r"\{\{[^{}\n]{1,64}\}\}|\{[^{}\n]{1,64}\}")

_NUM = r"\d[\d,]*(?:\.\d+)?"
_SCALE = r"(?:\s?(?:k|K|m|M|bn|thousand|million|billion)\b)?"
_CODES = r"(?:USD|EUR|GBP|CNY|RMB|JPY|CAD|AUD|CHF|INR)"
_ZH_NUMERAL = "[零〇一二两三四五六七八九十百千万亿]"
_ZH_MONEY_UNIT = "(?:万元|块钱|元|块|美元|欧元|英镑|日元|港币|人民币|角|毛)"
_EN_NUMBER_WORD = (
    r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    r"eighty|ninety|hundred|thousand|million|billion)"
)
_MONEY = [
    re.compile(rf"(?:US\$|[$€£¥₹￥]|\b{_CODES}\s?)\s?{_NUM}{_SCALE}"),
    re.compile(
        rf"\b{_EN_NUMBER_WORD}(?:[-\s]+(?:and\s+)?{_EN_NUMBER_WORD})*\s+(?:dollars?|bucks|cents?|euros?|pounds?)\b",
        re.IGNORECASE,
    ),
    re.compile(
        rf"{_NUM}{_SCALE}\s?(?:dollars?|bucks|cents?|euros?|pounds?|yuan|rupees?|{_CODES})\b",
        re.IGNORECASE,
    ),
    re.compile(rf"{_NUM}\s?{_ZH_MONEY_UNIT}"),
    re.compile(rf"{_ZH_NUMERAL}+{_ZH_MONEY_UNIT}"),
]

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_ZH_D = rf"(?:\d{{1,4}}|{_ZH_NUMERAL}{{1,4}})"
_DATE = [
    re.compile(rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b", re.IGNORECASE),
    re.compile(
        rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+\d{{4}})?", re.IGNORECASE
    ),
    re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"),
    re.compile(
        rf"{_ZH_D}年(?:{_ZH_D}月(?:{_ZH_D}[日号])?)?|{_ZH_D}月(?:{_ZH_D}[日号])?|{_ZH_D}[日号]"
    ),
    re.compile("(?:周|星期|礼拜)[一二三四五六日天]"),
]
_TIME = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s?(?:[ap]\.m\.|[ap]m\b|[AP]M\b)|\d{1,2}[点時时](?:\d{1,2}分|半)?"
)
_NUMBER_WORDS = re.compile(
    rf"\b{_EN_NUMBER_WORD}(?:[-\s]+(?:and\s+)?{_EN_NUMBER_WORD})*\b", re.IGNORECASE
)
_ZH_NUMBER = re.compile(
    rf"第{_ZH_NUMERAL}+|{_ZH_NUMERAL}*[十百千万亿]{_ZH_NUMERAL}*"
    rf"|{_ZH_NUMERAL}+(?:个月|个|件|笔|张|次|天|周|年|小时|分钟|位|台|份|单|箱|瓶|本|岁|折|号|楼|层)"
)

_PATTERNS: tuple[tuple[SlotKind, re.Pattern[str]], ...] = (
    ("template", _TEMPLATE),
    ("email", _EMAIL),
    ("url", _URL),
    *(("money", p) for p in _MONEY),
    *(("date", p) for p in _DATE),
    ("time", _TIME),
    ("id", _CODE),
    ("number", _NUMBER_WORDS),
    ("number", _ZH_NUMBER),
)
# When spans of several kinds merge, the merged slot takes the kind that ranks first here.
_KIND_RANK: dict[str, int] = {
    k: i
    for i, k in enumerate(
        ("protected", "template", "email", "url", "money", "date", "time", "id", "number")
    )
}


def _token_kind(token: str) -> SlotKind | None:
    if not _DIGIT.search(token):
        return None
    if token.startswith("#") or _LETTER.search(token):
        return "id"
    return "number"


def _candidates(
    text: str, protect: Sequence[str | re.Pattern[str]]
) -> Iterable[tuple[int, int, SlotKind]]:
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.span()
            if kind == "url":
                end = start + len(m.group().rstrip(".,!?;:)]"))
            if end > start:
                yield start, end, kind
    for m in _TOKEN.finditer(text):
        token_kind = _token_kind(m.group())
        if token_kind is not None:
            yield m.start(), m.end(), token_kind
    for item in protect:
        pattern = re.compile(re.escape(item)) if isinstance(item, str) else item
        for m in pattern.finditer(text):
            if m.end() > m.start():
                yield m.start(), m.end(), "protected"


def validate_protect(
    protect: object, *, argument: str = "protect"
) -> tuple[str | re.Pattern[str], ...]:
    """Check a ``protect=`` argument: a list of literal strings and/or compiled regexes."""
    if protect is None:
        return ()
    if isinstance(protect, (str, bytes, re.Pattern)):
        raise InvalidArgument(
            f"{argument}={protect!r} must be a list of strings or compiled patterns, not a single "
            f"{type(protect).__name__}; wrap it: {argument}=[{protect!r}]"
        )
    if not isinstance(protect, Iterable):
        raise InvalidArgument(
            f"{argument}={protect!r} must be a list of strings or compiled patterns (got "
            f"{type(protect).__name__})"
        )
    items: tuple[object, ...] = tuple(protect)
    checked: list[str | re.Pattern[str]] = []
    for item in items:
        if isinstance(item, str):
            if not item:
                raise InvalidArgument(f"{argument} contains an empty string; remove it")
        elif isinstance(item, re.Pattern):
            if not isinstance(item.pattern, str):
                raise InvalidArgument(
                    f"{argument} contains a bytes pattern {item!r}; use a str pattern"
                )
            if item.fullmatch(""):
                raise InvalidArgument(
                    f"{argument} contains the pattern {item.pattern!r}, which matches the empty "
                    "string; make it match at least one character (e.g. use + instead of *)"
                )
        else:
            raise InvalidArgument(
                f"{argument} items must be strings or compiled regexes (re.compile(...)), got "
                f"{type(item).__name__} {item!r}"
            )
        checked.append(item)
    return tuple(checked)


def find_slots(text: str, *, protect: Sequence[str | re.Pattern[str]] = ()) -> list[Slot]:
    """The protected slots of ``text``, sorted, non-overlapping and non-touching.

    ``protect`` adds literal strings (every occurrence, case-sensitive) and compiled regular
    expressions (every match) to the built-in detectors. Overlapping or touching spans are
    merged into one slot, which takes the most specific kind of its parts.
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"text must be a str, got {type(text).__name__} {text!r}")
    items = validate_protect(protect)
    spans = sorted(_candidates(text, items), key=lambda s: (s[0], -s[1]))
    merged: list[tuple[int, int, SlotKind]] = []
    for start, end, kind in spans:
        if merged and start <= merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            best = kind if _KIND_RANK[kind] < _KIND_RANK[last_kind] else last_kind
            merged[-1] = (last_start, max(last_end, end), best)
        else:
            merged.append((start, end, kind))
    return [Slot(s, e, text[s:e], k) for s, e, k in merged]


def mask(text: str, slots: Sequence[Slot]) -> tuple[str, dict[str, str]]:
    """Replace each slot by one placeholder character; return the masked text and the map
    from placeholder to the slot's original text."""
    if len(slots) > PLACEHOLDER_LAST - PLACEHOLDER_BASE + 1:
        raise InvalidArgument(f"text has {len(slots)} protected slots; at most 6400 are supported")
    out: list[str] = []
    mapping: dict[str, str] = {}
    pos = 0
    for i, slot in enumerate(slots):
        ph = chr(PLACEHOLDER_BASE + i)
        out.append(text[pos : slot.start])
        out.append(ph)
        mapping[ph] = slot.text
        pos = slot.end
    out.append(text[pos:])
    return "".join(out), mapping


_PLACEHOLDER_RE = re.compile(f"[{PLACEHOLDER_CLASS}]")


def unmask(masked: str, mapping: dict[str, str]) -> str:
    """Put the original slot text back in place of each placeholder."""
    return _PLACEHOLDER_RE.sub(lambda m: mapping.get(m.group(), m.group()), masked)


def has_placeholder_chars(text: str) -> bool:
    """Whether ``text`` contains characters reserved for placeholders (U+E000–U+F8FF)."""
    return _PLACEHOLDER_RE.search(text) is not None
