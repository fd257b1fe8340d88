"""Directional pairs: flip one atomic condition of a branch, and say what must change.

:func:`directional_pairs` moves one variable so that exactly one atom of a branch's clause flips,
the route to the node is unchanged and both sides are realisable. The expected outcome of each
side is computed from the tree, never assumed; what has no pair is listed in
:attr:`DirectionalPairs.skipped` with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentprop._scenario.build import Scenario
from agentprop._scenario.solver import BranchChoice, Route, _WalkStop, is_number, numeric_value
from agentprop._spec.bindings import Bindings
from agentprop._spec.model import Node, Spec
from agentprop._spec.when import Compare, Expr, Literal, Symbol, UnboundVariable, atoms, variables
from agentprop._spec.when import Path as VarPath
from agentprop.errors import InvalidArgument, Unsatisfiable
from agentprop.strategies._internal.boundary import _before, _edge_values
from agentprop.strategies._internal.scenarios import (
    Context,
    Skipped,
    check_node,
    check_spec_bindings,
)

if TYPE_CHECKING:  # Hypothesis is imported where a strategy is made: a run needs none
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "DirectionalPair",
    "DirectionalPairs",
    "DirectionalSide",
    "directional",
    "directional_pairs",
]


class DirectionalSide(BaseModel):
    """One side of a pair: the assignment and what the spec expects for it."""

    assignment: dict[str, Any]
    atoms: dict[str, bool]
    """Truth of each atom of the flipped branch's clause under ``assignment``."""
    choice: BranchChoice
    """The branch the spec takes at the pair's node (first match wins)."""
    route: Route
    scenario: Scenario | None = None
    unrealisable: str | None = None

    @property
    def next(self) -> str | None:
        return self.choice.next

    @property
    def decision(self) -> str | None:
        """The decision of the leaf the route ends at (``None`` if it stops before a leaf)."""
        return self.route.decision


class DirectionalPair(BaseModel):
    """Two assignments that differ in one variable, which flips one atom of one branch."""

    node: str
    branch: int
    clause: str
    atom: str
    """The atom whose truth differs between the sides."""
    variable: str
    base_value: Any
    perturbed_value: Any
    base: DirectionalSide
    perturbed: DirectionalSide
    also_flipped: list[str] = Field(default_factory=list)
    """Atoms of the node's *other* clauses whose truth changed too (``verified == false``
    flips with ``verified == true``); none of them belongs to ``clause``."""
    reaches_node: bool = True
    """Whether the perturbed route still reaches ``node`` through the same branches."""

    @property
    def changes_branch(self) -> bool:
        return self.base.choice.branch != self.perturbed.choice.branch

    @property
    def changes_decision(self) -> bool:
        return self.base.decision != self.perturbed.decision

    @property
    def realisable(self) -> bool:
        return self.base.scenario is not None and self.perturbed.scenario is not None

    @property
    def id(self) -> str:
        return (
            f"{self.node}#{self.branch} flip `{self.atom}` via {self.variable}: "
            f"{self.base_value!r} -> {self.perturbed_value!r}"
        )

    def describe(self) -> str:
        b, p = self.base, self.perturbed
        out = (
            f"directional {self.id}: {self.node} goes {b.choice.next} -> {p.choice.next}; "
            f"decision {b.decision} -> {p.decision}"
        )
        if not self.realisable:
            out += f"; not realisable: {b.unrealisable or p.unrealisable}"
        return out


class DirectionalPairs(list[DirectionalPair]):
    """A list of :class:`DirectionalPair` that also carries :attr:`skipped`."""

    skipped: list[Skipped]

    def __init__(
        self, pairs: Iterable[DirectionalPair] = (), skipped: Iterable[Skipped] = ()
    ) -> None:
        super().__init__(pairs)
        self.skipped = list(skipped)

    @property
    def realisable(self) -> list[DirectionalPair]:
        return [p for p in self if p.realisable]


# ----------------------------------------------------------------------------- search


def _constants(atom: Expr) -> list[Any]:
    out: list[Any] = []
    if isinstance(atom, Compare):
        for side in (atom.left, atom.right):
            if isinstance(side, Literal):
                out.append(side.value)
            elif isinstance(side, Symbol):
                out.append(side.name)
    return out


def _candidates(ctx: Context, name: str, env: Mapping[str, Any], node: Node) -> list[Any]:
    """Values to try for ``name``, simplest first, without the base value."""
    var = ctx.var(name)
    assert var is not None
    base = env.get(name)
    finite = var.finite_values()
    out: list[Any] = []
    node_atoms = [a for br in node.branches if br.clause.expr is not None for a in atoms(br.clause)]
    num = ctx.numeric(name)
    if finite is not None:
        out = list(finite)
    elif num is not None:
        for a in node_atoms:
            if not isinstance(a, Compare) or name not in variables(a):
                continue
            for side, other in ((a.left, a.right), (a.right, a.left)):
                if (
                    isinstance(side, VarPath)
                    and side.dotted == name
                    and name not in variables(other)
                ):
                    try:
                        e = dict(env)
                        ctx.fill(other, e, {})
                        t = numeric_value(other, e)
                    except (_WalkStop, UnboundVariable):
                        continue
                    if is_number(t):
                        out += [
                            v
                            for v, _ in _edge_values(num, float(t))
                            if num.out_of_domain(v) is None
                        ]
        if is_number(base):
            out.sort(key=lambda v: abs(v - base))
    else:
        schema, _ = ctx.field_schema(name)
        schema = schema or {}
        if schema.get("enum"):
            out = list(schema["enum"])
        elif schema.get("type") == "boolean" or isinstance(base, bool):
            out = [True, False]
        else:
            consts = [c for a in node_atoms if name in variables(a) for c in _constants(a)]
            out = consts + [f"not-{c}" for c in consts if isinstance(c, str)]
    seen: list[Any] = []
    for v in out:
        if values_equal(v, base) or any(values_equal(v, s) for s in seen):
            continue
        seen.append(v)
    return seen


def _direct(atom: Expr, name: str) -> bool:
    return isinstance(atom, Compare) and any(
        isinstance(x, VarPath) and x.dotted == name for x in (atom.left, atom.right)
    )


def values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    return bool(a == b)


def _truths(ctx: Context, exprs: list[Expr], env: Mapping[str, Any]) -> dict[str, bool]:
    return {str(a): ctx.truth(a, env) for a in exprs}


class _Search:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.pairs: list[DirectionalPair] = []
        self.skipped: list[Skipped] = []

    def skip(self, node: str, b: int, atom: str, reason: str, variable: str | None = None) -> None:
        self.skipped.append(
            Skipped(
                comparison=atom,
                location=f"decision_tree.{node}.branches[{b}].when",
                variable=variable,
                reason=reason,
            )
        )

    def side(self, node: str, env: dict[str, Any], clause_atoms: list[Expr]) -> DirectionalSide:
        ctx = self.ctx
        env = dict(env)
        choice = ctx.choose(node, env, {})
        route, env2 = ctx.walk(env)
        scenario, why = ctx.realise(route, env2)
        return DirectionalSide(
            assignment=env2,
            atoms=_truths(ctx, clause_atoms, env2),
            choice=choice,
            route=route,
            scenario=scenario,
            unrealisable=why,
        )

    def node(self, node: Node) -> None:
        ctx = self.ctx
        node_atoms = list(
            dict.fromkeys(
                a for br in node.branches if br.clause.expr is not None for a in atoms(br.clause)
            )
        )
        for b, br in enumerate(node.branches):
            clause = br.clause
            if clause.expr is None:
                continue
            clause_atoms = list(dict.fromkeys(atoms(clause)))
            try:
                env = ctx.base_env(node.node_id, b)
                base = self.side(node.node_id, env, clause_atoms)
            except (Unsatisfiable, _WalkStop) as exc:
                for a in clause_atoms:
                    self.skip(node.node_id, b, str(a), f"no assignment takes this branch: {exc}")
                continue
            if base.choice.branch != b:
                for a in clause_atoms:
                    self.skip(
                        node.node_id,
                        b,
                        str(a),
                        f"the solved assignment takes branch {base.choice.branch}, not {b}",
                    )
                continue
            env = base.assignment
            for atom in clause_atoms:
                names = variables(atom)
                if names and all(ctx.is_internal(n) for n in names):
                    self.skip(
                        node.node_id,
                        b,
                        str(atom),
                        "not controllable: every variable is bound `internal` "
                        "(the agent decides it)",
                    )
                    continue
                if not names:
                    self.skip(
                        node.node_id,
                        b,
                        str(atom),
                        "the atom reads no variable: it cannot be flipped",
                    )
                    continue
                for name in names:
                    self.flip(
                        node, b, clause.source, atom, name, env, base, clause_atoms, node_atoms
                    )

    def flip(
        self,
        node: Node,
        b: int,
        clause: str,
        atom: Expr,
        name: str,
        env: dict[str, Any],
        base: DirectionalSide,
        clause_atoms: list[Expr],
        node_atoms: list[Expr],
    ) -> None:
        ctx = self.ctx
        var = ctx.var(name)
        if var is None:
            where = ctx.bindings.path or "the bindings file"
            self.skip(
                node.node_id,
                b,
                str(atom),
                f"not controllable: {name} has no binding in {where}",
                name,
            )
            return
        if var.internal:
            self.skip(
                node.node_id, b, str(atom), f"not controllable: {name} is bound `internal`", name
            )
            return
        base_value = env.get(name)
        base_truth = base.atoms
        base_node = _truths(ctx, node_atoms, env)
        best: tuple[tuple[int, int, int, int], DirectionalPair] | None = None
        candidates = _candidates(ctx, name, env, node)
        flipped_with_others = 0
        for i, value in enumerate(candidates):
            env_p = dict(env)
            env_p[name] = value
            try:
                truths = _truths(ctx, clause_atoms, env_p)
            except (_WalkStop, UnboundVariable, TypeError):
                continue
            changed = [a for a in truths if truths[a] != base_truth[a]]
            if changed != [str(atom)]:
                flipped_with_others += str(atom) in changed
                continue
            try:
                perturbed = self.side(node.node_id, env_p, clause_atoms)
                node_p = _truths(ctx, node_atoms, perturbed.assignment)
            except (_WalkStop, UnboundVariable, TypeError):
                continue
            also = [a for a in node_p if node_p[a] != base_node.get(a) and a not in truths]
            reaches = perturbed.route.choice_at(node.node_id) is not None and _before(
                perturbed.route, node.node_id
            ) == _before(base.route, node.node_id)
            pair = DirectionalPair(
                node=node.node_id,
                branch=b,
                clause=clause,
                atom=str(atom),
                variable=name,
                base_value=base_value,
                perturbed_value=value,
                base=base,
                perturbed=perturbed,
                also_flipped=also,
                reaches_node=reaches,
            )
            score = (int(not reaches), int(perturbed.scenario is None), len(also), i)
            if best is None or score < best[0]:
                best = (score, pair)
        if best is None:
            if flipped_with_others:
                why = (
                    f"every value of {name} that flips `{atom}` also flips "
                    f"another atom of `{clause}`"
                )
            elif not candidates:
                why = f"the bindings give {name} no value other than {base_value!r}"
            else:
                tried = ", ".join(repr(c) for c in candidates[:6]) + (
                    " ..." if len(candidates) > 6 else ""
                )
                why = f"no value tried for {name} ({tried}) flips `{atom}`" + (
                    " (it appears inside arithmetic, where no edge is derived)"
                    if not _direct(atom, name)
                    else ""
                )
            self.skip(node.node_id, b, str(atom), why, name)
            return
        self.pairs.append(best[1])


# ----------------------------------------------------------------------------- public API


def directional_pairs(spec: Spec, bindings: Bindings, node: str | None = None) -> DirectionalPairs:
    """Directional pairs for the branches of ``node`` (every node with branches when
    ``None``), in branch and atom order; ``.skipped`` lists atoms without a pair and why."""
    spec, bindings = check_spec_bindings(spec, bindings, "directional_pairs")
    node = check_node(spec, node, "directional_pairs", allow_none=True)
    search = _Search(Context(spec, bindings))
    for n in spec.decision_tree:
        if n.is_terminal or (node is not None and n.node_id != node):
            continue
        search.node(n)
    return DirectionalPairs(search.pairs, search.skipped)


def _noted(pair: DirectionalPair) -> DirectionalPair:
    from hypothesis import note

    note(pair.describe())
    return pair


def directional(
    spec: Spec, bindings: Bindings, node: str | None = None, *, realisable_only: bool = True
) -> SearchStrategy[DirectionalPair]:
    """A strategy over :func:`directional_pairs` (``sampled_from``: shrinks to the first).
    With ``realisable_only`` (the default) only pairs with a scenario on both sides are
    drawn; if there are none, :class:`~agentprop._scenario.build.Unsatisfiable` is raised now."""
    if not isinstance(realisable_only, bool):
        raise InvalidArgument(
            f"directional: realisable_only={realisable_only!r} must be True or False"
        )
    pairs = directional_pairs(spec, bindings, node)
    pool = pairs.realisable if realisable_only else list(pairs)
    if not pool:
        where = f"node {node}" if node is not None else f"spec {spec.spec_id}"
        reasons = [f"{p.id}: {p.base.unrealisable or p.perturbed.unrealisable}" for p in pairs]
        reasons += [f"{s.location} `{s.comparison}`: {s.reason}" for s in pairs.skipped]
        raise Unsatisfiable(
            f"directional: {where} has no "
            f"{'realisable ' if realisable_only else ''}directional pair"
            + (":\n  " + "\n  ".join(reasons[:20]) if reasons else "")
        )
    from hypothesis import strategies as st

    return st.sampled_from(pool).map(_noted)
