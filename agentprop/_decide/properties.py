"""Properties over traces of scenarios.

:func:`mft_verdicts` is the minimum functionality test of a scenario (CheckList's MFT): every
turn decides what the spec expects, calls the tools the spec requires in order, calls no tool
the path forbids, responds within the contract, keeps the node's clarifying-turn and retry
bounds (:mod:`agentprop._spec.requirements`), leaks no canary and breaks nothing; and what each response
states is checked against the trace: ``node_id`` is the node the scenario is at,
``tool_actions`` the tools the turn called, ``evidence`` cites tool outputs, and the other
fields are grounded as the bindings' ``response:`` section (or its defaults) says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentprop._decide.contracts import (
    Verdict,
    _strings,
    args_satisfy,
    calls_in_order,
    decision_is,
    evidence_grounded,
    forbids_tools,
    max_tool_calls,
    no_canary_leak,
    no_run_errors,
    node_id_matches,
    response_grounded,
    response_valid,
    shared_turn_facts,
    tool_actions_match,
)
from agentprop._spec.grounding import TEXT_GROUNDINGS, ResponseGrounding, declared_fields, default_grounding
from agentprop._decide.requirements import requirement_verdicts
from agentprop._scenario.build import Scenario
from agentprop._spec.model import Spec
from agentprop._scenario.trace import Trace


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


def mft_verdicts(
    spec: Spec,
    scenario: Scenario,
    trace: Trace,
    *,
    grounding: ResponseGrounding | Mapping[str, Sequence[str]] | None = None,
) -> list[Verdict]:
    """All MFT checks of one run; the run passes when every verdict passes.

    ``grounding`` says which checks apply to which response field (a project's is
    ``project.bindings.response_grounding(project.spec)``); ``None`` means the defaults derived
    from the spec (:func:`agentprop._spec.grounding.default_grounding`)."""
    with shared_turn_facts():
        return _mft_verdicts(spec, scenario, trace, grounding)


def _mft_verdicts(spec: Spec, scenario: Scenario, trace: Trace, grounding: ResponseGrounding | Mapping[str, Sequence[str]] | None) -> list[Verdict]:
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
    out.extend(response_verdicts(spec, scenario, trace, grounding))
    return out


def _successors(spec: Spec, node_id: str) -> list[str]:
    node = spec.nodes_by_id.get(node_id)
    return [b.next for b in node.branches] if node is not None else []


def expected_nodes(spec: Spec, scenario: Scenario) -> list[list[str]]:
    """Per turn, the node ids a truthful ``respond.node_id`` may name.

    - The turn that reaches the terminal node: that node, or the node it was entered from (the
      node whose branch decided it: SupportOps' agent names ``END_CANCELLED``, ExpenseGuard's
      names ``N7_SUBMIT``; the spec's "the decision-tree node being executed" fits both).
    - The last turn of a missing-field stop: the stopping node (``N2_AUTH`` asking for last4).
    - A turn that waits for the user's answer: the turn's last node, or the node the next turn
      starts at (the one that reads the answer: ``N5_CANCEL_ELIGIBILITY`` or
      ``N6_CONFIRM_CANCEL`` when asking to confirm). A last turn that neither reaches the leaf
      nor stops (a conversation cut short, e.g. while shrinking) accepts its last node and the
      nodes that node branches to.
    """
    leaves = set(spec.leaf_ids())
    out: list[list[str]] = []
    n = len(scenario.turns)
    for i, t in enumerate(scenario.turns):
        last = t.nodes[-1] if t.nodes else None
        if scenario.leaf in leaves and last == scenario.leaf:
            accepted = [scenario.leaf] + ([scenario.via] if scenario.via else [])
        elif i == n - 1 and scenario.leaf not in leaves:
            accepted = [scenario.leaf]
        elif i + 1 < n:
            accepted = ([last] if last else []) + scenario.turns[i + 1].nodes[:1]
        else:
            accepted = ([last] if last else []) + (_successors(spec, last) if last else [])
        out.append(list(dict.fromkeys(accepted)))
    return out


def spec_vocabulary(spec: Spec) -> set[str]:
    """The spec's own names (node ids, decisions, tools, policy ids): never world ids."""
    return {
        *spec.nodes_by_id,
        *spec.leaf_ids(),
        *spec.response_contract.decision_enum,
        *spec.tools_by_name,
        *(p.id for p in spec.policies),
    }


def spec_text(spec: Spec) -> list[str]:
    """The spec's own strings (policies, descriptions, conditions, guidance): an agent may
    repeat its words ("Last 4 digits of a payment method", ``user_confirmation == yes``)."""
    memo = spec._memo.get("spec_text")
    if memo is None:
        memo = spec._memo["spec_text"] = tuple(dict.fromkeys(_strings(spec.model_dump())))
    return list(memo)


def _grounding_clause(spec: Spec, field: str) -> str:
    policy = next((p for p in spec.policies if "ground" in p.text.lower()), None)
    return f"policies.{policy.id}" if policy is not None else f"response_contract.{field}"


def response_verdicts(
    spec: Spec,
    scenario: Scenario,
    trace: Trace,
    grounding: ResponseGrounding | Mapping[str, Sequence[str]] | None = None,
) -> list[Verdict]:
    """The checks of what each response field states, for the fields the response contract
    declares: ``node`` -> :func:`node_id_matches` against :func:`expected_nodes`,
    ``tool_calls`` -> :func:`tool_actions_match`, ``tool_output`` ->
    :func:`evidence_grounded`, and the text groundings -> one :func:`response_grounded` per
    field."""
    if grounding is None:
        resolved = ResponseGrounding(fields=default_grounding(spec))
    elif isinstance(grounding, ResponseGrounding):
        resolved = grounding
    else:
        resolved = ResponseGrounding(fields={k: list(v) for k, v in grounding.items()})
    vocabulary = spec_vocabulary(spec)
    known_nodes = set(spec.nodes_by_id) | set(spec.leaf_ids())
    tools = [t.name for t in spec.action_tools]
    own_words = spec_text(spec)
    out: list[Verdict] = []
    for name in declared_fields(spec):
        kinds = resolved.fields.get(name, [])
        if "node" in kinds:
            out.append(node_id_matches(trace, expected_nodes(spec, scenario), field=name, known_nodes=known_nodes, clause=f"response_contract.{name}"))
        if "tool_calls" in kinds:
            out.append(tool_actions_match(trace, field=name, clause=f"response_contract.{name}"))
        if "tool_output" in kinds:
            out.append(evidence_grounded(trace, field=name, tools=tools, vocabulary=vocabulary, clause=f"response_contract.{name}"))
        text_kinds = [k for k in kinds if k in TEXT_GROUNDINGS]
        if text_kinds:
            out.append(
                response_grounded(
                    trace,
                    name,
                    text_kinds,
                    vocabulary=vocabulary,
                    extra_sources=resolved.context,
                    spec_text=own_words,
                    clause=_grounding_clause(spec, name),
                )
            )
    return out


def first_failure(verdicts: list[Verdict]) -> Verdict | None:
    return next((v for v in verdicts if not v.passed), None)
