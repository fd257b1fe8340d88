"""Numbers, dates and list items a reply may derive from grounded values in one step.

One arithmetic step from two grounded numbers (operands 0 and 1 excluded; its result rounded to
the digits the reply writes, exactly for an integer written whole), a part of a grounded
string, a date shifted by a grounded number of days, or a list item joining one tool record's
values. Never more than one step. Each acceptance returns its derivation as text, so the
verdict says what it accepted.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

_ISO_DATE = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d])")
_DIGITS = re.compile(r"\d+")
_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        )
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(\d{4}))?"
_DAY_MONTH = re.compile(rf"(?<![\w-]){_DAY}\s+(?:of\s+)?{_MONTH}{_YEAR}(?![\w-])", re.I)
_MONTH_DAY = re.compile(rf"(?<![\w-]){_MONTH}\s+{_DAY}{_YEAR}(?![\w-])", re.I)
_SLASH_DATE = re.compile(r"(?<![\w/.-])(\d{1,2})/(\d{1,2})/(\d{4})(?![\w/])")
_ZH_DATE = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ZH_YEARLESS = re.compile(r"(?<![\d年])(\d{1,2})\s*月\s*(\d{1,2})\s*[日号號]")
_COUNT = (
    r"(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty)"
)
_EN_WORDS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
} | {"a": 1, "an": 1, "thirty": 30}
_EN_DAYS = {"today": 0, "yesterday": -1, "tomorrow": 1}
_EN_RELATIVE = re.compile(
    rf"(?<![\w-])(?:(?P<word>today|yesterday|tomorrow)|the\s+day\s+before\s+yesterday"
    rf"|{_COUNT.replace('(', '(?P<back>', 1)}\s+(?P<unit>days?|weeks?)\s+ago"
    rf"|in\s+{_COUNT.replace('(', '(?P<ahead>', 1)}"
    rf"\s+(?P<ahead_unit>days?|weeks?))(?![\w-])",
    re.I,
)
_EN_OF_MONTH = re.compile(
    r"(?<![\w-])(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)?\s+of\s+(this|last|next)\s+month(?![\w-])",
    re.I,
)
_ZH_NUM = r"(?P<n>\d{1,3}|[一二两兩三四五六七八九十]{1,3})"
_ZH_DAYS = {"今天": 0, "昨天": -1, "明天": 1, "前天": -2, "后天": 2, "後天": 2, "大前天": -3}
_ZH_RELATIVE = re.compile(
    rf"(?P<word>大前天|今天|昨天|明天|前天|后天|後天)|{_ZH_NUM}\s*(?P<unit>天|周|週|个星期|個星期|星期)"
    r"\s*(?P<dir>前|之前|以前|后|後|之后|之後|以后|以後)"
)
_ZH_OF_MONTH = re.compile(
    r"(?P<which>上个?月|上個?月|这个月|這個月|本月|下个?月|下個?月)\s*(\d{1,2})\s*[号號日]"
    r"|(?<![\d月])(\d{1,2})\s*[号號]"
)
_ZH_SMALL = {c: n for n, c in enumerate("零一二三四五六七八九十")} | {"两": 2, "兩": 2}
_TOKEN = re.compile(r"[a-z0-9]+")
_CONNECTORS = frozenset(
    "a an the and or of on at by for to in is are was from with until till due each per x "
    "left remaining available total ends end starts start since".split()
)
MAX_DAYS = 3660
"""Largest day count a date derivation adds or subtracts (about ten years)."""


def _fmt(x: float) -> str:
    return f"{x:g}"


_Op = tuple[str, Callable[[float, float], float | None]]


def _div(a: float, b: float) -> float | None:
    return a / b if b else None


_OPS: tuple[_Op, ...] = (
    ("{a} + {b}", lambda a, b: a + b),
    ("{a} - {b}", lambda a, b: a - b),
    ("{a} × {b}", lambda a, b: a * b),
    ("{a} / {b}", _div),
    ("{a}% of {b}", lambda a, b: a * b / 100.0),
)


def _candidates(x: float, op: str, a: float) -> list[float]:
    """The second operands ``b`` that make ``op(a, b) == x`` (exactly)."""
    if op == "{a} + {b}":
        return [x - a]
    if op == "{a} - {b}":
        return [a - x]
    if op == "{a} × {b}":
        return [x / a] if a else []
    if op == "{a} / {b}":
        return [a / x] if x else []
    return [100.0 * x / a] if a else []


def derive_number(
    x: float,
    decimals: int,
    percent: bool,
    sources: Sequence[float],
    rel_tol: float,
    exact: bool = False,
) -> str | None:
    """How ``x`` (stated with ``decimals`` decimals; ``percent``: stated as ``x%``) follows in one
    arithmetic step from two of ``sources`` (sorted ascending), or ``None``.

    The step's result rounded to the stated digit must be ``x`` (9.24 is 9, never 10), or be
    within ``rel_tol`` of it. With ``exact`` (an integer written whole: a count, a day, a
    year), the result must be ``x`` itself: 9 is not ``100 / 11``. A percentage may be the
    ratio itself (``80%`` for ``24 / 30``)."""
    usable = [s for s in sources if s not in (0.0, 1.0, -1.0)]
    if not usable:
        return None
    targets = [(x, decimals, "")]
    if percent:
        targets.append((x / 100.0, decimals + 2, "%"))
    for value, d, unit in targets:
        # rounded to the stated digit: at most half a unit away (half-up and half-even alike)
        tol = (
            1e-9 * max(1.0, abs(value))
            if exact
            else max(0.5 * 10.0 ** (-d) * (1 + 1e-9), rel_tol * abs(value))
        )
        for a in usable:
            for text, fn in _OPS:
                for b_guess in _candidates(value, text, a):
                    i = bisect.bisect_left(usable, b_guess)
                    for b in usable[max(0, i - 2) : i + 2]:
                        got = fn(a, b)
                        if got is not None and abs(got - value) <= tol:
                            how = text.format(a=_fmt(a), b=_fmt(b))
                            return (
                                f"{_fmt(x)}{'%' if percent else ''} = {how}"
                                + (f" = {_fmt(got)}" if abs(got - value) > 1e-9 else "")
                                + (" (as a percentage)" if unit else "")
                            )
    return None


_PERCENT_OF = re.compile(
    r"(?<![\d.])(\d+(?:\.\d+)?)\s*%\s+of\s+(?:(?:the|your|my|our|its|their|this|that|a|an)\s+)?"
    r"[$€£]?(\d+(?:\.\d+)?)(?![\d.]*\d)",
    re.I,
)


def percent_of_terms(text: str) -> list[tuple[float, float, str]]:
    """The ``P% of N`` terms ``text`` writes with both numbers in digits, as ``(P, N, as
    written)``: ``80% of your 30-day supply`` -> ``(80.0, 30.0, "80% of your 30")``."""
    return [(float(m.group(1)), float(m.group(2)), m.group()) for m in _PERCENT_OF.finditer(text)]


def digit_parts(texts: Iterable[str]) -> dict[float, str]:
    """Every digit run of ``texts`` (the hour of ``2026-12-10T14:30``, the day of a date), with
    the text it is part of."""
    out: dict[float, str] = {}
    for text in texts:
        for m in _DIGITS.finditer(text):
            out.setdefault(float(m.group()), text)
    return out


def iso_dates(texts: Iterable[str]) -> dict[dt.date, str]:
    """Every ISO date (``YYYY-MM-DD``, also inside a timestamp) of ``texts``."""
    out: dict[dt.date, str] = {}
    for text in texts:
        for m in _ISO_DATE.finditer(text):
            try:
                out.setdefault(dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3))), text)
            except ValueError:
                continue
    return out


def _date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _zh_small(text: str) -> int:
    """A count of 1 to 99 in digits or Chinese numerals (两, 十二, 二十)."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_SMALL.get(tens, 1) * 10 + _ZH_SMALL.get(ones, 0)
    return _ZH_SMALL.get(text, 0)


def _shift_month(today: dt.date, months: int, day: int) -> dt.date | None:
    index = today.year * 12 + today.month - 1 + months
    return _date(index // 12, index % 12 + 1, day)


_PERIOD = re.compile(
    r"(?<![\w-])(?P<en>this|last|next)\s+(?P<unit>year|month)(?![\w-])"
    r"|(?P<zh>今年|去年|明年|这个月|這個月|本月|上个?月|上個?月|下个?月|下個?月)",
    re.I,
)


def relative_periods(text: str, today: dt.date) -> set[int]:
    """The numbers of the years and months ``text`` names relative to ``today``: ``last
    year`` 2025 on 2026-07-01, ``last month`` 6 and 2026, 去年, 上个月."""
    out: set[int] = set()
    for m in _PERIOD.finditer(text):
        if m.group("en"):
            shift = {"this": 0, "last": -1, "next": 1}[m.group("en").lower()]
            year = m.group("unit").lower() == "year"
        else:
            word = m.group("zh")
            shift = -1 if word[0] in "去上" else 1 if word[0] in "明下" else 0
            year = word.endswith("年")
        if year:
            out.add(today.year + shift)
        else:
            index = today.year * 12 + today.month - 1 + shift
            out |= {index // 12, index % 12 + 1}
    return out


def relative_dates(text: str, today: dt.date) -> list[dt.date]:
    """The dates ``text`` writes relative to ``today``: ``today``, ``yesterday``, ``a week
    ago``, ``two weeks ago``, ``11 days ago``, ``in 3 days``, ``the 20th of last month``,
    ``今天``, ``前天``, ``两周前``, ``11天前``, ``上个月20号``, ``20号`` (this month)."""
    out: list[dt.date] = []
    for m in _EN_RELATIVE.finditer(text):
        if m.group("word"):
            days = _EN_DAYS[m.group("word").lower()]
        elif m.group(0).lower().startswith("the"):
            days = -2
        else:
            count = m.group("back") or m.group("ahead")
            unit = (m.group("unit") or m.group("ahead_unit")).lower()
            n = int(count) if count.isdigit() else _EN_WORDS[count.lower()]
            days = n * (7 if unit.startswith("week") else 1) * (1 if m.group("ahead") else -1)
        out.append(today + dt.timedelta(days=days))
    for m in _EN_OF_MONTH.finditer(text):
        shift = {"this": 0, "last": -1, "next": 1}[m.group(2).lower()]
        date = _shift_month(today, shift, int(m.group(1)))
        if date is not None:
            out.append(date)
    for m in _ZH_RELATIVE.finditer(text):
        if m.group("word"):
            days = _ZH_DAYS[m.group("word")]
        else:
            n = _zh_small(m.group("n")) * (1 if m.group("unit") == "天" else 7)
            days = -n if "前" in m.group("dir") else n
        out.append(today + dt.timedelta(days=days))
    for m in _ZH_OF_MONTH.finditer(text):
        which = m.group("which") or ""
        shift = -1 if which.startswith("上") else 1 if which.startswith("下") else 0
        date = _shift_month(today, shift, int(m.group(2) or m.group(3)))
        if date is not None:
            out.append(date)
    return out


def grounded_dates(texts: Iterable[str], today: dt.date | None = None) -> dict[dt.date, str]:
    """Every date of ``texts``: ISO (:func:`iso_dates`), written with a month name (``22
    November 2026``, ``Nov 22``), in Chinese (``2026年11月22日``) or with slashes when it reads
    one way only (``11/22/2026``, ``22/11/2026``; not ``05/03/2026``); a date without a year
    (``20 November``, ``11月20日``) is read in each year another date of ``texts`` has, or
    ``today`` has, and the year before (``December 28`` said on 2027-01-05 is 2026-12-28). With
    ``today``, also every date written relative to it (:func:`relative_dates`)."""
    texts = tuple(texts)
    out = iso_dates(texts)
    yearless: list[tuple[int, int, str]] = []
    for text in texts:
        for _, month, day, year in _named_dates(text):
            if year is not None:
                date = _date(year, month, day)
                if date is not None:
                    out.setdefault(date, text)
            else:
                yearless.append((month, day, text))
        for m in _ZH_DATE.finditer(text):
            date = _date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            if date is not None:
                out.setdefault(date, text)
        yearless += [(int(m.group(1)), int(m.group(2)), text) for m in _ZH_YEARLESS.finditer(text)]
        if today is not None:
            for date in relative_dates(text, today):
                out.setdefault(date, text)
        for m in _SLASH_DATE.finditer(text):
            # a slash date reads one way only when one side is past 12: 11/20/2026, 20/11/2026
            a, b, year = int(m.group(1)), int(m.group(2)), int(m.group(3))
            date = _date(year, a, b) if b > 12 >= a else _date(year, b, a) if a > 12 >= b else None
            if date is not None:
                out.setdefault(date, text)
    years = {d.year for d in out} | ({today.year} if today is not None else set())
    for month, day, text in yearless:
        for year in sorted(years | {y - 1 for y in years}):
            date = _date(year, month, day)
            if date is not None:
                out.setdefault(date, text)
    return out


def derive_day_count(x: float, dates: Iterable[dt.date]) -> str | None:
    """How ``x`` is the number of days between two grounded ``dates``, or ``None``."""
    if x != int(x) or not 0 < x <= MAX_DAYS:
        return None
    known = set(dates)
    for start in sorted(known):
        end = start + dt.timedelta(days=int(x))
        if end in known:
            return f"{int(x)} = days from {start.isoformat()} to {end.isoformat()}"
    return None


def stated_dates(text: str) -> list[tuple[str, dt.date]]:
    """The dates ``text`` states with their year, as ``(as written, date)``: ISO, with a month
    name (``November 26, 2026``, ``26 Nov 2026``) or in Chinese (``2026年11月26日``)."""
    out = []
    for m in _ISO_DATE.finditer(text):
        try:
            out.append((m.group(), dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))))
        except ValueError:
            continue
    for written, month, day, year in _named_dates(text):
        date = _date(year, month, day) if year is not None else None
        if date is not None:
            out.append((written, date))
    for m in _ZH_DATE.finditer(text):
        date = _date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if date is not None:
            out.append((m.group(), date))
    return out


def stated_yearless(text: str) -> list[tuple[str, int, int]]:
    """The dates ``text`` states without a year (``November 26``, ``11月26日``), as ``(as
    written, month, day)``."""
    out = [(w, month, day) for w, month, day, year in _named_dates(text) if year is None]
    out += [(m.group(), int(m.group(1)), int(m.group(2))) for m in _ZH_YEARLESS.finditer(text)]
    return out


def _named_dates(text: str) -> list[tuple[str, int, int, int | None]]:
    """``(as written, month, day, year or None)`` of each date written with a month name."""
    out: list[tuple[str, int, int, int | None]] = []
    for pattern, day_first in ((_DAY_MONTH, True), (_MONTH_DAY, False)):
        for m in pattern.finditer(text):
            day_s, month_s = (m.group(1), m.group(2)) if day_first else (m.group(2), m.group(1))
            year = int(m.group(3)) if m.group(3) else None
            out.append((m.group(), _MONTHS[month_s.lower()], int(day_s), year))
    return out


def derive_date(date: dt.date, dates: Iterable[dt.date], numbers: Iterable[float]) -> str | None:
    """How ``date`` is a grounded date plus or minus a grounded number of days, or ``None``."""
    days = sorted({int(n) for n in numbers if n == int(n) and 0 < abs(n) <= MAX_DAYS})
    known = set(dates)
    for base in sorted(known):
        delta = (date - base).days
        if delta and abs(delta) in days:
            sign = "+" if delta > 0 else "-"
            return f"{date.isoformat()} = {base.isoformat()} {sign} {abs(delta)} days"
    return None


def _scalars(record: dict[str, Any]) -> list[str]:
    out = []
    for v in record.values():
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (str, int, float)):
            text = str(v).strip()
            if text:
                out.append(text)
    return out


def own_record(value: dict[Any, Any]) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """A dict's own entry of :func:`records` (its nested dicts not included), or ``None`` when
    it has fewer than two scalar values."""
    scalars = _scalars(value)
    if len(scalars) < 2:
        return None
    keys = frozenset(w for k in value for w in _TOKEN.findall(str(k).lower().replace("_", " ")))
    return tuple(scalars), keys


def records(value: Any) -> list[tuple[tuple[str, ...], frozenset[str]]]:
    """Every dict of a tool output, as (its scalar values, the words of its keys)."""
    out: list[tuple[tuple[str, ...], frozenset[str]]] = []
    if isinstance(value, dict):
        own = own_record(value)
        if own is not None:
            out.append(own)
        for v in value.values():
            out.extend(records(v))
    elif isinstance(value, (list, tuple)):
        for v in value:
            out.extend(records(v))
    return out


def composed_item(item: str, recs: Iterable[tuple[tuple[str, ...], frozenset[str]]]) -> str | None:
    """How list item ``item`` (normalised: case-folded, single spaces) joins two or more values
    of one record, with only the record's key words and connectors around them; ``None``."""
    for values, keys in recs:
        rest = f" {item} "
        used = []
        for v in sorted({v.casefold() for v in values}, key=len, reverse=True):
            pattern = re.compile(rf"(?<![\w]){re.escape(v)}(?![\w])")
            if pattern.search(rest):
                rest = pattern.sub(" ", rest, count=1)
                used.append(v)
        if len(used) < 2:
            continue
        left = _TOKEN.findall(rest)
        if all(w in _CONNECTORS or w in keys for w in left):
            return f"{item!r} joins {', '.join(repr(u) for u in used)} of one tool record"
    return None


def nearest_numbers(x: float, sources: Sequence[float], k: int = 3) -> list[float]:
    """The ``k`` grounded numbers closest to ``x``."""
    return sorted(sources, key=lambda s: (abs(s - x), s))[:k]


_RULE = re.compile(
    r"(?:^|[.;]\s*)(?:the\s+)?(?P<subject>[a-z][a-z ]{0,40}?)\s+(?:is|equals|is set at|is "
    r"always)\s+(?P<pct>\d+(?:\.\d+)?)\s*%\s+of\s+(?:the\s+)?(?P<base>[a-z][a-z "
    r"]{0,40}?)\s*(?=[.;,(]|$)",
    re.I,
)


def percent_rules(text: str) -> list[tuple[str, float, str, str]]:
    """The ``X is N% of Y`` rules a spec text states, as ``(subject, percent, base, as
    written)``: ``The change fee is 25% of the original fare.`` -> ``("change fee", 25.0,
    "original fare", ...)``."""
    out = []
    for m in _RULE.finditer(text):
        out.append(
            (
                m.group("subject").strip().lower(),
                float(m.group("pct")),
                m.group("base").strip().lower(),
                m.group(0).strip(" .;"),
            )
        )
    return out


def stated_amounts(text: str, head: str) -> list[tuple[float, str]]:
    """The numbers ``text`` states for ``head`` (``fee``): the first number at most four words
    after the word, with no punctuation between but ``:`` (``the change fee is 85.00``, ``fee:
    $75``), as ``(value, the words)``."""
    pattern = re.compile(
        rf"\b{re.escape(head)}s?\b((?:\s+[a-z]+){{0,4}}?)\s*[:=]?\s*[$€£]?\s*(\d{{1,3}}(?:,\d{{3}})+|\d+)(\.\d+)?(?![\d%])",
        re.I,
    )
    out = []
    for m in pattern.finditer(text):
        out.append((float(m.group(2).replace(",", "") + (m.group(3) or "")), m.group(0).strip()))
    return out
