"""The one solver: what values the bound variables take, and which way the tree goes for them.

Defaults and candidate values of a variable, solving a path (:meth:`Solver.solve`), walking the
tree for an assignment (:meth:`Solver.walk`, :meth:`Solver.choose`) and how a number may move
(:meth:`Solver.numeric`) live here once. Case compilation and every strategy ask it, so a value
or a branch means the same in a default run and under ``@given``.
"""

from __future__ import annotations

import contextlib
import contextvars
import decimal
import os
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from pydantic import BaseModel, Field

from agentprop._scenario.world import World, get_path
from agentprop._spec.bindings import Bindings, VariableBinding, parse_field_path, schema_at
from agentprop._spec.model import Spec
from agentprop._spec.paths import Constraint, PathStep, TreePath, enumerate_paths
from agentprop._spec.when import (
    Arith,
    Compare,
    Expr,
    Literal,
    Not,
    Symbol,
    UnboundVariable,
    arith,
    atoms,
    evaluate,
    leaves,
    lookup,
    values_equal,
    variables,
)
from agentprop._spec.when import (
    Path as VarPath,
)
from agentprop.errors import ConditionBudgetExceeded, Unsatisfiable

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


def schema_numeric_kind(schema: Mapping[str, Any] | None) -> str | None:
    if not schema:
        return None
    t = schema.get("type")
    if isinstance(t, list):
        t = next((k for k in t if k in ("integer", "number")), None)
    return t if t in ("integer", "number") else None


def schema_field(
    schema: Mapping[str, Any] | None, field_path: str
) -> tuple[Mapping[str, Any] | None, bool]:
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
    for key, bound, excl in (
        ("minimum", "lo", False),
        ("exclusiveMinimum", "lo", True),
        ("maximum", "hi", False),
        ("exclusiveMaximum", "hi", True),
    ):
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


# ----------------------------------------------------------------------------- values


def same_value(a: Any, b: Any) -> bool:
    """Whether two values of a variable are the same value (``True`` is not ``1``; a number
    equals its equal; otherwise equality, or equal text)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if is_number(a) and is_number(b):
        return bool(a == b)
    return bool(a == b) or (a is not None and b is not None and str(a) == str(b))


def lookup_value(table: Mapping[Hashable, Any], value: Any) -> Any:
    """``table[value]`` for a binding's table keyed by variable values (``utterance:``,
    ``withhold:``, world ``values:``), keys compared as the spec's ``when`` compares them;
    ``KeyError`` if none matches."""
    for k, v in table.items():
        if values_equal(k, value) or k == value:
            return v
    raise KeyError(value)


def _constants(exprs: Sequence[Expr]) -> list[Any]:
    """The literal values and symbols the expressions name, left to right."""
    return [
        leaf.value if isinstance(leaf, Literal) else leaf.name
        for e in exprs
        for leaf in leaves(e)
        if isinstance(leaf, (Literal, Symbol))
    ]


def _atoms_by_variable(exprs: Sequence[Expr]) -> dict[str, list[Expr]]:
    """The atoms of ``exprs`` that read each variable, in order (one pass over them all)."""
    index: dict[str, list[Expr]] = {}
    for e in exprs:
        for a in atoms(e):
            for n in variables(a):
                index.setdefault(n, []).append(a)
    return index


def _internal_candidates(
    name: str, exprs: Sequence[Expr], index: Mapping[str, list[Expr]] | None = None
) -> list[Any]:
    """Values an internal variable may take: the constants the atoms that read it compare it
    with (numbers with one either side, booleans with their complement, strings plus one
    other value). The agent decides which holds, so the solver only needs *some* value
    consistent with the path. ``index``: :func:`_atoms_by_variable` of ``exprs``, when the
    caller asks for many variables (a path of hundreds of nodes)."""
    related = (
        list(index.get(name, ()))
        if index is not None
        else [a for e in exprs for a in atoms(e) if name in variables(a)]
    )
    values: list[Any] = []
    for c in _constants(related):
        if c not in values:
            values.append(c)
    for c in list(values):
        if is_number(c):
            values += [v for v in (c + 1, c - 1) if v not in values]
    if any(isinstance(v, bool) for v in values) or not values:
        values += [b for b in (True, False) if b not in values]
    if any(isinstance(v, str) for v in values):
        values.append("__other__")
    return values


LOOP_BOUNDARY = "@loop"
"""Key of a loop path's assignment that records where the second instance starts (``at`` the
loop branch's node or ``after`` it, see :meth:`TreePath.constraints`)."""


def instance_name(name: str) -> str:
    """The key of a variable's second instance in an assignment (``intent@2``)."""
    return f"{name}@2"


def base_name(key: str) -> str:
    """The variable an assignment key stands for (``intent@2`` -> ``intent``)."""
    return key.split("@", 1)[0]


def instance_keys(constraints: list[Constraint]) -> dict[tuple[str, int], str]:
    """``(variable, instance)`` -> its key in the assignment: a variable read on both visits
    of a loop gets a second key for the second visit; one read on one visit keeps its name."""
    first = {n for c in constraints if c.instance == 1 for n in variables(c.expr)}
    out: dict[tuple[str, int], str] = {}
    for c in constraints:
        for n in variables(c.expr):
            out[(n, c.instance)] = instance_name(n) if c.instance == 2 and n in first else n
    return out


def instances_realisable(bindings: Bindings, env: Mapping[str, Any]) -> bool:
    """Whether the bindings can make a variable's two instances differ as ``env`` says: a new
    user message (utterance and follow-up variables), or a different outcome of the second
    call (world ``values`` that differ only in their failure); world fields and withheld slots
    cannot change between visits."""
    for key, value in env.items():
        if "@" not in key or key == LOOP_BOUNDARY:
            continue
        name = base_name(key)
        var = bindings.variables[name]
        if var.internal or var.utterance is not None or var.followup is not None:
            continue
        first = env.get(name)
        if values_equal(first, value) or first == value:
            continue
        if var.world is not None and var.world.values is not None:
            try:
                a, b = lookup_value(var.world.values, first), lookup_value(var.world.values, value)
            except KeyError:
                return False
            if a.set == b.set:
                continue
        return False
    return True


MAX_SOLVER_STEPS = 200_000
"""Most partial assignments the solver tries for one path before it gives up (the shipped
examples need a few hundred at most)."""

MAX_CONDITION_CHECKS = 2_000_000
"""Most condition evaluations the solver makes for all the paths of one spec while its cases
are built (:func:`condition_budget`; the shipped examples need a few thousand): a router with
a thousand branches would otherwise take hours. ``AGENTPROP_MAX_CONDITION_CHECKS`` overrides it."""

_CHECKS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "agentprop_condition_checks", default=None
)


@contextlib.contextmanager
def condition_budget(spec: Spec) -> Iterator[None]:
    """Count the solver's condition evaluations inside the block (the cases of ``spec``) and
    raise :class:`ConditionBudgetExceeded` past the limit, naming it and how to raise it."""
    raw = os.environ.get("AGENTPROP_MAX_CONDITION_CHECKS", "")
    limit = int(raw) if raw.isdigit() and int(raw) > 0 else MAX_CONDITION_CHECKS
    token = _CHECKS.set([0, limit])
    try:
        yield
    finally:
        _CHECKS.reset(token)


def _count_check() -> None:
    budget = _CHECKS.get()
    if budget is None:
        return
    budget[0] += 1
    if budget[0] > budget[1]:
        raise ConditionBudgetExceeded(
            f"building the cases of this spec needs more than {budget[1]:,} evaluations of its "
            "branch conditions (agentprop's limit, MAX_CONDITION_CHECKS): a node with hundreds "
            "of branches, or paths hundreds of nodes long",
            limit=budget[1],
            expected="a decision tree whose paths agentprop can solve in seconds",
            fix="merge branches that lead to the same place, or split the tree into several "
            "specs; to search longer, set AGENTPROP_MAX_CONDITION_CHECKS (e.g. "
            f"AGENTPROP_MAX_CONDITION_CHECKS={budget[1] * 5})",
        )


class _WalkStop(Exception):
    """The walk cannot go on (a variable has no binding and no value)."""


# ----------------------------------------------------------------------------- the solver


class Solver:
    """A spec with its bindings, and everything derived from them once: defaults, candidate
    values, numeric fields, the tree's paths. Cheap to make; make one per spec and bindings and
    ask it many times."""

    def __init__(self, spec: Spec, bindings: Bindings) -> None:
        self.spec = spec
        self.bindings = bindings
        self._defaults: dict[str, Any] = {}
        self._world_outputs: dict[str, Any] = {}
        self._world: World | None = None
        self._paths_by_steps: dict[tuple[tuple[str, int], ...], TreePath] | None = None

    # -------------------------------------------------------------- variables

    def var(self, name: str) -> VariableBinding | None:
        return self.bindings.variables.get(name)

    def is_internal(self, name: str) -> bool:
        v = self.var(name)
        return v is not None and v.internal

    def world_output(self, tool: str) -> Any:
        """``tool``'s output in the bindings' base world (seed 0)."""
        if tool not in self._world_outputs:
            if self._world is None:
                self._world = World(
                    spec=self.spec,
                    seed=0,
                    overrides={t: dict(v) for t, v in self.bindings.world.items()},
                )
            self._world_outputs[tool] = self._world.default_output(tool)
        return self._world_outputs[tool]

    def world_value(self, tool: str, field_path: str) -> Any:
        """The value at ``field_path`` of ``tool``'s base-world output (``None`` if absent)."""
        try:
            return get_path(self.world_output(tool), field_path)
        except (KeyError, IndexError, TypeError):
            return None

    def world_default(self, name: str) -> Any:
        """A world-bound variable's value in the base world (``None``: not
        world-bound, or absent)."""
        var = self.var(name)
        if var is None or var.world is None or var.world.field is None:
            return None
        return self.world_value(var.world.tool, var.world.field)

    def default(self, name: str) -> Any:
        """The value a variable takes when nothing sets it: the first value its binding lists,
        else its world default, else the first value its schema allows. Raises
        :class:`_WalkStop` for an unbound variable."""
        if name in self._defaults:
            return self._defaults[name]
        var = self.var(name)
        if var is None:
            where = self.bindings.path or "the bindings file"
            raise _WalkStop(f"variable {name!r} has no binding in {where}, so it has no value")
        value: Any = None
        finite = var.finite_values()
        if finite:
            value = finite[0]
        elif var.world is not None and var.world.field is not None:
            value = self.world_default(name)
            if value is None:
                schema = self.field_schema(name)[0] or {}
                if schema.get("enum"):
                    value = schema["enum"][0]
                elif schema.get("type") == "boolean":
                    value = True
                elif schema_numeric_kind(schema):
                    value = 0
        self._defaults[name] = value
        return value

    def field_schema(self, name: str) -> tuple[Mapping[str, Any] | None, bool]:
        """The output-schema of a world-bound variable's field, and whether it may be missing."""
        var = self.var(name)
        if var is None or var.world is None or var.world.field is None:
            return None, False
        return schema_field(self.spec.tool(var.world.tool).output_schema, var.world.field)

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
                    kind=kind,
                    step=1 if kind == "integer" else 0.01,
                    lo=None,
                    hi=None,
                    missing_reason=f"the binding of {name} lists no missing value",
                )
            return None
        assert var.world is not None
        schema, missing_ok = self.field_schema(name)
        field_kind = var.world.type or schema_numeric_kind(schema)
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
            if any(same_value(value, f) for f in finite):
                return None
            return (
                f"the binding of {name} realises only the values "
                f"{', '.join(repr(f) for f in finite)}"
            )
        return None

    def candidates(
        self, name: str, exprs: Sequence[Expr], index: Mapping[str, list[Expr]] | None = None
    ) -> list[Any]:
        """The values :meth:`solve` tries for ``name`` under the conditions ``exprs``, the
        default first: the values its binding lists; for a world field, its enum, both
        booleans, or the numbers the conditions compare with and one grid step either side
        (within the binding's bounds), or the strings they name and one other."""
        var = self.bindings.variables[name]
        if var.internal:
            return _internal_candidates(name, exprs, index)
        finite = var.finite_values()
        if finite is not None:
            return list(finite)
        assert var.world is not None and var.world.field is not None
        schema = self.field_schema(name)[0] or {}
        default = self.world_default(name)
        kind = var.world.type or schema.get("type")
        if "enum" in schema:
            values = list(schema["enum"])
            return sorted(values, key=lambda v: v != default)
        if kind == "boolean" or isinstance(default, bool):
            return [default, not default] if isinstance(default, bool) else [True, False]
        if kind in ("integer", "number") or isinstance(default, (int, float)):
            step = (
                1
                if kind == "integer" or isinstance(default, int)
                else (var.world.precision or 0.01)
            )
            pool: list[Any] = [default] if default is not None else []
            nums = [c for c in _constants(exprs) if is_number(c)]
            read = dict.fromkeys(n for e in exprs for n in variables(e))
            nums += [v for v in (self.world_default(n) for n in read) if is_number(v)]
            for c in nums:
                pool += [c, c + step, c - step]
            if var.world.min is not None:
                pool = [p for p in pool if p >= var.world.min]
            if var.world.max is not None:
                pool = [p for p in pool if p <= var.world.max]
            seen: list[Any] = []
            for p in pool:
                if p not in seen:
                    seen.append(p)
            return seen or [0]
        # strings: values named by symbols in the constraints, then the default
        strs = [c for c in _constants(exprs) if isinstance(c, str)]
        spool = ([default] if default is not None else []) + strs + [f"not-{s}" for s in strs]
        return list(dict.fromkeys(spool))

    # -------------------------------------------------------------- solving

    def solve(self, path: TreePath) -> dict[str, Any]:
        """Values for the bound variables that make ``path``'s conditions hold.

        Prefers each variable's default (its world default, or the first listed value), so the
        scenario differs from the happy path only where the path demands it. Variables bound as
        ``internal`` are the agent's own state: any value consistent with the path will do (they
        are not realised in the world or the conversation). Raises
        :class:`Unsatisfiable` with the reason when no assignment exists, or when a variable the
        path needs has no binding.

        On a loop path, variables read on both visits have a second instance (``intent@2``), and
        the assignment records under ``@loop`` whether the loop branch's node reads the first
        instance (``after``) or the second (``at``): the first reading that is satisfiable wins.
        """
        if path.loop_step is None:
            return self._solve(path, path.constraints())
        reasons: list[str] = []
        for boundary in ("after", "at"):
            try:
                env = self._solve(path, path.constraints(boundary))
            except Unsatisfiable as exc:
                reasons.append(str(exc))
                continue
            env[LOOP_BOUNDARY] = boundary
            return env
        # the reading with two instances says more (which variable could not change)
        raise Unsatisfiable(next((r for r in reasons if "second visit" in r), reasons[0]))

    def _solve(self, path: TreePath, constraints: list[Constraint]) -> dict[str, Any]:
        exprs = [c.as_expr() for c in constraints]
        keys = instance_keys(constraints)
        names: list[str] = []
        for e in exprs:
            for n in variables(e):
                if n not in names:
                    names.append(n)
        unbound = [n for n in names if n not in self.bindings.variables]
        if unbound:
            where = (
                f"{self.bindings.path} does not bind; add them under `variables:`"
                if self.bindings.path
                else (
                    "no bindings file binds (none was found: write agentprop.yaml next to the spec)"
                )
            )
            raise Unsatisfiable(
                f"path {path.id} ({path.describe()}) needs variable(s) "
                f"{', '.join(unbound)}, which {where}"
            )
        slots = list(dict.fromkeys(keys.values()))
        index = _atoms_by_variable(exprs) if len(slots) > 8 else None
        domains = [self.candidates(base_name(k), exprs, index) for k in slots]
        found = _first_assignment(
            slots,
            domains,
            constraints,
            keys,
            lambda env: len(slots) == len(names) or instances_realisable(self.bindings, env),
        )
        if found is not None:
            return found
        shown = ", ".join(slots)
        raise Unsatisfiable(
            f"no values of {shown} satisfy path {path.id}: "
            + " and ".join(str(e) for e in exprs)
            + " (the conditions contradict each other, or a binding lacks a "
            "value that satisfies them"
            + (
                "; on a loop's second visit, only utterance and follow-up variables and world "
                "`values:` that differ in their failure can change"
                if len(slots) != len(names)
                else ""
            )
            + ")"
        )

    # -------------------------------------------------------------- walking

    def internal_default(self, name: str) -> Any:
        """A value for an ``internal`` variable the assignment lacks: the first of its
        candidates over the whole tree (the first constant a condition compares it with; the
        agent decides it, any consistent value will do)."""
        exprs = [
            br.clause.expr
            for node in self.spec.decision_tree
            for br in node.branches
            if br.clause.expr is not None
        ]
        return _internal_candidates(name, exprs)[0]

    def fill(
        self,
        expr: Expr,
        env: dict[str, Any],
        filled: dict[str, Any],
        assumed: list[str] | None = None,
    ) -> None:
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
                raise _WalkStop(f"cannot evaluate `{clause.source}` at {node_id}: {exc}") from None
            if ok:
                return self._choice(node_id, i, clause.source, br.next, assumed)
        return BranchChoice(node=node_id, branch=None, assumed=assumed)

    def _choice(
        self, node_id: str, i: int, source: str, nxt: str, assumed: list[str]
    ) -> BranchChoice:
        decision = None
        target = self.spec.nodes_by_id.get(nxt)
        if target is None or target.is_terminal:
            decision = self.bindings.outcome(
                nxt, node_id, self.spec.response_contract.decision_enum
            )
        return BranchChoice(
            node=node_id, branch=i, clause=source, next=nxt, decision=decision, assumed=assumed
        )

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
            except _WalkStop as exc:
                stop = str(exc)
                break
            steps.append(choice)
            if choice.branch is None or choice.next is None:
                stop = (
                    f"no branch of {node_id} matches and it has no `otherwise`: the spec does "
                    "not say what happens"
                )
                break
            if choice.next in visited:
                stop = (
                    f"{node_id} leads back to {choice.next}, a node already visited "
                    "(loops are not unrolled)"
                )
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

    # -------------------------------------------------------------- prefixes

    def prefixes(self, node_id: str) -> list[tuple[PathStep, ...]]:
        """Distinct step sequences from the root to ``node_id``, shortest first."""
        out: dict[tuple[PathStep, ...], None] = {}
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
                steps = (*prefix, PathStep(node_id, branch, br.clause, br.next))
                leaf = br.next
            else:
                steps, leaf = prefix, node_id
            path = TreePath(steps, leaf, None, self.spec)
            try:
                return self.solve(path)
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


def solve(spec: Spec, bindings: Bindings, path: TreePath) -> dict[str, Any]:
    """Values for the bound variables that make ``path``'s conditions hold (see
    :meth:`Solver.solve`)."""
    return Solver(spec, bindings).solve(path)


def _first_assignment(
    slots: list[str],
    domains: list[list[Any]],
    constraints: list[Constraint],
    keys: dict[tuple[str, int], str],
    accept: Callable[[dict[str, Any]], bool],
) -> dict[str, Any] | None:
    """The first assignment, in the order of ``itertools.product(*domains)``, under which every
    constraint holds and ``accept`` agrees; ``None`` if there is none.

    A backtracking search: a constraint is evaluated as soon as every slot it reads has a
    value, and a partial assignment that breaks one (or makes it raise) is not extended, so
    contradictory paths are rejected without enumerating the whole product. Past
    :data:`MAX_SOLVER_STEPS` partial assignments it raises :class:`Unsatisfiable` naming the limit.
    """
    position = {k: i for i, k in enumerate(slots)}
    # each constraint is checked at the first depth where every slot it reads has a value: a
    # text (in)equality of that slot alone as a set lookup (a router's paths each say "not
    # any of the branches before": checked one by one, solving every path took cubic time),
    # any other as an expression read once
    ready: list[list[_Check]] = [[] for _ in slots]
    equal: list[set[str]] = [set() for _ in slots]
    differ: list[set[str]] = [set() for _ in slots]
    for c in constraints:
        reads = [(n, keys[(n, c.instance)]) for n in variables(c.expr)]
        if not slots:
            continue
        depth = max((position[k] for _, k in reads), default=0)
        test = _text_test(c)
        if test is not None and len(reads) == 1:
            (equal if test[1] else differ)[depth].add(test[0])
        ready[depth].append(_Check(c.as_expr(), reads, test is not None and len(reads) == 1))
    env: dict[str, Any] = {}

    def holds(c: _Check) -> bool:
        _count_check()
        try:
            return bool(evaluate(c.expr, {n: env[k] for n, k in c.reads}))
        except (UnboundVariable, TypeError, ArithmeticError):
            return False

    def admits(depth: int, value: Any) -> bool:
        if isinstance(value, str):  # `when` equality of two texts is text equality
            _count_check()
            if value in differ[depth] or any(value != c for c in equal[depth]):
                return False
            return all(holds(c) for c in ready[depth] if not c.text)
        return all(holds(c) for c in ready[depth])

    def extend() -> dict[str, Any] | None:
        # depth-first over the slots with an explicit stack (``tried[d]``: the values of slot d
        # tried so far), so a path reading thousands of variables is no deeper for Python
        steps = 0
        tried = [0] * len(slots)
        depth = 0
        while depth >= 0:
            if depth == len(slots):
                if accept(env):
                    return dict(env)
                depth -= 1
                del env[slots[depth]]
                continue
            if tried[depth] == len(domains[depth]):  # slot exhausted: back to the one before
                tried[depth] = 0
                depth -= 1
                if depth >= 0:
                    del env[slots[depth]]
                continue
            value = domains[depth][tried[depth]]
            tried[depth] += 1
            steps += 1
            if steps > MAX_SOLVER_STEPS:
                raise Unsatisfiable(
                    f"gave up after trying {MAX_SOLVER_STEPS:,} partial assignments of "
                    f"{', '.join(slots)} (agentprop's limit): the variables have too many "
                    "candidate values to search"
                )
            env[slots[depth]] = value
            if admits(depth, value):
                depth += 1
            else:
                del env[slots[depth]]
        return None

    if not slots:
        return (
            {}
            if all(holds(_Check(c.as_expr(), [], False)) for c in constraints) and accept({})
            else None
        )
    return extend()


@dataclass(frozen=True)
class _Check:
    """A constraint as :func:`_first_assignment` checks it: its expression, the variables it
    reads with their slots, and whether it is a text (in)equality of one slot (a set lookup)."""

    expr: Expr
    reads: list[tuple[str, str]]
    text: bool


def _text_test(c: Constraint) -> tuple[str, bool] | None:
    """``(text, must_equal)`` when ``c`` says that one variable equals (or differs from) a text
    constant (``intent == billing``, ``not status != "open"``), else ``None``."""
    e, want = c.expr, not c.negated
    while isinstance(e, Not):
        e, want = e.item, not want
    if not isinstance(e, Compare) or e.op not in ("==", "!="):
        return None
    left, right = e.left, e.right
    if isinstance(right, VarPath):
        left, right = right, left
    if not isinstance(left, VarPath):
        return None
    if isinstance(right, Symbol):
        text = right.name
    elif isinstance(right, Literal) and isinstance(right.value, str):
        text = right.value
    else:
        return None
    return text, want == (e.op == "==")
