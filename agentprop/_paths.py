"""Paths through a decision tree and the conditions that select them.

A :class:`TreePath` goes from the root to a terminal node (or stops at a node whose
requirements are not met, e.g. ``N2_AUTH`` with ``last4``/``zip`` missing decides
``REQUEST_AUTH_INFO``). Branches are first-match-wins, so taking branch *k* of a node means its
clause holds and every earlier clause of that node does not: :meth:`TreePath.constraints`
returns exactly that conjunction.

Loops (``N4_CLARIFY -> N1_INTENT``, ``N6_CONFIRM_CANCEL -> N6_CONFIRM_CANCEL``) are not
unrolled: a path never enters a node twice, and the branches that would are listed by
:func:`loop_branches` for coverage reporting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentprop._spec.model import Spec
from agentprop._spec.when import Expr, Not, WhenClause


@dataclass(frozen=True)
class Step:
    """At ``node``, branch ``branch`` (index) was taken to ``next``."""

    node: str
    branch: int
    clause: WhenClause
    next: str


@dataclass(frozen=True)
class Constraint:
    """A condition a path needs: ``expr`` holds (``negated`` = it must not hold), checked at
    ``node``; ``after`` carries the clause's ``after NAME`` suffix."""

    expr: Expr
    node: str
    negated: bool = False
    after: str | None = None

    def as_expr(self) -> Expr:
        return Not(self.expr) if self.negated else self.expr


@dataclass(frozen=True)
class MissingFields:
    """The path stops at ``node`` because ``fields`` are missing; the node decides
    ``decision``."""

    node: str
    fields: tuple[str, ...]
    decision: str


@dataclass(frozen=True)
class TreePath:
    steps: tuple[Step, ...]
    leaf: str
    missing: MissingFields | None = None
    _spec: Spec | None = field(default=None, compare=False, repr=False, hash=False)

    @property
    def nodes(self) -> list[str]:
        """Nodes visited, root first, ending with the leaf (or the stopping node)."""
        out = [s.node for s in self.steps]
        out.append(self.leaf)
        return out

    @property
    def via(self) -> str | None:
        """The node the leaf was entered from."""
        return self.steps[-1].node if self.steps else None

    @property
    def id(self) -> str:
        if self.missing is not None:
            return f"{self.missing.node}:missing_{'+'.join(self.missing.fields)}"
        return f"{self.leaf}<-{self.via}" if self.via else self.leaf

    def constraints(self) -> list[Constraint]:
        spec = self._spec
        assert spec is not None
        out: list[Constraint] = []
        for step in self.steps:
            node = spec.nodes_by_id[step.node]
            for earlier in node.branches[: step.branch]:
                c = earlier.clause
                if c.expr is not None:
                    out.append(Constraint(c.expr, step.node, negated=True, after=c.after))
            if step.clause.expr is not None:
                out.append(Constraint(step.clause.expr, step.node, negated=False, after=step.clause.after))
        return out

    def describe(self) -> str:
        parts = []
        for s in self.steps:
            parts.append(f"{s.node} [{s.clause}]")
        parts.append(self.leaf if self.missing is None else f"stop: missing {', '.join(self.missing.fields)} -> {self.missing.decision}")
        return " -> ".join(parts)


def enumerate_paths(spec: Spec) -> list[TreePath]:
    """Every loop-free path from the root to a terminal node, plus one path per
    missing-field requirement, in depth-first tree order."""
    memo = spec._memo.get("paths")
    if memo is not None:
        return list(memo)
    out: list[TreePath] = []
    if not spec.decision_tree:
        return out

    def walk(node_id: str, steps: tuple[Step, ...], visited: frozenset[str]) -> None:
        node = spec.nodes_by_id.get(node_id)
        if node is None or node.is_terminal:
            out.append(TreePath(steps, node_id, None, spec))
            return
        for fields, decision in node.requirements.missing_field_outcomes():
            out.append(TreePath(steps, node_id, MissingFields(node_id, tuple(fields), decision), spec))
        for i, branch in enumerate(node.branches):
            if branch.next in visited:
                continue
            walk(branch.next, (*steps, Step(node_id, i, branch.clause, branch.next)), visited | {branch.next})

    walk(spec.root.node_id, (), frozenset({spec.root.node_id}))
    spec._memo["paths"] = tuple(out)
    return out


def loop_branches(spec: Spec) -> list[tuple[str, int]]:
    """``(node, branch index)`` of branches that only lead back to an ancestor."""
    on_paths = {(s.node, s.branch) for p in enumerate_paths(spec) for s in p.steps}
    return [
        (n.node_id, i)
        for n in spec.decision_tree
        for i, _ in enumerate(n.branches)
        if (n.node_id, i) not in on_paths
    ]
