"""Paths through a decision tree and the conditions that select them.

A :class:`TreePath` goes from the root to a terminal node (or stops at a node whose
requirements are not met, e.g. ``N2_AUTH`` with ``last4``/``zip`` missing decides
``REQUEST_AUTH_INFO``). Branches are first-match-wins, so taking branch *k* of a node means its
clause holds and every earlier clause of that node does not: :meth:`TreePath.constraints`
returns exactly that conjunction.

Loops (``N4_CLARIFY -> N1_INTENT``, ``N6_CONFIRM_CANCEL -> N6_CONFIRM_CANCEL``) are unrolled
once: :func:`enumerate_paths` gives the loop-free paths and :func:`enumerate_loop_paths` the
paths that take one loop branch (a branch back to a node already on the path) exactly once.
The steps from the re-entered node on are its second visit, and a variable read both before
and on the second visit has a second *instance* there (``intent`` is ``unknown`` on the first
visit and ``cancel_order`` after the clarifying question): :class:`Constraint` carries the
instance, :meth:`TreePath.constraints` takes the instance boundary. Where the loop branch's own
condition is about the fresh value (``N4_CLARIFY``: ``intent != unknown`` after the answer) the
boundary is at the loop branch's node, where it is about the old one (``N6_CONFIRM_CANCEL``:
the answer was neither yes nor no, ask again) it is after it; the solver tries both.
:func:`loop_branches` lists the loop branches for coverage reporting.
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
    loop: bool = False
    """This branch re-enters a node already on the path (the one loop the path unrolls)."""


@dataclass(frozen=True)
class Constraint:
    """A condition a path needs: ``expr`` holds (``negated`` = it must not hold), checked at
    ``node``; ``after`` carries the clause's ``after NAME`` suffix."""

    expr: Expr
    node: str
    negated: bool = False
    after: str | None = None
    step: int = 0
    """Index of the path step this condition is checked at (a node may be visited twice)."""
    instance: int = 1
    """Which instance of the loop's variables the condition reads (2 on a loop's second
    visit, see :meth:`TreePath.constraints`)."""

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
    def loop_step(self) -> int | None:
        """Index of the step that takes the loop branch, if this path unrolls a loop."""
        return next((i for i, s in enumerate(self.steps) if s.loop), None)

    @property
    def id(self) -> str:
        if self.missing is not None:
            return f"{self.missing.node}:missing_{'+'.join(self.missing.fields)}"
        return f"{self.leaf}<-{self.via}" if self.via else self.leaf

    def constraints(self, boundary: str = "after") -> list[Constraint]:
        """The path's conditions, first-match-wins included.

        On a loop path, the conditions of the second visit read the second instance of every
        variable that is also read before it; ``boundary`` says whether the loop branch's own
        node reads the first instance (``"after"``: the second instance starts at the re-entered
        node) or already the second (``"at"``)."""
        spec = self._spec
        assert spec is not None
        out: list[Constraint] = []
        loop = self.loop_step
        first = (loop + (1 if boundary == "after" else 0)) if loop is not None else len(self.steps)
        for i, step in enumerate(self.steps):
            node = spec.nodes_by_id[step.node]
            inst = 2 if i >= first else 1
            for earlier in node.branches[: step.branch]:
                c = earlier.clause
                if c.expr is not None:
                    out.append(Constraint(c.expr, step.node, negated=True, after=c.after, step=i, instance=inst))
            if step.clause.expr is not None:
                out.append(Constraint(step.clause.expr, step.node, negated=False, after=step.clause.after, step=i, instance=inst))
        return out

    def describe(self) -> str:
        parts = []
        for s in self.steps:
            parts.append(f"{s.node} [{s.clause}]" + (" (loop, second visit)" if s.loop else ""))
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


def enumerate_loop_paths(spec: Spec) -> list[TreePath]:
    """The paths that unroll one loop once, in depth-first tree order: each takes exactly one
    branch back to a node already on the path, and never re-enters a node after that."""
    memo = spec._memo.get("loop_paths")
    if memo is not None:
        return list(memo)
    out: list[TreePath] = []
    if not spec.decision_tree:
        return out

    def walk(node_id: str, steps: tuple[Step, ...], visited: frozenset[str], looped: bool) -> None:
        node = spec.nodes_by_id.get(node_id)
        if node is None or node.is_terminal:
            if looped:
                out.append(TreePath(steps, node_id, None, spec))
            return
        if looped:
            for fields, decision in node.requirements.missing_field_outcomes():
                out.append(TreePath(steps, node_id, MissingFields(node_id, tuple(fields), decision), spec))
        for i, branch in enumerate(node.branches):
            again = branch.next in visited
            if again and looped:
                continue
            step = Step(node_id, i, branch.clause, branch.next, loop=again)
            walk(branch.next, (*steps, step), visited | {branch.next}, looped or again)

    walk(spec.root.node_id, (), frozenset({spec.root.node_id}), False)
    spec._memo["loop_paths"] = tuple(out)
    return out


def loop_branches(spec: Spec) -> list[tuple[str, int]]:
    """``(node, branch index)`` of branches that lie on no loop-free path: they only lead back
    to an ancestor (or only through one). Loop paths (:func:`enumerate_loop_paths`) take them."""
    on_paths = {(s.node, s.branch) for p in enumerate_paths(spec) for s in p.steps}
    return [(n.node_id, i) for n in spec.decision_tree for i, _ in enumerate(n.branches) if (n.node_id, i) not in on_paths]
