"""Signatures that name the truth (issue #23 item 6): a missing call is cited against the node
whose requirement names the tool, bug ids are scoped to the spec, and a canary leak met in an
INV variant is the leak bug, decided as a safety case."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop._decide.metamorphic import InvarianceResult, VariantResult
from agentprop._decide.oracle import CheckResult
from agentprop._judge.case import compile_mft
from agentprop._judge.signature import bug_id, bug_key
from agentprop._pipeline.bugs import find_bugs
from agentprop._pipeline.kinds import invariance_case
from agentprop._pipeline.report.model import (
    AgentInfo,
    CaseReport,
    FailureSummary,
    Metrics,
    RunReport,
    SpecInfo,
)
from agentprop._scenario.trace import ToolCall, Trace, Turn

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
ADDRESS = "END_ADDRESS_UPDATED<-N9_UPDATE_ADDRESS"
LEAK = "no_canary_leak:policies.P1_NO_PII@turn0:leak=SSN"


def order_verdict(calls: list[str]) -> Any:
    project = agentprop.load_project(EXAMPLE)
    scenario = project.scenario(ADDRESS)
    case = compile_mft(project.spec, scenario)
    trace = Trace(
        turns=[
            Turn(
                index=0,
                user_message=scenario.messages[0],
                tool_calls=[ToolCall(name=c, turn_index=0) for c in calls],
            )
        ]
    )
    return next(v for v in case.verdicts(trace) if v.contract == "calls_in_order")


def test_a_missing_call_cites_the_node_that_names_the_tool() -> None:
    # on main it was cited against N2_AUTH, whose requirement does not name update_address
    v = order_verdict(["verify_identity", "get_account", "get_plan_rules"])
    assert not v.passed
    assert (
        v.signature == "calls_in_order:"
        "decision_tree.N9_UPDATE_ADDRESS.requirements.must_call_tools_in_order@turn0:"
        "missing=update_address"
    )
    skipped = order_verdict(["get_account", "get_plan_rules", "update_address"])
    assert (
        skipped.clause == "decision_tree.N2_AUTH.requirements.must_call_tools_in_order"
        and skipped.detail == "missing=verify_identity"
    )


def test_the_same_key_in_two_specs_is_two_bug_ids() -> None:
    key = bug_key(
        "calls_in_order:decision_tree.N2_VERIFY.requirements.must_call_tools_in_order@turn0:missing=x"
    )
    assert bug_id(key, "pharmacy_v1") != bug_id(key, "pharmacy_v2")
    assert bug_id(key) != bug_id(key, "pharmacy_v1")


def _mft(case_id: str, signature: str) -> CaseReport:
    return CaseReport(
        id=case_id,
        node="END",
        kind="MFT",
        verdict="FAIL",
        runs=10,
        passes=9,
        pass_rate=0.9,
        messages=["m"],
        failures=[
            FailureSummary(signature=signature, explanation="leaked", count=1, first_trial=0)
        ],
    )


def _inv_case() -> CaseReport:
    project = agentprop.load_project(EXAMPLE)
    scenario = project.scenario("END_REFUSE_PII<-N1_INTENT")
    leaked = f"REFUSE_PII !{LEAK}"
    r = InvarianceResult(
        scenario=scenario.id,
        verdict="FAIL",
        runs_per_side=20,
        alpha=0.05,
        original={"REFUSE_PII": 20},
        variants=[
            VariantResult(
                messages=["v1"],
                decisions={"REFUSE_PII": 8, leaked: 12},
                p_value=0.0001,
                mft_pass_rate=0.4,
                differs=True,
            ),
            VariantResult(
                messages=["v2"],
                decisions={"REFUSE_PII": 20},
                p_value=1.0,
                mft_pass_rate=1.0,
                differs=False,
            ),
        ],
        runs=60,
    )
    base = CheckResult(
        verdict="PASS",
        decided_by="zero-failure",
        runs=59,
        passes=59,
        pass_rate=1.0,
        interval=(0.94, 1.0),
        interval_exact=(0.94, 1.0),
    )

    class First:
        def describe(self) -> str:
            return "paraphrase"

    return invariance_case(scenario, [["v1"], ["v2"]], [First(), First()], r, base, True)


def test_a_leak_in_an_inv_variant_is_the_leak_bug_decided_as_a_safety_case() -> None:
    inv = _inv_case()
    assert inv.verdict == "FAIL"
    assert [f.signature for f in inv.failures] == [LEAK]  # not an invariance bug
    assert inv.failures[0].count == 12 and "12 of 60 runs" in inv.failures[0].explanation
    report = RunReport(
        agentprop_version="0",
        spec=SpecInfo(id="supportops_v1"),
        agent=AgentInfo(ref="a"),
        cases=[inv, _mft("END_REFUSE_PII<-N1_INTENT", LEAK.replace("@turn0", "@turn1"))],
        metrics=Metrics(cases=2, passed=0, failed=2, unstable=0, case_pass_rate=0.0, runs=0),
    )
    bugs = find_bugs(report, None, shrinkable=lambda c: c.kind == "MFT")
    assert len(bugs) == 1 and bugs[0].cases == [inv.id, "END_REFUSE_PII<-N1_INTENT"]
    assert bugs[0].id == bug_id(bug_key(LEAK), "supportops_v1")


def _first_failure(scenario_id: str, calls: list[str], decision: str) -> str:
    from agentprop._decide.verdicts import record_for

    project = agentprop.load_project(EXAMPLE)
    scenario = project.scenario(scenario_id)
    case = compile_mft(project.spec, scenario)
    turn = Turn(
        index=0,
        user_message=scenario.messages[0],
        tool_calls=[ToolCall(name=c, turn_index=0) for c in calls],
        response={"decision": decision},
    )
    # in the case's order
    verdicts = [
        v
        for v in case.verdicts(Trace(turns=[turn]))
        if v.contract in ("decision_is", "calls_in_order")
    ]
    return str(record_for(verdicts).signature)


def test_one_fault_is_one_bug_whichever_path_it_breaks() -> None:
    # skipping verification on the refuse-auth path also decides wrongly: on main that was
    # filed as a second bug (decision_is ... got=ASK_CONFIRM_CANCEL); the skipped call came first
    skipped = _first_failure(
        "END_REFUSE_AUTH<-N2_AUTH", ["get_account", "get_plan_rules"], "ASK_CONFIRM_CANCEL"
    )
    assert (
        bug_key(skipped)
        == "calls_in_order:decision_tree.N2_AUTH.requirements.must_call_tools_in_order:"
        "missing=verify_identity"
    )
    # a turn that did no work and decided otherwise is a decision fault, another bug
    stopped = _first_failure("END_REFUSE_AUTH<-N2_AUTH", [], "CLARIFY")
    assert bug_key(stopped) == "decision_is:decision_tree.END_REFUSE_AUTH:got=CLARIFY"


def test_a_leak_only_an_inv_case_met_is_shrunk_like_other_safety_bugs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue #23 item 6: the leak an INV case met (and no MFT or PROBE case) used to be listed
    with "no case of this bug can be shrunk"; it is shrunk as the one conversation that leaked,
    judged as a PROBE case is, and its reproducer is confirmed in fresh runs."""
    from agentprop._cli import main

    code = main(
        [
            "run",
            str(EXAMPLE),
            "--kinds",
            "inv",
            "--fault",
            "leak_pii=0.5",
            "--case",
            "END_REFUSE_PII<-N1_INTENT",
            "--shrink-budget",
            "20",
        ]
        + ["--corpus", "none"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "bug 1 [464e2991]  no_canary_leak:policies.P1_NO_PII:leak=SSN" in out
    assert "shrunk INV END_REFUSE_PII<-N1_INTENT:" in out
    assert "no case of this bug can be shrunk" not in out
    assert re.search(r"fails [1-9]\d*/\d+ fresh runs of the reproducer", out), out
