"""How agentprop reads a node's ``requirements`` (and what it does not check).

Three readings: ordering anchors (:func:`anchor_overlap`), exits that end a node's flow
(:func:`exit_cut`, :func:`binding_downgrades`) and limits with a trace meaning
(:func:`requirement_verdicts`). Every other key is named by :func:`unchecked_requirements`, so
nothing is silently skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentprop._spec.model import Node, Spec, derived

# ----------------------------------------------------------------------------- anchors


def anchor_overlap(
    previous: Sequence[str], tools: Sequence[str], repeat: Sequence[str] = ()
) -> int:
    """How many leading tools of ``tools`` are the ordering anchor on ``previous``: the longest
    prefix of ``tools`` that is a suffix of ``previous`` and names no tool of ``repeat``."""
    for k in range(min(len(previous), len(tools)), 0, -1):
        if list(previous[-k:]) == list(tools[:k]) and not set(tools[:k]) & set(repeat):
            return k
    return 0


# ----------------------------------------------------------------------------- requirement keys

CHECKED_REQUIREMENTS: dict[str, str] = {
    "must_call_tools_in_order": "the turn's calls contain the node's tools in order "
    "(anchors read as one call)",
    "may_call_tools": "the tools are permitted on paths through the node",
    "must_not_use": "no tool argument contains the phrases",
    "if_missing_fields": "a path stops at the node with the fields withheld",
    "on_missing_fields_decision": "the decision of that stop",
    "must_have": "a path stops at the node with the field withheld",
    "max_clarify_turns": "clarifying decisions per conversation through the node",
    "max_clarifying_questions": "clarifying decisions per conversation through the node",
    "max_retries": "repeated calls of the tools the node retries",
}
"""Requirement keys agentprop checks, and how. ``on_missing_<field>_decision`` (for a field of
``must_have``), ``max_<x>_retries`` and ``max_<x>_rewrites`` are checked too."""

_RETRY_KEY = re.compile(r"^max_(?:[a-z0-9_]+_)?(?:retries|rewrites)$")


def _is_checked(key: str, node: Node) -> bool:
    if key in CHECKED_REQUIREMENTS or _RETRY_KEY.match(key):
        return True
    m = re.fullmatch(r"on_missing_(.+)_decision", key)
    return m is not None and m.group(1) in node.requirements.must_have


def requirement_keys(node: Node) -> list[str]:
    """The requirement keys agentprop reads on ``node`` (what a misspelt key is compared with)."""
    fields = list(type(node.requirements).model_fields)
    return list(
        dict.fromkeys(
            [
                *fields,
                *CHECKED_REQUIREMENTS,
                *(f"on_missing_{f}_decision" for f in node.requirements.must_have),
            ]
        )
    )


@dataclass(frozen=True)
class Unchecked:
    node: str
    node_index: int
    key: str

    @property
    def clause(self) -> str:
        return f"{self.node}.requirements.{self.key}"


def unchecked_requirements(spec: Spec) -> list[Unchecked]:
    """Every requirement key of every node that agentprop does not check, in spec order."""
    out: list[Unchecked] = []
    for i, node in enumerate(spec.decision_tree):
        req = node.requirements
        keys = [k for k in type(req).model_fields if k in req.model_fields_set] + list(
            req.model_extra or {}
        )
        for key in keys:
            if not _is_checked(key, node):
                out.append(Unchecked(node.node_id, i, key))
    for lim in _limits(spec, unusable=True):
        if not lim.counted:
            out.append(Unchecked(lim.node, lim.node_index, lim.key))
    return out


@dataclass(frozen=True)
class RequirementLimit:
    node: str
    node_index: int
    key: str
    kind: str
    """``clarify`` (decisions counted) or ``retry`` (tool calls counted)."""
    limit: int
    counted: list[str]
    """The decisions (clarify) or tools (retry) counted."""
    nodes: list[str]
    """The nodes whose presence on a path puts it in scope."""

    @property
    def clause(self) -> str:
        return f"decision_tree.{self.node}.requirements.{self.key}"


def _limits(spec: Spec, *, unusable: bool = False) -> list[RequirementLimit]:
    out: list[RequirementLimit] = []
    clarify = [d for d in spec.response_contract.decision_enum if "CLARIFY" in d.upper()]
    for i, node in enumerate(spec.decision_tree):
        extras = node.requirements.model_extra or {}
        for key, value in extras.items():
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            if key in ("max_clarify_turns", "max_clarifying_questions"):
                out.append(
                    RequirementLimit(
                        node.node_id,
                        i,
                        key,
                        "clarify",
                        value,
                        clarify if len(clarify) == 1 else [],
                        [node.node_id],
                    )
                )
            elif _RETRY_KEY.match(key):
                own = list(node.requirements.must_call_tools_in_order)
                targets = [b.next for b in node.branches if b.next in spec.nodes_by_id]
                counted = own or [
                    t
                    for n in targets
                    for t in spec.nodes_by_id[n].requirements.must_call_tools_in_order
                ]
                scope = [node.node_id] + (
                    []
                    if own
                    else [
                        n
                        for n in targets
                        if spec.nodes_by_id[n].requirements.must_call_tools_in_order
                    ]
                )
                out.append(
                    RequirementLimit(
                        node.node_id, i, key, "retry", value, list(dict.fromkeys(counted)), scope
                    )
                )
    return out if unusable else [lim for lim in out if lim.counted]


def requirement_limits(spec: Spec) -> list[RequirementLimit]:
    """The clarifying-turn and retry bounds of the spec that agentprop checks."""
    return list(derived(spec, "requirement_limits", lambda: tuple(_limits(spec))))


def retry_allowance(
    spec: Spec, tool: str, failures: Sequence[Mapping[str, Any]], attempts: int
) -> int:
    """Extra calls the tool's own ``retry_policy`` permits when the world injects a failure it
    retries on (each logical attempt may be retried that many times)."""
    policy = spec.tools_by_name[tool].retry_policy if tool in spec.tools_by_name else None
    if policy is None or not policy.retries:
        return 0
    if any(f.get("tool") == tool and f.get("mode") in policy.on for f in failures):
        return policy.retries * attempts
    return 0
