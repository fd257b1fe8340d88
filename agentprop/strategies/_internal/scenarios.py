"""Scenarios drawn from a path of the decision tree: worlds and conversations.

This module also holds the machinery the boundary and directional strategies share: reading
the spec's expectation for an assignment of the condition variables (:func:`choose_branch`,
:func:`walk`) and realising an assignment as a :class:`~agentprop._scenario.build.Scenario`.

Invariants (DESIGN.md §3 item 2):

* **Expectations are computed, never written by hand.** The branch a node takes for an
  assignment is found by evaluating its ``when`` ASTs in order, first match wins. A variable
  the assignment lacks takes its *default* -- its value in the bindings' base world, or the
  first value its binding lists -- and the default is recorded, so "all else at default" is
  explicit. Variables bound ``internal`` are the agent's own state: like
  :func:`~agentprop._scenario.build.solve`, which gives them any value consistent with the path, the
  assignment carries a value for them; one it lacks is set to the first constant the tree
  compares it with (``schema_needed == true`` -> ``True``) and listed in ``assumed``.
* **Strategies draw integers, never text or floats.** :func:`worlds` draws, for each numeric
  world field, an integer number of steps (1 for integers, the binding's ``precision`` for
  numbers) away from the value :func:`~agentprop._scenario.build.solve` chose, inside the interval
  where every condition of the path still holds; :func:`conversations` draws a template index
  and paraphrase transforms. 0 is always the default, so Hypothesis shrinks a failure towards
  the path's default scenario, first template, original wording.
* **Bad requests fail when the strategy is created.** An unknown path id or a malformed
  argument raises :class:`~agentprop.errors.InvalidArgument`; a path that no assignment
  realises raises :class:`~agentprop._scenario.build.Unsatisfiable` with every reason.
* **Provenance travels with the value.** A drawn world or conversation records the tree path,
  the template index, the offsets and the paraphrase steps, and the same text is ``note()``d.
"""

from __future__ import annotations

import decimal
import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from pydantic import BaseModel, Field

from agentprop._scenario.build import Scenario, WorldSpec, base_world, build_scenario, solve
from agentprop._scenario.world import get_path
from agentprop._spec.bindings import Bindings, VariableBinding, parse_field_path, schema_at
from agentprop._spec.model import Spec
from agentprop._spec.paths import Step, TreePath, enumerate_paths
from agentprop._spec.when import (
    And,
    Arith,
    Compare,
    Expr,
    Literal,
    Not,
    Or,
    Symbol,
    UnboundVariable,
    arith,
    atoms,
    evaluate,
    lookup,
    variables,
)
from agentprop._spec.when import (
    Path as VarPath,
)
from agentprop.errors import AgentPropError, InvalidArgument, Unsatisfiable

__all__ = [
    "BranchChoice",
    "ConversationProvenance",
    "DrawnScenario",
    "PathWorld",
    "Route",
    "Skipped",
    "choose_branch",
    "conversations",
    "resolve_path",
    "walk",
    "worlds",
]

PathLike = TreePath | str


# ----------------------------------------------------------------------------- models


class BranchChoice(BaseModel):
    """The branch the spec takes at ``node`` for an assignment (first match wins).

    ``branch is None`` means no clause of the node holds and it has no ``otherwise``: the spec
    does not say what happens. ``decision`` is set when ``next`` is a terminal node (from the
    bindings' ``outcomes`` or the leaf's name). ``assumed`` lists the ``internal`` variables
    the assignment lacked and that were given a value while choosing (``name = value``): the
    agent decides those, so the branch holds *if* the agent decides that way.
    """

    node: str
    branch: int | None
    clause: str | None = None
    next: str | None = None
    decision: str | None = None
    assumed: list[str] = Field(default_factory=list)

    def __str__(self) -> str:
        if self.branch is None:
            return f"{self.node}: no branch matches"
        return f"{self.node}#{self.branch} [{self.clause}] -> {self.next}"


class Route(BaseModel):
    """Where an assignment leads from the root: the branches taken, and the leaf (or why the
    walk stopped: a loop back to a visited node, no matching branch, an unbound variable)."""

    steps: list[BranchChoice] = Field(default_factory=list)
    leaf: str | None = None
    decision: str | None = None
    stop: str | None = None
    path_id: str | None = None
    """The id of the loop-free tree path this route follows (``None`` if it stopped)."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    """Variables the assignment lacked, set to their defaults while walking."""

    @property
    def nodes(self) -> list[str]:
        out = [s.node for s in self.steps]
        if self.leaf is not None:
            out.append(self.leaf)
        return out

    def choice_at(self, node: str) -> BranchChoice | None:
        for s in self.steps:
            if s.node == node:
                return s
        return None

    def __str__(self) -> str:
        parts = [f"{s.node}#{s.branch}" for s in self.steps]
        parts.append(self.leaf if self.leaf is not None else f"stop: {self.stop}")
        return " -> ".join(parts)


class PathWorld(BaseModel):
    """A world drawn by :func:`worlds`: the overrides, and how they were chosen."""

    path_id: str
    tree_path: str
    """The path as text (``N1_INTENT [intent == cancel_order] -> ...``)."""
    alternative: int = 0
    """Index among the tree paths that share ``path_id`` (0 = the first satisfiable)."""
    assignment: dict[str, Any]
    """Values of the condition variables; every condition of the path holds for them."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    """The value :func:`~agentprop._scenario.build.solve` chose for each varied variable."""
    offsets: dict[str, int] = Field(default_factory=dict)
    """Steps away from the default, per varied variable (0 = the default)."""
    fixed: dict[str, str] = Field(default_factory=dict)
    """Numeric variables that were not varied, with the reason."""
    world: WorldSpec

    def describe(self) -> str:
        moved = ", ".join(f"{k}={self.assignment[k]!r} ({v:+d} steps)" for k, v in self.offsets.items() if v)
        return f"world for {self.path_id}: " + (moved or "default values")


class ConversationProvenance(BaseModel):
    """How a :class:`DrawnScenario` was made (everything needed to make it again)."""

    path_id: str
    tree_path: str
    alternative: int = 0
    template_index: int = 0
    world_offsets: dict[str, int] = Field(default_factory=dict)
    original_messages: list[str] = Field(default_factory=list)
    paraphrase_steps: list[list[str]] = Field(default_factory=list)
    """Per turn, the paraphrase transforms applied (empty = the template's own text)."""

    def describe(self) -> str:
        moved = {k: v for k, v in self.world_offsets.items() if v}
        changed = [f"turn {i + 1}: {' + '.join(s)}" for i, s in enumerate(self.paraphrase_steps) if s]
        return (
            f"conversation for {self.path_id}: template {self.template_index}"
            + (f", world offsets {moved}" if moved else ", default world")
            + (f", paraphrased ({'; '.join(changed)})" if changed else ", original wording")
        )


class DrawnScenario(Scenario):
    """A :class:`~agentprop._scenario.build.Scenario` drawn by :func:`conversations`, with its
    provenance. Use it anywhere a ``Scenario`` goes."""

    provenance: ConversationProvenance


class Skipped(BaseModel):
    """A comparison, atom, variable or value for which no case was made, and why."""

    comparison: str
    location: str
    variable: str | None = None
    value: Any = None
    label: str | None = None
    reason: str


# ----------------------------------------------------------------------------- validation


def check_spec_bindings(spec: object, bindings: object, where: str) -> tuple[Spec, Bindings]:
    if not isinstance(spec, Spec):
        raise InvalidArgument(f"{where}: spec must be a Spec (got {type(spec).__name__}); load one with agentprop.load_spec('path/to/spec.yaml')")
    if not isinstance(bindings, Bindings):
        raise InvalidArgument(
            f"{where}: bindings must be a Bindings (got {type(bindings).__name__}); load them with "
            "load_bindings('agentprop.yaml', spec), or use empty_bindings(spec) for none"
        )
    return spec, bindings


def check_node(spec: Spec, node: object, where: str, *, allow_none: bool) -> str | None:
    if node is None and allow_none:
        return None
    inner = [n.node_id for n in spec.decision_tree if not n.is_terminal]
    if not isinstance(node, str):
        raise InvalidArgument(f"{where}: node must be a node id string (got {type(node).__name__}); nodes with branches: {', '.join(inner)}")
    if node not in spec.nodes_by_id:
        close = difflib.get_close_matches(node, list(spec.nodes_by_id), n=1)
        raise InvalidArgument(
            f"{where}: spec {spec.spec_id} has no node {node!r}"
            + (f"; did you mean {close[0]!r}?" if close else "")
            + f" Nodes with branches: {', '.join(inner)}"
        )
    if spec.nodes_by_id[node].is_terminal:
        raise InvalidArgument(
            f"{where}: node {node!r} is terminal (it has no branches, so nothing to compare); use a node with branches: {', '.join(inner)}"
        )
    return node


def check_int(value: object, name: str, where: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{where}: {name}={value!r} must be an integer >= {minimum}")
    if value < minimum:
        raise InvalidArgument(f"{where}: {name}={value} must be >= {minimum}")
    return value


def resolve_path(spec: Spec, path: object, where: str = "resolve_path") -> list[TreePath]:
    """The tree paths ``path`` names: a :class:`~agentprop._spec.paths.TreePath` of ``spec``, a
    path id such as ``"END_CANCELLED<-N7_CANCEL"`` (several tree paths may share an id; all
    are returned, in tree order), or a scenario id of ``agentprop run`` that adds the branch it
    covers (``"END_APPROVE<-N7_SUBMIT/N5_CALCULATE#1"``)."""
    all_paths = enumerate_paths(spec)
    if isinstance(path, TreePath):
        if path not in all_paths:
            raise InvalidArgument(
                f"{where}: path {path.id} is not a path of spec {spec.spec_id}; take paths from enumerate_paths(spec), or pass a path id string"
            )
        return [path]
    if isinstance(path, str):
        matches = [p for p in all_paths if p.id == path]
        base, _, branch = path.rpartition("/")
        if not matches and base and "#" in branch:
            # a scenario id of `agentprop run`: the path id plus the branch it covers
            node, _, k = branch.partition("#")
            matches = [p for p in all_paths if p.id == base and any(f"{s.node}#{s.branch}" == f"{node}#{k}" for s in p.steps)]
        if not matches:
            ids = list(dict.fromkeys(p.id for p in all_paths))
            close = difflib.get_close_matches(path, ids, n=1)
            raise InvalidArgument(
                f"{where}: spec {spec.spec_id} has no path {path!r}"
                + (f"; did you mean {close[0]!r}?" if close else "")
                + f" Path ids: {', '.join(ids)}"
            )
        return matches
    raise InvalidArgument(f"{where}: path must be a TreePath or a path id string like 'END_CANCELLED<-N7_CANCEL' (got {type(path).__name__})")


# ----------------------------------------------------------------------------- numbers


@dataclass(frozen=True)
class NumericField:
    """How a numeric condition variable (or tool field) may move."""

    kind: str  # "integer" or "number"
    step: float | int
    lo: float | None
    hi: float | None
    lo_reason: str | None = None
    hi_reason: str | None = None
    missing_ok: bool = False
    missing_reason: str = ""

    @property
    def decimals(self) -> int:
        if self.kind == "integer":
            return 0
        exp = decimal.Decimal(str(self.step)).normalize().as_tuple().exponent
        return max(0, -int(exp))

    def norm(self, x: float) -> int | float:
        """``x`` on this field's grid (an ``int`` for integers, rounded to the precision)."""
        if self.kind == "integer":
            return int(round(x))
        return round(float(x), self.decimals)

    def out_of_domain(self, x: Any) -> str | None:
        if x is None:
            return None if self.missing_ok else self.missing_reason
        if self.lo is not None and x < self.lo:
            return f"{x!r} is below the lowest allowed value {self.lo!r} ({self.lo_reason})"
        if self.hi is not None and x > self.hi:
            return f"{x!r} is above the highest allowed value {self.hi!r} ({self.hi_reason})"
        return None


def _schema_kind(schema: Mapping[str, Any] | None) -> str | None:
    if not schema:
        return None
    t = schema.get("type")
    if isinstance(t, list):
        t = next((k for k in t if k in ("integer", "number")), None)
    return t if t in ("integer", "number") else None


def _schema_field(schema: Mapping[str, Any] | None, field_path: str) -> tuple[Mapping[str, Any] | None, bool]:
    """The sub-schema at ``field_path`` and whether the field may be absent."""
    parts = parse_field_path(field_path)
    sub = schema_at(schema, parts)
    parent = schema_at(schema, parts[:-1]) if len(parts) > 1 else schema
    last = parts[-1]
    required = True
    if isinstance(last, str) and parent is not None:
        required = last in (parent.get("required") or [])
    nullable = sub is not None and isinstance(sub.get("type"), list) and "null" in sub["type"]
    return sub, (not required) or nullable


def numeric_field(
    kind: str,
    *,
    schema: Mapping[str, Any] | None,
    missing_ok: bool,
    precision: float | None,
    bmin: float | None,
    bmax: float | None,
    what: str,
) -> NumericField:
    step: float | int = 1 if kind == "integer" else (precision or 0.01)
    lo: float | None = None
    hi: float | None = None
    lo_reason = hi_reason = None
    s = schema or {}
    for key, bound, excl in (("minimum", "lo", False), ("exclusiveMinimum", "lo", True), ("maximum", "hi", False), ("exclusiveMaximum", "hi", True)):
        v = s.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if bound == "lo":
            v2 = v + step if excl else v
            if lo is None or v2 > lo:
                lo, lo_reason = v2, f"output_schema {key} {v}"
        else:
            v2 = v - step if excl else v
            if hi is None or v2 < hi:
                hi, hi_reason = v2, f"output_schema {key} {v}"
    if bmin is not None and (lo is None or bmin > lo):
        lo, lo_reason = bmin, f"binding min {bmin}"
    if bmax is not None and (hi is None or bmax < hi):
        hi, hi_reason = bmax, f"binding max {bmax}"
    return NumericField(
        kind=kind,
        step=step,
        lo=lo,
        hi=hi,
        lo_reason=lo_reason,
        hi_reason=hi_reason,
        missing_ok=missing_ok,
        missing_reason=f"{what} is required by its output_schema, so it cannot be missing",
    )


def is_number(x: object) -> TypeGuard[int | float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def numeric_value(e: Expr, env: Mapping[str, Any]) -> Any:
    """The value of a (numeric) expression; ``UnboundVariable`` if a variable has none."""
    if isinstance(e, Literal):
        return e.value
    if isinstance(e, VarPath):
        return lookup(env, e.dotted)
    if isinstance(e, Arith):
        a, b = numeric_value(e.left, env), numeric_value(e.right, env)
        if not (is_number(a) and is_number(b)):
            return None
        return arith(e.op, a, b)
    return None


# ----------------------------------------------------------------------------- the context


class _Stop(Exception):
    """The walk cannot go on (a variable has no binding and no value)."""


@dataclass
class Context:
    """A spec with its bindings, and what is derived from them once (defaults, domains)."""

    spec: Spec
    bindings: Bindings
    _defaults: dict[str, Any] = field(default_factory=dict)
    _paths_by_steps: dict[tuple[tuple[str, int], ...], TreePath] | None = None
    _world_outputs: dict[str, Any] = field(default_factory=dict)

    # -------------------------------------------------------------- variables

    def var(self, name: str) -> VariableBinding | None:
        return self.bindings.variables.get(name)

    def is_internal(self, name: str) -> bool:
        v = self.var(name)
        return v is not None and v.internal

    def world_output(self, tool: str) -> Any:
        if tool not in self._world_outputs:
            self._world_outputs[tool] = base_world(self.spec, self.bindings, seed=0).default_output(tool)
        return self._world_outputs[tool]

    def world_value(self, tool: str, field_path: str) -> Any:
        try:
            return get_path(self.world_output(tool), field_path)
        except (KeyError, IndexError, TypeError):
            return None

    def default(self, name: str) -> Any:
        """The value a variable takes when nothing sets it: its world default, else the first
        value its binding lists. Raises :class:`_Stop` for an unbound variable."""
        if name in self._defaults:
            return self._defaults[name]
        var = self.var(name)
        if var is None:
            where = self.bindings.path or "the bindings file"
            raise _Stop(f"variable {name!r} has no binding in {where}, so it has no value")
        value: Any = None
        finite = var.finite_values()
        if finite:
            value = finite[0]
        elif var.world is not None and var.world.field is not None:
            value = self.world_value(var.world.tool, var.world.field)
            if value is None:
                schema = self.field_schema(name)[0] or {}
                if schema.get("enum"):
                    value = schema["enum"][0]
                elif schema.get("type") == "boolean":
                    value = True
                elif _schema_kind(schema):
                    value = 0
        self._defaults[name] = value
        return value

    def field_schema(self, name: str) -> tuple[Mapping[str, Any] | None, bool]:
        var = self.var(name)
        if var is None or var.world is None or var.world.field is None:
            return None, False
        return _schema_field(self.spec.tool(var.world.tool).output_schema, var.world.field)

    def numeric(self, name: str) -> NumericField | None:
        """How a numeric variable may move (``None`` if it is not numeric)."""
        var = self.var(name)
        if var is None or var.internal:
            return None
        finite = var.finite_values()
        if finite is not None:
            if finite and all(is_number(v) for v in finite):
                kind = "integer" if all(isinstance(v, int) for v in finite) else "number"
                return NumericField(
                    kind=kind, step=1 if kind == "integer" else 0.01, lo=None, hi=None, missing_reason=f"the binding of {name} lists no missing value"
                )
            return None
        assert var.world is not None
        schema, missing_ok = self.field_schema(name)
        field_kind = var.world.type or _schema_kind(schema)
        if field_kind not in ("integer", "number"):
            return None
        return numeric_field(
            field_kind,
            schema=schema,
            missing_ok=missing_ok,
            precision=var.world.precision,
            bmin=var.world.min,
            bmax=var.world.max,
            what=f"{var.world.tool}.{var.world.field}",
        )

    def realisable(self, name: str, value: Any) -> str | None:
        """Why the bindings cannot give ``name`` this value (``None``: they can)."""
        var = self.var(name)
        if var is None:
            return f"variable {name!r} has no binding"
        if var.internal:
            return f"variable {name!r} is bound `internal`: the agent sets it, tests do not"
        finite = var.finite_values()
        if finite is not None:
            if any(_same(value, f) for f in finite):
                return None
            return f"the binding of {name} realises only the values {', '.join(repr(f) for f in finite)}"
        return None

    # -------------------------------------------------------------- evaluation

    def internal_default(self, name: str) -> Any:
        """A value for an ``internal`` variable the assignment lacks: the first constant the
        tree compares it with (the agent decides it; any consistent value will do)."""
        for node in self.spec.decision_tree:
            for br in node.branches:
                if br.clause.expr is None:
                    continue
                for a in atoms(br.clause):
                    if isinstance(a, Compare) and name in variables(a):
                        for side in (a.right, a.left):
                            if isinstance(side, Literal):
                                return side.value
                            if isinstance(side, Symbol):
                                return side.name
        return True

    def fill(self, expr: Expr, env: dict[str, Any], filled: dict[str, Any], assumed: list[str] | None = None) -> None:
        for n in variables(expr):
            try:
                lookup(env, n)
            except UnboundVariable:
                if self.is_internal(n):
                    env[n] = filled[n] = self.internal_default(n)
                    if assumed is not None:
                        assumed.append(f"{n} = {env[n]!r}")
                else:
                    env[n] = filled[n] = self.default(n)

    def truth(self, expr: Expr, env: Mapping[str, Any]) -> bool:
        """Evaluate ``expr``, with missing variables at their defaults (on a copy)."""
        e = dict(env)
        self.fill(expr, e, {})
        return evaluate(expr, e)

    def choose(self, node_id: str, env: dict[str, Any], filled: dict[str, Any]) -> BranchChoice:
        """First-match-wins at ``node_id``; fills missing variables into ``env``/``filled``."""
        node = self.spec.nodes_by_id[node_id]
        assumed: list[str] = []
        for i, br in enumerate(node.branches):
            clause = br.clause
            if clause.expr is None:
                return self._choice(node_id, i, clause.source, br.next, assumed)
            self.fill(clause.expr, env, filled, assumed)
            try:
                ok = evaluate(clause.expr, env)
            except TypeError as exc:
                raise _Stop(f"cannot evaluate `{clause.source}` at {node_id}: {exc}") from None
            if ok:
                return self._choice(node_id, i, clause.source, br.next, assumed)
        return BranchChoice(node=node_id, branch=None, assumed=assumed)

    def _choice(self, node_id: str, i: int, source: str, nxt: str, assumed: list[str]) -> BranchChoice:
        decision = None
        target = self.spec.nodes_by_id.get(nxt)
        if target is None or target.is_terminal:
            decision = self.bindings.outcome(nxt, node_id, self.spec.response_contract.decision_enum)
        return BranchChoice(node=node_id, branch=i, clause=source, next=nxt, decision=decision, assumed=assumed)

    def walk(self, env: Mapping[str, Any]) -> tuple[Route, dict[str, Any]]:
        """Follow the tree from the root under ``env``; returns the route and ``env`` with
        the defaults it needed."""
        env2 = dict(env)
        filled: dict[str, Any] = {}
        steps: list[BranchChoice] = []
        node_id = self.spec.root.node_id
        visited = {node_id}
        leaf: str | None = None
        stop: str | None = None
        while True:
            node = self.spec.nodes_by_id.get(node_id)
            if node is None or node.is_terminal:
                leaf = node_id
                break
            try:
                choice = self.choose(node_id, env2, filled)
            except _Stop as exc:
                stop = str(exc)
                break
            steps.append(choice)
            if choice.branch is None or choice.next is None:
                stop = f"no branch of {node_id} matches and it has no `otherwise`: the spec does not say what happens"
                break
            if choice.next in visited:
                stop = f"{node_id} leads back to {choice.next}, a node already visited (loops are not unrolled)"
                break
            visited.add(choice.next)
            node_id = choice.next
        decision = steps[-1].decision if leaf is not None and steps else None
        path = self.path_for(steps) if leaf is not None else None
        route = Route(
            steps=steps,
            leaf=leaf,
            decision=decision,
            stop=stop,
            path_id=path.id if path is not None else None,
            defaults=filled,
        )
        return route, env2

    def path_for(self, steps: Sequence[BranchChoice]) -> TreePath | None:
        if self._paths_by_steps is None:
            self._paths_by_steps = {}
            for p in enumerate_paths(self.spec):
                if p.missing is None:
                    self._paths_by_steps.setdefault(tuple((s.node, s.branch) for s in p.steps), p)
        key = tuple((s.node, s.branch) for s in steps if s.branch is not None)
        return self._paths_by_steps.get(key)

    # -------------------------------------------------------------- realising

    def build_env(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """The part of an assignment ``build_scenario`` can realise (bound, not internal)."""
        return {k: v for k, v in env.items() if (b := self.var(k)) is not None and not b.internal}

    def realise(
        self,
        route: Route,
        env: Mapping[str, Any],
        *,
        template_index: int = 0,
        extra_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> tuple[Scenario | None, str | None]:
        """A scenario for ``route`` under ``env``, or ``(None, reason)``."""
        if route.leaf is None:
            return None, f"the route stops before a leaf: {route.stop}"
        path = self.path_for(route.steps)
        if path is None:
            return None, f"no loop-free tree path follows {route}"
        for k, v in env.items():
            why = self.realisable(k, v) if not self.is_internal(k) and self.var(k) is not None else None
            if why is not None:
                return None, why
        try:
            scenario = build_scenario(self.spec, self.bindings, path, template_index=template_index, assignment=self.build_env(env))
        except (Unsatisfiable, AgentPropError, KeyError) as exc:
            return None, f"path {path.id} cannot be built: {exc}"
        if extra_overrides:
            scenario = scenario.model_copy(deep=True)
            for tool, fields in extra_overrides.items():
                scenario.world.overrides.setdefault(tool, {}).update(dict(fields))
        return scenario, None

    # -------------------------------------------------------------- prefixes

    def prefixes(self, node_id: str) -> list[tuple[Step, ...]]:
        """Distinct step sequences from the root to ``node_id``, shortest first."""
        out: dict[tuple[Step, ...], None] = {}
        if node_id == self.spec.root.node_id:
            out[()] = None
        for p in enumerate_paths(self.spec):
            for i, s in enumerate(p.steps):
                if s.node == node_id:
                    out.setdefault(tuple(p.steps[:i]), None)
                    break
        return sorted(out, key=len)

    def base_env(self, node_id: str, branch: int | None) -> dict[str, Any]:
        """An assignment that reaches ``node_id`` and, when ``branch`` is given, takes that
        branch there (solved with defaults preferred; shortest prefix first). Raises
        :class:`Unsatisfiable` with every reason when none exists."""
        node = self.spec.nodes_by_id[node_id]
        reasons: list[str] = []
        for prefix in self.prefixes(node_id):
            if branch is not None:
                br = node.branches[branch]
                steps = (*prefix, Step(node_id, branch, br.clause, br.next))
                leaf = br.next
            else:
                steps, leaf = prefix, node_id
            path = TreePath(steps, leaf, None, self.spec)
            try:
                return solve(self.spec, self.bindings, path)
            except Unsatisfiable as exc:
                reasons.append(str(exc))
        if not reasons:
            reasons.append(f"no path of the tree reaches {node_id}")
        raise Unsatisfiable(
            f"no assignment reaches {node_id}"
            + (f" and takes branch {branch}" if branch is not None else "")
            + ": "
            + "; ".join(dict.fromkeys(reasons))
        )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if is_number(a) and is_number(b):
        return bool(a == b)
    return bool(a == b) or (a is not None and b is not None and str(a) == str(b))


def choose_branch(spec: Spec, bindings: Bindings, node: str, assignment: Mapping[str, Any]) -> BranchChoice:
    """The branch ``node`` takes for ``assignment``: its ``when`` clauses evaluated in order,
    first match wins, with variables the assignment lacks at their defaults (see
    :class:`BranchChoice` for ``internal`` ones)."""
    spec, bindings = check_spec_bindings(spec, bindings, "choose_branch")
    check_node(spec, node, "choose_branch", allow_none=False)
    assert node is not None
    try:
        return Context(spec, bindings).choose(node, dict(assignment), {})
    except _Stop as exc:
        raise Unsatisfiable(str(exc)) from None


def walk(spec: Spec, bindings: Bindings, assignment: Mapping[str, Any]) -> Route:
    """The route ``assignment`` takes through the tree from the root (see :class:`Route`)."""
    spec, bindings = check_spec_bindings(spec, bindings, "walk")
    return Context(spec, bindings).walk(assignment)[0]


# ----------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class _Free:
    """A numeric variable :func:`worlds` may move, with its grid."""

    name: str
    num: NumericField
    default: int | float

    def at(self, k: int) -> int | float:
        return self.num.norm(self.default + k * self.num.step)


def _direct_thresholds(name: str, exprs: Sequence[Expr], env: Mapping[str, Any]) -> list[float] | None:
    """Values of the other side of every comparison ``name OP e`` in ``exprs``; ``None`` if
    ``name`` appears in a form this analysis does not solve (inside arithmetic, ...)."""
    out: list[float] = []

    def walk_(e: Expr) -> bool:
        if isinstance(e, (And, Or)):
            return all(walk_(i) for i in e.items)
        if isinstance(e, Not):
            return walk_(e.item)
        if name not in variables(e):
            return True
        if not isinstance(e, Compare):
            return False
        for side, other in ((e.left, e.right), (e.right, e.left)):
            if isinstance(side, VarPath) and side.dotted == name and name not in variables(other):
                try:
                    t = numeric_value(other, env)
                except UnboundVariable:
                    return False
                if is_number(t):
                    out.append(float(t))
                    return True
                return t is None or isinstance(t, str)
        return False

    return out if all(walk_(e) for e in exprs) else None


def _k_interval(free: _Free, exprs: Sequence[Expr], env: Mapping[str, Any], max_steps: int, ctx: Context) -> tuple[int, int] | None:
    """The integers ``k`` around 0 for which every expression holds with ``free`` at
    ``free.at(k)`` (others as in ``env``); ``None`` if it cannot be analysed."""
    thresholds = _direct_thresholds(free.name, exprs, env)
    if thresholds is None:
        return None
    num, step = free.num, free.num.step
    kmin, kmax = -max_steps, max_steps
    if num.lo is not None:
        kmin = max(kmin, math.ceil((num.lo - free.default) / step - 1e-9))
    if num.hi is not None:
        kmax = min(kmax, math.floor((num.hi - free.default) / step + 1e-9))
    if kmin > 0 or kmax < 0:
        return (0, 0)
    probes = {kmin, kmax, 0}
    for t in thresholds:
        kt = (t - free.default) / step
        for k in (math.floor(kt) - 1, math.floor(kt), math.ceil(kt), math.ceil(kt) + 1):
            if kmin <= k <= kmax:
                probes.add(k)
    ordered = sorted(probes)

    def ok(k: int) -> bool:
        e = dict(env)
        e[free.name] = free.at(k)
        try:
            return all(ctx.truth(x, e) for x in exprs)
        except (UnboundVariable, TypeError, _Stop):
            return False

    # between consecutive probes the truth of every comparison is constant (no threshold lies
    # strictly inside a gap), so checking each probe and one point per gap is exact
    i0 = ordered.index(0)
    hi = 0
    for a, b in zip(ordered[i0:], ordered[i0 + 1 :]):
        if b - a > 1 and not ok(a + 1):
            hi = a
            break
        if not ok(b):
            hi = b - 1
            break
        hi = b
    lo = 0
    rev = ordered[: i0 + 1][::-1]
    for a, b in zip(rev, rev[1:]):
        if a - b > 1 and not ok(a - 1):
            lo = a
            break
        if not ok(b):
            lo = b + 1
            break
        lo = b
    return (lo, hi)


# ----------------------------------------------------------------------------- worlds


@dataclass
class _Alternative:
    index: int
    path: TreePath
    env: dict[str, Any]
    exprs: list[Expr]
    free: list[_Free]
    fixed: dict[str, str]


@dataclass
class _WorldPlan:
    ctx: Context
    path_id: str
    alternatives: list[_Alternative]
    max_steps: int


def _plan_worlds(spec: Spec, bindings: Bindings, path: object, max_steps: int, where: str) -> _WorldPlan:
    ctx = Context(spec, bindings)
    paths = resolve_path(spec, path, where)
    alternatives: list[_Alternative] = []
    reasons: list[str] = []
    for p in paths:
        try:
            env = solve(spec, bindings, p)
            build_scenario(spec, bindings, p, assignment=env)
        except (Unsatisfiable, AgentPropError) as exc:
            reasons.append(f"{p.describe()}: {exc}")
            continue
        exprs = [c.as_expr() for c in p.constraints()]
        free: list[_Free] = []
        fixed: dict[str, str] = {}
        for name, var in bindings.variables.items():
            num = ctx.numeric(name)
            if num is None or var.world is None or var.world.field is None:
                continue
            value = env.get(name, ctx.default(name))
            if not is_number(value):
                fixed[name] = f"its default value is {value!r}, not a number"
                continue
            f = _Free(name, num, value)
            if _direct_thresholds(name, exprs, {**env, name: value}) is None:
                fixed[name] = "it appears in a condition this solver does not invert (inside arithmetic)"
                continue
            env.setdefault(name, value)
            free.append(f)
        alternatives.append(_Alternative(len(alternatives), p, env, exprs, free, fixed))
    if not alternatives:
        raise Unsatisfiable(f"{where}: no assignment realises path {paths[0].id} of spec {spec.spec_id}:\n  " + "\n  ".join(reasons))
    return _WorldPlan(ctx, paths[0].id, alternatives, max_steps)


def _draw_world(draw: Callable[[SearchStrategy[Any]], Any], plan: _WorldPlan) -> tuple[PathWorld, _Alternative]:
    n = len(plan.alternatives)
    alt = plan.alternatives[draw(st.integers(0, n - 1)) if n > 1 else 0]
    env = dict(alt.env)
    offsets: dict[str, int] = {}
    fixed = dict(alt.fixed)
    for f in alt.free:
        interval = _k_interval(f, alt.exprs, env, plan.max_steps, plan.ctx)
        if interval is None:
            fixed[f.name] = "its interval could not be computed"
            continue
        lo, hi = interval
        k = draw(st.integers(lo, hi)) if lo < hi else lo
        env[f.name] = f.at(k)
        offsets[f.name] = k
    scenario = build_scenario(plan.ctx.spec, plan.ctx.bindings, alt.path, assignment=plan.ctx.build_env(env))
    world = PathWorld(
        path_id=alt.path.id,
        tree_path=alt.path.describe(),
        alternative=alt.index,
        assignment=env,
        defaults={f.name: f.default for f in alt.free},
        offsets=offsets,
        fixed=fixed,
        world=scenario.world,
    )
    return world, alt


def worlds(spec: Spec, bindings: Bindings, path: PathLike, *, max_steps: int = 1000) -> SearchStrategy[PathWorld]:
    """Worlds in which every condition along ``path`` holds, as :class:`PathWorld` values.

    Each numeric world field bound to a condition variable (``order.days_since_created``) is
    moved an integer number of grid steps (1, or the binding's ``precision``; at most
    ``max_steps``) away from the value :func:`~agentprop._scenario.build.solve` picks, inside the
    interval where the path's conditions still hold and within the field's ``min``/``max``
    and schema bounds. Shrinks towards the solved (default) world. Fields that only the
    bindings' base world sets are never moved: an abstract variable may depend on them.

    ``path`` is a :class:`~agentprop._spec.paths.TreePath` or a path id (``"END_CANCELLED<-N7_CANCEL"``);
    when several tree paths share the id, the one used is drawn (0 = the first satisfiable).
    Raises :class:`~agentprop._scenario.build.Unsatisfiable` now if no assignment realises the path.
    """
    spec, bindings = check_spec_bindings(spec, bindings, "worlds")
    check_int(max_steps, "max_steps", "worlds", minimum=0)
    plan = _plan_worlds(spec, bindings, path, max_steps, "worlds")

    @st.composite
    def draw_world(draw: Callable[[SearchStrategy[Any]], Any]) -> PathWorld:
        world, _ = _draw_world(draw, plan)
        note(world.describe())
        return world

    return draw_world()


# ----------------------------------------------------------------------------- conversations


def _paraphrase_fn() -> Callable[..., SearchStrategy[Any]] | None:
    try:
        from agentprop.strategies._internal.paraphrase import paraphrases
    except ImportError:
        return None
    return paraphrases


def _template_count(ctx: Context, env: Mapping[str, Any]) -> int:
    for name, value in env.items():
        var = ctx.var(name)
        if var is not None and var.utterance is not None:
            for k, templates in var.utterance.items():
                if _same(k, value):
                    return max(1, len(templates))
    return max(1, len(ctx.bindings.utterances))


def conversations(
    spec: Spec,
    bindings: Bindings,
    path: PathLike,
    *,
    paraphrase: bool | None = None,
    lang: str = "en",
    max_transforms: int = 2,
    max_steps: int = 1000,
) -> SearchStrategy[DrawnScenario]:
    """Scenarios realising ``path``, as :class:`DrawnScenario` values.

    Draws the world as :func:`worlds` does, then a template index (0 = the first template the
    bindings list for the path's utterance variable, or ``utterances:``; follow-up turns use the
    same index, as :func:`~agentprop._scenario.build.build_scenario` does), then -- when the paraphrase
    strategy is available (``paraphrase=None``) or asked for (``True``) -- paraphrases each
    user turn with up to ``max_transforms`` transforms, protecting every slot value. Shrinks
    towards template 0, the default world and the original wording.

    Raises :class:`~agentprop._scenario.build.Unsatisfiable` now if no assignment realises the path.
    """
    where = "conversations"
    spec, bindings = check_spec_bindings(spec, bindings, where)
    if paraphrase is not None and not isinstance(paraphrase, bool):
        raise InvalidArgument(f"{where}: paraphrase={paraphrase!r} must be True, False or None (use it if available)")
    check_int(max_transforms, "max_transforms", where, minimum=0)
    check_int(max_steps, "max_steps", where, minimum=0)
    para = _paraphrase_fn() if paraphrase is not False else None
    if paraphrase is True and para is None:
        raise InvalidArgument(
            f"{where}: paraphrase=True but agentprop.strategies._internal.paraphrase cannot be imported; "
            "pass paraphrase=None to paraphrase only when it is available"
        )
    if para is not None and max_transforms > 0:
        try:
            para("probe", lang=lang, max_transforms=max_transforms)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}: {exc}") from None
    plan = _plan_worlds(spec, bindings, path, max_steps, where)
    cache: dict[tuple[str, tuple[str, ...]], SearchStrategy[Any]] = {}

    def paraphrased(text: str, protect: tuple[str, ...]) -> SearchStrategy[Any]:
        key = (text, protect)
        if key not in cache:
            assert para is not None
            cache[key] = para(text, lang=lang, protect=list(protect), max_transforms=max_transforms)
        return cache[key]

    @st.composite
    def draw_conversation(draw: Callable[[SearchStrategy[Any]], Any]) -> DrawnScenario:
        world, alt = _draw_world(draw, plan)
        n = _template_count(plan.ctx, world.assignment)
        template_index = draw(st.integers(0, n - 1)) if n > 1 else 0
        base = build_scenario(spec, bindings, alt.path, template_index=template_index, assignment=plan.ctx.build_env(world.assignment))
        originals = [t.user_message for t in base.turns]
        steps: list[list[str]] = [[] for _ in base.turns]
        turns = [t.model_copy() for t in base.turns]
        if para is not None and max_transforms > 0:
            protect = tuple(sorted({str(v) for v in base.slots.values() if str(v).strip()}, key=lambda s: (-len(s), s)))
            for i, t in enumerate(turns):
                present = tuple(x for x in protect if x in t.user_message)
                p = draw(paraphrased(t.user_message, present))
                t.user_message = str(p)
                steps[i] = [str(s) for s in getattr(p, "transforms", ())]
        provenance = ConversationProvenance(
            path_id=alt.path.id,
            tree_path=alt.path.describe(),
            alternative=alt.index,
            template_index=template_index,
            world_offsets=world.offsets,
            original_messages=originals,
            paraphrase_steps=steps,
        )
        data = base.model_dump()
        data["turns"] = [t.model_dump() for t in turns]
        scenario = DrawnScenario(**data, provenance=provenance)
        note(provenance.describe())
        return scenario

    return draw_conversation()
