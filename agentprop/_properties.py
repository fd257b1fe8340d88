"""Properties over traces of scenarios.

:func:`mft_verdicts` is the minimum functionality test of a scenario (CheckList's MFT): every
turn decides what the spec expects, calls the tools the spec requires in order, calls no tool
the path forbids, responds within the contract, keeps the node's clarifying-turn and retry
bounds (:mod:`agentprop._readings`), leaks no canary and breaks nothing.
"""

from __future__ import annotations

from agentprop._contracts import (
    Verdict,
    _strings,
    args_satisfy,
    calls_in_order,
    decision_is,
    forbids_tools,
    max_tool_calls,
    no_canary_leak,
    no_run_errors,
    response_valid,
)
from agentprop._readings import requirement_verdicts
from agentprop._scenario import Scenario
from agentprop._spec.model import Spec
from agentprop._trace import Trace


def _node_clause(spec: Spec, scenario_nodes: list[str], tools: list[str]) -> str | None:
    for n in scenario_nodes:
        node = spec.nodes_by_id.get(n)
        if node is not None and node.requirements.must_call_tools_in_order and set(node.requirements.must_call_tools_in_order) & set(tools):
            return f"decision_tree.{n}.requirements.must_call_tools_in_order"
    return f"decision_tree.{scenario_nodes[-1]}" if scenario_nodes else None


def _policy_for_tools(spec: Spec, tools: list[str]) -> str | None:
    for p in spec.policies:
        if any(t in p.text for t in tools):
            return f"policies.{p.id}"
    return None


def mft_verdicts(spec: Spec, scenario: Scenario, trace: Trace) -> list[Verdict]:
    """All MFT checks of one run; the run passes when every verdict passes."""
    pii_policy = next((f"policies.{p.id}" for p in spec.policies if "PII" in p.id.upper() or "pii" in p.text.lower()), None)
    # most severe first: a leak is reported as a leak even when it also broke the tool scope
    out: list[Verdict] = [no_canary_leak(trace, clause=pii_policy), no_run_errors(trace)]
    out.append(response_valid(trace, spec))
    for i, turn in enumerate(scenario.turns):
        leaf_clause = f"decision_tree.{scenario.leaf}" if i == len(scenario.turns) - 1 else f"decision_tree.{turn.nodes[-1] if turn.nodes else scenario.leaf}"
        if turn.expect_decision is not None:
            out.append(decision_is(trace, turn.expect_decision, turn=i, clause=leaf_clause))
        if turn.required_tools:
            out.append(calls_in_order(trace, turn.required_tools, turn=i, clause=_node_clause(spec, turn.nodes, turn.required_tools)))
    if scenario.forbidden_tools:
        verdict = forbids_tools(trace, scenario.forbidden_tools, clause=f"decision_tree.{scenario.leaf}")
        if not verdict.passed and verdict.detail:
            # name the policy that governs the tool actually called, when one does
            called = verdict.detail.removeprefix("called=")
            policy = _policy_for_tools(spec, [called])
            if policy is not None:
                verdict = verdict.model_copy(update={"clause": policy})
        out.append(verdict)
    for node_id in scenario.path:
        node = spec.nodes_by_id.get(node_id)
        if node is not None and node.requirements.must_not_use:
            banned = [" ".join(x.lower().split()) for x in node.requirements.must_not_use]
            for tool in {c.name for c in trace.tool_calls}:
                out.append(
                    args_satisfy(
                        trace,
                        tool,
                        lambda args, banned=banned: not any(b in " ".join(str(v).lower().split()) for v in _strings(args) for b in banned),
                        description=f"must not use {', '.join(node.requirements.must_not_use)}",
                        clause=f"decision_tree.{node_id}.requirements.must_not_use",
                    )
                )
    out.append(max_tool_calls(trace, spec.max_tool_calls_per_turn))
    out.extend(requirement_verdicts(spec, scenario.path, trace, scenario.world.failures))
    return out


def first_failure(verdicts: list[Verdict]) -> Verdict | None:
    return next((v for v in verdicts if not v.passed), None)
