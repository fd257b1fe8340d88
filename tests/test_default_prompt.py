"""The prompt agentprop writes from a spec (no prompt file) states its nodes and decisions."""

from __future__ import annotations

from pathlib import Path

from agentprop._agents.model_agent import default_system_prompt
from agentprop._agents.project import load_project

ROOT = Path(__file__).resolve().parents[1]


def test_the_quickstart_prompt_states_the_tree_with_node_ids_and_decisions() -> None:
    project = load_project(ROOT / "examples" / "quickstart")
    text = default_system_prompt(project.spec, project.bindings.context)
    tree = text[text.index("Decision tree:") :].splitlines()
    assert tree[0].startswith("Decision tree: start at N1_ROUTE on every turn")
    assert "`respond` with that node's id as `node_id`" in tree[0]
    assert tree[1:7] == [
        "- N1_ROUTE: Decide what the user needs.",
        "    if intent == answerable -> END_ANSWERED",
        "    if intent == unclear -> END_CLARIFY",
        "- END_ANSWERED (ends the turn; decision ANSWERED): Answer from the tools' outputs.",
        "    call, in this order: get_order",
        "- END_CLARIFY (ends the turn; decision CLARIFY): Ask the user what they mean.",
    ]
    assert text.rstrip().endswith("its `decision` is one of: ANSWERED, CLARIFY.")


def test_missing_field_stops_and_otherwise_branches_are_stated() -> None:
    project = load_project(ROOT / "examples" / "supportops")
    text = default_system_prompt(project.spec, project.bindings.context)
    assert "    if last4, zip are missing: stop here with decision REQUEST_AUTH_INFO" in text
    assert "    otherwise -> END_BILLING_ANSWER" in text
    assert "- END_TICKET (ends the turn; decision TICKET_CREATED)" in text
    # every node of the tree is named in the prompt
    assert all(f"- {node.node_id}" in text for node in project.spec.decision_tree)
