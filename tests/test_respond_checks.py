"""Issue #11 item 4: ``respond`` is checked against the trace, not trusted.

``node_id`` must be the node the scenario is at, ``tool_actions`` the tools the turn really
called (in order), ``evidence`` what tool outputs said. Each bug is first reproduced on the
runbook spec (tests/data/promises/runbook) and on the SupportOps example with an agent that
lies, then each contract is pinned on hand-built traces.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import Project, Trace, TurnContext
from agentprop._agents.loading import load_agent
from agentprop._judge.properties import first_failure
from agentprop.contracts import mft_verdicts
from agentprop.scenarios import Scenario

ROOT = Path(__file__).resolve().parents[1]
RUNBOOK_DIR = ROOT / "tests" / "data" / "promises" / "runbook"
SUPPORTOPS_DIR = ROOT / "examples" / "supportops"
RUNBOOK_CASES = [
    "N1_TRIAGE:missing_service",
    "END_PROVIDE_STEPS<-N2_LOOKUP",
    "END_ESCALATED<-N3_ESCALATE",
    "END_PROVIDE_STEPS<-N2_LOOKUP/get_runbook:timeout+retry",
]
"""The runbook spec's scenarios, written out so collecting loads no project (checked below)."""


def run(project: agentprop.Project, scenario: Scenario, agent: Any, trial: int = 0) -> Trace:
    return asyncio.run(project.arun(scenario, agent, trial=trial))


def runbook_agent(faults: dict[str, float] | None = None) -> Any:
    return load_agent("agent:RunbookAgent", RUNBOOK_DIR, faults or {}).factory


def failures(
    project: agentprop.Project, scenario: Scenario, trace: Trace
) -> list[agentprop.Verdict]:
    return [
        v
        for v in mft_verdicts(
            project.spec,
            scenario,
            trace,
            grounding=project.bindings.response_grounding(project.spec),
        )
        if not v.passed
    ]


# ----------------------------------------------------------------------------- the bug, reproduced


def test_the_runbook_cases_are_every_scenario_of_the_spec(runbook_project: Project) -> None:
    assert [s.id for s in runbook_project.scenarios()] == RUNBOOK_CASES


@pytest.mark.parametrize("case", RUNBOOK_CASES)
def test_the_clean_runbook_agent_passes_the_mft(runbook_project: Project, case: str) -> None:
    scenario = runbook_project.scenario(case)
    for trial in range(3):
        assert (
            failures(
                runbook_project, scenario, run(runbook_project, scenario, runbook_agent(), trial)
            )
            == []
        )


def test_tool_actions_that_list_an_uncalled_tool_fail_the_mft(runbook_project: Project) -> None:
    s = runbook_project.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    trace = run(runbook_project, s, runbook_agent({"lie_tool_actions": 1.0}))
    assert trace.final_response is not None and trace.final_response["tool_actions"] == [
        "get_runbook",
        "page_oncall",
    ]
    first = first_failure(failures(runbook_project, s, trace))
    assert first is not None, "an agent that reports page_oncall without calling it passed the MFT"
    assert first.contract == "tool_actions_match"
    assert first.detail == "uncalled=page_oncall"
    assert "page_oncall" in first.explanation and "never called" in first.explanation


def test_an_invented_node_id_fails_the_mft(runbook_project: Project) -> None:
    s = runbook_project.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    first = first_failure(
        failures(
            runbook_project, s, run(runbook_project, s, runbook_agent({"invent_node_id": 1.0}))
        )
    )
    assert first is not None, "an agent that reports a node the spec does not have passed the MFT"
    assert first.contract == "node_id_matches"
    assert first.detail == "got=unknown-node"
    assert "N4_VERIFY_FIX" in first.explanation and "END_PROVIDE_STEPS" in first.explanation


def test_evidence_citing_an_id_no_tool_returned_fails_the_mft(runbook_project: Project) -> None:
    s = runbook_project.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    first = first_failure(
        failures(
            runbook_project, s, run(runbook_project, s, runbook_agent({"invent_evidence": 1.0}))
        )
    )
    assert first is not None, "evidence citing RB-99 (no tool returned it) passed the MFT"
    assert first.contract == "evidence_grounded"
    assert first.detail == "ids"
    assert "RB-99" in first.explanation


class LyingSupportOps:
    """The clean SupportOps agent, but its respond claims a tool it never called and a node
    that does not exist: the issue's "passes 20/20" agent."""

    def __init__(self) -> None:
        self.inner = load_agent("agent:SupportOpsAgent", SUPPORTOPS_DIR).factory()

    def turn(self, message: str, ctx: TurnContext) -> None:
        real = ctx.respond

        def lying_respond(**fields: Any) -> Any:
            fields["tool_actions"] = [*fields["tool_actions"], "verify_identity"]
            fields["node_id"] = "N0_LOOKUP"
            return real(**fields)

        ctx.respond = lying_respond  # type: ignore[method-assign]
        self.inner.turn(message, ctx)


def test_a_lying_supportops_agent_fails_every_case(supportops_project: Project) -> None:
    for s in supportops_project.scenarios():
        first = first_failure(
            failures(supportops_project, s, run(supportops_project, s, LyingSupportOps))
        )
        assert first is not None, f"{s.id}: the lying agent passed"
        assert first.contract in {"node_id_matches", "tool_actions_match"}, (
            f"{s.id}: {first.explanation}"
        )


# ----------------------------------------------------------------------------- the zoo


def zoo_found(entry: Any, seed: int, tmp_path: Path) -> bool:
    """The zoo's rule: some case is FAIL or UNSTABLE and its failure text contains ``expect``.
    The MFT cases alone (no shrinking) keep the test fast; a default run adds cases to them."""
    import io
    import json

    from agentprop._cli import main

    out = tmp_path / f"{entry.name}-{seed}.json"
    argv = [
        "run",
        str(ROOT / entry.project),
        "--seed",
        str(seed),
        "--json",
        str(out),
        "--kinds",
        "mft",
        "--shrink-budget",
        "0",
        "--corpus",
        str(tmp_path / "corpus"),
    ]
    for knob, p in entry.faults.items():
        argv += ["--fault", f"{knob}={p}"]
    main(argv, out=io.StringIO(), err=io.StringIO())
    report = json.loads(out.read_text())
    return any(
        c["verdict"] in ("FAIL", "UNSTABLE")
        and any(entry.expect in f["signature"] + f["explanation"] for f in c["failures"])
        for c in report["cases"]
    )


def test_item4_zoo_entries_are_found_and_the_clean_agent_is_not(tmp_path: Path) -> None:
    import sys

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks._promises_zoo.item4_lying_respond import ENTRIES

    assert {e.name for e in ENTRIES} == {
        "lying_tool_actions",
        "invented_node_id",
        "invented_evidence",
    }
    for entry in ENTRIES:
        assert zoo_found(entry, 0, tmp_path), entry.name
    clean = ENTRIES[0].__class__(name="clean", item=4, project=ENTRIES[0].project, expect="")
    assert not zoo_found(clean, 0, tmp_path)


# ----------------------------------------------------------------------------- node_id


def supportops(supportops_project: Project, case: str) -> Scenario:
    return supportops_project.scenario(case)


def test_expected_nodes_per_turn(supportops_project: Project) -> None:
    from agentprop._judge.properties import expected_nodes

    spec = supportops_project.spec
    # a turn that waits for the answer: its last node, or the node that reads the answer
    assert expected_nodes(spec, supportops(supportops_project, "END_CANCELLED<-N7_CANCEL")) == [
        ["N5_CANCEL_ELIGIBILITY", "N6_CONFIRM_CANCEL"],
        ["END_CANCELLED", "N7_CANCEL"],  # the leaf, or the node it was entered from
    ]
    assert expected_nodes(spec, supportops(supportops_project, "END_TICKET<-N4_CLARIFY")) == [
        ["N1_INTENT", "N4_CLARIFY"],
        ["END_TICKET", "N4_CLARIFY"],
    ]
    # a missing-field stop: the stopping node only
    assert expected_nodes(spec, supportops(supportops_project, "N2_AUTH:missing_last4+zip")) == [
        ["N2_AUTH"]
    ]
    # a conversation cut short (the shrinker drops turns): the last node and where it leads
    cut = supportops(supportops_project, "END_CANCELLED<-N7_CANCEL")
    cut = cut.model_copy(update={"turns": cut.turns[:1]})
    assert expected_nodes(spec, cut) == [
        ["N5_CANCEL_ELIGIBILITY", "END_CANCEL_DENIED", "N6_CONFIRM_CANCEL"]
    ]
    eg = agentprop.load_project(ROOT / "examples" / "expenseguard")
    approve = next(s for s in eg.scenarios() if s.id.startswith("END_APPROVE<-N7_SUBMIT"))
    assert expected_nodes(eg.spec, approve) == [["END_APPROVE", "N7_SUBMIT"]]


def _turn(index: int, calls: list[Any], response: dict[str, Any] | None, user: str = "hi") -> Any:
    from agentprop._scenario.trace import ToolCall, Turn

    tool_calls = []
    for step, c in enumerate(calls):
        name, result, error = (
            (c, {"ok": True}, None)
            if isinstance(c, str)
            else (c[0], c[1], c[2] if len(c) > 2 else None)
        )
        tool_calls.append(
            ToolCall(
                name=name,
                result=None if error else result,
                error=error,
                error_kind=error,
                turn_index=index,
                step=step,
            )
        )
    return Turn(index=index, user_message=user, tool_calls=tool_calls, response=response)


def _trace(*turns: Any) -> Trace:
    return Trace(turns=list(turns))


def test_node_id_matches() -> None:
    from agentprop._judge.grounded import node_id_matches

    t = _trace(
        _turn(0, [], {"node_id": "N6_CONFIRM_CANCEL"}), _turn(1, [], {"node_id": "N7_CANCEL"})
    )
    accepted = [["N5_CANCEL_ELIGIBILITY", "N6_CONFIRM_CANCEL"], ["END_CANCELLED", "N7_CANCEL"]]
    assert node_id_matches(t, accepted).passed
    wrong = node_id_matches(
        _trace(_turn(0, [], {"node_id": "N7_CANCEL"})), accepted, known_nodes={"N7_CANCEL"}
    )
    assert not wrong.passed and wrong.detail == "got=N7_CANCEL" and wrong.turn == 0
    assert "N5_CANCEL_ELIGIBILITY or N6_CONFIRM_CANCEL" in wrong.explanation
    invented = node_id_matches(
        _trace(_turn(0, [], {"node_id": "N0_X"})), accepted, known_nodes={"N7_CANCEL"}
    )
    assert (
        invented.detail == "got=unknown-node"
        and "a node the spec does not have" in invented.explanation
    )
    # not stated (an optional field), or no expectation for the turn: nothing to check
    assert node_id_matches(_trace(_turn(0, [], {"decision": "X"})), accepted).passed
    assert node_id_matches(_trace(_turn(0, [], {"node_id": "N0_X"})), [[]]).passed


# ----------------------------------------------------------------------------- tool_actions


@pytest.mark.parametrize(
    ("calls", "listed", "detail"),
    [
        (["get_account", "get_plan_rules"], ["get_account", "get_plan_rules"], None),
        (["get_account"], "get_account", None),  # a string lists one tool
        (["get_account", "get_plan_rules"], "get_account, get_plan_rules", None),
        (["get_account"], ["get_account(A1)"], None),  # the leading name counts
        ([], [], None),
        (["get_account"], ["get_account", "cancel_order"], "uncalled=cancel_order"),
        (["get_account", "cancel_order"], ["get_account"], "unlisted=cancel_order"),
        (["get_account", "get_plan_rules"], ["get_plan_rules", "get_account"], "order"),
        # a retried timeout is two calls: both are listed
        ([("get_account", None, "timeout"), "get_account"], ["get_account", "get_account"], None),
        ([("get_account", None, "timeout"), "get_account"], ["get_account"], "count=get_account"),
        (["get_account"], ["get_account", "get_account"], "count=get_account"),
    ],
)
def test_tool_actions_match(calls: list[Any], listed: Any, detail: str | None) -> None:
    from agentprop._judge.grounded import tool_actions_match

    v = tool_actions_match(_trace(_turn(0, calls, {"tool_actions": listed})))
    assert v.passed is (detail is None), v.explanation
    assert v.detail == detail


def test_tool_actions_leave_out_respond_and_calls_refused_after_it() -> None:
    from agentprop._judge.grounded import tool_actions_match
    from agentprop._scenario.trace import ToolCall

    t = _trace(_turn(0, ["get_account"], {"tool_actions": ["get_account"]}))
    t.turns[0].tool_calls.append(
        ToolCall(
            name="cancel_order", error="tool call after respond", error_kind="protocol", step=1
        )
    )
    assert tool_actions_match(t).passed


def test_tool_actions_are_checked_per_turn() -> None:
    from agentprop._judge.grounded import tool_actions_match

    # turn 2 lists turn 1's call: tool_actions is "List of tools called this turn"
    t = _trace(
        _turn(0, ["get_account"], {"tool_actions": ["get_account"]}),
        _turn(1, [], {"tool_actions": ["get_account"]}),
    )
    v = tool_actions_match(t)
    assert not v.passed and v.turn == 1 and v.detail == "uncalled=get_account"


# ----------------------------------------------------------------------------- evidence


@pytest.mark.parametrize(
    ("calls", "evidence", "detail"),
    [
        ([], "no tool output needed", None),  # nothing was called: nothing to cite
        ([], "", None),
        (
            [("get_account", {"plan_id": "PLAN-BASIC", "orders": [{"order_id": "O-1001"}]})],
            "get_account: plan PLAN-BASIC, 1 order(s)",
            None,
        ),
        # wording is free: a word of an output field is a reference
        (
            [("get_plan_rules", {"plan_id": "P", "can_cancel": True, "cancel_window_days": 30})],
            "plan allows cancellation; order within window",
            None,
        ),
        ([("get_receipt", None, "not_found")], "get_receipt failed: not_found", None),
        ([("get_account", {"plan_id": "PLAN-BASIC"})], "no tool output needed", "disclaims"),
        ([("get_account", {"plan_id": "PLAN-BASIC"})], "", "disclaims"),
        ([("get_account", {"plan_id": "PLAN-BASIC"})], "n/a", "disclaims"),
        ([("get_account", {"plan_id": "PLAN-BASIC"})], "checked carefully", "unreferenced"),
        (
            [("get_account", {"plan_id": "PLAN-BASIC"})],
            "get_plan_rules: window 30",
            "tool=get_plan_rules",
        ),
        ([("get_account", {"plan_id": "PLAN-BASIC"})], "get_account: plan PLAN-GOLD", "ids"),
        (
            [("get_account", {"orders": [{"order_id": "O-1001"}]})],
            "get_account: 3 orders",
            "numbers",
        ),
        ([("get_account", {"status": "processing"})], 'get_account: status "shipped"', "quoted"),
        ([("get_account", {"status": "processing"})], 'get_account: status "processing"', None),
    ],
)
def test_evidence_grounded(calls: list[Any], evidence: str, detail: str | None) -> None:
    from agentprop._judge.grounded import evidence_grounded

    tools = {"get_account", "get_plan_rules", "get_receipt"}
    v = evidence_grounded(_trace(_turn(0, calls, {"evidence": evidence})), tools=tools)
    assert v.passed is (detail is None), v.explanation
    assert v.detail == detail


def test_evidence_may_cite_earlier_turns_but_not_the_user() -> None:
    from agentprop._judge.grounded import evidence_grounded

    earlier = _trace(
        _turn(
            0, [("get_account", {"plan_id": "PLAN-BASIC"})], {"evidence": "get_account: PLAN-BASIC"}
        ),
        _turn(1, [], {"evidence": "plan PLAN-BASIC from get_account"}),
    )
    assert evidence_grounded(earlier).passed
    # the order id is in the user's message, not in any tool output
    user = _trace(
        _turn(
            0,
            [("get_account", {"plan_id": "PLAN-BASIC"})],
            {"evidence": "get_account for O-1001"},
            user="cancel O-1001",
        )
    )
    v = evidence_grounded(user)
    assert not v.passed and v.detail == "ids" and "O-1001" in v.explanation
    # an output of a later turn does not ground an earlier turn's evidence
    later = _trace(
        _turn(0, [], {"evidence": "get_account: PLAN-BASIC"}),
        _turn(1, [("get_account", {"plan_id": "PLAN-BASIC"})], {"evidence": "ok"}),
    )
    v = evidence_grounded(later, tools={"get_account"})
    assert not v.passed and v.turn == 0 and v.detail == "tool=get_account"


@pytest.mark.parametrize(
    ("text", "disclaims"),
    [
        ("no tool output needed", True),
        ("None", True),
        ("", True),
        ("N/A", True),
        ("not required", True),
        ("no tools were used", True),
        ("get_account: plan PLAN-BASIC", False),
        ("run_sql returned 0 rows", False),
    ],
)
def test_disclaims_evidence(text: str, disclaims: bool) -> None:
    from agentprop._judge.grounded import disclaims_evidence

    assert disclaims_evidence(text) is disclaims


# ----------------------------------------------------------------------------- what the MFT checks


def _without_field(spec: Any, name: str) -> Any:
    contract = spec.response_contract.model_copy(
        update={
            "required_json_fields": [
                f for f in spec.response_contract.required_json_fields if f != name
            ]
        }
    )
    return spec.model_copy(update={"response_contract": contract})


def test_only_fields_the_contract_declares_are_checked(runbook_project: Project) -> None:
    s = runbook_project.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    trace = run(runbook_project, s, runbook_agent({"invent_node_id": 1.0, "lie_tool_actions": 1.0}))
    spec = _without_field(_without_field(runbook_project.spec, "node_id"), "tool_actions")
    contracts = {v.contract for v in mft_verdicts(spec, s, trace)}
    assert "node_id_matches" not in contracts and "tool_actions_match" not in contracts
    assert {"node_id_matches", "tool_actions_match"} <= {
        v.contract for v in mft_verdicts(runbook_project.spec, s, trace) if not v.passed
    }


def test_a_bindings_entry_can_turn_a_check_off(runbook_project: Project) -> None:
    s = runbook_project.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    trace = run(runbook_project, s, runbook_agent({"invent_node_id": 1.0}))
    grounding = runbook_project.bindings.response_grounding(runbook_project.spec)
    grounding.fields["node_id"] = []
    assert first_failure(mft_verdicts(runbook_project.spec, s, trace, grounding=grounding)) is None


def test_the_clean_example_agents_pass_the_new_checks() -> None:
    for name in ("supportops", "expenseguard", "datainsights"):
        project = agentprop.load_project(ROOT / "examples" / name)
        agent = load_agent(project.bindings.agent or "", project.base_dir).factory
        for s in project.scenarios():
            for trial in range(2):
                bad = failures(project, s, run(project, s, agent, trial))
                assert bad == [], f"{name} {s.id}: {bad[0].explanation if bad else ''}"


# ----------------------------------------------------------------------------- judged once per turn


def test_the_mft_reads_each_turns_tool_outputs_once_with_the_same_verdicts(
    supportops_project: Project,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One MFT judgement grounds several response fields and the evidence, each over the same
    turns: the facts of a turn's tool outputs are worked out once, and the verdicts are those
    of working them out per check."""
    from agentprop._judge import grounded
    from agentprop._judge.properties import response_verdicts

    s = supportops_project.scenario("END_CANCELLED<-N7_CANCEL")
    agent = load_agent("agent:SupportOpsAgent", SUPPORTOPS_DIR).factory
    grounding = supportops_project.bindings.response_grounding(supportops_project.spec)
    made: list[int] = []
    facts = grounded._TurnFacts

    def counting(*args: Any) -> Any:
        made.append(1)
        return facts(*args)

    monkeypatch.setattr(grounded, "_TurnFacts", counting)
    for trial in range(3):
        trace = run(supportops_project, s, agent, trial)
        made.clear()
        judged = mft_verdicts(supportops_project.spec, s, trace, grounding=grounding)
        assert len(made) == len(trace.turns)
        made.clear()
        # outside the shared scope
        apart = response_verdicts(supportops_project.spec, s, trace, grounding)
        assert len(made) > len(trace.turns)
        assert [v for v in judged if v.contract in {a.contract for a in apart}] == apart
