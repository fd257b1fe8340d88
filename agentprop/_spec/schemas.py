"""What agentprop asks of a tool's JSON Schemas beyond the metaschema.

:func:`schema_problems` finds, when the spec loads, schemas that describe nothing, outputs no
world can generate in bounded time and memory, or bounds floating point cannot move by one;
each problem names the keyword's position, what is wrong and the limit.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from agentprop.errors import clip_repr

MAX_GENERATED_ITEMS = 1_000
"""Most items a generated tool output may be required to hold (``minItems`` of an output schema)."""
MAX_MAGNITUDE = 2.0**53
"""Largest numeric bound (in absolute value) of an output schema: past 2^53 a float cannot
tell ``x`` from ``x + 1``, so no boundary case can step across it."""

_NUMERIC = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_PAIRS = (
    ("minLength", "maxLength"),
    ("minItems", "maxItems"),
    ("minProperties", "maxProperties"),
    ("minContains", "maxContains"),
)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "items",
    "additionalItems",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)

Loc = tuple[Hashable, ...]


@dataclass(frozen=True)
class SchemaProblem:
    loc: Loc
    """Where in the schema (keys and indices from the schema's root)."""
    problem: str
    fix: str


def subschemas(schema: Any, loc: Loc = ()) -> Iterator[tuple[Loc, Mapping[str, Any]]]:
    """Every schema object inside ``schema`` (itself included) with its position; boolean
    schemas (``true``/``false``) hold no keywords and are skipped."""
    if not isinstance(schema, Mapping):
        return
    yield loc, schema
    for key in _SCHEMA_MAPS:
        children = schema.get(key)
        if isinstance(children, Mapping):
            for name, child in children.items():
                yield from subschemas(child, (*loc, key, name))
    for key in _SCHEMA_LISTS:
        children = schema.get(key)
        if isinstance(children, list):
            for i, child in enumerate(children):
                yield from subschemas(child, (*loc, key, i))
    for key in _SCHEMA_ONE:
        child = schema.get(key)
        if isinstance(child, list):  # draft-4 tuple items
            for i, item in enumerate(child):
                yield from subschemas(item, (*loc, key, i))
        else:
            yield from subschemas(child, (*loc, key))


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def schema_problems(schema: Any, *, output: bool) -> list[SchemaProblem]:
    """The problems of one tool schema (``output``: it is an ``output_schema``, from which
    worlds generate values)."""
    out: list[SchemaProblem] = []
    for loc, node in subschemas(schema):
        for key in _NUMERIC:
            value = node.get(key)
            if not _number(value):
                continue
            if isinstance(value, float) and not math.isfinite(value):
                out.append(
                    SchemaProblem(
                        (*loc, key),
                        f"{key} is {value}, not a finite number",
                        f"give {key} a finite number, or remove it",
                    )
                )
            elif output and abs(value) > MAX_MAGNITUDE:
                out.append(
                    SchemaProblem(
                        (*loc, key),
                        f"{key} {clip_repr(value, 40)} is over agentprop's limit of 2^53 in "
                        "absolute value for output schemas (past it a float cannot step from "
                        "one number to the next)",
                        f"give {key} a value of at most {MAX_MAGNITUDE:.0f} in absolute value",
                    )
                )
        if any(p.loc[: len(loc)] == loc and len(p.loc) == len(loc) + 1 for p in out):
            continue  # the bounds themselves are wrong: comparing them says nothing more
        out.extend(_empty_range(loc, node))
        for low, high in _PAIRS:
            a, b = node.get(low), node.get(high)
            if _number(a) and _number(b) and a > b:
                out.append(
                    SchemaProblem(
                        (*loc, low),
                        f"{low} {clip_repr(a, 40)} is greater than {high} {clip_repr(b, 40)}: "
                        "nothing satisfies the schema",
                        f"make {low} at most {high}",
                    )
                )
        items = node.get("minItems")
        if output and _number(items) and items > MAX_GENERATED_ITEMS:
            out.append(
                SchemaProblem(
                    (*loc, "minItems"),
                    f"minItems {clip_repr(items, 40)} is over agentprop's limit of "
                    f"{MAX_GENERATED_ITEMS:,} items in a generated tool output",
                    f"give minItems at most {MAX_GENERATED_ITEMS:,} (worlds generate at least "
                    "minItems items for every call)",
                )
            )
    return out


def _empty_range(loc: Loc, node: Mapping[str, Any]) -> list[SchemaProblem]:
    """``minimum``/``exclusiveMinimum`` above ``maximum``/``exclusiveMaximum`` (or, for
    ``type: integer``, no integer between them)."""
    lows = [(k, node[k]) for k in ("minimum", "exclusiveMinimum") if _number(node.get(k))]
    highs = [(k, node[k]) for k in ("maximum", "exclusiveMaximum") if _number(node.get(k))]
    for lk, lv in lows:
        for hk, hv in highs:
            exclusive = lk.startswith("exclusive") or hk.startswith("exclusive")
            if lv > hv or (exclusive and lv >= hv):
                return [
                    SchemaProblem(
                        (*loc, lk),
                        f"{lk} {clip_repr(lv, 40)} and {hk} {clip_repr(hv, 40)} leave no number: "
                        "nothing satisfies the schema",
                        f"make {lk} less than {hk}",
                    )
                ]
    if node.get("type") == "integer" and lows and highs:
        lo = max(math.floor(v) + 1 if k.startswith("exclusive") else math.ceil(v) for k, v in lows)
        hi = min(math.ceil(v) - 1 if k.startswith("exclusive") else math.floor(v) for k, v in highs)
        if lo > hi:
            lk, lv = lows[0]
            hk, hv = highs[0]
            return [
                SchemaProblem(
                    (*loc, lk),
                    f"no integer lies between {lk} {clip_repr(lv, 40)} and "
                    f"{hk} {clip_repr(hv, 40)}",
                    "widen the range, or use `type: number`",
                )
            ]
    return []
