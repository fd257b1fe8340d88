"""Worlds: deterministic tool fixtures built from a spec.

A :class:`World` answers tool calls for one run: default outputs are a pure function of
``(seed, tool name)``, with overrides, PII canaries, injected failure modes and stateful Python
handlers on top. A world never reaches outside the process. A default output is a fresh copy on
every call, except for a caller that only reads it and keeps it (:func:`answer` with
``shared``): the calls of one tool in one world then share one copy.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import math
import pickle
import random
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import jsonschema

from agentprop._spec.bindings import parse_field_path
from agentprop._spec.model import Spec, Tool, spec_memo
from agentprop.errors import InvalidArgument, ToolError


class ToolHandler(Protocol):
    """A Python implementation of a stateful tool: ``handler(args, world) -> result``.

    Raise :class:`~agentprop.errors.ToolError` to answer with a tool error.
    """

    def __call__(self, args: dict[str, Any], world: World) -> Any: ...


@dataclass(frozen=True)
class Failure:
    """Make ``tool`` fail with ``mode`` on the given 1-based ``calls`` (``None``: every call)."""

    tool: str
    mode: str
    calls: tuple[int, ...] | None = None
    message: str | None = None

    def applies(self, call_number: int) -> bool:
        return self.calls is None or call_number in self.calls


_FAILURE_MESSAGES = {
    "timeout": "the tool did not answer in time",
    "not_found": "no record matches the request",
    "rate_limited": "too many requests; try again later",
    "invalid_query": "the query could not be executed",
}


def stable_seed(*parts: object) -> int:
    """A 64-bit seed derived from the parts' text, stable across processes and runs."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data (``dict``, ``list``, scalars), several times faster than
    :func:`copy.deepcopy`; anything else inside is copied with :func:`copy.deepcopy`."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else copy_json(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else copy_json(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


_ATOMS = frozenset({str, int, float, bool, type(None)})


@functools.lru_cache(maxsize=4096)
def _field_path(path: str) -> tuple[str | int, ...]:
    return tuple(parse_field_path(path))


def _parsed(path: str | list[str | int]) -> list[str | int] | tuple[str | int, ...]:
    return _field_path(path) if isinstance(path, str) else path


def _memo_key(value: Any) -> bytes | None:
    """An exact key for data that decides a memoised result: its pickle, which tells apart
    types (``1``, ``1.0``, ``True``) and key order; ``None`` (do not memoise) if it cannot be
    pickled or is too big to be worth keeping."""
    try:
        key = pickle.dumps(value, protocol=4)
    except Exception:
        return None
    return key if len(key) <= _MEMO_KEY_BYTES else None


_DEFAULTS_MEMO = "world_default_outputs"
_VALIDATORS_MEMO = "world_argument_validators"
_ARG_CHECKS_MEMO = "world_argument_checks"
_MEMO_LIMIT = 4096
_MEMO_KEY_BYTES = 4096
_UNSET: Any = object()


# ----------------------------------------------------------------------------- defaults


def _word(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))


def _string_for(name: str, schema: Mapping[str, Any], rng: random.Random) -> str:
    if "enum" in schema and schema["enum"]:
        return str(schema["enum"][0])
    lowered = name.lower()
    if lowered.endswith("_id") or lowered == "id":
        prefix = "".join(p[0] for p in lowered.split("_")[:-1]).upper() or "ID"
        return f"{prefix}-{rng.randint(1000, 9999)}"
    if "date" in lowered or lowered.endswith("_at"):
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if "currency" in lowered:
        return "USD"
    if "email" in lowered:
        return f"{_word(rng)}@example.com"
    if "country" in lowered:
        return "US"
    if "status" in lowered:
        return "ok"
    return f"{name}-{_word(rng, 4)}"


def generate_value(
    schema: Mapping[str, Any] | None, rng: random.Random, name: str = "value"
) -> Any:
    """A value satisfying a (simple) JSON Schema, drawn from ``rng``.

    Booleans are ``True`` and enums take their first value, so a default world is the happy
    path; numbers and strings vary with the seed.
    """
    if not isinstance(schema, Mapping):  # a boolean schema, or none: no constraint to follow
        return None
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if "enum" in schema and schema["enum"]:
        return copy.deepcopy(schema["enum"][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties", {})
        return (
            {k: generate_value(v, rng, k) for k, v in props.items()}
            if isinstance(props, Mapping)
            else {}
        )
    if kind == "array":
        items = schema.get("items", {})
        if isinstance(items, list):  # draft-4 tuple items: one value per position
            return [generate_value(item, rng, name) for item in items]
        # bounded at spec load (_spec/schemas.py)
        n = max(int(_bound(schema.get("minItems"), 1)), 1)
        return [generate_value(items, rng, name.rstrip("s") or name) for _ in range(n)]
    if kind == "string":
        return _string_for(name, schema, rng)
    if kind == "integer":
        low = math.ceil(_bound(schema.get("minimum"), 0))
        high = math.floor(_bound(schema.get("maximum"), low + 100))
        return rng.randint(low, max(low, high))
    if kind == "number":
        lo = float(_bound(schema.get("minimum"), 0.0))
        hi = float(_bound(schema.get("maximum"), lo + 500.0))
        return round(rng.uniform(lo, max(lo, hi)), 2)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return None


def _bound(value: Any, default: float) -> float:
    """A numeric schema keyword's value, or ``default`` when it is absent or not a finite
    number (specs are checked when they load; this keeps generation total for schemas built
    in code)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return value if isinstance(value, int) or math.isfinite(value) else default


def set_path(target: Any, path: str | list[str | int], value: Any) -> None:
    """Set a dotted field path (``orders[0].status``) inside nested dicts/lists, creating
    containers as needed."""
    _set_parts(target, _parsed(path), value, copy_value=True)


def _set_parts(
    target: Any, parts: list[str | int] | tuple[str | int, ...], value: Any, *, copy_value: bool
) -> None:
    """:func:`set_path` for a parsed path; stores ``value`` itself unless ``copy_value``."""
    node = target
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(part, int):
            while len(node) <= part:
                node.append({} if isinstance(nxt, str) else [])
            if node[part] is None:
                node[part] = {} if isinstance(nxt, str) else []
            node = node[part]
        else:
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {} if isinstance(nxt, str) else []
            node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = copy.deepcopy(value) if copy_value else value


CANARY_MARK = "_CANARY_"
"""What every planted PII value holds, between its field's label and its token
(``DOB_CANARY_4f2a01b3``): the one spelling every module that plants or reads canaries uses."""


def canary_value(label: str, token: str) -> str:
    """The canary planted in a PII field labelled ``label`` (``dob``): ``DOB_CANARY_<token>``."""
    return f"{label.upper()}{CANARY_MARK}{token}"


def canary_label(canary: str) -> str:
    """The label a canary was planted under (``DOB`` of ``DOB_CANARY_4f2a01b3``)."""
    return canary.split(CANARY_MARK)[0]


def _plant(target: dict[str, Any], parts: tuple[str | int, ...], value: str) -> None:
    """``_set_parts(target, parts, value, copy_value=False)``, quicker in the usual case of a
    path of keys through existing dicts (anything else, untouched, goes to :func:`_set_parts`)."""
    node = target
    for part in parts[:-1]:
        child = node.get(part) if type(part) is str else None
        if type(child) is not dict:
            _set_parts(target, parts, value, copy_value=False)
            return
        node = child
    last = parts[-1]
    if type(last) is str:
        node[last] = value
    else:
        _set_parts(target, parts, value, copy_value=False)


def get_path(target: Any, path: str | list[str | int]) -> Any:
    parts = _parsed(path)
    node = target
    for part in parts:
        node = node[part]
    return node


def _merge(base: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    for key, value in overrides.items():
        if "." in key or "[" in key:
            set_path(base, key, value)
        elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


# ----------------------------------------------------------------------------- world


@dataclass
class World:
    """Tool fixtures for one run.

    ``overrides`` maps a tool name to field overrides of its output (``{"verified": False}``,
    ``{"orders[0].days_since_created": 45}``); ``failures`` inject failure modes;
    ``handlers`` answer stateful tools; ``pii`` maps a tool to the output fields that hold PII,
    where unique canary strings are planted (``canary_nonce`` makes them unique per run).
    """

    spec: Spec
    seed: int = 0
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    handlers: dict[str, ToolHandler | Callable[[dict[str, Any], World], Any]] = field(
        default_factory=dict
    )
    pii: dict[str, list[str]] = field(default_factory=dict)
    canary_nonce: str = ""
    validate_args: bool = True
    state: dict[str, Any] = field(default_factory=dict)
    """Scratch space for handlers (e.g. an open database connection)."""

    def __post_init__(self) -> None:
        tools = self.spec.tools_by_name
        for named in (self.overrides, [f.tool for f in self.failures], self.handlers, self.pii):
            for tool in named:
                if tool not in tools:
                    known = ", ".join(t.name for t in self.spec.action_tools)
                    raise InvalidArgument(
                        f"World: spec {self.spec.spec_id} has no tool {tool!r}; "
                        f"its tools are {known}"
                    )
        for f in self.failures:
            modes = self.spec.tool(f.tool).failure_modes
            if f.mode not in modes:
                raise InvalidArgument(
                    f"World: tool {f.tool!r} has no failure mode {f.mode!r}; declared: "
                    f"{', '.join(modes) or 'none'}"
                )
        self._call_counts: dict[str, int] = {}
        self.canaries: dict[str, str] = {}
        for tool, fields in self.pii.items():
            prefix = f"{self.seed}:{self.canary_nonce}:{tool}:"
            for pii_field in fields:
                label = _field_path(pii_field)[-1]
                token = hashlib.sha256(f"{prefix}{pii_field}".encode()).hexdigest()[:8]
                self.canaries[f"{tool}.{pii_field}"] = canary_value(str(label), token)
        self._outputs: dict[str, Any] = {}
        self._shared_outputs: dict[str, Any] = {}
        """Per tool, the copy of its default output that this world's shared answers give."""
        self._spec_memo: dict[str, Any] = spec_memo(self.spec)

    # -------------------------------------------------------------- outputs

    def default_output(self, tool: str) -> Any:
        """The output of ``tool`` before any call-specific handling (deterministic); a fresh
        copy on every call."""
        if tool in self._outputs:
            base = self._outputs[tool]
        else:
            base = self._outputs[tool] = self._overridden_output(tool)
        out = copy_json(base)
        pii = self.pii.get(tool)
        if pii and isinstance(out, dict):
            for f in pii:
                _plant(out, _field_path(f), self.canaries[f"{tool}.{f}"])
        return out

    def _shared_output(self, tool: str) -> Any:
        """:meth:`default_output`, one copy for every call of ``tool`` in this world (it is the
        same output each time): for callers that only read it (see :func:`answer`)."""
        out = self._shared_outputs.get(tool, _UNSET)
        if out is _UNSET:
            out = self._shared_outputs[tool] = self.default_output(tool)
        return out

    def _overridden_output(self, tool: str) -> Any:
        """The generated output of ``tool`` with this world's overrides merged in, before the
        canaries. It depends only on (spec, seed, tool, overrides), so it is computed once per
        spec and shared between worlds; the shared object is never handed out or changed
        (:meth:`default_output` copies it, then plants this world's canaries in the copy)."""
        overrides = self.overrides.get(tool, {})
        frozen = _memo_key(overrides) if type(self.seed) is int else None
        key = None if frozen is None else (tool, self.seed, frozen)
        schema = self.spec.tool(tool).output_schema
        memo: dict[Any, tuple[Any, Any]] = self._spec_memo.setdefault(_DEFAULTS_MEMO, {})
        if key is not None:
            found = memo.get(key)
            if found is not None and found[0] is schema:
                return found[1]
        rng = random.Random(stable_seed(self.seed, tool))
        out = generate_value(schema, rng, tool)
        if isinstance(out, dict):
            _merge(out, overrides)
        if key is not None:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[key] = (schema, out)
        return out

    def call_count(self, tool: str) -> int:
        return self._call_counts.get(tool, 0)

    def call(self, tool: str, args: Mapping[str, Any] | None = None) -> Any:
        """Answer one tool call, or raise :class:`ToolError`."""
        return self._answer(tool, args)[0]

    def _answer(
        self, tool: str, args: Mapping[str, Any] | None, shared: bool = False
    ) -> tuple[Any, bool]:
        """:meth:`call`'s output, and whether it is fresh (see :func:`answer`)."""
        args = dict(args or {})
        spec_tool = self.spec.tools_by_name.get(tool)
        if spec_tool is None:
            known = ", ".join(t.name for t in self.spec.action_tools)
            raise ToolError("unknown_tool", f"no tool named {tool!r}; available tools: {known}")
        if self.validate_args:
            self._check_args(spec_tool, args)
        n = self._call_counts.get(tool, 0) + 1
        self._call_counts[tool] = n
        for f in self.failures:
            if f.tool == tool and f.applies(n):
                raise ToolError(
                    f.mode, f.message or _FAILURE_MESSAGES.get(f.mode, f.mode.replace("_", " "))
                )
        handler = self.handlers.get(tool)
        if handler is not None:
            return handler(args, self), False  # it may be state the handler keeps
        return (self._shared_output(tool) if shared else self.default_output(tool)), True

    def _check_args(self, tool: Tool, args: dict[str, Any]) -> None:
        schema = tool.input_schema
        frozen = _memo_key(args)
        checks: dict[tuple[str, bytes], tuple[Any, str | None]] = self._spec_memo.setdefault(
            _ARG_CHECKS_MEMO, {}
        )
        if frozen is not None:
            known = checks.get((tool.name, frozen))
            if known is not None and known[0] is schema:
                problem = known[1]
                if problem is not None:
                    raise ToolError("invalid_arguments", problem)
                return
        validators: dict[str, tuple[Any, Any]] = self._spec_memo.setdefault(_VALIDATORS_MEMO, {})
        cached = validators.get(tool.name)
        if cached is None or cached[0] is not schema:
            cached = validators[tool.name] = (
                schema,
                jsonschema.validators.validator_for(schema)(schema),
            )
        errors = sorted(cached[1].iter_errors(args), key=lambda e: list(e.path))
        problem = None
        if errors:
            e = errors[0]
            where = "/".join(map(str, e.path)) or "arguments"
            problem = f"{tool.name}: {where}: {e.message}"
        if frozen is not None:
            if len(checks) >= _MEMO_LIMIT:
                checks.clear()
            checks[(tool.name, frozen)] = (schema, problem)
        if problem is not None:
            raise ToolError("invalid_arguments", problem)


def answer(
    world: World, tool: str, args: Mapping[str, Any] | None = None, *, shared: bool = False
) -> tuple[Any, bool]:
    """``world.call(tool, args)``, and whether its output is fresh: a copy made for this call
    that nothing else holds (a default output), which the caller may keep as it is without
    copying it. With ``shared``, for a caller that only reads what it keeps, a default output is
    one copy shared by every such call of the tool in this world (still fresh: nothing changes
    it). A handler's output may be state the handler keeps and changes later, and a subclass
    that answers calls or makes default outputs its own way may share them: not fresh."""
    kind = type(world)
    if kind.call is World.call and kind.default_output is World.default_output:
        return world._answer(tool, args, shared)
    return world.call(tool, args), False
