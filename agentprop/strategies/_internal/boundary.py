"""Boundary values: both sides of every numeric edge a spec draws.

Edges come from the decision tree's comparisons, output-schema bounds and policy texts. For an
edge ``t`` the values are ``t-1, t, t+1`` (or ``t±ε``), plus zero, negative, very large and
missing where the domain allows. What each case expects is computed by walking the tree, never
written by hand; variables or values that cannot be used are listed in
:attr:`BoundaryCases.skipped` with the reason.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from typing import Literal as TypingLiteral

from pydantic import BaseModel

from agentprop._scenario.build import Scenario, build_scenario
from agentprop._scenario.solver import (
    BranchChoice,
    NumericField,
    Route,
    _WalkStop,
    is_number,
    numeric_field,
    numeric_value,
    schema_field,
    schema_numeric_kind,
    solve,
)
from agentprop._scenario.world import get_path
from agentprop._spec.bindings import Bindings
from agentprop._spec.model import Spec
from agentprop._spec.paths import enumerate_paths
from agentprop._spec.when import Arith, Compare, Expr, Literal, UnboundVariable, atoms, variables
from agentprop._spec.when import Path as VarPath
from agentprop.errors import AgentPropError, InvalidArgument, Unsatisfiable
from agentprop.strategies._internal.scenarios import (
    Context,
    Skipped,
    check_node,
    check_spec_bindings,
)

if TYPE_CHECKING:  # Hypothesis is imported where a strategy is made: a run needs none
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "BoundaryCase",
    "BoundaryCases",
    "Comparison",
    "MovedValue",
    "Skipped",
    "boundaries",
    "boundary_values",
    "is_numeric_comparison",
]

LARGE_INTEGER = 2_147_483_647
"""The "very large" integer: the largest 32-bit signed integer (overflow bugs live there)."""
LARGE_NUMBER = 1_000_000_000.0
"""The "very large" number (money, amounts)."""

_ORDER_OPS = (">", ">=", "<", "<=")


# ----------------------------------------------------------------------------- models


class Comparison(BaseModel):
    """Where an edge comes from."""

    source: str
    """The comparison as text (``order.days_since_created > plan_rules.cancel_window_days``)."""
    origin: TypingLiteral["decision_tree", "output_schema", "policy"]
    location: str
    """Where it is written, e.g. ``decision_tree.N5_CANCEL_ELIGIBILITY.branches[1].when``."""
    node: str | None = None
    """The node whose branch choice the case checks (for schema bounds: the first node that
    reads the variable; ``None`` for a policy comparison the tree does not read)."""
    branch: int | None = None
    clause: str | None = None
    """The whole ``when`` clause the comparison belongs to."""
    policy: str | None = None


class MovedValue(BaseModel):
    """One variable (or tool field) moved to a boundary value."""

    variable: str | None
    """The condition variable, or ``None`` for a tool field no variable is bound to."""
    tool: str | None = None
    field: str | None = None
    default: Any = None
    """Its value before moving."""
    value: Any
    """The boundary value (``None`` = missing)."""
    label: str
    """``t-1``, ``t``, ``t+1`` (``t-0.01`` ... for numbers), ``zero``, ``negative``, ``large``,
    ``missing``, ``nearest-below``, ``nearest-above``, or ``minimum``/``maximum`` forms."""

    @property
    def name(self) -> str:
        return self.variable or f"{self.tool}.{self.field}"


class BoundaryCase(BaseModel):
    """One value on one side of an edge, and what the spec expects there."""

    comparison: Comparison
    edge: int | float
    """The value ``t`` the moved variable is compared with."""
    moved: list[MovedValue]
    holds: bool
    """Whether the comparison is true for this value."""
    assignment: dict[str, Any]
    """Every condition variable's value (moved ones included, the rest at their defaults)."""
    expected: BranchChoice | None
    """The branch the spec takes at ``comparison.node`` for ``assignment`` (first match wins);
    ``None`` for a policy comparison the tree does not read."""
    reaches_node: bool
    """Whether the route from the root reaches ``comparison.node`` (moving a variable that an
    earlier node also reads can divert it)."""
    route: Route
    scenario: Scenario | None = None
    unrealisable: str | None = None
    """Why there is no scenario (a value the binding cannot give, a loop, a spec limit)."""
    caveat: str | None = None
    """What the expectation assumes beyond the spec (for a tool field no variable is bound to:
    that the bindings' abstract variables still hold with the moved value)."""

    @property
    def id(self) -> str:
        moved = ", ".join(f"{m.name}={m.value!r} ({m.label})" for m in self.moved)
        where = self.comparison.policy or self.comparison.node or self.comparison.location
        return f"{where}: {self.comparison.source} with {moved}"

    def describe(self) -> str:
        side = "holds" if self.holds else "does not hold"
        out = f"boundary {self.id}: comparison {side}"
        if self.expected is not None:
            out += f"; spec expects {self.expected}"
        out += f"; route {self.route}"
        if self.route.decision:
            out += f" ({self.route.decision})"
        if self.scenario is None:
            out += f"; not realisable: {self.unrealisable}"
        if self.caveat:
            out += f"; assumes: {self.caveat}"
        return out


class BoundaryCases(list[BoundaryCase]):
    """A list of :class:`BoundaryCase` that also carries :attr:`skipped`."""

    skipped: list[Skipped]

    def __init__(self, cases: Iterable[BoundaryCase] = (), skipped: Iterable[Skipped] = ()) -> None:
        super().__init__(cases)
        self.skipped = list(skipped)

    @property
    def realisable(self) -> list[BoundaryCase]:
        return [c for c in self if c.scenario is not None]


# ----------------------------------------------------------------------------- analysis


def is_numeric_comparison(
    atom: Expr, numeric_variable: Callable[[str], bool] = lambda _: False
) -> bool:
    """Whether an atom of a ``when`` clause compares numbers: an ordering (``>``, ``>=``,
    ``<``, ``<=``), or ``==``/``!=`` against a number or a numeric variable."""
    if not isinstance(atom, Compare):
        return False
    if atom.op in _ORDER_OPS:
        return True
    for side in (atom.left, atom.right):
        if isinstance(side, Literal) and is_number(side.value):
            return True
        if isinstance(side, VarPath) and numeric_variable(side.dotted):
            return True
    return False


def _linear(side: Expr) -> tuple[VarPath, Callable[[float], float | None]] | None:
    """``side`` as a variable scaled or shifted by a constant (``days_since_fill * 100``,
    ``fee + 5``), with the function that turns a value of ``side`` into the variable's value
    (``t / 100``); ``None`` for anything else. A bare variable is its own inverse."""
    if isinstance(side, VarPath):
        return side, lambda t: t
    if not isinstance(side, Arith):
        return None
    left, right = side.left, side.right
    const_right = (
        isinstance(right, Literal) and is_number(right.value) and isinstance(left, VarPath)
    )
    const_left = isinstance(left, Literal) and is_number(left.value) and isinstance(right, VarPath)
    if not (const_right or const_left):
        return None
    var = left if const_right else right
    lit = right if const_right else left
    assert (
        isinstance(var, VarPath)
        and isinstance(lit, Literal)
        and isinstance(lit.value, (int, float))
    )
    k = float(lit.value)
    op = side.op
    if op == "*":
        return var, (lambda t: t / k if k else None)
    if op == "+":
        return var, (lambda t: t - k)
    if op == "-":
        return var, (lambda t: t + k) if const_right else (lambda t: k - t)
    if op == "/" and const_right:
        return var, (lambda t: t * k)
    return None


def _fmt(step: float | int) -> str:
    return f"{step:g}"


def _edge_values(num: NumericField, t: float) -> list[tuple[Any, str]]:
    step = num.step
    if num.kind == "integer" and float(t) != math.floor(t):
        return [(math.floor(t), "floor(t)"), (math.ceil(t), "ceil(t)")]
    if num.kind == "integer":
        return [(int(t) - 1, "t-1"), (int(t), "t"), (int(t) + 1, "t+1")]
    return [
        (num.norm(t - step), f"t-{_fmt(step)}"),
        (num.norm(t), "t"),
        (num.norm(t + step), f"t+{_fmt(step)}"),
    ]


def _extra_values(num: NumericField) -> list[tuple[Any, str]]:
    large: int | float = LARGE_INTEGER if num.kind == "integer" else LARGE_NUMBER
    if num.hi is not None:
        large = num.norm(num.hi)
    return [
        (0 if num.kind == "integer" else 0.0, "zero"),
        (num.norm(-num.step), "negative"),
        (large, "large"),
        (None, "missing"),
    ]


def _dedupe(values: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    for v, label in values:
        if any(
            (v is None and w is None) or (v is not None and w is not None and v == w)
            for w, _ in out
        ):
            continue
        out.append((v, label))
    return out


@dataclass
class _Builder:
    ctx: Context
    cases: list[BoundaryCase]
    skipped: list[Skipped]

    def skip(
        self,
        cmp: Comparison,
        reason: str,
        variable: str | None = None,
        value: Any = None,
        label: str | None = None,
    ) -> None:
        self.skipped.append(
            Skipped(
                comparison=cmp.source,
                location=cmp.location,
                variable=variable,
                value=value,
                label=label,
                reason=reason,
            )
        )

    # -------------------------------------------------------------- values for a variable

    def values_for(
        self, cmp: Comparison, name: str, num: NumericField, t: float, *, extras: str | None = None
    ) -> list[tuple[Any, str]]:
        """Values to try for ``name`` around ``t``: the edge triple (always kept, realisable or
        not), the nearest listed values for finite bindings, and the extras the domain allows
        (``extras`` is a reason to leave them out). Values left out go to ``skipped``."""
        var = self.ctx.var(name)
        finite = var.finite_values() if var is not None else None
        out: list[tuple[Any, str]] = []
        for v, label in _edge_values(num, t):
            why = num.out_of_domain(v)
            if why is not None:
                self.skip(cmp, why, name, v, label)
            else:
                out.append((v, label))
        if finite is not None:
            listed = sorted(v for v in finite if is_number(v))
            below = [v for v in listed if v < t]
            above = [v for v in listed if v > t]
            if below:
                out.append((below[-1], "nearest-below"))
            if above:
                out.append((above[0], "nearest-above"))
        for v, label in _extra_values(num):
            if extras is not None:
                if not any(v == w for w, _ in out if v is not None and w is not None):
                    self.skip(cmp, extras, name, v, label)
                continue
            if finite is not None:
                why = self.ctx.realisable(name, v)
                if why is not None:
                    if not any(v == w for w, _ in out if v is not None and w is not None):
                        self.skip(cmp, why, name, v, label)
                    continue
            why = num.out_of_domain(v)
            if why is not None:
                self.skip(cmp, why, name, v, label)
                continue
            out.append((v, label))
        return _dedupe(out)

    # -------------------------------------------------------------- one case

    def case(
        self,
        cmp: Comparison,
        holds: Callable[[dict[str, Any]], bool],
        env: Mapping[str, Any],
        moved: MovedValue,
        edge: float,
        *,
        extra_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        caveat: str | None = None,
    ) -> None:
        ctx = self.ctx
        env2 = dict(env)
        if moved.variable is not None:
            env2[moved.variable] = moved.value
        expected: BranchChoice | None = None
        try:
            if cmp.node is not None:
                expected = ctx.choose(cmp.node, env2, {})
            route, env3 = ctx.walk(env2)
            truth = holds(env3)
        except (_WalkStop, UnboundVariable, TypeError) as exc:
            self.skip(
                cmp,
                f"cannot evaluate the spec for this value: {exc}",
                moved.name,
                moved.value,
                moved.label,
            )
            return
        reaches = cmp.node is None or route.choice_at(cmp.node) is not None
        scenario, why = ctx.realise(route, env3, extra_overrides=extra_overrides)
        self.cases.append(
            BoundaryCase(
                comparison=cmp,
                edge=edge,
                moved=[moved],
                holds=truth,
                assignment=env3,
                expected=expected,
                reaches_node=reaches,
                route=route,
                scenario=scenario,
                unrealisable=why,
                caveat=caveat,
            )
        )

    # -------------------------------------------------------------- decision tree

    def base_for(
        self, node: str, branch: int, atom: Expr, clause_atoms: list[Expr]
    ) -> dict[str, Any]:
        """An assignment that takes ``branch`` at ``node`` (so the comparison decides), with the
        comparison's own variables put back to their defaults when that changes no other atom
        of the clause and no earlier branch choice."""
        ctx = self.ctx
        try:
            env = ctx.base_env(node, branch)
        except Unsatisfiable:
            env = ctx.base_env(node, None)
        reset = dict(env)
        for n in variables(atom):
            var = ctx.var(n)
            if var is not None and not var.internal:
                try:
                    reset[n] = ctx.default(n)
                except _WalkStop:
                    pass
        try:
            others = [a for a in clause_atoms if a != atom]
            same = all(ctx.truth(a, env) == ctx.truth(a, reset) for a in others)
            r1, _ = ctx.walk(env)
            r2, _ = ctx.walk(reset)
            if same and r2.choice_at(node) is not None and _before(r1, node) == _before(r2, node):
                return reset
        except (_WalkStop, UnboundVariable, TypeError):
            pass
        return env

    def tree(self, node_filter: str | None) -> None:
        ctx = self.ctx
        for node in ctx.spec.decision_tree:
            if node.is_terminal or (node_filter is not None and node.node_id != node_filter):
                continue
            for b, br in enumerate(node.branches):
                clause = br.clause
                if clause.expr is None:
                    continue
                clause_atoms = list(dict.fromkeys(atoms(clause)))
                for atom in clause_atoms:
                    if not is_numeric_comparison(atom, lambda n: ctx.numeric(n) is not None):
                        continue
                    assert isinstance(atom, Compare)
                    cmp = Comparison(
                        source=str(atom),
                        origin="decision_tree",
                        location=f"decision_tree.{node.node_id}.branches[{b}].when",
                        node=node.node_id,
                        branch=b,
                        clause=clause.source,
                    )
                    self.tree_comparison(cmp, atom, clause_atoms)

    def tree_comparison(self, cmp: Comparison, atom: Compare, clause_atoms: list[Expr]) -> None:
        ctx = self.ctx
        assert cmp.node is not None and cmp.branch is not None
        env: dict[str, Any] | None = None
        for side, other in ((atom.left, atom.right), (atom.right, atom.left)):
            names = variables(side)
            if not names:
                continue
            linear = _linear(side)
            if linear is None:
                for n in names:
                    self.skip(
                        cmp,
                        f"{n} appears inside arithmetic ({side}); boundary values are derived "
                        "only for a variable compared directly or scaled / shifted by a constant",
                        n,
                    )
                continue
            path, invert = linear
            name = path.dotted
            var = ctx.var(name)
            if var is None:
                where = ctx.bindings.path or "the bindings file"
                self.skip(cmp, f"not controllable: {name} has no binding in {where}", name)
                continue
            if var.internal:
                self.skip(
                    cmp,
                    f"not controllable: {name} is bound `internal` (the agent's own bookkeeping)",
                    name,
                )
                continue
            if name in variables(other):
                self.skip(cmp, f"{name} appears on both sides of the comparison", name)
                continue
            internal_other = [n for n in variables(other) if ctx.is_internal(n)]
            if internal_other:
                self.skip(
                    cmp,
                    f"the edge for {name} depends on {', '.join(internal_other)}, bound "
                    "`internal`, which has no value tests can set",
                    name,
                )
                continue
            num = ctx.numeric(name)
            if num is None:
                self.skip(
                    cmp,
                    f"{name} is not bound to a numeric value (its binding lists non-numbers or "
                    "its field is not integer/number)",
                    name,
                )
                continue
            if env is None:
                try:
                    env = self.base_for(cmp.node, cmp.branch, atom, clause_atoms)
                except Unsatisfiable as exc:
                    self.skip(cmp, f"no assignment reaches the comparison: {exc}", name)
                    return
            try:
                e = dict(env)
                ctx.fill(other, e, {})
                t = numeric_value(other, e)
            except (_WalkStop, UnboundVariable) as exc:
                self.skip(cmp, f"the other side has no value: {exc}", name)
                continue
            if not is_number(t):
                self.skip(cmp, f"the other side ({other}) is {t!r}, not a number", name)
                continue
            t = invert(float(t))
            if t is None:
                self.skip(cmp, f"{side} cannot reach the other side's value (a zero factor)", name)
                continue
            try:
                default = env[name] if name in env else ctx.default(name)
            except _WalkStop as exc:
                self.skip(cmp, str(exc), name)
                continue
            w = var.world
            for value, label in self.values_for(cmp, name, num, float(t)):
                moved = MovedValue(
                    variable=name,
                    tool=w.tool if w is not None else None,
                    field=w.field if w is not None else None,
                    default=default,
                    value=value,
                    label=label,
                )
                self.case(cmp, lambda env3: ctx.truth(atom, env3), env, moved, t)

    # -------------------------------------------------------------- schema bounds

    def schema(self, node_filter: str | None) -> None:
        ctx = self.ctx
        for name, var in ctx.bindings.variables.items():
            if var.world is None or var.world.field is None or var.finite_values() is not None:
                continue
            num = ctx.numeric(name)
            if num is None:
                continue
            schema, _ = ctx.field_schema(name)
            if not schema:
                continue
            first = self.first_reader(name)
            if first is None or (node_filter is not None and first[0] != node_filter):
                continue
            node, branch, atom, clause_atoms = first
            for key, op, inside, outside in (
                ("minimum", ">=", (0, 1), (-1,)),
                ("exclusiveMinimum", ">", (1, 2), (0,)),
                ("maximum", "<=", (0, -1), (1,)),
                ("exclusiveMaximum", "<", (-1, -2), (0,)),
            ):
                bound = schema.get(key)
                if isinstance(bound, bool) or not is_number(bound):
                    continue
                cmp = Comparison(
                    source=f"{name} {op} {bound}",
                    origin="output_schema",
                    location=f"tools.{var.world.tool}.output_schema: {var.world.field}.{key}",
                    node=node,
                    branch=None,
                )
                try:
                    env = self.base_for(node, branch, atom, clause_atoms)
                except Unsatisfiable as exc:
                    self.skip(cmp, f"no assignment reaches {node}: {exc}", name)
                    continue
                default = env.get(name, ctx.default(name))
                for k in outside:
                    v = num.norm(bound + k * num.step)
                    self.skip(
                        cmp,
                        f"{v!r} is outside the output_schema ({key} {bound}): a "
                        "world must not return it",
                        name,
                        v,
                        f"{key}{k:+d}step",
                    )
                for k in inside:
                    v = num.norm(bound + k * num.step)
                    why = num.out_of_domain(v)
                    label = key if k == 0 else f"{key}{k:+d}step"
                    if why is not None:
                        self.skip(cmp, why, name, v, label)
                        continue
                    moved = MovedValue(
                        variable=name,
                        tool=var.world.tool,
                        field=var.world.field,
                        default=default,
                        value=v,
                        label=label,
                    )
                    src = Compare(op, VarPath(tuple(name.split("."))), Literal(bound))
                    self.case(cmp, functools.partial(ctx.truth, src), env, moved, bound)

    def first_reader(self, name: str) -> tuple[str, int, Expr, list[Expr]] | None:
        for node in self.ctx.spec.decision_tree:
            for b, br in enumerate(node.branches):
                if br.clause.expr is None:
                    continue
                clause_atoms = list(dict.fromkeys(atoms(br.clause)))
                for a in clause_atoms:
                    if name in variables(a):
                        return node.node_id, b, a, clause_atoms
        return None

    # -------------------------------------------------------------- policies

    def policies(self) -> None:
        ctx = self.ctx
        for policy in ctx.spec.policies:
            for m in _POLICY_CMP.finditer(policy.text):
                left, word, right = m.group("left"), m.group("op"), m.group("right")
                op = _OP_WORDS[re.sub(r"\s+", " ", word.lower())]
                lref = self.field_ref(left)
                rnum = _number(right)
                rref: _FieldRef | float | None = rnum if rnum is not None else self.field_ref(right)
                source = f"{left} {op} {right}"
                cmp = Comparison(
                    source=source,
                    origin="policy",
                    location=f"policies.{policy.id}.text",
                    policy=policy.id,
                )
                if lref is None and not isinstance(rref, _FieldRef):
                    continue  # prose ("the request is over"), not a comparison of tool fields
                if lref is None or rref is None:
                    missing = left if lref is None else right
                    self.skip(
                        cmp,
                        f"{missing!r} is neither a number nor a numeric output field of a tool, "
                        "so this edge has no value to move around",
                    )
                    continue
                refs = [(lref, rref, False), (rref, lref, True)]
                for moving, fixed, flipped in refs:
                    if not isinstance(moving, _FieldRef):
                        continue
                    self.policy_side(cmp, op, moving, fixed, flipped)

    def field_ref(self, token: str) -> _FieldRef | None:
        ctx = self.ctx
        var = ctx.var(token)
        if (
            var is not None
            and var.world is not None
            and var.world.field is not None
            and ctx.numeric(token) is not None
        ):
            return _FieldRef(var.world.tool, var.world.field, token)
        for tool in ctx.spec.action_tools:
            for path, _schema in _numeric_fields(tool.output_schema):
                plain = re.sub(r"\[\d+\]", "", path)
                if plain == token or plain.split(".")[-1] == token.split(".")[-1]:
                    bound_var = next(
                        (
                            n
                            for n, v in ctx.bindings.variables.items()
                            if v.world is not None
                            and v.world.tool == tool.name
                            and v.world.field == path
                        ),
                        None,
                    )
                    return _FieldRef(tool.name, path, bound_var)
        return None

    def field_is_set(self, ref: _FieldRef) -> bool:
        if ref.variable is not None:
            return True
        base = self.ctx.bindings.world.get(ref.tool, {})
        if ref.field in base:
            return True
        try:
            get_path(base, ref.field)
            return True
        except (KeyError, IndexError, TypeError, ValueError):
            return False

    def policy_side(
        self, cmp: Comparison, op: str, moving: _FieldRef, fixed: _FieldRef | float, flipped: bool
    ) -> None:
        ctx = self.ctx
        if not self.field_is_set(moving):
            self.skip(
                cmp,
                f"{moving.tool}.{moving.field} is set by no binding (bind a variable to it or "
                "give it a value under `world:`), so its default is arbitrary",
                moving.variable or f"{moving.tool}.{moving.field}",
            )
            return
        if isinstance(fixed, _FieldRef):
            if not self.field_is_set(fixed):
                self.skip(
                    cmp,
                    f"{fixed.tool}.{fixed.field} is set by no binding, so there is no edge to "
                    f"move {moving.tool}.{moving.field} around",
                    moving.variable or f"{moving.tool}.{moving.field}",
                )
                return
            t = ctx.world_value(fixed.tool, fixed.field)
        else:
            t = fixed
        if not is_number(t):
            self.skip(cmp, f"the other side has no numeric value ({t!r})", moving.variable)
            return
        schema, missing_ok = schema_field(ctx.spec.tool(moving.tool).output_schema, moving.field)
        var = ctx.var(moving.variable) if moving.variable is not None else None
        num = ctx.numeric(moving.variable) if moving.variable is not None else None
        if num is None:
            kind = schema_numeric_kind(schema) or "number"
            num = numeric_field(
                kind,
                schema=schema,
                missing_ok=missing_ok,
                precision=var.world.precision
                if var is not None and var.world is not None
                else None,
                bmin=None,
                bmax=None,
                what=f"{moving.tool}.{moving.field}",
            )
        if moving.variable is not None:
            first = self.first_reader(moving.variable)
            if first is not None:
                cmp = cmp.model_copy(update={"node": first[0]})
        env = self.policy_env(moving.tool)
        if env is None:
            self.skip(
                cmp,
                f"no satisfiable path of the tree calls {moving.tool} without a failure, so no "
                "scenario shows its output",
                moving.variable,
            )
            return
        default = ctx.world_value(moving.tool, moving.field)
        name = moving.variable or f"{moving.tool}.{moving.field}"
        caveat = extras = None
        if moving.variable is None:
            field = f"{moving.tool}.{moving.field}"
            caveat = (
                f"the tree does not read {field}; the expected route assumes the bindings' "
                "abstract variables (realised through the base world) still "
                f"hold with {field} moved"
            )
            extras = (
                f"{field} is bound to no variable, so it is moved only across the policy's edge: "
                "a far value could change what abstract variables realised "
                "through the base world mean"
            )
        for value, label in self.values_for(cmp, name, num, float(t), extras=extras):
            mv = MovedValue(
                variable=moving.variable,
                tool=moving.tool,
                field=moving.field,
                default=default,
                value=value,
                label=label,
            )

            def holds(_: dict[str, Any], value: Any = value) -> bool:
                if value is None:
                    return False
                a, b = (t, value) if flipped else (value, t)
                return _compare(op, a, b)

            extra = None if moving.variable is not None else {moving.tool: {moving.field: value}}
            self.case(cmp, holds, env, mv, float(t), extra_overrides=extra, caveat=caveat)

    def policy_env(self, tool: str) -> dict[str, Any] | None:
        """The solved assignment of the path closest to the defaults on which ``tool`` is
        required and not failing (so a scenario shows the moved output)."""
        ctx = self.ctx
        best: tuple[int, int, dict[str, Any]] | None = None
        for i, p in enumerate(enumerate_paths(ctx.spec)):
            if p.missing is not None:
                continue
            try:
                env = solve(ctx.spec, ctx.bindings, p)
                sc = build_scenario(ctx.spec, ctx.bindings, p, assignment=ctx.build_env(env))
            except (Unsatisfiable, AgentPropError):
                continue
            if not any(tool in t.required_tools for t in sc.turns):
                continue
            if any(f.get("tool") == tool for f in sc.world.failures):
                continue
            score = 0
            for n, v in env.items():
                try:
                    score += int(v != ctx.default(n))
                except _WalkStop:
                    score += 1
            if best is None or (score, i) < best[:2]:
                best = (score, i, env)
        return best[2] if best is not None else None


def _before(route: Route, node: str) -> list[tuple[str, int | None]]:
    """The branches a route takes before it reaches ``node``."""
    out: list[tuple[str, int | None]] = []
    for s in route.steps:
        if s.node == node:
            break
        out.append((s.node, s.branch))
    return out


@dataclass(frozen=True)
class _FieldRef:
    tool: str
    field: str
    variable: str | None


_OP_WORDS = {
    "exceeds": ">",
    "is greater than": ">",
    "greater than": ">",
    "is more than": ">",
    "more than": ">",
    "is above": ">",
    "is over": ">",
    "is at least": ">=",
    "at least": ">=",
    "is at most": "<=",
    "at most": "<=",
    "is below": "<",
    "is under": "<",
    "is less than": "<",
    "less than": "<",
    ">": ">",
    ">=": ">=",
    "<": "<",
    "<=": "<=",
}

_POLICY_CMP = re.compile(
    r"(?P<left>\b[A-Za-z_][\w.]*)\s+"
    r"(?P<op>exceeds|(?:is\s+)?(?:greater|more|less)\s+than|is\s+(?:above|over|below|under)|(?:is\s+)?at\s+(?:least|most)|>=|<=|>|<)\s+"
    r"\$?(?P<right>-?\d+(?:\.\d+)?\b|[A-Za-z_][\w.]*[A-Za-z0-9_])",
    re.IGNORECASE,
)


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == ">":
        return bool(a > b)
    if op == ">=":
        return bool(a >= b)
    if op == "<":
        return bool(a < b)
    return bool(a <= b)


def _numeric_fields(
    schema: Mapping[str, Any] | None, prefix: str = ""
) -> list[tuple[str, Mapping[str, Any]]]:
    """Numeric leaf fields of a JSON Schema as field paths (``orders[0].days_since_created``)."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    if not schema:
        return out
    if schema_numeric_kind(schema) and prefix:
        out.append((prefix, schema))
    t = schema.get("type")
    if t == "object" or "properties" in schema:
        for k, sub in (schema.get("properties") or {}).items():
            out += _numeric_fields(sub, f"{prefix}.{k}" if prefix else k)
    elif t == "array" and isinstance(schema.get("items"), Mapping):
        out += _numeric_fields(schema["items"], f"{prefix}[0]")
    return out


# ----------------------------------------------------------------------------- public API


def boundary_values(spec: Spec, bindings: Bindings, *, node: str | None = None) -> BoundaryCases:
    """Boundary cases for every numeric edge of ``spec`` (see the module docstring).

    ``node`` restricts them to the comparisons of one node (and the schema bounds of the
    variables it reads first). The result is a list of :class:`BoundaryCase` in tree order
    (then schema bounds, then policies), each comparison's values in the order ``t-1, t, t+1``,
    nearest listed values, zero, negative, large, missing; ``.skipped`` lists what could not be
    moved or was outside the domain, with the reason.
    """
    spec, bindings = check_spec_bindings(spec, bindings, "boundary_values")
    node = check_node(spec, node, "boundary_values", allow_none=True)
    builder = _Builder(Context(spec, bindings), [], [])
    builder.tree(node)
    builder.schema(node)
    if node is None:
        builder.policies()
    return BoundaryCases(builder.cases, builder.skipped)


def _noted(case: BoundaryCase) -> BoundaryCase:
    from hypothesis import note

    note(case.describe())
    return case


def boundaries(
    spec: Spec, bindings: Bindings, node: str | None = None, *, realisable_only: bool = True
) -> SearchStrategy[BoundaryCase]:
    """A strategy over :func:`boundary_values` (``sampled_from``, so it shrinks towards the
    first case). With ``realisable_only`` (the default) only cases with a scenario are drawn;
    if there are none, :class:`~agentprop._scenario.build.Unsatisfiable` is raised now, with the
    reasons."""
    if not isinstance(realisable_only, bool):
        raise InvalidArgument(
            f"boundaries: realisable_only={realisable_only!r} must be True or False"
        )
    cases = boundary_values(spec, bindings, node=node)
    pool = cases.realisable if realisable_only else list(cases)
    if not pool:
        where = f"node {node}" if node is not None else f"spec {spec.spec_id}"
        reasons = [f"{c.id}: {c.unrealisable}" for c in cases] + [
            f"{s.comparison} ({s.variable}): {s.reason}" for s in cases.skipped
        ]
        raise Unsatisfiable(
            f"boundaries: {where} has no {'realisable ' if realisable_only else ''}boundary case"
            + (
                ":\n  " + "\n  ".join(reasons[:20])
                if reasons
                else " (it has no numeric comparison)"
            )
        )
    from hypothesis import strategies as st

    return st.sampled_from(pool).map(_noted)
