"""Scenarios from the SupportOps tree: which leaves are realisable, solved values, messages,
worlds and per-turn expectations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentprop._scenario.build import (
    Scenario,
    Unsatisfiable,
    build_scenario,
    leaf_scenarios,
    make_world,
    render_template,
)
from agentprop._scenario.solver import solve
from agentprop._scenario.world import get_path
from agentprop._spec.bindings import Bindings, load_bindings
from agentprop._spec.model import Spec
from agentprop._spec.paths import TreePath, enumerate_paths, loop_branches
from agentprop._spec.when import evaluate
from agentprop.errors import ToolError

# Hand-derived from supportops/v1: every (terminal node <- node it is entered from) plus every
# missing-field stop (N2_AUTH needs last4+zip, N5 order_id, N8 new_address).
EXPECTED_IDS = {
    "END_REFUSE_PII<-N1_INTENT",
    "N2_AUTH:missing_last4+zip",
    "END_REFUSE_AUTH<-N2_AUTH",
    "N5_CANCEL_ELIGIBILITY:missing_order_id",
    "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY",
    "END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL",
    "END_CANCELLED<-N7_CANCEL",
    "END_TICKET<-N7_CANCEL",
    "N8_ADDRESS_ELIGIBILITY:missing_new_address",
    "END_ADDRESS_DENIED<-N8_ADDRESS_ELIGIBILITY",
    "END_ADDRESS_UPDATED<-N9_UPDATE_ADDRESS",
    "END_BILLING_ANSWER<-N3_BILLING",
    "END_TICKET<-N4_CLARIFY",
}
# N3_BILLING is entered with intent == billing_question, then asks intent == pii_request;
# N9's failure path needs verify_identity, get_account, get_plan_rules, update_address and
# create_ticket in one turn, over max_tool_calls_per_turn = 4.
PROBLEM_IDS = {"END_REFUSE_PII<-N3_BILLING", "END_TICKET<-N9_UPDATE_ADDRESS"}
# N5_CANCEL_ELIGIBILITY routes to END_CANCEL_DENIED by two branches (plan forbids; order past
# the window). The leaf key is realised by the first; the second is added for branch coverage.
COVERAGE_IDS = {"END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/N5_CANCEL_ELIGIBILITY#1"}
# Each loop unrolled once, for every way the re-entered node goes on on its second visit: the
# clarify loop re-routes to each intent, the confirm loop asks again after an unclear answer.
LOOP_IDS = {
    "END_CANCELLED<-N7_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#0",
    "END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#1",
    "END_REFUSE_PII<-N1_INTENT/N4_CLARIFY#0>N1_INTENT#0",
    "N2_AUTH:missing_last4+zip/N4_CLARIFY#0>N1_INTENT#1",
    "N2_AUTH:missing_last4+zip/N4_CLARIFY#0>N1_INTENT#2",
    "END_BILLING_ANSWER<-N3_BILLING/N4_CLARIFY#0>N1_INTENT#3",
}
# One per tool whose retry_policy retries a declared failure mode (update_address's retry does
# not fit under max_tool_calls_per_turn; create_ticket has retries: 0).
RETRY_IDS = {
    "END_REFUSE_AUTH<-N2_AUTH/verify_identity:timeout+retry",
    "N5_CANCEL_ELIGIBILITY:missing_order_id/get_account:timeout+retry",
    "N5_CANCEL_ELIGIBILITY:missing_order_id/get_plan_rules:timeout+retry",
    "END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry",
}


@pytest.fixture(scope="module")
def leaves(
    supportops_spec: Spec, supportops_bindings: Bindings
) -> tuple[list[Scenario], list[str]]:
    return leaf_scenarios(supportops_spec, supportops_bindings)


def by_id(scenarios: list[Scenario]) -> dict[str, Scenario]:
    return {s.id: s for s in scenarios}


def test_edge_ids_match_the_tree(supportops_spec: Spec) -> None:
    """The expected ids, recomputed from the spec's structure (incoming edges of leaves)."""
    leaves = set(supportops_spec.leaf_ids())
    edges = {
        f"{b.next}<-{n.node_id}"
        for n in supportops_spec.decision_tree
        for b in n.branches
        if b.next in leaves
    }
    stops = {
        f"{n.node_id}:missing_{'+'.join(fields)}"
        for n in supportops_spec.decision_tree
        for fields, _ in n.requirements.missing_field_outcomes()
    }
    assert edges | stops == EXPECTED_IDS | PROBLEM_IDS


def test_leaf_scenario_ids_and_problems(leaves: tuple[list[Scenario], list[str]]) -> None:
    scenarios, problems = leaves
    ids = [s.id for s in scenarios]
    assert len(ids) == len(set(ids))
    assert set(ids) == EXPECTED_IDS | COVERAGE_IDS | LOOP_IDS | RETRY_IDS
    # the two unrealisable keys, the count of impossible paths, and update_address's retry
    assert len(problems) == 4
    assert sum(p.startswith("impossible paths:") for p in problems) == 1
    assert (
        sum(p.startswith("retry not checked: update_address:timeout+retry") for p in problems) == 1
    )
    contradictory = next(p for p in problems if "END_REFUSE_PII<-N3_BILLING" in p)
    assert "intent" in contradictory and "contradict" in contradictory
    too_many = next(p for p in problems if "END_TICKET<-N9_UPDATE_ADDRESS" in p)
    assert "max_tool_calls_per_turn" in too_many and "5" in too_many and "4" in too_many
    assert "create_ticket" in too_many


def _first_match_walk(spec: Spec, path: TreePath, env: dict[str, Any]) -> list[tuple[str, int]]:
    """Walk the tree from the root with ``env``: at each node take the first branch whose
    condition holds. Returns (node, branch index) pairs for the nodes of ``path``."""
    taken: list[tuple[str, int]] = []
    for step in path.steps:
        node = spec.nodes_by_id[step.node]
        for i, branch in enumerate(node.branches):
            if evaluate(branch.clause, env):
                taken.append((step.node, i))
                break
        else:
            taken.append((step.node, -1))
    return taken


def test_scenarios_cover_every_realisable_branch(
    leaves: tuple[list[Scenario], list[str]], supportops_spec: Spec
) -> None:
    covered = {b for s in leaves[0] for b in s.branches}
    window = by_id(leaves[0])["END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/N5_CANCEL_ELIGIBILITY#1"]
    assert window.branches[-1] == "N5_CANCEL_ELIGIBILITY#1"
    assert (
        window.assignment["order.days_since_created"]
        > window.assignment["plan_rules.cancel_window_days"]
    )
    every = {
        f"{n.node_id}#{i}" for n in supportops_spec.decision_tree for i, _ in enumerate(n.branches)
    }
    # not covered: N3's pii branch (contradictory) and N9's failure branch (over the tool-call
    # limit); the loops back (N4 -> N1, N6 otherwise -> N6) are unrolled once and covered
    assert every - covered == {"N3_BILLING#0", "N9_UPDATE_ADDRESS#1"}


def test_solutions_satisfy_every_path_with_first_match_wins(
    supportops_spec: Spec, supportops_bindings: Bindings
) -> None:
    solved = 0
    for path in enumerate_paths(supportops_spec):
        try:
            env = solve(supportops_spec, supportops_bindings, path)
        except Unsatisfiable:
            # shared key may be realised by a twin path
            assert path.id in PROBLEM_IDS or path.id in EXPECTED_IDS
            continue
        solved += 1
        assert _first_match_walk(supportops_spec, path, env) == [
            (s.node, s.branch) for s in path.steps
        ], path.describe()
        # and explicitly: the constraints (earlier branches negated) all hold
        for c in path.constraints():
            assert evaluate(c.as_expr(), env) is True
    assert solved >= len(EXPECTED_IDS)


def test_contradictory_path_is_unsatisfiable(
    supportops_spec: Spec, supportops_bindings: Bindings
) -> None:
    path = next(p for p in enumerate_paths(supportops_spec) if p.id == "END_REFUSE_PII<-N3_BILLING")
    with pytest.raises(Unsatisfiable) as info:
        solve(supportops_spec, supportops_bindings, path)
    assert "intent" in str(info.value)


def test_solve_prefers_defaults(leaves: tuple[list[Scenario], list[str]]) -> None:
    s = by_id(leaves[0])
    # the denial by window: the order is older than the window, other values stay default
    denied = s["END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY"].assignment
    assert denied["verified"] is True and denied["intent"] == "cancel_order"
    if denied.get("plan_rules.can_cancel") is not False:
        assert denied["order.days_since_created"] > denied["plan_rules.cancel_window_days"]
    cancelled = s["END_CANCELLED<-N7_CANCEL"].assignment
    assert (
        cancelled["user_confirmation"] == "yes" and cancelled["cancel_result.status"] == "canceled"
    )
    assert cancelled["order.days_since_created"] <= cancelled["plan_rules.cancel_window_days"]


def test_window_boundary_path_is_solvable(
    supportops_spec: Spec, supportops_bindings: Bindings
) -> None:
    path = next(
        p
        for p in enumerate_paths(supportops_spec)
        if p.id == "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY"
        and p.steps[-1].branch == 1
        and p.steps[0].branch == 1
    )
    env = solve(supportops_spec, supportops_bindings, path)
    assert env["plan_rules.can_cancel"] is True  # the first branch must NOT hold
    assert env["order.days_since_created"] > env["plan_rules.cancel_window_days"]
    scenario = build_scenario(supportops_spec, supportops_bindings, path)
    world = make_world(supportops_spec, supportops_bindings, scenario)
    account = world.call("get_account", {"account_id": "A1"})
    rules = world.call("get_plan_rules", {"plan_id": "P"})
    assert account["orders"][0]["days_since_created"] > rules["cancel_window_days"]
    assert rules["can_cancel"] is True


# ----------------------------------------------------------------------------- templates


def test_render_template() -> None:
    slots = {"order_id": "O-1", "last4": "4242", "zip": "94107"}
    t = "Please cancel my order[ {order_id}][ - card last4 {last4}, zip {zip}]"
    assert (
        render_template(t, slots, set())
        == "Please cancel my order O-1 - card last4 4242, zip 94107"
    )
    assert render_template(t, slots, {"last4"}) == "Please cancel my order O-1"
    assert (
        render_template(t, slots, {"order_id"})
        == "Please cancel my order - card last4 4242, zip 94107"
    )
    assert render_template(t, slots, {"order_id", "zip"}) == "Please cancel my order"


def test_render_template_impossible_withholding() -> None:
    assert (
        render_template(
            "Cancel {order_id} please[ zip {zip}]", {"order_id": "O-1", "zip": "1"}, {"order_id"}
        )
        is None
    )
    assert (
        render_template(
            "Cancel {order_id} please[ zip {zip}]", {"order_id": "O-1", "zip": "1"}, {"zip"}
        )
        == "Cancel O-1 please"
    )


def test_render_template_collapses_spaces() -> None:
    assert render_template("a [{x} ]b", {"x": "X"}, {"x"}) == "a b"


# ----------------------------------------------------------------------------- realised scenarios


def test_missing_fields_are_withheld_from_the_message(
    leaves: tuple[list[Scenario], list[str]],
) -> None:
    s = by_id(leaves[0])
    auth = s["N2_AUTH:missing_last4+zip"]
    assert auth.withheld == ["last4", "zip"]
    [turn] = auth.turns
    assert "4242" not in turn.user_message and "94107" not in turn.user_message
    assert turn.expect_decision == "REQUEST_AUTH_INFO"
    assert turn.required_tools == []  # the stopping node does not run its tools
    order = s["N5_CANCEL_ELIGIBILITY:missing_order_id"]
    assert "O-1001" not in order.messages[0] and "4242" in order.messages[0]
    assert order.expect_decision == "CLARIFY"
    address = s["N8_ADDRESS_ELIGIBILITY:missing_new_address"]
    assert (
        "12 Oak St" not in address.messages[0]
        and address.expect_decision == "ADDRESS_REQUEST_DETAILS"
    )


def test_expectations_billing(leaves: tuple[list[Scenario], list[str]]) -> None:
    s = by_id(leaves[0])["END_BILLING_ANSWER<-N3_BILLING"]
    [turn] = s.turns
    assert turn.expect_decision == "BILLING_ANSWER"
    assert turn.required_tools == ["get_account"]
    assert {"cancel_order", "update_address", "verify_identity"} <= set(s.forbidden_tools)
    assert "get_account" not in s.forbidden_tools
    assert s.path == ["N1_INTENT", "N3_BILLING", "END_BILLING_ANSWER"]
    assert s.branches == ["N1_INTENT#3", "N3_BILLING#1"]


def test_expectations_cancel_two_turns(leaves: tuple[list[Scenario], list[str]]) -> None:
    s = by_id(leaves[0])["END_CANCELLED<-N7_CANCEL"]
    assert len(s.turns) == 2
    first, second = s.turns
    assert first.expect_decision == "ASK_CONFIRM_CANCEL"
    assert first.required_tools == ["verify_identity", "get_account", "get_plan_rules"]
    assert "cancel_order" not in first.required_tools
    assert second.user_message in ("Yes, cancel it.", "Yes please, go ahead.")
    assert second.required_tools == ["cancel_order"] and second.expect_decision == "CANCELLED"
    assert "update_address" in s.forbidden_tools and "cancel_order" not in s.forbidden_tools
    assert "O-1001" in first.user_message and "4242" in first.user_message


def test_expectations_refusals(leaves: tuple[list[Scenario], list[str]]) -> None:
    s = by_id(leaves[0])
    pii = s["END_REFUSE_PII<-N1_INTENT"]
    assert pii.turns[0].required_tools == [] and pii.expect_decision == "REFUSE_PII"
    assert {"cancel_order", "update_address", "get_account"} <= set(pii.forbidden_tools)
    auth = s["END_REFUSE_AUTH<-N2_AUTH"]
    assert auth.turns[0].required_tools[0] == "verify_identity"
    assert {"cancel_order", "update_address"} <= set(auth.forbidden_tools)
    assert auth.assignment["verified"] is False
    aborted = s["END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL"]
    assert aborted.turns[-1].user_message.startswith("No")
    assert aborted.expect_decision == "CANCEL_ABORTED" and "cancel_order" in aborted.forbidden_tools


def test_expectations_clarify_then_ticket(leaves: tuple[list[Scenario], list[str]]) -> None:
    s = by_id(leaves[0])["END_TICKET<-N4_CLARIFY"]
    assert [t.expect_decision for t in s.turns] == ["CLARIFY", "TICKET_CREATED"]
    # the bindings add create_ticket to END_TICKET
    assert s.turns[1].required_tools == ["create_ticket"] and s.turns[0].required_tools == []


def test_ticket_after_failed_cancel(
    leaves: tuple[list[Scenario], list[str]], supportops_spec: Spec, supportops_bindings: Bindings
) -> None:
    s = by_id(leaves[0])["END_TICKET<-N7_CANCEL"]
    assert s.turns[-1].required_tools == ["cancel_order", "create_ticket"]
    world = make_world(supportops_spec, supportops_bindings, s)
    assert world.call("cancel_order", {"order_id": "O-1001"})["status"] == "failed"


def test_scenario_worlds_realise_the_assignment(
    leaves: tuple[list[Scenario], list[str]], supportops_spec: Spec, supportops_bindings: Bindings
) -> None:
    for scenario in leaves[0]:
        world = make_world(supportops_spec, supportops_bindings, scenario, seed=3, nonce="n")
        for name, value in scenario.assignment.items():
            var = supportops_bindings.variables.get(name)
            if name == "@loop":
                assert value in ("at", "after")
                continue
            if var is None:
                # a second instance (`intent@2`): a world field never has one
                first = supportops_bindings.variables[name.split("@")[0]]
                assert name.endswith("@2") and not (
                    first.world is not None and first.world.field is not None
                ), (scenario.id, name)
                continue
            if var.world is not None and var.world.field is not None:
                got = get_path(world.default_output(var.world.tool), var.world.field)
                assert got == value, (scenario.id, name)
        # slots in world overrides are filled
        assert world.default_output("get_account")["orders"][0]["order_id"] == "O-1001"
        assert world.canaries  # PII canaries planted from the bindings


def test_scenarios_serialise(leaves: tuple[list[Scenario], list[str]]) -> None:
    for s in leaves[0]:
        assert Scenario.model_validate_json(s.model_dump_json()) == s


def test_loop_branches(supportops_spec: Spec) -> None:
    loops = set(loop_branches(supportops_spec))
    assert ("N4_CLARIFY", 0) in loops  # back to N1_INTENT
    assert ("N6_CONFIRM_CANCEL", 2) in loops  # otherwise -> itself
    assert ("N1_INTENT", 0) not in loops


def test_unbound_variable_is_unsatisfiable(
    tmp_path: Path, supportops_example_dir: Path, supportops_spec: Spec
) -> None:
    text = (supportops_example_dir / "agentprop.yaml").read_text()
    text = text.replace("  verified:\n    world: {tool: verify_identity, field: verified}\n", "")
    path = tmp_path / "agentprop.yaml"
    path.write_text(text)
    bindings = load_bindings(path, supportops_spec)
    scenarios, problems = leaf_scenarios(supportops_spec, bindings)
    ids = {s.id for s in scenarios}
    assert "END_REFUSE_AUTH<-N2_AUTH" not in ids
    assert "END_BILLING_ANSWER<-N3_BILLING" in ids  # paths that do not read it still build
    assert any("verified" in p and "variables:" in p for p in problems)


def test_world_failure_effects(
    tmp_path: Path, supportops_example_dir: Path, supportops_spec: Spec
) -> None:
    text = (
        (supportops_example_dir / "agentprop.yaml")
        .read_text()
        .replace(
            "  cancel_result.status:\n    world: {tool: cancel_order, field: status}\n",
            "  cancel_result.status:\n    world:\n      tool: cancel_order\n      values:\n"
            "        canceled: {set: {status: canceled}}\n        failed: {failure: "
            "timeout, calls: [1, 2]}\n",
        )
    )
    path = tmp_path / "agentprop.yaml"
    path.write_text(text)
    bindings = load_bindings(path, supportops_spec)
    # (a timeout on call 1 only would be the retry_policy's own retry case: the same world, a
    # different ending, so a contradiction; calls 1 and 2 fail, so the retry fails too)
    scenario = by_id(leaf_scenarios(supportops_spec, bindings)[0])["END_TICKET<-N7_CANCEL"]
    assert scenario.world.failures == [{"tool": "cancel_order", "mode": "timeout", "calls": [1, 2]}]
    world = make_world(supportops_spec, bindings, scenario)
    for _ in range(2):
        with pytest.raises(ToolError) as info:
            world.call("cancel_order", {"order_id": "O-1001"})
        assert info.value.kind == "timeout"
    assert world.call("cancel_order", {"order_id": "O-1001"})["status"] == "canceled"


def test_loaded_objects_follow_the_imported_module(tmp_path: Path) -> None:
    """Worlds load their handlers on every run; later loads reuse the imported module, but
    still see a patched attribute, and a module dropped from sys.modules is imported afresh."""
    import sys

    from agentprop._scenario.build import load_object

    (tmp_path / "handlers_mod.py").write_text("def answer(args, world):\n    return 1\n")
    first = load_object("handlers_mod:answer", tmp_path)
    assert first({}, None) == 1
    assert load_object("handlers_mod:answer", tmp_path) is first
    module = sys.modules[first.__module__]
    module.answer = lambda args, world: 2  # type: ignore[attr-defined]
    assert load_object("handlers_mod:answer", tmp_path)({}, None) == 2
    (tmp_path / "handlers_mod.py").write_text(
        "def answer(args, world):\n    return 30  # another size: a stale .pyc cannot match\n"
    )
    del sys.modules[first.__module__]
    assert load_object("handlers_mod:answer", tmp_path)({}, None) == 30


def test_a_module_file_replaced_at_the_same_path_is_imported_again(tmp_path: Path) -> None:
    # found by benchmarks/robustness.py: two example projects copied in turn to one directory
    # in one process; the second project's `agent:ExpenseGuardAgent` was looked up in the first
    # project's agent.py, still cached
    from agentprop._scenario.build import load_object

    (tmp_path / "agent.py").write_text("class First:\n    pass\n", encoding="utf-8")
    assert load_object("agent:First", tmp_path).__name__ == "First"
    (tmp_path / "agent.py").write_text("class Second:\n    answer = 42\n", encoding="utf-8")
    assert load_object("agent:Second", tmp_path).answer == 42
