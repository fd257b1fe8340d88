"""Grounding: whether what a reply states (numbers, ids, quoted values, list items, dates) can be
traced to what the agent was told or what its tools returned, and the ``respond`` fields checked
against the trace (provenance, node ids, tool actions, evidence).

Heuristics over text, each a pure function of a trace: a value counts as grounded when it, or one
arithmetic step from values in the sources (:mod:`agentprop._judge.derive`), appears there.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import functools
import marshal
import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from agentprop._judge.derive import (
    composed_item,
    derive_date,
    derive_day_count,
    derive_number,
    digit_parts,
    grounded_dates,
    nearest_numbers,
    own_record,
    percent_of_terms,
    records,
    relative_periods,
    stated_dates,
    stated_yearless,
)
from agentprop._judge.verdict import Verdict, _fail, _ok, _seq, _strings
from agentprop._scenario.trace import ToolCall, Trace, Turn
from agentprop._scenario.world import CANARY_MARK
from agentprop._spec.grounding import TEXT_GROUNDINGS
from agentprop._util.typos import as_corrected, withdrawn_part
from agentprop.errors import InvalidArgument

# ----------------------------------------------------------------------------- grounding

_SPACELESS = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007\u3040-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f"
)
"""The letters of scripts written without spaces between words (Han, kana, Hangul with its
attached particles, Thai, Lao, Myanmar, Khmer): a value written directly against one of them
("订单HP-482913已发货", "共120元") is still a whole token."""
_GLUED = rf"[^\W{_SPACELESS}]"
"""A word character that would continue a token: a letter of a spaced script, a digit or ``_``."""


@functools.cache
def _glued() -> re.Pattern[str]:
    """:data:`_GLUED` compiled once (a few milliseconds: its ranges are large). A pattern of
    a token between ``(?<!{_GLUED})`` and ``(?!{_GLUED})`` took as long to compile for each
    token; :func:`_whole_spans` finds the token as a literal and checks its two neighbours with
    this one instead. Letter case does not change what it matches."""
    return re.compile(_GLUED)


def _whole_spans(
    text: str, token: re.Pattern[str], *, hyphen: bool, first: bool = False
) -> list[tuple[int, int]]:
    """The spans, left to right and not overlapping, where ``token`` (a literal) occurs with
    no :data:`_GLUED` character (and with ``hyphen``, no ``-``) right before or after it: what
    ``(?<!-)(?<!{_GLUED})TOKEN(?!-)(?!{_GLUED})`` finds, as ``re.finditer`` would, without
    compiling it. With ``first``, only the first span."""
    glued = _glued().match
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := token.search(text, pos)) is not None:
        start, end = m.span()
        if (start == 0 or not ((hyphen and text[start - 1] == "-") or glued(text[start - 1]))) and (
            end == len(text) or not ((hyphen and text[end] == "-") or glued(text[end]))
        ):
            spans.append((start, end))
            if first:
                break
            pos = end if end > start else end + 1
        else:
            pos = start + 1
        if pos > len(text):
            break
    return spans


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (left to right, not overlapping) replaced by a space."""
    out: list[str] = []
    last = 0
    for start, end in spans:
        out += (text[last:start], " ")
        last = end
    out.append(text[last:])
    return "".join(out)


_NUMBER = re.compile(
    rf"(?<!\.)(?<!{_GLUED})[-+]?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?(?:%|[kK](?![A-Za-z0-9]))?"
)


def stated_numbers(text: str) -> list[tuple[float, int, bool]]:
    """Numbers stated in text as ``(value, decimals, is_percent)``: ``1,234.50`` is
    ``(1234.5, 2, False)``, ``45.2%`` is ``(45.2, 1, True)``, ``£2.4k`` is ``(2400.0, 0,
    False)`` (thousands, as users write amounts)."""
    return list(_stated_numbers(text))


@functools.lru_cache(maxsize=16384)
def _stated_numbers(text: str) -> tuple[tuple[float, int, bool], ...]:
    return tuple((v, d, p) for v, d, p, _ in _stated_quantities(text))


_AMOUNT_BEFORE = re.compile(
    r"(?:[$€£¥₹₩~≈约]|(?<![A-Za-z])(?:usd|eur|gbp|cny|rmb|jpy|cad|aud|chf|inr|hkd|sgd|about|"
    r"approximately|approx\.|around|roughly|nearly|almost))\s*$",
    re.I,
)
_AMOUNT_AFTER = re.compile(
    r"^\s*(?:[$€£¥₹₩元]|左右|(?:usd|eur|gbp|cny|rmb|jpy|cad|aud|chf|inr|hkd|sgd|dollars?|euros?|"
    r"pounds?|yuan|cents?)(?![A-Za-z]))",
    re.I,
)


def stated_quantities(text: str) -> list[tuple[float, int, bool, bool]]:
    """:func:`stated_numbers` with a fourth field, ``amount``: the number reads as a measured or
    derived amount, so the relative tolerance applies to it. An amount is written with decimals,
    as a percentage, with ``k``, next to a currency (``$12``, ``12 EUR``, ``120元``) or as an
    approximation (``about 1,250``, ``~40``). Any other number is an integer written whole (a
    year, a day or month, a count, a number in an id): it must equal what grounds it."""
    return list(_stated_quantities(text))


@functools.lru_cache(maxsize=16384)
def _stated_quantities(text: str) -> tuple[tuple[float, int, bool, bool], ...]:
    # cached: every judged run reads the same tool outputs, user turns and spec texts again
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group()
        percent = raw.endswith("%")
        kilo = raw[-1:] in ("k", "K")
        digits = raw.replace(",", "").rstrip("%kK")
        value = float(digits)
        decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
        if kilo:
            value, decimals = round(value * 1000, max(0, decimals - 3)), max(0, decimals - 3)
        amount = (
            percent
            or kilo
            or "." in digits
            or _AMOUNT_BEFORE.search(text, max(0, m.start() - 16), m.start()) is not None
            or _AMOUNT_AFTER.match(text[m.end() : m.end() + 12]) is not None
        )
        out.append((value, decimals, percent, amount))
    return tuple(out)


def numbers_in(text: str) -> list[float]:
    """Numbers stated in text: ``1,234.50``, ``$12``, ``-3``, ``45%`` (as 45)."""
    return [v for v, _, _ in _stated_numbers(text)]


_EN_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_EN_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_EN_WORDS: dict[str, int] = (
    {w: n for n, w in enumerate(_EN_UNITS)}
    | {w: 20 + 10 * n for n, w in enumerate(_EN_TENS)}
    | {"hundred": 100, "thousand": 1000, "million": 1_000_000}
)
_EN_WORD = "|".join(sorted(_EN_WORDS, key=len, reverse=True))
_EN_RUN = re.compile(
    rf"(?<![A-Za-z-])(?P<run>(?:a\s+(?=(?:hundred|thousand|million)\b))?(?:{_EN_WORD})"
    rf"(?:(?:-|\s+|\s+and\s+)(?:{_EN_WORD})(?![A-Za-z]))*)(?![A-Za-z])(?:-(?P<after>[A-Za-z]+))?",
    re.I,
)
_EN_TOKEN = re.compile(rf"\b(?:a|and|{_EN_WORD})\b", re.I)
_HYPHEN_UNITS = frozenset(
    "second minute hour day night week month year person people guest room bed seat ticket "
    "item piece page step digit letter character installment instalment payment".split()
)
"""The words a number word is hyphenated to and still counts ("a fourteen-day window", "a
four-digit code"); before any other word it is part of that word ("two-factor", "one-time")."""
_NEXT = {
    "start": {"unit", "teen", "tens"},
    "unit": {"hundred", "scale"},
    "teen": {"hundred", "scale"},
    "tens": {"unit", "scale"},
    "hundred": {"and", "unit", "teen", "tens", "scale"},
    "scale": {"and", "unit", "teen", "tens"},
    "and": {"unit", "teen", "tens"},
}
"""What may follow what in one English numeral: "twenty-five", "one hundred and five", "two
thousand four hundred"; "two three" is two numerals, "twenty twenty" too."""


def _en_class(word: str) -> str:
    if word in ("and", "hundred"):
        return word
    if word in ("thousand", "million"):
        return "scale"
    n = _EN_WORDS[word]
    return "unit" if n < 10 else "teen" if n < 20 else "tens"


def _en_numerals(words: Sequence[str]) -> list[int]:
    """The numerals a run of English number words spells, left to right."""
    out: list[int] = []
    total = group = 0
    state = "start"
    open_ = False
    for word in words:
        if word == "a":  # "a hundred": the pattern lets "a" through only before a scale
            if open_:
                out.append(total + group)
            total, group, state, open_ = 0, 1, "unit", True
            continue
        kind = _en_class(word)
        if kind not in _NEXT[state]:
            if open_:
                out.append(total + group)
            total = group = 0
            state, open_ = "start", False
            if kind not in _NEXT[state]:
                continue  # "and" or a scale word without a number before it
        n = _EN_WORDS.get(word, 0)
        if kind == "hundred":
            group = (group or 1) * 100
        elif kind == "scale":
            total, group = total + (group or 1) * n, 0
        elif kind != "and":
            group += n
        state, open_ = kind, True
    if open_:
        out.append(total + group)
    return out


_ZH_DIGITS = {c: n for n, c in enumerate("零一二三四五六七八九")} | {"两": 2, "兩": 2, "〇": 0}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}
_ZH_SCALES = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
_ZH_NUMERAL = "零〇一二两兩三四五六七八九十百千万萬亿億"
_ZH_RUN = re.compile(rf"[{_ZH_NUMERAL}]+")
_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
"""A Han character (or kana): after a Chinese numeral, its measure word or unit (三人, 三小时,
两间, 五件, 六个月, 十二期)."""


def _zh_counts(text: str) -> Iterator[str]:
    """The Chinese numerals of ``text`` that write a number: each one before a measure word or
    unit (any Han character, a space between allowed: 六 个月), or standing alone between
    characters of no Han word (人数：三). One glued to a Han word before it and to nothing
    after (统一。) is part of that word."""
    for m in _ZH_RUN.finditer(text):
        after = text[m.end() : m.end() + 2].lstrip(" ")[:1]
        before = text[m.start() - 1 : m.start()]
        if (after and _HAN.match(after)) or not (before and _HAN.match(before)):
            yield m.group()


def _zh_numerals(run: str) -> list[int]:
    """The numbers a run of Chinese numerals writes: 二十五 25, 三十 30, 一百零五 105, 两万五千
    25000; digit by digit without a 十, 百 or 千 (二〇二六 2026); two digits side by side are two
    numbers (两三个: 2 or 3)."""
    if not any(c in _ZH_UNITS or c in _ZH_SCALES for c in run):
        digits = [_ZH_DIGITS[c] for c in run]
        if len(digits) == 2 and "零" not in run and "〇" not in run:
            return digits
        return [int("".join(map(str, digits)))]
    total = section = num = 0
    for c in run:
        if c in _ZH_DIGITS:
            num = _ZH_DIGITS[c]
        elif c in _ZH_UNITS:
            section += (num or 1) * _ZH_UNITS[c]
            num = 0
        else:
            total += ((section + num) or 1) * _ZH_SCALES[c]
            section = num = 0
    return [total + section + num]


def _count_words(text: str) -> set[float]:
    """Counts a source writes in words: "six" months, "twenty-five" days, "one hundred and
    five", 六个月, 十二期, 二十五天, 三人 (see :func:`_zh_counts`); not 0 or 1 ("one" and 一 are
    words too). A number word hyphenated to a word that is not a unit ("two-factor",
    "one-time") is part of that word."""
    out: set[float] = set()
    for m in _EN_RUN.finditer(text):
        numerals = _en_numerals([w.lower() for w in _EN_TOKEN.findall(m.group("run"))])
        after = (m.group("after") or "").lower()
        if after and after not in _HYPHEN_UNITS and after.rstrip("s") not in _HYPHEN_UNITS:
            numerals = numerals[:-1]
        out.update(float(n) for n in numerals)
    for run in _zh_counts(text):
        out.update(float(n) for n in _zh_numerals(run))
    return {n for n in out if n >= 2}


@functools.lru_cache(maxsize=16384)
def _number_set(text: str) -> frozenset[float]:
    """The numbers a source states, counts written in words among them (a user's "six"
    grounds a reply's 6)."""
    return frozenset(v for v, _, _ in _stated_numbers(text)) | _count_words(text)


@functools.lru_cache(maxsize=64)
def _numbers_of_texts(texts: tuple[str, ...]) -> frozenset[float]:
    """Every number the texts state (a spec's own strings: the same for every judged run)."""
    return frozenset().union(*(_number_set(t) for t in texts))


def _source_numbers(value: Any, out: set[float]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        out.add(float(value))
    elif isinstance(value, str):
        out.update(_number_set(value))
    elif isinstance(value, dict):
        for v in value.values():
            _source_numbers(v, out)
    elif isinstance(value, (list, tuple)):
        out.add(float(len(value)))
        for v in value:
            _source_numbers(v, out)


def _grounded(x: float, decimals: int, percent: bool, sources: set[float], rel_tol: float) -> bool:
    """``x``, stated with ``decimals`` decimals, is some source value rounded (any rounding
    direction: half-up, half-even or truncation all land within half a unit of the last
    digit), or equal to one within ``rel_tol``. A percentage may also state a fraction
    (45.2% for 0.4523)."""
    candidates = [(x, decimals)]
    if percent:
        candidates.append((x / 100.0, decimals + 2))
    for value, d in candidates:
        half_unit = 0.5 * 10.0 ** (-min(d, 2)) if d <= 2 else 0.5 * 10.0 ** (-d)
        for s in sources:
            if abs(value - s) <= max(rel_tol * abs(s), 1e-9):
                return True
            if d <= 2 and abs(value - s) <= half_unit + 1e-9:
                return True
    return False


def numbers_grounded(
    trace: Trace,
    *,
    turn: int | None = None,
    rel_tol: float = 0.005,
    ignore: Iterable[float] = (),
    clause: str | None = None,
) -> Verdict:
    """Every number told to the user is traceable to a tool result of the same or an earlier
    turn (or to the user's own messages), up to rounding to 0–2 decimals and, for an amount
    (:func:`stated_quantities`), ``rel_tol``.

    Counts of returned lists count as grounded ("3 orders" after a 3-row result); the markers
    of a numbered list (``1.``, ``2)`` at the start of a line) are not stated numbers.
    """
    sources: set[float] = set(ignore)
    for t in trace.turns:
        sources.update(numbers_in(t.user_message))
        for c in t.tool_calls:
            if c.result is not None:
                _source_numbers(c.result, sources)
        if turn is not None and t.index != (turn % len(trace.turns)):
            continue
        response_text = without_list_markers(t.user_visible_text)
        for x, decimals, percent, amount in stated_quantities(response_text):
            if not _grounded(x, decimals, percent, sources, rel_tol if amount else 0.0):
                return _fail(
                    "numbers_grounded",
                    f"turn {t.index + 1}: the reply states {x:g}, which no tool result supports",
                    clause,
                    t.index,
                )
    return _ok(
        "numbers_grounded", "every number in the replies is traceable to tool output", clause
    )


# --------------------------------------------------------------------------- what a response states

_LIST_MARKER = re.compile(
    r"^[ \t]*(?:\d{1,3}[.)]|[-*\u2022\u2023\u25e6\u2013]|step[ \t]+\d{1,3}[ \t]*[:.)-]?)[ \t]+",
    re.I | re.M,
)
_LIST_LINE = re.compile(
    r"^[ \t]*(?:\d{1,3}[.)]|[-*\u2022\u2023\u25e6\u2013]|step[ \t]+\d{1,3}[ "
    r"\t]*[:.)-]?)[ \t]+(\S.*?)[ \t]*$",
    re.I | re.M,
)
_ID_TOKEN = re.compile(
    rf"(?<!-)(?<!{_GLUED})[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+(?!-)(?!{_GLUED})"
)
_QUOTED = re.compile(
    r"\"([^\"\n]{1,200})\"|\u201c([^\u201d\n]{1,200})\u201d|`([^`\n]{1,200})`|(?<![\w'])'([^'\n]{1,200}?)'(?![\w'])"
)
_WORD = re.compile(r"[A-Za-z]{4,}")
_FILLER = frozenset(
    "tool tools output outputs result results returned return called call calls needed required "
    "none used using with from this that were have been into than then when what which there "
    "their they them your only also some more most such each just over must should "
    "would could does user".split()
)


def without_list_markers(text: str) -> str:
    """``text`` with the markers of list lines (``1.``, ``2)``, ``-``, ``*``, ``Step 3:``) removed:
    they number the list, they state nothing."""
    return _LIST_MARKER.sub("", text)


def _is_word_segment(seg: str) -> bool:
    return seg.isdigit() or (
        seg.isalpha()
        and (seg.islower() or (len(seg) > 1 and seg[0].isupper() and seg[1:].islower()))
    )


def looks_like_id(token: str) -> bool:
    """Whether a token is shaped like an identifier: letters and digits joined by ``-`` or
    ``_``, starting with a letter, and either holding a digit in a segment that is not a plain
    word or number (``O-1001``, ``RB-12``, ``payments-v2``, ``ord_9f2c``; not ``top-5`` or
    ``Step-2``), or all upper case and joined by ``-`` (``PLAN-BASIC``). A format placeholder
    whose segments each repeat one letter (``YYYY-MM-DD``) is no identifier."""
    if _ID_TOKEN.fullmatch(token) is None:
        return False
    segments = re.split(r"[-_]", token)
    if all(len(set(seg.upper())) == 1 and seg.isalpha() for seg in segments):
        return False  # a format placeholder (YYYY-MM-DD, HH-MM), not an identifier
    if any(ch.isdigit() for ch in token):
        return not all(_is_word_segment(s) for s in segments)
    return "_" not in token and len(token) >= 4 and all(s.isupper() for s in segments)


def stated_ids(text: str, vocabulary: Collection[str] = ()) -> list[str]:
    """Identifiers stated in text (see :func:`looks_like_id`), except names in ``vocabulary``
    (the spec's own node ids, decisions, tools and policy ids)."""
    vocab = set(vocabulary)
    return [
        m.group()
        for m in _ID_TOKEN.finditer(text)
        if m.group() not in vocab and looks_like_id(m.group())
    ]


def quoted_values(text: str) -> list[str]:
    """Values quoted in text: ``"..."``, ``\u201c...\u201d``, `` `...` `` and ``'...'`` (an
    apostrophe inside a word does not open a quote)."""
    out = []
    for m in _QUOTED.finditer(text):
        value = next(g for g in m.groups() if g is not None).strip()
        if value:
            out.append(value)
    return out


def list_items(value: Any) -> list[str]:
    """The items a value lists: the strings of an array, or the numbered / bulleted lines of a
    text (``1. ...``, ``2) ...``, ``- ...``, ``* ...``, ``Step 3: ...``)."""
    if isinstance(value, (list, tuple)):
        return [v.strip() for v in value if isinstance(v, str) and v.strip()]
    if isinstance(value, str):
        return [m.group(1) for m in _LIST_LINE.finditer(value)]
    return []


def _norm(text: str) -> str:
    return " ".join(without_list_markers(text).casefold().split()).strip(" .,;:!?")


@functools.lru_cache(maxsize=16384)
def _words(text: str) -> frozenset[str]:
    out = set()
    for w in _WORD.findall(text.replace("_", " ")):
        w = w.lower()
        if w.endswith("s") and len(w) > 4:
            w = w[:-1]
        if w not in _FILLER:
            out.add(w)
    return frozenset(out)


def _keys(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _keys(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _keys(v)


def _calls_before_respond(turn: Turn) -> list[ToolCall]:
    """The calls a turn made before it responded (a call refused because it came after
    ``respond`` is not one the response could report)."""
    return [c for c in turn.tool_calls if c.error_kind != "protocol"]


@dataclass(frozen=True)
class _TurnFacts:
    """What a turn's tool calls contribute to the sources of a statement (see
    :meth:`_Sources.add_turn`)."""

    called: tuple[str, ...]
    numbers: frozenset[float]
    texts: tuple[str, ...]
    words: frozenset[str]
    records: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = ()
    """Each dict of the outputs: its scalar values and key words (see :func:`composed_item`)."""


_shared_facts: contextvars.ContextVar[dict[int, tuple[Turn, _TurnFacts]] | None] = (
    contextvars.ContextVar("agentprop_turn_facts", default=None)
)


@contextlib.contextmanager
def shared_turn_facts() -> Iterator[None]:
    """Within this scope, the checks work out each turn's tool-output facts once, however many
    of them read the turn (the MFT judges one trace with a grounding check per response field
    and the evidence check). The trace must not change inside the scope."""
    token = _shared_facts.set({})
    try:
        yield
    finally:
        _shared_facts.reset(token)


@dataclass(frozen=True)
class _OutputFacts:
    """What one tool output contributes to its turn's facts (see :class:`_TurnFacts`)."""

    numbers: frozenset[float]
    texts: tuple[str, ...]
    words: frozenset[str]
    records: tuple[tuple[tuple[str, ...], frozenset[str]], ...]


def _facts_of_result(result: Any) -> _OutputFacts:
    """What one tool output contributes to a turn's facts."""
    numbers: set[float] = set()
    texts: list[str] = []
    words: set[str] = set()
    _source_numbers(result, numbers)
    for s in _strings(result):
        texts.append(s)
        words |= _words(s)
    for k in _keys(result):
        texts.append(k)
        words |= _words(k)
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        texts.append(str(result))
    return _OutputFacts(frozenset(numbers), tuple(texts), frozenset(words), tuple(records(result)))


_Record = tuple[tuple[str, ...], frozenset[str]]


@dataclass(frozen=True, slots=True)
class _Part:
    """What one value inside a tool output contributes to the output's facts: its strings and
    its dict keys in the order :func:`_facts_of_result` reads them, its numbers, words and
    records (:func:`records`). A container's part is its items' parts joined in order, so an
    output's facts are composed from its parts (see :func:`_result_facts`)."""

    strings: tuple[str, ...]
    keys: tuple[str, ...]
    numbers: frozenset[float]
    words: frozenset[str]
    records: tuple[_Record, ...]


_NO_PART = _Part((), (), frozenset(), frozenset(), ())


class _PartMemo:
    """Parts of containers by their ``marshal`` (version 2: no back-references, so the bytes
    depend on the value alone), which takes only plain built-in types, no subclasses, and
    records them exactly (``1``, ``1.0`` and ``True`` differ; ``-0.0`` is not ``0.0``): equal
    bytes, equal value, equal facts. Bounded: past :attr:`entries` entries or :attr:`size`
    bytes of keys it starts afresh; a key over an eighth of :attr:`size` is not kept."""

    __slots__ = ("_parts", "_size", "entries", "hits", "size")

    def __init__(self, entries: int, size: int) -> None:
        self._parts: dict[bytes, _Part] = {}
        self._size = 0
        self.entries = entries
        self.size = size
        self.hits = 0

    def get(self, key: bytes) -> _Part | None:
        found = self._parts.get(key)
        if found is not None:
            self.hits += 1
        return found

    def put(self, key: bytes, part: _Part) -> None:
        if len(self._parts) >= self.entries or self._size + len(key) > self.size:
            self._parts.clear()
            self._size = 0
        if len(key) <= self.size // 8:
            self._parts[key] = part
            self._size += len(key)

    def clear(self) -> None:
        self._parts.clear()
        self._size = 0
        self.hits = 0


_PARTS = _PartMemo(entries=8192, size=16 << 20)
"""Every run of a case reads the same tool outputs from the same world, but for the values a
run plants in them (its PII canaries): an output met again, or a part of it (a list of orders
beside the account's canaried PII), is not read again (a 4 KB output took a third of a
millisecond). Pure functions of the values, so sharing them across sessions shares no state."""


def _part(value: Any) -> _Part:
    """The :class:`_Part` of one value of a tool output."""
    if isinstance(value, str):
        return _Part((value,), (), _number_set(value), _words(value), ())
    if isinstance(value, (dict, list, tuple)):
        try:
            key: bytes | None = marshal.dumps(value, 2)
        except ValueError:  # not plain built-in data (or nested too deep): read, not kept
            key = None
        if key is not None:
            found = _PARTS.get(key)
            if found is not None:
                return found
        part = _composed_part(value)
        if key is not None:
            _PARTS.put(key, part)
        return part
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _NO_PART
    return _Part((), (), frozenset((float(value),)), frozenset(), ())


def _composed_part(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> _Part:
    """A container's :class:`_Part` from its items' (each looked up in :data:`_PARTS`)."""
    strings: list[str] = []
    keys: list[str] = []
    numbers: set[float] = set()
    words: set[str] = set()
    recs: list[_Record] = []
    if isinstance(value, dict):
        own = own_record(value)
        if own is not None:
            recs.append(own)
        items: Iterable[tuple[str | None, Any]] = ((str(k), v) for k, v in value.items())
    else:
        numbers.add(float(len(value)))
        items = ((None, v) for v in value)
    for name, v in items:
        if name is not None:
            keys.append(name)
            words |= _words(name)
        p = _part(v)
        strings.extend(p.strings)
        keys.extend(p.keys)
        numbers |= p.numbers
        words |= p.words
        recs.extend(p.records)
    return _Part(tuple(strings), tuple(keys), frozenset(numbers), frozenset(words), tuple(recs))


def _result_facts(result: Any) -> _OutputFacts:
    """:func:`_facts_of_result`, composed from the output's parts (:func:`_part`)."""
    try:
        p = _part(result)
    except RecursionError:  # nested too deep for the parts: as it reads
        return _facts_of_result(result)
    texts = p.strings + p.keys
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        texts += (str(result),)
    return _OutputFacts(p.numbers, texts, p.words, p.records)


def _turn_facts(t: Turn) -> _TurnFacts:
    cache = _shared_facts.get()
    if cache is not None:
        hit = cache.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
    called: list[str] = []
    numbers: set[float] = set()
    texts: list[str] = []
    words: set[str] = set()
    recs: list[tuple[tuple[str, ...], frozenset[str]]] = []
    for c in t.tool_calls:
        called.append(c.name)
        if c.result is not None:
            of_result = _result_facts(c.result)
            numbers |= of_result.numbers
            recs.extend(of_result.records)
            texts.extend(of_result.texts)
            words |= of_result.words
        for err in (c.error, c.error_kind):
            if err:
                texts.append(err)
                numbers |= _number_set(err)
                words |= _words(err)
    facts = _TurnFacts(
        tuple(called), frozenset(numbers), tuple(texts), frozenset(words), tuple(recs)
    )
    if cache is not None:
        cache[id(t)] = (t, facts)
    return facts


@dataclass
class _Sources:
    """What grounds a statement on some turn: tool outputs of that turn and earlier ones (and,
    unless ``outputs_only``, the user's turns and extra values such as the runtime context)."""

    outputs_only: bool = False
    numbers: set[float] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    quotable: list[str] = field(default_factory=list)
    """Texts that ground quoted values only (the spec's own words)."""
    words: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)
    records: list[tuple[tuple[str, ...], frozenset[str]]] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)
    """The derivations accepted so far (see :mod:`agentprop._judge.derive`), in order."""
    today: dt.date | None = None
    """The date relative dates are read against (``None``: they ground no date)."""
    terms: dict[float, str] = field(default_factory=dict)
    """The values of the ``P% of N`` terms the replies wrote (:meth:`add_written_terms`)."""
    withdrawn: list[tuple[int, str]] = field(default_factory=list)
    """``(turn index, text)``: what a user turn took back in a correction ("HP-483913, no
    wait, that's wrong. It should be: HP-482913"); it grounds nothing."""
    _lines: list[str] | None = None
    _sorted: list[float] | None = None
    _parts: dict[float, str] | None = None
    _dates: dict[dt.date, str] | None = None

    def _changed(self) -> None:
        self._lines = None
        self._sorted = None
        self._parts = None
        self._dates = None

    def add_turn(self, t: Turn) -> None:
        if not self.outputs_only:
            # a value the user took back grounds nothing: only what follows the repair counts
            self.add_text(as_corrected(t.user_message))
            taken_back = withdrawn_part(t.user_message)
            if taken_back:
                self.withdrawn.append((t.index, taken_back))
        facts = _turn_facts(t)
        self.called.update(facts.called)
        self.numbers |= facts.numbers
        self.texts.extend(facts.texts)
        self.words |= facts.words
        self.records.extend(facts.records)
        self._changed()

    def add_text(self, text: str) -> None:
        self.texts.append(text)
        self.numbers |= _number_set(text)
        if self.today is not None:
            # "last year" grounds 2025 on 2026-07-01 (a relative day grounds its date: dates())
            self.numbers |= {float(n) for n in relative_periods(text, self.today)}
        self._changed()

    def add_spec_text(self, text: str) -> None:
        self.quotable.append(text)
        self.numbers |= _number_set(text)
        self._changed()

    def add_spec_texts(self, texts: Iterable[str]) -> None:
        """:meth:`add_spec_text` for each of ``texts``, at once."""
        texts = tuple(texts)
        self.quotable.extend(texts)
        self.numbers |= _numbers_of_texts(texts)
        self._changed()

    def sorted_numbers(self) -> list[float]:
        if self._sorted is None:
            self._sorted = sorted(self.numbers)
        return self._sorted

    def _accept(self, how: str) -> bool:
        if how not in self.derived:
            self.derived.append(how)
        return True

    def number(
        self, x: float, decimals: int, percent: bool, rel_tol: float, amount: bool = True
    ) -> bool:
        """``x`` is a grounded number, a part of a grounded string, or one arithmetic step
        from two grounded numbers (the derivation is recorded in :attr:`derived`). Only an
        ``amount`` (see :func:`stated_quantities`) may be ``rel_tol`` off what grounds it."""
        if not amount:
            rel_tol = 0.0
        if _grounded(x, decimals, percent, self.numbers, rel_tol):
            return True
        if decimals == 0 and not percent:
            if self._parts is None:
                self._parts = digit_parts(self.texts)
            whole = self._parts.get(x)
            if whole is not None:
                return self._accept(f"{x:g} is part of {clip_text(whole)!r}")
            days = derive_day_count(x, self.dates())
            if days is not None:
                return self._accept(days)
        how = derive_number(x, decimals, percent, self.sorted_numbers(), rel_tol, exact=not amount)
        if how is None and 1.0 in self.numbers and not percent:
            for term, written in self.terms.items():
                if x in (term - 1, term + 1):
                    sign = "-" if x < term else "+"
                    how = f"{x:g} = {written!r} {sign} 1 = {term:g} {sign} 1"
                    break
        if how is None:
            return False
        # a number the reply derived grounds the next one (a total of a derived difference and a
        # derived fee): each is one step from what is grounded so far
        self.numbers.add(x / 100.0 if percent else x)
        self.numbers.add(x)
        self._sorted = None
        return self._accept(how)

    def add_written_terms(self, text: str) -> None:
        """Ground the value of each ``P% of N`` term ``text`` writes of two grounded numbers
        ("once 80% of your 30-day supply is used": 24), as a number the reply derived: it
        grounds the next step ("try again in 23 days" after 1 day), and the verdict names it.
        Unlike a source number, such a term takes a grounded 1 as the next step's operand: the
        reply wrote what it counts from."""
        for pct, base, written in percent_of_terms(text):
            value = round(pct * base / 100.0, 9)
            if pct not in self.numbers or base not in self.numbers:
                continue
            if value not in self.numbers:
                self.numbers.add(value)
                self._sorted = None
            self.terms[value] = written

    def without_derived_dates(self, text: str) -> str:
        """``text`` with each ISO date blanked out that is a grounded date, however the sources
        write it ("20 November", "a week ago", 上个月20号: its parts need not be numbers they
        state), or a grounded date plus or minus a grounded number of days (recorded)."""
        stated = stated_dates(text)
        yearless = stated_yearless(text)
        if not stated and not yearless:
            return text
        dates = self.dates()
        for written, date in stated:
            if date not in dates:
                how = derive_date(date, dates, self.numbers)
                if how is None:
                    continue
                self._accept(how)
            text = text.replace(written, " ")
        days = {(d.month, d.day) for d in dates}
        for written, month, day in yearless:
            if (month, day) in days:
                text = text.replace(written, " ")
        return text

    def dates(self) -> dict[dt.date, str]:
        """Every grounded date (:func:`~agentprop._judge.derive.grounded_dates`)."""
        if self._dates is None:
            self._dates = grounded_dates(self.texts, self.today)
        return self._dates

    def nearest(self, kind: str, bad: str) -> list[str]:
        """The grounded values closest to a rejected one, for the failure message."""
        if kind == "numbers":
            try:
                x = float(bad)
            except ValueError:
                return []
            return [f"{n:g}" for n in nearest_numbers(x, self.sorted_numbers())]
        # a planted PII canary grounds a statement, but is never offered as what the agent
        # could have said; an id is compared with ids, not with whole outputs or field names
        texts = [t for t in self.texts if t.strip() and CANARY_MARK not in t]
        pool = (
            {i for t in texts for i in stated_ids(t)}
            if kind == "ids"
            else {clip_text(t) for t in texts}
        )
        scored = sorted(pool, key=lambda t: (-_fuzz().ratio(bad.casefold(), t.casefold()), t))
        return scored[:3]

    def has_id(self, token: str) -> bool:
        """``token`` occurs in a source as a whole token, case aside, with its separators where
        it has them (``-`` and ``_`` alike), or, as users type an id, with a space or nothing
        at each of them ("RCP 123", "RCP123" ground RCP-123). A source writing the id with
        separators of its own grounds no other split of it (A-123 grounds no A-12-3)."""
        return any(_holds_id(t, token) for t in self.texts)

    def withdrawn_in(self, stated: str, kind: str = "value") -> int | None:
        """The index of the user turn whose correction took back ``stated`` (``None``: none),
        read as ``kind`` reads it: an id in any notation that grounds it (the user's "O1011"
        for O-1011), a number as the sources' numbers are read, anything else as text."""
        low = stated.strip().casefold()
        if not low:
            return None
        for i, text in self.withdrawn:
            if kind == "ids" and _holds_id(text, stated.strip()):
                return i
            if kind == "numbers":
                with contextlib.suppress(ValueError):
                    if float(low) in _number_set(text):
                        return i
            if low in text.casefold():
                return i
        return None

    def has_quote(self, quoted: str) -> bool:
        q = _norm(quoted)
        return any(q in _norm(t) for t in (*self.texts, *self.quotable))

    def has_value(self, value: str) -> bool:
        v = _norm(value)
        return not v or any(v == _norm(t) for t in self.texts) or self.has_id(value.strip())

    def lines(self) -> list[str]:
        """Every source string, and each line of a multi-line one, normalised."""
        if self._lines is None:
            out = []
            for t in self.texts:
                out.append(_norm(t))
                if "\n" in t:
                    out.extend(_norm(line) for line in t.splitlines() if line.strip())
            self._lines = [x for x in dict.fromkeys(out) if x]
        return self._lines

    def has_item(self, item: str, min_similarity: float) -> bool:
        i = _norm(item)
        fuzz = _fuzz()
        if not i or any(
            max(fuzz.ratio(i, s), fuzz.token_sort_ratio(i, s)) >= min_similarity
            for s in self.lines()
        ):
            return True
        how = composed_item(i, self.records)
        return self._accept(how) if how is not None else False


@functools.lru_cache(maxsize=4096)
def _id_patterns(token: str) -> tuple[re.Pattern[str], ...]:
    """See :meth:`_Sources.has_id`: ``token`` with its separators, and with a space or nothing
    at each of them."""
    parts = [re.escape(p) for p in re.split(r"[-_]", token)]
    if not all(parts):
        return (re.compile(re.escape(token), re.I),)
    return tuple(re.compile(sep.join(parts), re.I) for sep in ("[-_]", " ?"))


def _holds_id(text: str, token: str) -> bool:
    """Whether ``text`` holds the id ``token`` as :meth:`_Sources.has_id` reads it."""
    return any(_whole_spans(text, p, hyphen=True, first=True) for p in _id_patterns(token))


def _fuzz() -> ModuleType:
    """rapidfuzz's ``fuzz``, imported when first used (``agentprop run`` imports this module,
    and most runs compare no texts)."""
    from rapidfuzz import fuzz

    return fuzz


def clip_text(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _decimals(x: float) -> int:
    text = repr(float(x))
    return len(text.split(".", 1)[1].rstrip("0")) if "." in text and "e" not in text else 0


def without_ids(text: str, vocabulary: Collection[str] = ()) -> str:
    """``text`` with the identifiers it states blanked out (their digits are checked as part
    of the id, not as numbers)."""
    ids = set(stated_ids(text, vocabulary))
    return _ID_TOKEN.sub(lambda m: " " if m.group() in ids else m.group(), text) if ids else text


def _ungrounded_number(
    value: Any, sources: _Sources, rel_tol: float, vocabulary: Collection[str] | None = None
) -> str | None:
    """The first number ``value`` states that ``sources`` do not hold; with ``vocabulary`` given,
    ids are checked as ids and their digits skipped here."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        # a JSON integer is written whole (a count, a year): it is not an amount
        amount = not isinstance(value, int)
        return (
            None
            if sources.number(float(value), _decimals(value), False, rel_tol, amount)
            else f"{value:g}"
        )
    if isinstance(value, str):
        text = without_ids(value, vocabulary) if vocabulary is not None else value
        text = sources.without_derived_dates(text)
        sources.add_written_terms(text)
        for x, decimals, percent, amount in stated_quantities(without_list_markers(text)):
            if not sources.number(x, decimals, percent, rel_tol, amount):
                return f"{x:g}"
        return None
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for v in value:
            bad = _ungrounded_number(v, sources, rel_tol, vocabulary)
            if bad is not None:
                return bad
    return None


def _ungrounded_value(value: Any, sources: _Sources, rel_tol: float) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return _ungrounded_number(value, sources, rel_tol)
    if isinstance(value, str):
        return None if sources.has_value(value) else value
    items = (
        list(value.values())
        if isinstance(value, dict)
        else list(value)
        if isinstance(value, (list, tuple))
        else [str(value)]
    )
    for v in items:
        bad = _ungrounded_value(v, sources, rel_tol)
        if bad is not None:
            return bad
    return None


def _ungrounded(
    kind: str,
    value: Any,
    sources: _Sources,
    *,
    vocabulary: Collection[str],
    rel_tol: float,
    min_similarity: float,
    ids_checked: bool = False,
) -> str | None:
    """The first thing ``value`` states under grounding ``kind`` that ``sources`` do not support."""
    if kind == "numbers":
        return _ungrounded_number(value, sources, rel_tol, vocabulary if ids_checked else None)
    if kind == "value":
        return _ungrounded_value(value, sources, rel_tol)
    text = "\n".join(_strings(value))
    if kind == "ids":
        return next((i for i in stated_ids(text, vocabulary) if not sources.has_id(i)), None)
    if kind == "quoted":
        return next((q for q in quoted_values(text) if not sources.has_quote(q)), None)
    if kind == "list_items":
        return next((i for i in list_items(value) if not sources.has_item(i, min_similarity)), None)
    raise InvalidArgument(f"unknown grounding kind {kind!r}; kinds: {', '.join(TEXT_GROUNDINGS)}")


_KIND_ORDER = ["value", "ids", "quoted", "list_items", "numbers"]
"""The order kinds are checked in: wholes before parts, so an invented ``O-9999`` is reported
as an id, not as the number 9999."""


_KIND_NOUN = {
    "numbers": "a number",
    "ids": "an id",
    "quoted": "a quoted value",
    "list_items": "a list item",
    "value": "a value",
}


def response_grounded(
    trace: Trace,
    field: str,
    kinds: Sequence[str],
    *,
    vocabulary: Collection[str] = (),
    extra_sources: Iterable[str] = (),
    spec_text: Iterable[str] = (),
    rel_tol: float = 0.005,
    min_similarity: float = 85.0,
    today: dt.date | None = None,
    clause: str | None = None,
    ids_checked: bool | None = None,
) -> Verdict:
    """What response field ``field`` states is traceable to a tool output of the same or an
    earlier turn, or to the user's turns (or to ``extra_sources``, e.g. the runtime context).
    With ``today`` (the scenario's reference date), a date the sources write relative to it
    ("a week ago", "the 20th of last month", 两周前) grounds the date it resolves to.

    ``kinds`` (any of ``numbers``, ``ids``, ``quoted``, ``list_items``, ``value``) say what is
    checked: numbers as in :func:`numbers_grounded`; ids (:func:`looks_like_id`, names in
    ``vocabulary`` excepted) must occur as whole tokens, case-insensitively; quoted values must
    occur (case and spacing aside); each list item (:func:`list_items`) must match a source
    string, list element or line with rapidfuzz similarity (the higher of ``ratio`` and
    ``token_sort_ratio`` on normalised text) at least ``min_similarity``; ``value`` means the
    whole value (each element of a list) is a source value. ``spec_text`` (the MFT passes the
    spec's own strings) grounds numbers and quoted values only: an agent may repeat the spec's
    words ("the last 4 digits", reply "yes"), but its examples are not world facts, so it
    grounds no id, value or list item. For
    ``user_message`` the free text the agent showed outside ``respond`` is checked too. A turn
    without the field is skipped. With ``ids_checked`` (default: ``"ids"`` is one of ``kinds``),
    the digits of an id are not numbers: the field's ids are checked, here or by another call.
    """
    unknown = [k for k in kinds if k not in TEXT_GROUNDINGS]
    if unknown:
        raise InvalidArgument(
            f"unknown grounding kind {unknown[0]!r}; kinds: {', '.join(TEXT_GROUNDINGS)}"
        )
    ordered = sorted(dict.fromkeys(kinds), key=_KIND_ORDER.index)
    sources = _Sources(today=today)
    sources.add_spec_texts(spec_text)
    for s in extra_sources:
        sources.add_text(s)
    for t in trace.turns:
        sources.add_turn(t)
        value = t.user_visible_text if field == "user_message" else (t.response or {}).get(field)
        if value is None or value == "" or value == []:
            continue
        for kind in ordered:
            bad = _ungrounded(
                kind,
                value,
                sources,
                vocabulary=vocabulary,
                rel_tol=rel_tol,
                min_similarity=min_similarity,
                ids_checked="ids" in kinds if ids_checked is None else ids_checked,
            )
            if bad is not None:
                near = sources.nearest(kind, bad)
                taken_back = sources.withdrawn_in(str(bad), kind)
                why = (
                    "which no tool output or user turn supports"
                    if taken_back is None
                    else f"which the user stated in turn {taken_back + 1} but withdrew in a "
                    "correction, and no tool output supports"
                )
                return _fail(
                    "response_grounded",
                    f"turn {t.index + 1}: respond.{field} states {bad!r} ({_KIND_NOUN[kind]}), "
                    + why
                    + (f" (nearest grounded: {', '.join(near)})" if near else ""),
                    clause,
                    t.index,
                    detail=f"{field}:{kind}",
                )
    derived = f"; derived in one step: {'; '.join(sources.derived)}" if sources.derived else ""
    return _ok(
        "response_grounded",
        f"everything respond.{field} states ({', '.join(kinds) or 'nothing checked'}) "
        f"is grounded{derived}",
        clause,
    )


# ------------------------------------------------------------------------ respond against the trace


def _output_field(result: Any, path: str) -> list[Any]:
    """The values at ``path`` (``ticket_id``, ``ticket.id``) of one tool result."""
    values: list[Any] = [result]
    for key in path.split("."):
        values = [v.get(key) for v in values if isinstance(v, dict) and key in v]
    return [v for v in values if v is not None and not isinstance(v, (dict, bool))]


def _same(a: Any, b: Any) -> bool:
    return str(a).strip().casefold() == str(b).strip().casefold()


def field_provenance(
    trace: Trace, field: str, sources: Sequence[str], *, clause: str | None = None
) -> Verdict:
    """``respond.<field>`` holds a value one of ``sources`` (``TOOL.FIELD``) returned on that turn
    or an earlier one; each element, for a list. A turn before any source tool answered is not
    checked here (the field's ``value`` grounding still is). A value that another tool's output
    holds is shown with where it came from."""
    wanted: dict[str, list[str]] = {}
    for source in sources:
        tool, _, path = source.partition(".")
        wanted.setdefault(tool, []).append(path)
    got: list[tuple[str, Any]] = []
    for t in trace.turns:
        for c in t.tool_calls:
            if c.name in wanted and c.result is not None:
                got += [
                    (f"{c.name}.{path}", v)
                    for path in wanted[c.name]
                    for v in _output_field(c.result, path)
                ]
        value = (t.response or {}).get(field)
        if value is None or value == "" or value == [] or not got:
            continue
        for item in value if isinstance(value, list) else [value]:
            if any(_same(item, v) for _, v in got):
                continue
            elsewhere = next(
                (
                    c.name
                    for turn in trace.turns[: t.index + 1]
                    for c in turn.tool_calls
                    if c.result is not None
                    and any(_same(item, s) for s in _strings_and_scalars(c.result))
                ),
                None,
            )
            returned = "; ".join(f"{where} returned {v!r}" for where, v in got[-3:])
            return _fail(
                "field_provenance",
                f"turn {t.index + 1}: respond.{field} is {item!r}, but {returned}"
                + (f" ({item!r} is {elsewhere}'s output, the wrong tool)" if elsewhere else ""),
                clause,
                t.index,
                detail=f"{field}:from",
            )
    return _ok("field_provenance", f"respond.{field} comes from {', '.join(sources)}", clause)


def _strings_and_scalars(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings_and_scalars(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings_and_scalars(v)
    elif value is not None and not isinstance(value, bool):
        yield value


def node_id_matches(
    trace: Trace,
    accepted: Sequence[Collection[str]],
    *,
    field: str = "node_id",
    known_nodes: Collection[str] = (),
    clause: str | None = "response_contract.node_id",
) -> Verdict:
    """Each turn's ``respond.<field>`` is one of ``accepted[turn]`` (the nodes the scenario is
    at on that turn; see :func:`agentprop._judge.properties.expected_nodes`). Turns past the end of
    ``accepted``, with an empty set, or without the field are not checked. The failure's
    detail is ``got=<node>`` for a node of ``known_nodes`` and ``got=unknown-node`` for a name
    the spec does not have."""
    # a spec's set, not copied per run
    known = known_nodes if isinstance(known_nodes, (set, frozenset)) else set(known_nodes)
    for t in trace.turns:
        if t.index >= len(accepted) or t.response is None or t.response.get(field) is None:
            continue
        want = list(dict.fromkeys(accepted[t.index]))
        got = t.response[field]
        if not want or got in want:
            continue
        invented = bool(known) and got not in known
        return _fail(
            "node_id_matches",
            f"turn {t.index + 1}: respond.{field} is "
            f"{got!r}{', a node the spec does not have' if invented else ''}; the scenario is at "
            f"{' or '.join(want)} on this turn",
            clause,
            t.index,
            detail="got=unknown-node" if invented else f"got={got}",
        )
    return _ok(
        "node_id_matches", f"every respond.{field} names the node the scenario is at", clause
    )


_TOOL_NAME = re.compile(r"\s*([A-Za-z_][\w.-]*)")


def listed_tools(value: Any) -> list[str]:
    """The tool names a ``tool_actions`` value lists: each item's leading name
    (``get_account(A1)`` is ``get_account``); a string is split at ``,`` ``;`` ``->`` and
    new lines; an object item gives its ``name`` or ``tool``."""
    if isinstance(value, str):
        items: list[Any] = [p for p in re.split(r"\s*(?:,|;|->|\u2192|\n)\s*", value) if p.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    out = []
    for item in items:
        text = (
            str(item.get("name") or item.get("tool") or "")
            if isinstance(item, Mapping)
            else str(item)
        )
        m = _TOOL_NAME.match(text)
        out.append(m.group(1) if m else text.strip())
    return out


def _first_surplus(names: Sequence[str], surplus: Counter[str]) -> str:
    return next(n for n in names if surplus[n] > 0)


def tool_actions_match(
    trace: Trace,
    *,
    field: str = "tool_actions",
    clause: str | None = "response_contract.tool_actions",
) -> Verdict:
    """Each turn's ``respond.<field>`` lists exactly the tools that turn called, in order:
    every call counts, failed ones and retries included (a retried timeout is listed twice);
    ``respond`` itself is not a tool action. Details: ``uncalled=T`` (listed, never called this
    turn), ``unlisted=T`` (called, not listed), ``count=T`` (listed a different number of
    times than called), ``order`` (same tools, another order)."""
    for t in trace.turns:
        if t.response is None or t.response.get(field) is None:
            continue
        listed = listed_tools(t.response[field])
        called = [c.name for c in _calls_before_respond(t)]
        if listed == called:
            continue
        where = (
            f"turn {t.index + 1}: respond.{field} is {_seq(listed)}, but the turn "
            f"called {_seq(called)}"
        )
        extra, missing = Counter(listed) - Counter(called), Counter(called) - Counter(listed)
        # a tool listed but not called (or more often than called), then one called but not listed
        for surplus, more, fewer, absent, tag in (
            (extra, listed, called, "it lists {}, which this turn never called", "uncalled"),
            (missing, called, listed, "it leaves out {}, which the turn called", "unlisted"),
        ):
            if not surplus:
                continue
            name = _first_surplus(more, surplus)
            if name in fewer:
                return _fail(
                    "tool_actions_match",
                    f"{where}: it lists {name} {listed.count(name)} time(s), the turn called it "
                    f"{called.count(name)} time(s)",
                    clause,
                    t.index,
                    detail=f"count={name}",
                )
            return _fail(
                "tool_actions_match",
                f"{where}: {absent.format(name)}",
                clause,
                t.index,
                detail=f"{tag}={name}",
            )
        return _fail(
            "tool_actions_match",
            f"{where}: the same tools in another order",
            clause,
            t.index,
            detail="order",
        )
    return _ok(
        "tool_actions_match",
        f"every respond.{field} lists exactly the tools its turn called",
        clause,
    )


_PLACEHOLDER = re.compile(r"[\W_]*(?:none|n/?a|nothing|null|not applicable|no evidence)?[\W_]*")
_DISCLAIMER = re.compile(
    r"\bno (?:tools?|tool outputs?|outputs?|tool calls?|evidence)\b|\b(?:not|none) "
    r"(?:needed|required)\b|\bwithout (?:any )?(?:tools?|tool outputs?)\b"
)


def disclaims_evidence(text: str) -> bool:
    """Whether an evidence text is empty or says no tool output was used ("no tool output
    needed", "none", "n/a", "not required")."""
    t = " ".join(text.lower().split())
    return _PLACEHOLDER.fullmatch(t) is not None or _DISCLAIMER.search(t) is not None


def evidence_grounded(
    trace: Trace,
    *,
    field: str = "evidence",
    tools: Collection[str] = (),
    vocabulary: Collection[str] = (),
    rel_tol: float = 0.005,
    clause: str | None = "response_contract.evidence",
) -> Verdict:
    """Each turn's ``respond.<field>`` cites tool outputs, and only tool outputs of that turn
    or earlier ones (not the user's words):

    - a tool it names (any of ``tools`` or of the trace's calls, as a whole word) was called
      on this turn or before (detail ``tool=T``);
    - every number, id and quoted value it states is in those outputs (results, error kinds and
      messages), as :func:`response_grounded` matches them (details ``numbers``, ``ids``,
      ``quoted``);
    - on a turn that called a tool, it refers to some tool output: it names a called tool,
      states a grounded number, id or quoted value, or uses a word of an output's fields or
      values (``plan allows cancellation`` after ``get_plan_rules`` returned ``plan_id``).
      Empty evidence or a disclaimer ("no tool output needed", see :func:`disclaims_evidence`)
      is allowed only on a turn that called no tool (details ``disclaims``, ``unreferenced``).
    """
    names = set(tools) | {c.name for c in trace.tool_calls}
    patterns = {n: re.compile(re.escape(n)) for n in sorted(names, key=len, reverse=True)}
    sources = _Sources(outputs_only=True)
    for t in trace.turns:
        sources.add_turn(t)
        if t.response is None or field not in t.response:
            continue
        text = "\n".join(_strings(t.response[field]))
        mentioned = [
            n for n, p in patterns.items() if _whole_spans(text, p, hyphen=False, first=True)
        ]
        scope = f"turn {t.index + 1}: respond.{field} {text!r}"
        never = [n for n in mentioned if n not in sources.called]
        if never:
            return _fail(
                "evidence_grounded",
                f"{scope} cites {never[0]}, which was never called (calls so far: "
                f"{', '.join(sorted(sources.called)) or 'none'})",
                clause,
                t.index,
                detail=f"tool={never[0]}",
            )
        rest = text
        for n in mentioned:
            rest = _cut(rest, _whole_spans(rest, patterns[n], hyphen=False))
        ids = stated_ids(rest, vocabulary)
        bad_id = next((i for i in ids if not sources.has_id(i)), None)
        if bad_id is not None:
            return _fail(
                "evidence_grounded",
                f"{scope} cites {bad_id}, which no tool output of this or an earlier turn holds",
                clause,
                t.index,
                detail="ids",
            )
        quotes = quoted_values(rest)
        bad_quote = next((q for q in quotes if not sources.has_quote(q)), None)
        if bad_quote is not None:
            return _fail(
                "evidence_grounded",
                f"{scope} quotes {bad_quote!r}, which no tool output of this or "
                "an earlier turn holds",
                clause,
                t.index,
                detail="quoted",
            )
        stated = stated_quantities(
            without_list_markers(sources.without_derived_dates(without_ids(rest, vocabulary)))
        )
        bad_number = next(
            (x for x, d, p, a in stated if not sources.number(x, d, p, rel_tol, a)), None
        )
        if bad_number is not None:
            near = ", ".join(sources.nearest("numbers", f"{bad_number:g}"))
            return _fail(
                "evidence_grounded",
                f"{scope} states {bad_number:g}, which no tool output of this or "
                "an earlier turn holds" + (f" (nearest grounded: {near})" if near else ""),
                clause,
                t.index,
                detail="numbers",
            )
        calls = _calls_before_respond(t)
        if not calls:
            continue
        refers = bool(mentioned or stated or ids or quotes or (_words(rest) & sources.words))
        if not refers:
            kind = "disclaims" if disclaims_evidence(text) else "unreferenced"
            what = (
                "says no tool output was used"
                if kind == "disclaims"
                else "refers to no tool output"
            )
            return _fail(
                "evidence_grounded",
                f"{scope} {what}, but the turn called {_seq([c.name for c in calls])}: evidence "
                "must cite the tool output relied on",
                clause,
                t.index,
                detail=kind,
            )
    return _ok("evidence_grounded", f"every respond.{field} cites only tool outputs", clause)
