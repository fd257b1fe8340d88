"""Relations between the fields of a bound world, kept whenever one of them is set.

A path's binding or an explored world variation that sets one field of a related group
re-derives the others (:meth:`WorldRelations.reconcile`), or the variation is not tried
(:meth:`WorldRelations.contradictions` names why): a world never contradicts itself.

Relations count only where they hold on the bindings' own world, or where ``relations:``
declares them; a field declared ``independent`` is in none. Kinds: ``days_since``
(N == (today - D).days), ``days_until`` (N == (D - today).days), ``total_of`` (T == the sum
of a list's item field) and ``count_of`` (C == a list's length). Every date keeps its side of
"today" (unless declared ``crosses_today``) and its order with the other dates of the world.
"today" is the runtime context's ``today`` (``current_date``, ``as_of``, ``now``); without
one, the day the bound world's elapsed-day fields imply (``days_since_created: 10`` next to
``created_at: 2026-11-20`` -> 2026-11-30); without either, it is unknown and a date is only
ever moved earlier.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Literal

from agentprop._spec.bindings import Bindings, parse_field_path, resolve_fields
from agentprop._spec.model import Spec
from agentprop._spec.orders import Order, detected_orders, parse_declared, stated_orders
from agentprop.errors import BindingsError

__all__ = [
    "FieldPath",
    "Relation",
    "WorldRelations",
    "format_field_path",
    "resolve",
    "world_orders",
    "world_relations",
]

FieldPath = tuple[str | int, ...]
Kind = Literal["days_since", "days_until", "total_of", "count_of"]

_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:$|[T ])")
_REFERENCE_KEYS = re.compile(r"today|current_date|as_of|now", re.IGNORECASE)
_ELAPSED = re.compile(r"days|age|elapsed|since|until|ago", re.IGNORECASE)


@dataclass(frozen=True)
class Relation:
    """``field`` of ``tool``'s output follows from ``source``: a date (``days_since``,
    ``days_until``) or a list (``total_of`` its items' ``item`` field, ``count_of`` its
    length)."""

    kind: Kind
    tool: str
    field: FieldPath
    source: FieldPath
    item: FieldPath = ()

    def describe(self) -> str:
        src = format_field_path(self.source)
        if self.kind == "total_of":
            src = f"{src}[].{format_field_path(self.item)}"
        return f"{self.tool}.{format_field_path(self.field)} = {self.kind}({src})"


def format_field_path(path: FieldPath) -> str:
    """``("orders", 0, "created_at")`` -> ``orders[0].created_at``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _as_date(value: Any) -> date | None:
    if not isinstance(value, str):
        return None
    m = _DATE.match(value)
    if m is None:
        return None
    try:
        return date.fromisoformat(m.group(1))
    except ValueError:
        return None


def _with_date(old: Any, new: date) -> str:
    """``old`` (an ISO date or datetime) with its date part set to ``new``."""
    text = str(old)
    return new.isoformat() + text[10:]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


resolve = resolve_fields


def _view(fields: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`resolve` for reading only: the output shares its values with ``fields``, and only
    the dicts and lists a path key writes into are copied (one level each), so ``fields`` is
    left as it is. (Deep copies of a tool's whole output, kilobytes, for every relation of
    every generated input were most of the relations' cost.) Never write into the result."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if "." in key or "[" in key:
            try:
                _put_in_copying(out, tuple(parse_field_path(key)), value)
            except (ValueError, KeyError, IndexError, TypeError):
                continue  # as resolve
        else:
            out[key] = value
    return out


def _put_in_copying(target: dict[str, Any], path: FieldPath, value: Any) -> None:
    """Set ``path`` in ``target``, copying each dict or list on the way before writing into
    it."""
    node: Any = target
    for part in path[:-1]:
        child = node[part]
        if isinstance(child, (dict, list)):
            child = copy.copy(child)
            node[part] = child
        node = child
    node[path[-1]] = value


def _get(target: Any, path: FieldPath) -> Any:
    node = target
    for part in path:
        node = node[part]
    return node


def _leaves(value: Any, prefix: FieldPath = ()) -> Iterator[tuple[FieldPath, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, (*prefix, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*prefix, i))
    else:
        yield prefix, value


def _objects(value: Any, prefix: FieldPath = ()) -> Iterator[tuple[FieldPath, Mapping[str, Any]]]:
    if isinstance(value, Mapping):
        yield prefix, value
        for k, v in value.items():
            yield from _objects(v, (*prefix, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _objects(v, (*prefix, i))


@dataclass(frozen=True)
class WorldRelations:
    """The relations of a bindings file's world, and the day they are read against."""

    today: date | None
    today_from: str
    """Where ``today`` comes from, in words (``context.today``, ``implied by ...``, ``unknown``)."""
    relations: tuple[Relation, ...]
    bound: Mapping[str, Mapping[str, Any]]
    """The bindings' world, resolved (the dates every check compares against)."""
    crosses_today: frozenset[tuple[str, FieldPath]] = field(default_factory=frozenset)
    independent: frozenset[tuple[str, FieldPath]] = field(default_factory=frozenset)

    def _bound_dates(self) -> list[tuple[str, FieldPath, date]]:
        return [
            (tool, path, d)
            for tool, out in self.bound.items()
            for path, v in _leaves(out)
            if (d := _as_date(v)) is not None
        ]

    def reconcile(
        self, overrides: Mapping[str, Mapping[str, Any]], changed: set[tuple[str, FieldPath]]
    ) -> dict[str, dict[str, Any]]:
        """``overrides`` with every field related to a ``changed`` one re-derived from it (a
        date from its elapsed days set by a binding, the days from a varied date, a total from
        a varied item); a relation whose both ends changed, or that cannot be re-derived (a
        count, a total set alone), is left as it is for :meth:`contradictions` to name."""
        out = {t: dict(v) for t, v in overrides.items()}

        def hit(tool: str, path: FieldPath) -> bool:
            return any(t == tool and p == path[: len(p)] for t, p in changed)

        for r in self.relations:
            fields = out.get(r.tool)
            if fields is None:
                continue
            now = _view(fields)
            try:
                if r.kind in ("days_since", "days_until") and self.today is not None:
                    sign = 1 if r.kind == "days_since" else -1
                    if hit(r.tool, r.field) and not hit(r.tool, r.source):
                        n = _get(now, r.field)
                        old = _get(now, r.source)
                        if _number(n) and _as_date(old) is not None:
                            new = self.today - timedelta(days=sign * int(n))
                            _put(fields, r.source, _with_date(old, new))
                    elif hit(r.tool, r.source) and not hit(r.tool, r.field):
                        d = _as_date(_get(now, r.source))
                        if d is not None:
                            _put(fields, r.field, sign * (self.today - d).days)
                elif r.kind == "total_of":
                    items = _get(now, r.source)
                    touched = any(hit(r.tool, (*r.source, i, *r.item)) for i in range(len(items)))
                    if touched and not hit(r.tool, r.field):
                        _put(fields, r.field, _total([_get(x, r.item) for x in items]))
            except (KeyError, IndexError, TypeError, OverflowError, ValueError):
                continue  # not there, or no date is that many days away (a boundary value)
        return out

    def contradictions(self, overrides: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """What in ``overrides`` contradicts the relations, a date's side of today or the
        order of the bound world's dates (empty: the world is consistent)."""
        now = {t: _view(v) for t, v in overrides.items()}
        out: list[str] = []
        for r in self.relations:
            if r.tool not in now:
                continue
            try:
                value = _get(now[r.tool], r.field)
                source = _get(now[r.tool], r.source)
            except (KeyError, IndexError, TypeError):
                continue
            want: Any = None
            if r.kind in ("days_since", "days_until") and self.today is not None:
                d = _as_date(source)
                if d is not None:
                    want = (self.today - d).days * (1 if r.kind == "days_since" else -1)
            elif r.kind == "count_of" and isinstance(source, list):
                want = len(source)
            elif r.kind == "total_of" and isinstance(source, list):
                try:
                    want = _total([_get(x, r.item) for x in source])
                except (KeyError, IndexError, TypeError):
                    continue
            if want is not None and _number(value) and abs(float(value) - float(want)) > 0.005:
                out.append(f"{r.describe()}: {value} != {want}")
        dates = self._bound_dates()
        current: dict[tuple[str, FieldPath], date] = {}
        for tool, path, was in dates:
            try:
                d = _as_date(_get(now.get(tool, {}), path))
            except (KeyError, IndexError, TypeError):
                continue
            if d is None:
                continue
            current[(tool, path)] = d
            name = f"{tool}.{format_field_path(path)}"
            if d == was or (tool, path) in self.crosses_today:
                continue
            if self.today is None:
                if d > was:
                    out.append(
                        f"{name} = {d} is later than its bound {was}, and no today is known "
                        "(dates only move earlier)"
                    )
            elif was <= self.today < d:
                out.append(f"{name} = {d} is after today {self.today}")
            elif was > self.today >= d:
                out.append(f"{name} = {d} is not after today {self.today}, as its bound value is")
        for ta, pa, a in dates:
            for tb, pb, b in dates:
                if a < b and (ta, pa) in current and (tb, pb) in current:
                    if current[(ta, pa)] > current[(tb, pb)]:
                        out.append(
                            f"{ta}.{format_field_path(pa)} = {current[(ta, pa)]} is after "
                            f"{tb}.{format_field_path(pb)} = {current[(tb, pb)]}"
                        )
        return out


def _total(values: list[Any]) -> Any:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return sum(values)
    return round(sum(float(v) for v in values), 2)


def _put(fields: dict[str, Any], path: FieldPath, value: Any) -> None:
    """Set ``path`` in one tool's overrides (unless it already holds ``value``): the key naming
    it, else a path key (the world merges path keys after the nested values)."""
    try:
        if _get(_view(fields), path) == value:
            return
    except (KeyError, IndexError, TypeError):
        pass
    fields[format_field_path(path)] = value


def _reference(context: Mapping[str, Any]) -> date | None:
    for key, value in context.items():
        if _REFERENCE_KEYS.search(str(key)):
            d = value if isinstance(value, date) else _as_date(str(value))
            if d is not None:
                return d
    return None


def _detect(
    bound: Mapping[str, Mapping[str, Any]], today: date | None, skip: set[tuple[str, FieldPath]]
) -> tuple[list[Relation], date | None, str]:
    """The relations that hold on ``bound`` (and the implied today when ``today`` is None)."""
    out: list[Relation] = []
    implied: tuple[date, str] | None = None
    for tool, value in bound.items():
        for at, obj in _objects(value):
            dates = {k: d for k, v in obj.items() if (d := _as_date(v)) is not None}
            for key, v in obj.items():
                here = (*at, key)
                if (tool, here) in skip or not _number(v):
                    continue
                if isinstance(v, int):
                    for dk, d in dates.items():
                        if (tool, (*at, dk)) in skip:
                            continue
                        if today is None:
                            if not (_ELAPSED.search(key) and len(dates) == 1 and v >= 0):
                                continue
                            guess = d + timedelta(days=v)
                            if implied is not None and implied[0] != guess:
                                continue
                            implied = implied or (guess, f"{tool}.{format_field_path(here)}")
                            out.append(Relation("days_since", tool, here, (*at, dk)))
                        elif v == (today - d).days:
                            out.append(Relation("days_since", tool, here, (*at, dk)))
                        elif v == (d - today).days:
                            out.append(Relation("days_until", tool, here, (*at, dk)))
                for lk, lv in obj.items():
                    if not isinstance(lv, list) or not lv or (tool, (*at, lk)) in skip:
                        continue
                    if isinstance(v, int) and v == len(lv):
                        out.append(Relation("count_of", tool, here, (*at, lk)))
                    if v and all(isinstance(x, Mapping) for x in lv):
                        for ik in lv[0]:
                            items = [x.get(ik) for x in lv]
                            if (
                                all(_number(x) for x in items)
                                and abs(float(_total(items)) - float(v)) < 0.005
                            ):
                                out.append(Relation("total_of", tool, here, (*at, lk), (ik,)))
    if today is None and implied is not None:
        return out, implied[0], f"implied by {implied[1]} (no today in the context)"
    return out, today, "context" if today is not None else "unknown"


def _declared_path(
    bound: Mapping[str, Mapping[str, Any]], tool: str, name: str, where: str
) -> FieldPath:
    """``name`` parsed, if the bindings' world of ``tool`` holds it (else a BindingsError)."""
    try:
        path = tuple(parse_field_path(name))
        _get(bound[tool], path)
    except (ValueError, KeyError, IndexError, TypeError):
        raise BindingsError(
            f"{where}: {tool}.{name} is not a field of the bindings' world; name a field "
            f"under world.{tool} (a path like orders[0].created_at)"
        ) from None
    return path


def _implied_today(bound: Mapping[str, Mapping[str, Any]], r: Relation) -> date | None:
    """The day a declared ``days_since``/``days_until`` relation's bound values imply."""
    if r.kind not in ("days_since", "days_until"):
        return None
    try:
        n = _get(bound.get(r.tool, {}), r.field)
        d = _as_date(_get(bound.get(r.tool, {}), r.source))
    except (KeyError, IndexError, TypeError):
        return None
    if d is None or not isinstance(n, int) or isinstance(n, bool):
        return None
    return d + timedelta(days=n if r.kind == "days_since" else -n)


def world_relations(bindings: Bindings) -> WorldRelations:
    """The relations of ``bindings``' world (memoised on the bindings object)."""
    memo = bindings._relations
    if isinstance(memo, WorldRelations):
        return memo
    bound = {t: resolve(v) for t, v in bindings.world.items()}
    skip: set[tuple[str, FieldPath]] = set()
    crosses: set[tuple[str, FieldPath]] = set()
    declared: list[Relation] = []
    for tool, fields in bindings.relations.items():
        for name, rb in fields.items():
            where = f"relations.{tool}.{name}"
            path = _declared_path(bound, tool, name, where)
            if rb.independent:
                skip.add((tool, path))
            if rb.crosses_today:
                crosses.add((tool, path))
            for kind in ("days_since", "days_until", "total_of", "count_of"):
                src = getattr(rb, kind)
                if src is None:
                    continue
                item: FieldPath = ()
                if kind == "total_of":
                    src, _, rest = src.partition("[].")
                    if not rest:
                        raise BindingsError(
                            f"{where}: total_of {src!r} names no item field; write it as "
                            "LIST[].FIELD (total_of: items[].price)"
                        )
                    item = tuple(parse_field_path(rest))
                source = _declared_path(bound, tool, src, f"{where}.{kind}")
                declared.append(Relation(kind, tool, path, source, item))
                skip.add((tool, path))
    today = _reference(bindings.context)
    found, today, today_from = _detect(bound, today, skip)
    for r in declared if today is None else ():
        implied = _implied_today(bound, r)
        if implied is not None:
            today = implied
            today_from = (
                f"implied by {r.tool}.{format_field_path(r.field)} (no today in the context)"
            )
            break
    if today_from == "context":
        today_from = next(f"context.{k}" for k in bindings.context if _REFERENCE_KEYS.match(str(k)))
    out = WorldRelations(
        today=today,
        today_from=today_from,
        relations=tuple(declared + found),
        bound=bound,
        crosses_today=frozenset(crosses),
        independent=frozenset(skip - {(r.tool, r.field) for r in declared}),
    )
    wrong = [
        c
        for c in dataclasses.replace(out, relations=tuple(declared)).contradictions(bindings.world)
        if " = " in c and "!=" in c
    ]
    if wrong:
        raise BindingsError(
            f"relations: a declared relation does not hold on the bindings' world ({wrong[0]}, "
            f"today {today or 'unknown'}, {today_from}); fix the world's values or the relation"
        )
    bindings._relations = out
    return out


def _bare(o: Order) -> tuple[str | int, ...]:
    return tuple(x for x in (*o.items, *o.key) if not isinstance(x, int))


def world_orders(bindings: Bindings, spec: Spec) -> tuple[Order, ...]:
    """The orders ``bindings``' world keeps (:mod:`agentprop._spec.orders`): those
    ``relations:`` declares, then those the tools' descriptions state, then those the bound
    world shows on lists neither names; none on a field declared ``independent``. (The bindings'
    validation has already checked that the declared and stated ones hold.)"""
    memo = bindings._orders
    if isinstance(memo, tuple):
        return memo
    bound = {t: resolve(v) for t, v in bindings.world.items()}
    out: list[Order] = []
    skip: set[tuple[str, FieldPath]] = set()
    for tool, fields in bindings.relations.items():
        for name, rb in fields.items():
            try:
                path = tuple(parse_field_path(name))
            except ValueError:
                continue
            if rb.independent:
                skip.add((tool, path))
            o = parse_declared(tool, path, rb.order) if rb.order is not None else None
            if o is not None:
                out.append(o)
    for tool, output in bound.items():
        declared = spec.tools_by_name.get(tool)
        if declared is not None:
            out += stated_orders(tool, declared.description, declared.output_schema, output)
    named = {(o.tool, o.items, o.key) for o in out}
    for tool, output in bound.items():
        out += [o for o in detected_orders(tool, output) if (o.tool, o.items, o.key) not in named]
    kept = tuple(
        o
        for o in out
        if (o.tool, o.items) not in skip
        and not any(
            t == o.tool and tuple(x for x in p if not isinstance(x, int)) == _bare(o)
            for t, p in skip
        )
    )
    bindings._orders = kept
    return kept
