"""Paths through a decision tree and the conditions that select them.

Branches are first-match-wins, so taking branch *k* means its clause holds and every earlier
clause does not: :meth:`TreePath.constraints` is exactly that conjunction. Loops are unrolled
once (:func:`enumerate_paths`, :func:`enumerate_loop_paths`); a variable read on both visits has
a second instance, carried by :class:`Constraint`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from agentprop._spec.model import Spec, derived
from agentprop._spec.when import Expr, Not, WhenClause
from agentprop.errors import PathLimitExceeded, SourceLocation

MAX_PATHS = 2_000
"""The most paths (loop-free plus loop paths, each counted apart) agentprop enumerates for a
spec; more raise :class:`PathLimitExceeded`. ``AGENTPROP_MAX_PATHS`` overrides it."""
MAX_PATH_CONDITIONS = 20_000
"""The most branch conditions over all those paths, first-match-wins included (taking branch
*k* of a node reads k + 1 conditions): a chain of hundreds of nodes, or a router with a
thousand branches, has few paths but long ones, each solved apart.
``AGENTPROP_MAX_PATH_CONDITIONS`` overrides it."""


def _limit(name: str, default: int) -> int:
    raw = os.environ.get(f"AGENTPROP_{name}", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


def max_paths() -> int:
    """:data:`MAX_PATHS`, or the ``AGENTPROP_MAX_PATHS`` environment variable when it is a
    positive integer."""
    return _limit("MAX_PATHS", MAX_PATHS)


def _path_limit(spec: Spec, what: str, name: str, limit: int) -> PathLimitExceeded:
    """The error for a tree with more paths, or longer ones, than agentprop enumerates (a ladder of
    two-way nodes doubles them at every rung), naming the limit and how to raise it."""
    return PathLimitExceeded(
        f"spec {spec.spec_id}: its decision tree has more than {limit:,} {what} (agentprop's "
        f"limit, {name}): testing every path would take hours",
        limit=limit,
        location=SourceLocation(spec.source_path) if spec.source_path else None,
        expected=f"at most {MAX_PATHS:,} paths from the root to a terminal node, "
        f"{MAX_PATH_CONDITIONS:,} branch conditions in all",
        fix="merge branches that lead to the same place, or split the tree into several specs; "
        f"to enumerate more, set AGENTPROP_{name} (e.g. AGENTPROP_{name}={limit * 5})",
    )


@dataclass(frozen=True)
class PathStep:
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
    steps: tuple[PathStep, ...]
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
                    out.append(
                        Constraint(
                            c.expr, step.node, negated=True, after=c.after, step=i, instance=inst
                        )
                    )
            if step.clause.expr is not None:
                out.append(
                    Constraint(
                        step.clause.expr,
                        step.node,
                        negated=False,
                        after=step.clause.after,
                        step=i,
                        instance=inst,
                    )
                )
        return out

    def describe(self) -> str:
        parts = []
        for s in self.steps:
            parts.append(f"{s.node} [{s.clause}]" + (" (loop, second visit)" if s.loop else ""))
        parts.append(
            self.leaf
            if self.missing is None
            else f"stop: missing {', '.join(self.missing.fields)} -> {self.missing.decision}"
        )
        return " -> ".join(parts)


def enumerate_paths(spec: Spec) -> list[TreePath]:
    """Every loop-free path from the root to a terminal node, plus one path per
    missing-field requirement, in depth-first tree order. Raises :class:`PathLimitExceeded`
    past :func:`max_paths` paths."""
    return list(
        derived(spec, "paths", lambda: tuple(_bounded(iter_paths(spec), spec, "loop-free paths")))
    )


def enumerate_loop_paths(spec: Spec) -> list[TreePath]:
    """The paths that unroll one loop once, in depth-first tree order: each takes exactly one
    branch back to a node already on the path, and never re-enters a node after that. Raises
    :class:`PathLimitExceeded` past :func:`max_paths` paths."""
    return list(
        derived(
            spec,
            "loop_paths",
            lambda: tuple(_bounded(iter_loop_paths(spec), spec, "paths that unroll a loop")),
        )
    )


def count_paths(spec: Spec, limit: int | None = None) -> tuple[int, bool]:
    """How many loop-free paths the tree has, counting lazily: ``(count, complete)``, where
    ``complete`` is false when counting stopped at ``limit`` (default :func:`max_paths`)."""
    cap = max_paths() if limit is None else limit
    n = 0
    for _ in iter_paths(spec):
        n += 1
        if n > cap:
            return cap, False
    return n, True


def _bounded(paths: Iterator[TreePath], spec: Spec, what: str) -> list[TreePath]:
    limit, condition_limit = max_paths(), _limit("MAX_PATH_CONDITIONS", MAX_PATH_CONDITIONS)
    out: list[TreePath] = []
    conditions = 0
    for path in paths:
        if len(out) >= limit:
            raise _path_limit(spec, what, "MAX_PATHS", limit)
        conditions += sum(step.branch + 1 for step in path.steps)
        if conditions > condition_limit:
            raise _path_limit(
                spec, f"branch conditions over its {what}", "MAX_PATH_CONDITIONS", condition_limit
            )
        out.append(path)
    return out


def iter_paths(spec: Spec) -> Iterator[TreePath]:
    """:func:`enumerate_paths`, lazily and unbounded (an explicit stack: a chain of thousands
    of nodes is no deeper for Python than a chain of two)."""
    if not spec.decision_tree:
        return
    # (node, steps, visited), or a branch still to take: the stack holds work in reverse order
    stack: list[tuple[str, tuple[PathStep, ...], frozenset[str]]] = [
        (spec.root.node_id, (), frozenset({spec.root.node_id}))
    ]
    while stack:
        node_id, steps, visited = stack.pop()
        node = spec.nodes_by_id.get(node_id)
        if node is None or node.is_terminal:
            yield TreePath(steps, node_id, None, spec)
            continue
        for fields, decision in node.requirements.missing_field_outcomes():
            yield TreePath(steps, node_id, MissingFields(node_id, tuple(fields), decision), spec)
        later = [
            (
                branch.next,
                (*steps, PathStep(node_id, i, branch.clause, branch.next)),
                visited | {branch.next},
            )
            for i, branch in enumerate(node.branches)
            if branch.next not in visited
        ]
        stack.extend(reversed(later))


def iter_loop_paths(spec: Spec) -> Iterator[TreePath]:
    """:func:`enumerate_loop_paths`, lazily and unbounded (an explicit stack)."""
    if not spec.decision_tree:
        return
    stack: list[tuple[str, tuple[PathStep, ...], frozenset[str], bool]] = [
        (spec.root.node_id, (), frozenset({spec.root.node_id}), False)
    ]
    while stack:
        node_id, steps, visited, looped = stack.pop()
        node = spec.nodes_by_id.get(node_id)
        if node is None or node.is_terminal:
            if looped:
                yield TreePath(steps, node_id, None, spec)
            continue
        if looped and not any(s.node == node_id for s in steps):
            # a stop at a node the path already passed cannot happen: its first visit had the
            # fields (a withheld field is withheld from the whole conversation)
            for fields, decision in node.requirements.missing_field_outcomes():
                yield TreePath(
                    steps, node_id, MissingFields(node_id, tuple(fields), decision), spec
                )
        later = []
        for i, branch in enumerate(node.branches):
            again = branch.next in visited
            if again and looped:
                continue
            step = PathStep(node_id, i, branch.clause, branch.next, loop=again)
            later.append((branch.next, (*steps, step), visited | {branch.next}, looped or again))
        stack.extend(reversed(later))


def loop_branches(spec: Spec) -> list[tuple[str, int]]:
    """``(node, branch index)`` of branches that lie on no loop-free path: they only lead back
    to an ancestor (or only through one). Loop paths (:func:`enumerate_loop_paths`) take them."""
    on_paths = {(s.node, s.branch) for p in enumerate_paths(spec) for s in p.steps}
    return [
        (n.node_id, i)
        for n in spec.decision_tree
        for i, _ in enumerate(n.branches)
        if (n.node_id, i) not in on_paths
    ]
