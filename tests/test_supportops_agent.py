"""The SupportOps reference agent: clean passes, and every fault knob caught by its contract."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import agentprop
import agentprop.contracts
import agentprop.scenarios
import agentprop.spec
from agentprop import Project, Trace
from agentprop._judge.properties import first_failure
from agentprop.agents import make_factory
from agentprop.contracts import mft_verdicts
from agentprop.scenarios import Scenario

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import FAULTS, SupportOpsAgent  # noqa: E402


@pytest.fixture(scope="module")
def scenarios(supportops_project: Project) -> dict[str, Scenario]:
    return {s.id: s for s in supportops_project.scenarios()}


@pytest.fixture(scope="module")
def account_changes(scenarios: dict[str, Scenario]) -> set[str]:
    return {
        sid
        for sid, s in scenarios.items()
        if "N2_AUTH" in s.path and not sid.startswith("N2_AUTH:")
    }


def run(
    supportops_project: Project,
    scenario: Scenario,
    faults: dict[str, float] | None = None,
    trial: int = 0,
    messages: list[str] | None = None,
) -> Trace:
    factory = make_factory(SupportOpsAgent, faults or {}).factory
    return asyncio.run(supportops_project.arun(scenario, factory, trial=trial, messages=messages))


def failing(
    supportops_project: Project, scenarios: dict[str, Scenario], faults: dict[str, float]
) -> dict[str, agentprop.Verdict]:
    out = {}
    for sid, s in scenarios.items():
        v = first_failure(
            mft_verdicts(supportops_project.spec, s, run(supportops_project, s, faults))
        )
        if v is not None:
            out[sid] = v
    return out


def test_expected_case_set(scenarios: dict[str, Scenario]) -> None:
    assert set(scenarios) == {
        "END_REFUSE_PII<-N1_INTENT",
        "N2_AUTH:missing_last4+zip",
        "END_REFUSE_AUTH<-N2_AUTH",
        "N5_CANCEL_ELIGIBILITY:missing_order_id",
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY",
        "END_CANCELLED<-N7_CANCEL",
        "END_TICKET<-N7_CANCEL",
        "END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL",
        "N8_ADDRESS_ELIGIBILITY:missing_new_address",
        "END_ADDRESS_DENIED<-N8_ADDRESS_ELIGIBILITY",
        "END_ADDRESS_UPDATED<-N9_UPDATE_ADDRESS",
        "END_BILLING_ANSWER<-N3_BILLING",
        "END_TICKET<-N4_CLARIFY",
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/N5_CANCEL_ELIGIBILITY#1",
        # the confirm loop (an unclear answer, asked again) and the clarify loop, unrolled once
        "END_CANCELLED<-N7_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#0",
        "END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#1",
        "END_REFUSE_PII<-N1_INTENT/N4_CLARIFY#0>N1_INTENT#0",
        "N2_AUTH:missing_last4+zip/N4_CLARIFY#0>N1_INTENT#1",
        "N2_AUTH:missing_last4+zip/N4_CLARIFY#0>N1_INTENT#2",
        "END_BILLING_ANSWER<-N3_BILLING/N4_CLARIFY#0>N1_INTENT#3",
        # a first call that times out and the retry its retry_policy asks for
        "END_REFUSE_AUTH<-N2_AUTH/verify_identity:timeout+retry",
        "N5_CANCEL_ELIGIBILITY:missing_order_id/get_account:timeout+retry",
        "N5_CANCEL_ELIGIBILITY:missing_order_id/get_plan_rules:timeout+retry",
        "END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry",
        # MC/DC of N2_AUTH's branch 2
        # (`verified == true and intent == change_address`): atom 1 alone
        "END_REFUSE_AUTH<-N2_AUTH/MCDC N2_AUTH#2.1",
    }


@pytest.mark.parametrize("trial", range(5))
def test_clean_agent_passes_every_case(
    supportops_project: Project, scenarios: dict[str, Scenario], trial: int
) -> None:
    for sid, s in scenarios.items():
        v = first_failure(
            mft_verdicts(supportops_project.spec, s, run(supportops_project, s, trial=trial))
        )
        assert v is None, f"{sid}: {v.explanation if v else ''}"


def test_skip_auth_fails_exactly_the_account_changes_on_the_auth_clause(
    supportops_project: Project, scenarios: dict[str, Scenario], account_changes: set[str]
) -> None:
    fails = failing(supportops_project, scenarios, {"skip_auth": 1.0})
    assert set(fails) == account_changes
    for v in fails.values():
        # the skipped verification, also where it then fails to refuse: one fault, one clause
        assert (v.contract, v.clause) == (
            "calls_in_order",
            "decision_tree.N2_AUTH.requirements.must_call_tools_in_order",
        )


def test_leak_pii_is_caught_by_the_canary_contract(
    supportops_project: Project, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["END_REFUSE_PII<-N1_INTENT"]
    trace = run(supportops_project, s, {"leak_pii": 1.0})
    verdict = agentprop.contracts.no_canary_leak(trace)
    assert not verdict.passed and "SSN_CANARY_" in verdict.explanation
    # also after a clarifying question (the clarify loop re-routes to the PII request)
    assert set(failing(supportops_project, scenarios, {"leak_pii": 1.0})) == {
        "END_REFUSE_PII<-N1_INTENT",
        "END_REFUSE_PII<-N1_INTENT/N4_CLARIFY#0>N1_INTENT#0",
    }


def test_skip_confirm_fails_the_confirmation_cases(
    supportops_project: Project, scenarios: dict[str, Scenario]
) -> None:
    fails = failing(supportops_project, scenarios, {"skip_confirm": 1.0})
    assert set(fails) == {
        "END_CANCELLED<-N7_CANCEL",
        "END_TICKET<-N7_CANCEL",
        "END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL",
        "END_CANCELLED<-N7_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#0",
        "END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#1",
        "END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry",
    }
    assert (
        "decided CANCELLED; the spec expects ASK_CONFIRM_CANCEL"
        in fails["END_CANCELLED<-N7_CANCEL"].explanation
    )
    # on the failure path the skipped question costs a fifth call in one turn: the limit trips
    assert "max_tool_calls_per_turn=4" in fails["END_TICKET<-N7_CANCEL"].explanation
    for sid in fails:
        trace = run(supportops_project, scenarios[sid], {"skip_confirm": 1.0})
        assert not agentprop.contracts.forbids_tools(trace, ["cancel_order"], turn=0).passed


def test_ignore_plan_rules_fails_the_denials(
    supportops_project: Project, scenarios: dict[str, Scenario]
) -> None:
    fails = failing(supportops_project, scenarios, {"ignore_plan_rules": 1.0})
    assert set(fails) == {
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY",
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/N5_CANCEL_ELIGIBILITY#1",
        "END_ADDRESS_DENIED<-N8_ADDRESS_ELIGIBILITY",
    }


def test_wrong_order_is_caught_by_the_order_contract(
    supportops_project: Project, scenarios: dict[str, Scenario], account_changes: set[str]
) -> None:
    fails = failing(supportops_project, scenarios, {"wrong_order": 1.0})
    assert fails and set(fails) <= account_changes
    for v in fails.values():
        assert v.contract == "calls_in_order"
        assert "verify_identity" in v.explanation


def test_window_off_by_one_only_shows_at_the_boundary(
    scenarios: dict[str, Scenario], supportops_project: Project
) -> None:
    assert failing(supportops_project, scenarios, {"window_off_by_one": 1.0}) == {}
    path = next(
        p
        for p in agentprop.spec.enumerate_paths(supportops_project.spec)
        if p.id == "END_CANCELLED<-N7_CANCEL"
    )
    env = agentprop.scenarios.solve(supportops_project.spec, supportops_project.bindings, path)
    env["order.days_since_created"] = env["plan_rules.cancel_window_days"]  # exactly at the edge
    edge = agentprop.scenarios.build_scenario(
        supportops_project.spec, supportops_project.bindings, path, assignment=env
    )
    assert (
        first_failure(mft_verdicts(supportops_project.spec, edge, run(supportops_project, edge)))
        is None
    )
    v = first_failure(
        mft_verdicts(
            supportops_project.spec, edge, run(supportops_project, edge, {"window_off_by_one": 1.0})
        )
    )
    assert v is not None and v.contract == "decision_is" and "CANCEL_DENIED" in v.explanation


def test_skip_auth_impatient_needs_impatient_phrasing(
    supportops_project: Project, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["END_CANCELLED<-N7_CANCEL"]
    assert (
        first_failure(
            mft_verdicts(
                supportops_project.spec, s, run(supportops_project, s, {"skip_auth_impatient": 1.0})
            )
        )
        is None
    )
    hurried = ["Cancel my order O-1001 right now! card last4 4242, zip 94107", "Yes, cancel it."]
    v = first_failure(
        mft_verdicts(
            supportops_project.spec,
            s,
            run(supportops_project, s, {"skip_auth_impatient": 1.0}, messages=hurried),
        )
    )
    assert v is not None and v.contract == "calls_in_order"


def test_every_knob_is_documented_and_probabilities_are_honoured(
    supportops_project: Project, scenarios: dict[str, Scenario]
) -> None:
    assert set(FAULTS) == set(SupportOpsAgent.FAULTS)
    s = scenarios["END_CANCELLED<-N7_CANCEL"]
    n = 400
    fails = sum(
        first_failure(
            mft_verdicts(
                supportops_project.spec, s, run(supportops_project, s, {"skip_auth": 0.25}, trial=i)
            )
        )
        is not None
        for i in range(n)
    )
    # binomial(400, 0.25): sd = 8.7; 4 sd bounds
    assert abs(fails - 100) <= 35
