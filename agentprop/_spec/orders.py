"""The orders a tool's output lists keep, so a world variation never breaks one.

An order is a list of a tool's output whose items' field (a number or an ISO date; for a list of
scalars, the items themselves) ascends or descends, ties allowed. It is *detected* where the
bindings' world shows it (at least two distinct values, already sorted), *stated* where the
tool's description or its output schema's description says so ("cheapest first", "newest
first", "sorted by date", "in ascending order of price", 按价格从低到高), or *declared* in the
bindings' ``relations:`` block (``LIST: {order: ascending FIELD}``). A stated or declared order
the bindings' world breaks is a :class:`~agentprop.errors.BindingsError`. A varied value is
moved inside the interval its neighbours allow (:func:`in_order`), or not tried.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

__all__ = [
    "NOT_TRIED",
    "Order",
    "broken",
    "detected_orders",
    "format_path",
    "in_order",
    "item_at",
    "parse_declared",
    "stated_orders",
]

FieldPath = tuple[str | int, ...]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


class _NotTried:
    def __repr__(self) -> str:
        return "NOT_TRIED"


NOT_TRIED: Any = _NotTried()
"""What :func:`in_order` gives for a value no in-order value can stand for."""


@dataclass(frozen=True)
class Order:
    """``tool``'s output list at ``items`` ascends (or descends) by its items' ``key`` field
    (``()``: the items themselves); ``source`` says how it is known."""

    tool: str
    items: FieldPath
    key: FieldPath
    descending: bool
    source: str

    def describe(self) -> str:
        at = format_path(self.items) + "[]" + (f".{format_path(self.key)}" if self.key else "")
        way = "descending" if self.descending else "ascending"
        return f"{self.tool}.{at} {way} ({self.source})"


def format_path(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _sort_key(value: Any) -> float | str | None:
    """A comparable form of ``value``: a number, or an ISO date(time) string (ISO strings of
    one format sort as their dates do); ``None`` for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and _DATE.match(value):
        try:
            date.fromisoformat(value[:10])
        except ValueError:
            return None
        return value
    return None


def item_at(item: Any, key: FieldPath) -> Any:
    for part in key:
        if isinstance(part, int):
            if not isinstance(item, list) or not -len(item) <= part < len(item):
                return None
            item = item[part]
        else:
            if not isinstance(item, Mapping) or part not in item:
                return None
            item = item[part]
    return item


def _lists(value: Any, prefix: FieldPath = ()) -> Iterator[tuple[FieldPath, list[Any]]]:
    """Every list inside ``value``, with its path."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _lists(v, (*prefix, str(k)))
    elif isinstance(value, list):
        yield prefix, value
        for i, v in enumerate(value):
            yield from _lists(v, (*prefix, i))


def _keys(items: list[Any]) -> list[FieldPath]:
    """The item fields a list can be ordered by: ``()`` for scalars, else the top-level keys
    every record has."""
    if all(not isinstance(x, (Mapping, list)) for x in items):
        return [()]
    if not all(isinstance(x, Mapping) for x in items):
        return []
    first = items[0]
    return [(str(k),) for k in first if all(k in x for x in items)]


def broken(values: Sequence[Any], descending: bool) -> int | None:
    """The first index whose value breaks the order with the one before it (``None``: the
    values keep it; a value that cannot be compared breaks it)."""
    keys = [_sort_key(v) for v in values]
    for i in range(1, len(keys)):
        a, b = keys[i - 1], keys[i]
        if a is None or b is None or type(a) is not type(b):
            return i
        if (a < b) if descending else (a > b):  # type: ignore[operator]
            return i
    return None


def detected_orders(tool: str, output: Mapping[str, Any]) -> list[Order]:
    """The orders ``tool``'s bound ``output`` shows: each list (two items or more) whose items'
    field takes at least two distinct comparable values, all in order."""
    out: list[Order] = []
    for at, items in _lists(output):
        if len(items) < 2:
            continue
        for key in _keys(items):
            values = [item_at(x, key) for x in items]
            keys = [_sort_key(v) for v in values]
            if any(k is None for k in keys) or len({type(k) for k in keys}) != 1:
                continue
            if len(set(keys)) < 2:
                continue
            for descending in (False, True):
                if broken(values, descending) is None:
                    out.append(Order(tool, at, key, descending, "detected on the bound world"))
    return out


# ----------------------------------------------------------------------------- stated orders

_PRICE = ("price", "cost", "fare", "amount", "fee", "total", "rate")
_DATE_NAMES = ("date", "dates", "time", "day", "days", "datetime", "timestamp")
_DATE_WORDS = ("date", "time", "day", "_at", "departs", "arrives", "created", "updated", "when")

# (pattern, descending, what the order is by: a field name, "price", "date" or a capture group)
_STATED: tuple[tuple[re.Pattern[str], bool | None, str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), d, by)
    for p, d, by in (
        (r"\b(?:cheapest|least expensive|lowest[- ]priced?|lowest price) first\b", False, "price"),
        (r"\b(?:most expensive|highest[- ]priced?|highest price|priciest) first\b", True, "price"),
        (r"\bprices? (?:from )?low(?:est)? to high(?:est)?\b", False, "price"),
        (r"\bprices? (?:from )?high(?:est)? to low(?:est)?\b", True, "price"),
        (r"\b(?:newest|latest|most recent) first\b", True, "date"),
        (r"\b(?:oldest|earliest|least recent) first\b", False, "date"),
        (
            r"\bin (ascending|descending) order of (?:the |their |its )?([a-z_][a-z0-9_]*)",
            None,
            "2",
        ),
        (r"\b([a-z_][a-z0-9_]*) in (ascending|descending) order\b(?! of)", None, "1"),
        (
            r"\b(?:sorted|ordered) by (?:the |their |its )?([a-z_][a-z0-9_]*)"
            r"(?:,? (ascending|descending|asc|desc)\b)?",
            None,
            "1",
        ),
        (r"按(价格|价钱|费用|金额|票价)(?:从低到高|由低到高|升序)", False, "price"),
        (r"按(价格|价钱|费用|金额|票价)(?:从高到低|由高到低|降序)", True, "price"),
        (r"按(日期|时间)(?:从早到晚|由早到晚|升序)", False, "date"),
        (r"按(日期|时间)(?:从晚到早|由晚到早|从新到旧|降序)", True, "date"),
        (r"最便宜的?(?:在前|排在前面|优先)", False, "price"),
        (r"最贵的?(?:在前|排在前面|优先)", True, "price"),
        (r"最新的?(?:在前|排在前面|优先)", True, "date"),
        (r"最早的?(?:在前|排在前面|优先)", False, "date"),
    )
)


def _statement(text: str) -> tuple[str, bool, str] | None:
    """``(phrase, descending, by)`` for the first order ``text`` states, else ``None``."""
    found: list[tuple[int, str, bool, str]] = []
    for pattern, descending, by in _STATED:
        m = pattern.search(text)
        if m is None:
            continue
        if descending is None:
            word = m.group(int(by)).lower()
            other = m.group(2 if by == "1" else 1)
            way = (other or "").lower()
            desc = way.startswith("desc")
            if by == "1" and m.group(0).lower().startswith(("sorted", "ordered")):
                # "sorted by date, newest first": the first-phrase tells the direction
                rest = text[m.end() : m.end() + 40].lower()
                desc = desc or bool(re.match(r",? (?:newest|latest|most recent|highest)", rest))
            found.append((m.start(), m.group(0), desc, word))
        else:
            found.append((m.start(), m.group(0), descending, by))
    if not found:
        return None
    _, phrase, desc, by = min(found)
    return phrase, desc, by


def _resolve_key(by: str, items: list[Any], schema_keys: Sequence[str]) -> FieldPath | None:
    """The item field ``by`` names among the list's fields (its records' keys, or the schema's
    item properties); for a price or a date, else the list's one numeric (or date) field; else
    ``None`` (a word naming no field, like "relevance", states no order agentprop can keep)."""
    names = list(dict.fromkeys([*schema_keys, *(k for x in items[:1] for k in x)]))
    comparable = [
        n for n in names if items and all(_sort_key(item_at(x, (n,))) is not None for x in items)
    ] or names
    low = {n: n.lower() for n in names}
    if by in low.values():
        return (next(n for n in names if low[n] == by),)
    kind = "price" if by in (*_PRICE, "prices") else "date" if by in _DATE_NAMES else None
    hints = _PRICE if kind == "price" else _DATE_WORDS if kind == "date" else (by.rstrip("s"),)
    want: type | None = float if kind == "price" else str if kind == "date" else None

    def fits(n: str) -> bool:  # a price is a number, a date a string, whatever the name says
        return want is None or all(isinstance(_sort_key(item_at(x, (n,))), want) for x in items)

    words = {n: set(re.split(r"[^a-z0-9]+", low[n])) for n in names}
    # hints in their order of preference, a whole word of the name before a part of one:
    # "fare_usd" before "total_stops" for a price, never a count of days for a date
    for whole in (True, False):
        for h in hints:
            for n in comparable:
                if (h in words[n] if whole else h in low[n]) and fits(n):
                    return (n,)
    if kind is None:
        return None
    alone = [n for n in comparable if fits(n)]
    return (alone[0],) if len(alone) == 1 else None


def _schema_lists(
    schema: Any, prefix: FieldPath = ()
) -> Iterator[tuple[FieldPath, Mapping[str, Any]]]:
    """Every array property of an output schema (no items inside arrays), with its path."""
    if not isinstance(schema, Mapping):
        return
    if schema.get("type") == "array" or "items" in schema:
        yield prefix, schema
        return
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for k, v in props.items():
            yield from _schema_lists(v, (*prefix, str(k)))


def stated_orders(
    tool: str, description: str, schema: Mapping[str, Any] | None, output: Mapping[str, Any]
) -> list[Order]:
    """The orders ``tool``'s description or its output schema's descriptions state, on the
    lists of its bound ``output`` (a statement in an array property's description is about that
    list; one in the tool's or the schema's own description about every list that has the
    field it names)."""
    lists = list(_schema_lists(schema or {}))
    texts: list[tuple[str, list[FieldPath]]] = [
        (str((schema or {}).get("description") or ""), [p for p, _ in lists]),
        (description, [p for p, _ in lists]),
    ]
    texts += [(str(s.get("description") or ""), [p]) for p, s in lists]
    out: list[Order] = []
    seen: set[FieldPath] = set()
    for text, paths in texts:
        said = _statement(text) if text else None
        if said is None:
            continue
        phrase, desc, by = said
        for path in paths:
            items = item_at(output, path)
            if not isinstance(items, list) or path in seen:
                continue
            item_schema = dict(lists).get(path, {}).get("items") or {}
            props = item_schema.get("properties") if isinstance(item_schema, Mapping) else None
            keys = [str(k) for k in props] if isinstance(props, Mapping) else []
            if items and not all(isinstance(x, Mapping) for x in items):
                key: FieldPath | None = ()
            else:
                key = _resolve_key(by, items, keys)
            if key is None:
                continue
            seen.add(path)
            out.append(Order(tool, path, key, desc, f'stated: "{phrase}"'))
    return out


def parse_declared(tool: str, items: FieldPath, text: str) -> Order | None:
    """``relations: {TOOL: {LIST: {order: "ascending FIELD"}}}`` as an order (``None``: not
    ``ascending``/``descending`` followed by at most one field path)."""
    m = re.fullmatch(r"\s*(ascending|descending)(?:\s+([A-Za-z_][\w.]*))?\s*", text)
    if m is None:
        return None
    key: FieldPath = tuple(m.group(2).split(".")) if m.group(2) else ()
    return Order(tool, items, key, m.group(1) == "descending", "declared in relations:")


def in_order(values: Sequence[Any], index: int, candidate: Any, descending: bool) -> Any:
    """The value that stands for ``candidate`` at ``index`` of ``values`` (a list in order):
    ``candidate`` itself when the order keeps, else the nearest value its neighbours allow (a
    tie with the neighbour it would pass), else :data:`NOT_TRIED` (no value but the current one
    keeps the order, or the neighbour cannot be written in the candidate's type)."""
    current = values[index]
    trial = list(values)
    trial[index] = candidate
    if broken(trial, descending) is None:
        return candidate
    before = values[index - 1] if index > 0 else None
    after = values[index + 1] if index + 1 < len(values) else None
    lo, hi = (after, before) if descending else (before, after)
    ck = _sort_key(candidate)
    if ck is None:
        return NOT_TRIED
    lk = _sort_key(lo)
    below = lk is not None and type(lk) is type(ck) and ck < lk  # type: ignore[operator]
    bound = lo if below else hi
    if bound is None:
        return NOT_TRIED
    value: Any
    if isinstance(candidate, str):
        value = bound if isinstance(bound, str) else NOT_TRIED
    elif isinstance(bound, str):
        value = NOT_TRIED
    elif isinstance(candidate, int) and not isinstance(candidate, bool):
        value = math.ceil(float(bound)) if below else math.floor(float(bound))
    else:
        value = float(bound)
    if value is NOT_TRIED or value == current:
        return NOT_TRIED
    trial[index] = value
    return value if broken(trial, descending) is None else NOT_TRIED
