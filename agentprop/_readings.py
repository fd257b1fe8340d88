"""How agentprop reads a node's ``requirements`` (and what it does not check).

Three readings, each reported where it applies (``agentprop lint``, ``agentprop run``):

Ordering anchors
    A node whose ``must_call_tools_in_order`` starts with the tools the node before it on the
    path ended on repeats them to say where its own calls go, not to ask for second calls:
    ``N2 [verify_patient, get_prescription]`` then ``N3 [get_prescription, check_interactions]``
    expects ``verify_patient, get_prescription, check_interactions``, one call each.
    :func:`anchor_overlap` is that rule; a revisited node (a loop) and a tool the bindings list
    under ``nodes: NODE: repeat_calls:`` are second calls.
Exits that end a node's flow
    A branch that goes to a terminal node on a value the bindings realise through a tool's
    output (``verified == false``) requires the node's tools up to that tool; the tools the
    node lists after it are permitted, not required, only when the value is off the happy path
    (a failure, or a value other than the one the bindings' ``world:`` gives). On the happy
    value every tool stays required. :func:`exit_cut` is the rule; :func:`binding_downgrades`
    lists every place it applies, for lint.
Limits with a trace meaning
    ``max_clarify_turns`` / ``max_clarifying_questions`` bound the clarifying decisions of a
    conversation through the node; ``max_retries``, ``max_<x>_retries`` and
    ``max_<x>_rewrites`` bound repeated calls of the tools the node retries (its own, or those
    of the node it loops back to). :func:`requirement_verdicts` checks them; every other key is
    named by :func:`unchecked_requirements`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentprop._bindings import Bindings, VariableBinding
from agentprop._contracts import Verdict, _fail, _ok
from agentprop._spec.lint import LintFinding
from agentprop._spec.model import Node, Spec
from agentprop._spec.when import _equal, variables
from agentprop._trace import Trace
from agentprop._world import World, get_path

# ----------------------------------------------------------------------------- anchors


def anchor_overlap(previous: Sequence[str], tools: Sequence[str], repeat: Sequence[str] = ()) -> int:
    """How many leading tools of ``tools`` are the ordering anchor on ``previous``: the longest
    prefix of ``tools`` that is a suffix of ``previous`` and names no tool of ``repeat``."""
    for k in range(min(len(previous), len(tools)), 0, -1):
        if list(previous[-k:]) == list(tools[:k]) and not set(tools[:k]) & set(repeat):
            return k
    return 0


# ----------------------------------------------------------------------------- exits


@dataclass(frozen=True)
class ExitCut:
    """The tools up to ``index`` are required; the branch left the happy path on ``variable``."""

    index: int
    variable: str
    tool: str
    value: Any
    happy: Any


def _lookup(table: Mapping[Hashable, Any], value: Any) -> Any:
    for k, v in table.items():
        if _equal(k, value) or k == value:
            return v
    raise KeyError(value)


def _base_output(spec: Spec, bindings: Bindings, tool: str) -> Any:
    cache = bindings._base_outputs
    if tool not in cache:
        world = World(spec=spec, seed=0, overrides={t: dict(v) for t, v in bindings.world.items()})
        cache[tool] = world.default_output(tool)
    return cache[tool]


def happy_value(spec: Spec, bindings: Bindings, var: VariableBinding) -> Any:
    """The value the bindings' base world gives a field-bound variable (``None``: unknown)."""
    if var.world is None or var.world.field is None:
        return None
    try:
        return get_path(_base_output(spec, bindings, var.world.tool), var.world.field)
    except (KeyError, IndexError, TypeError):
        return None


def off_happy_path(spec: Spec, bindings: Bindings, var: VariableBinding, value: Any) -> tuple[bool, Any]:
    """Whether ``value`` leaves the happy path, and the happy value it is compared with.

    A ``field:`` binding leaves it when the value differs from the base world's; a ``values:``
    binding when its effect injects a failure or sets a field to another value than the base
    world's. An unknown happy value never counts as leaving it.
    """
    if var.world is None:
        return False, None
    if var.world.field is not None:
        happy = happy_value(spec, bindings, var)
        if happy is None:
            return False, None
        return not (_equal(value, happy) or value == happy), happy
    try:
        effect = _lookup(var.world.values or {}, value)
    except KeyError:
        return False, None
    if effect.failure is not None:
        return True, "no failure"
    base = _base_output(spec, bindings, var.world.tool)
    for field, v in effect.set.items():
        try:
            if get_path(base, field) != v:
                return True, get_path(base, field)
        except (KeyError, IndexError, TypeError):
            return True, None
    return False, None


def exit_cut(spec: Spec, bindings: Bindings, node_id: str, branch: int, tools: Sequence[str], env: Mapping[str, Any]) -> ExitCut | None:
    """Where branch ``branch`` of ``node_id`` (which ends the conversation) cuts the node's
    required ``tools``: after the last of them whose output the branch reads, when one of the
    values read is off the happy path. ``None``: every tool stays required."""
    clause = spec.nodes_by_id[node_id].branches[branch].clause
    reads: list[tuple[int, str, str]] = []
    leaving: list[tuple[str, str, Any, Any]] = []
    for name in variables(clause):
        var = bindings.variables.get(name)
        if var is None or var.world is None or var.world.tool not in tools:
            continue
        reads.append((list(tools).index(var.world.tool), name, var.world.tool))
        off, happy = off_happy_path(spec, bindings, var, env.get(name))
        if off:
            leaving.append((name, var.world.tool, env.get(name), happy))
    if not reads or not leaving:
        return None
    index = max(i for i, _, _ in reads)
    name, tool, value, happy = leaving[0]
    return ExitCut(index=index, variable=name, tool=tool, value=value, happy=happy)


def _show(value: Any) -> str:
    """A value as the YAML files write it (``false``, ``null``, ``3``, ``failed``)."""
    return json.dumps(value) if isinstance(value, (bool, type(None))) else str(value)


@dataclass(frozen=True)
class Downgrade:
    """A tool a node requires that a path reads as permitted (see :func:`exit_cut`)."""

    node: str
    branch: int
    when: str
    leaf: str
    variable: str
    tool: str
    value: Any
    happy: Any
    tools: list[str]

    def message(self) -> str:
        happy = "no failure" if self.happy == "no failure" else _show(self.happy)
        return (
            f"variable {self.variable} is {self.tool}'s output: {self.node} leaves to {self.leaf} on "
            f"`{self.when}` with {self.variable} = {_show(self.value)}, off the happy path (the bindings' "
            f"world gives {happy}); so {', '.join(self.tools)}, which {self.node} requires after "
            f"{self.tool}, is read as allowed, not required, on that path"
        )

    def fix(self) -> str:
        listed = ", ".join(self.tools)
        return (
            f"if {self.node} must still call {listed} there, route the branch in the spec through a node "
            f"that requires {'it' if len(self.tools) == 1 else 'them'}, or add `nodes: {{{self.leaf}: "
            f"{{must_call_tools_in_order: [{listed}]}}}}` to the bindings (written out: nodes: {self.leaf}: "
            f"must_call_tools_in_order: [{listed}]; every path into {self.leaf} then requires it)"
        )


def binding_downgrades(spec: Spec, bindings: Bindings) -> list[Downgrade]:
    """Every (node, branch) where a binding makes a required tool permitted, on the paths the
    bindings realise, in tree order."""
    from agentprop._paths import enumerate_paths
    from agentprop._scenario import Unsatisfiable, _node_tools, solve

    leaves = set(spec.leaf_ids())
    out: dict[tuple[str, int], Downgrade] = {}
    for path in enumerate_paths(spec):
        try:
            env = solve(spec, bindings, path)
        except Unsatisfiable:
            continue
        for step in path.steps:
            if step.next not in leaves or (step.node, step.branch) in out:
                continue
            tools = _node_tools(spec, bindings, step.node)
            cut = exit_cut(spec, bindings, step.node, step.branch, tools, env)
            if cut is None or not tools[cut.index + 1 :]:
                continue
            out[(step.node, step.branch)] = Downgrade(
                node=step.node,
                branch=step.branch,
                when=spec.nodes_by_id[step.node].branches[step.branch].when,
                leaf=step.next,
                variable=cut.variable,
                tool=cut.tool,
                value=cut.value,
                happy=cut.happy,
                tools=list(tools[cut.index + 1 :]),
            )
    order = {n.node_id: i for i, n in enumerate(spec.decision_tree)}
    return sorted(out.values(), key=lambda d: (order.get(d.node, 0), d.branch))


def binding_findings(bindings: Bindings, spec: Spec) -> list[LintFinding]:
    """B002 notes for ``agentprop lint``: each :class:`Downgrade` at its variable's binding line."""
    out: list[LintFinding] = []
    src = bindings._src
    for d in binding_downgrades(spec, bindings):
        loc = src.location(("variables", d.variable), key=True) if src is not None else None
        out.append(
            LintFinding(
                code="B002",
                severity="info",
                message=d.message(),
                file=str(loc.path) if loc is not None and loc.path else (str(bindings.path) if bindings.path else None),
                line=loc.line if loc is not None else None,
                column=loc.column if loc is not None else None,
                fix=d.fix(),
            )
        )
    return out


# ----------------------------------------------------------------------------- requirement keys

CHECKED_REQUIREMENTS: dict[str, str] = {
    "must_call_tools_in_order": "the turn's calls contain the node's tools in order (anchors read as one call)",
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
        keys = [k for k in type(req).model_fields if k in req.model_fields_set] + list(req.model_extra or {})
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
                out.append(RequirementLimit(node.node_id, i, key, "clarify", value, clarify if len(clarify) == 1 else [], [node.node_id]))
            elif _RETRY_KEY.match(key):
                own = list(node.requirements.must_call_tools_in_order)
                targets = [b.next for b in node.branches if b.next in spec.nodes_by_id]
                counted = own or [t for n in targets for t in spec.nodes_by_id[n].requirements.must_call_tools_in_order]
                scope = [node.node_id] + ([] if own else [n for n in targets if spec.nodes_by_id[n].requirements.must_call_tools_in_order])
                out.append(RequirementLimit(node.node_id, i, key, "retry", value, list(dict.fromkeys(counted)), scope))
    return out if unusable else [lim for lim in out if lim.counted]


def requirement_limits(spec: Spec) -> list[RequirementLimit]:
    """The clarifying-turn and retry bounds of the spec that agentprop checks."""
    memo = spec._memo.get("requirement_limits")
    if memo is None:
        memo = spec._memo["requirement_limits"] = tuple(_limits(spec))
    return list(memo)


def _retry_allowance(spec: Spec, tool: str, failures: Sequence[Mapping[str, Any]], attempts: int) -> int:
    """Extra calls the tool's own ``retry_policy`` permits when the world injects a failure it
    retries on (each logical attempt may be retried that many times)."""
    policy = spec.tools_by_name[tool].retry_policy if tool in spec.tools_by_name else None
    if policy is None or not policy.retries:
        return 0
    if any(f.get("tool") == tool and f.get("mode") in policy.on for f in failures):
        return policy.retries * attempts
    return 0


def requirement_verdicts(spec: Spec, path: Sequence[str], trace: Trace, failures: Sequence[Mapping[str, Any]] = ()) -> list[Verdict]:
    """The bounds of :func:`requirement_limits` that apply to a scenario through ``path``."""
    out: list[Verdict] = []
    for lim in requirement_limits(spec):
        if not set(lim.nodes) & set(path):
            continue
        if lim.kind == "clarify":
            asked = [i for i, d in enumerate(trace.decisions) if d in lim.counted]
            names = "/".join(lim.counted)
            if len(asked) > lim.limit:
                out.append(_fail(lim.key, f"the conversation has {len(asked)} clarifying turns ({names}), at most {lim.limit}: turns {', '.join(str(i + 1) for i in asked)}", lim.clause, asked[lim.limit], detail=f"clarify={len(asked)}"))
            else:
                out.append(_ok(lim.key, f"{len(asked)} clarifying turn(s) ({names}), at most {lim.limit}", lim.clause))
            continue
        for tool in lim.counted:
            calls = [c for c in trace.tool_calls if c.name == tool]
            allowed = 1 + lim.limit + _retry_allowance(spec, tool, failures, 1 + lim.limit)
            if len(calls) > allowed:
                extra = "" if allowed == 1 + lim.limit else f" (plus {allowed - 1 - lim.limit} for its retry_policy on the injected failure)"
                out.append(_fail("max_retries", f"{tool} was called {len(calls)} times: {len(calls) - 1} retries, at most {lim.limit}{extra}", lim.clause, calls[allowed].turn_index, detail=f"{tool}x{len(calls)}"))
            else:
                out.append(_ok("max_retries", f"{tool} was called {len(calls)} time(s), at most {allowed}", lim.clause))
    return out
