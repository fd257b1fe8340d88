"""One reading of a retry: a retry node of the tree and a tool's ``retry_policy`` that describe
the same retry are one retry.

Then the case expects the tool twice, not three times, and no separate policy retry case is
built. :func:`tree_retries` finds such retries with bindings, :func:`spec_retries` without (for
lint L017).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from agentprop._spec.bindings import Bindings, node_tools
from agentprop._spec.model import Spec, derived
from agentprop._spec.when import Literal, Symbol, WhenClause, leaves, values_equal, variables


@dataclass(frozen=True)
class TreeRetry:
    """Branch ``branch`` of ``node`` retries ``tool`` after failure ``mode`` at ``target``."""

    tool: str
    mode: str
    node: str
    branch: int
    target: str
    when: str

    @property
    def clause(self) -> str:
        return f"decision_tree.{self.node}.branches[{self.branch}]"

    def policy_too(self, spec: Spec) -> bool:
        """Whether the tool's ``retry_policy`` retries the same failure mode."""
        policy = (
            spec.tools_by_name[self.tool].retry_policy if self.tool in spec.tools_by_name else None
        )
        return policy is not None and policy.retries > 0 and self.mode in policy.on


def _calls_again(spec: Spec, bindings: Bindings | None, target: str) -> list[str]:
    """The tools ``target`` calls, or, for a retry node without tools of its own
    (``N3A_RETRY_LOOKUP`` looping back to ``N3_PRESCRIPTION``), those of the nodes it leads to."""
    own = node_tools(spec, bindings, target)
    if own:
        return own
    node = spec.nodes_by_id.get(target)
    return [
        t
        for b in (node.branches if node is not None else [])
        for t in node_tools(spec, bindings, b.next)
    ]


def _named(clause: WhenClause) -> list[Any]:
    if clause.expr is None:
        return []
    return [
        leaf.value if isinstance(leaf, Literal) else leaf.name
        for leaf in leaves(clause.expr)
        if isinstance(leaf, (Literal, Symbol))
    ]


def _lookup(table: Mapping[Hashable, Any], value: Any) -> Any:
    for k, v in table.items():
        if values_equal(k, value) or k == value:
            return v
    raise KeyError(value)


def tree_retries(spec: Spec, bindings: Bindings) -> list[TreeRetry]:
    """Every branch that retries a tool after a failure the bindings inject, in tree order."""
    return list(
        derived(spec, str(("tree_retries", id(bindings))), lambda: _tree_retries(spec, bindings))
    )


def _tree_retries(spec: Spec, bindings: Bindings) -> tuple[TreeRetry, ...]:
    out: list[TreeRetry] = []
    for node in spec.decision_tree:
        tools = node_tools(spec, bindings, node.node_id)
        for k, branch in enumerate(node.branches):
            again = _calls_again(spec, bindings, branch.next)
            for name in variables(branch.clause):
                var = bindings.variables.get(name)
                if var is None or var.world is None or var.world.values is None:
                    continue
                tool = var.world.tool
                if tool not in tools or tool not in again:
                    continue
                for value in _named(branch.clause):
                    try:
                        effect = _lookup(var.world.values, value)
                    except KeyError:
                        continue
                    if effect.failure is not None:
                        out.append(
                            TreeRetry(
                                tool, effect.failure, node.node_id, k, branch.next, branch.when
                            )
                        )
    return tuple(dict.fromkeys(out))


def spec_retries(spec: Spec) -> list[TreeRetry]:
    """Without bindings: every branch whose condition names a failure mode of a tool the node
    calls (``lookup_status == timeout``, or a variable such as ``rx_timeout``) and leads to a
    node that calls the tool again (or to a retry node that loops back to one)."""
    return list(derived(spec, "spec_retries", lambda: _spec_retries(spec)))


def _spec_retries(spec: Spec) -> tuple[TreeRetry, ...]:
    out: list[TreeRetry] = []
    for node in spec.decision_tree:
        tools = node_tools(spec, None, node.node_id)
        for k, branch in enumerate(node.branches):
            if branch.clause.expr is None:
                continue
            named = {str(v) for v in _named(branch.clause)}
            names = [n.lower() for n in variables(branch.clause)]
            again = _calls_again(spec, None, branch.next)
            for tool in tools:
                if tool not in again or tool not in spec.tools_by_name:
                    continue
                for mode in spec.tools_by_name[tool].failure_modes:
                    if mode in named or any(mode.lower() in n for n in names):
                        out.append(TreeRetry(tool, mode, node.node_id, k, branch.next, branch.when))
    return tuple(dict.fromkeys(out))
