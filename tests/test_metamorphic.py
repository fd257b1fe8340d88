"""Invariance and direction properties, calibrated against sampling noise."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agentprop
import agentprop.modelapi
import agentprop.scenarios
from agentprop import AgentPropertyViolation, Project
from agentprop._decide.metamorphic import check_direction, check_invariance, decision_signature
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo
from agentprop.scenarios import Scenario

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402


@pytest.fixture(scope="module")
def cancel(supportops_project: Project) -> Scenario:
    return supportops_project.scenario("END_CANCELLED<-N7_CANCEL")


CALM = ["I'd like to cancel order O-1001. Last four digits 4242, ZIP 94107", "Yes, cancel it."]
HURRIED = ["Cancel my order O-1001 right now! card last4 4242, zip 94107", "Yes, cancel it."]


def test_a_paraphrase_that_changes_behaviour_fails_invariance(
    supportops_project: Project, cancel: Scenario
) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.6})
    with pytest.raises(AgentPropertyViolation) as info:
        check_invariance(supportops_project, cancel, agent, [CALM, HURRIED], memo=TrialMemo())
    result = info.value.result
    calm, hurried = result.variants
    assert not calm.differs and hurried.differs
    assert hurried.p_value < 0.025  # Bonferroni over two variants
    assert any("N2_AUTH" in k for k in hurried.decisions)


def test_uniform_noise_is_not_blamed_on_paraphrases(
    supportops_project: Project, cancel: Scenario
) -> None:
    # An agent that skips auth 30% of the time whatever the phrasing: the variants differ from
    # the original only by sampling noise. Over 40 seeded repetitions the invariance check
    # must fail at most at the nominal rate (alpha = 0.05, Bonferroni over 2 variants).
    # Exact tests are conservative, so the realised rate is usually well below alpha; the
    # bound allows alpha plus 2 binomial standard errors (sd = sqrt(.05*.95/40) = 0.034).
    # require_base=False: this studies the two-sample test itself (in a run, an INV whose base
    # case fails 30% of the time is NOT APPLICABLE; see the NOT APPLICABLE tests below).
    agent = make_factory(SupportOpsAgent, {"skip_auth": 0.3})
    fails = 0
    reps = 40
    for seed in range(reps):
        r = check_invariance(
            supportops_project,
            cancel,
            agent,
            [CALM, HURRIED],
            n=20,
            memo=TrialMemo(),
            settings=agentprop.settings(seed=seed),
            raise_on_failure=False,
            require_base=False,
        )
        fails += r.verdict == "FAIL"
        assert r.original, "the original was sampled"
    assert fails / reps <= 0.05 + 2 * 0.034


def test_invariance_validates_its_arguments(supportops_project: Project, cancel: Scenario) -> None:
    with pytest.raises(agentprop.InvalidArgument, match="one per turn"):
        check_invariance(supportops_project, cancel, SupportOpsAgent, [["only one turn"]])
    with pytest.raises(agentprop.InvalidArgument, match="at least one variant"):
        check_invariance(supportops_project, cancel, SupportOpsAgent, [])
    with pytest.raises(agentprop.InvalidArgument, match="too few"):
        check_invariance(supportops_project, cancel, SupportOpsAgent, [CALM], n=2)


def test_budget_makes_invariance_inconclusive(
    supportops_project: Project, cancel: Scenario
) -> None:
    r = check_invariance(
        supportops_project,
        cancel,
        SupportOpsAgent,
        [CALM],
        memo=TrialMemo(),
        budget=agentprop.modelapi.Budget(max_runs=25),
        raise_on_failure=False,
    )
    assert r.verdict == "INCONCLUSIVE" and r.budget_exhausted and r.runs == 25


def test_direction_holds_for_the_clean_agent_and_breaks_under_a_fault(
    supportops_project: Project,
) -> None:
    ok = check_direction(
        supportops_project,
        "END_CANCELLED<-N7_CANCEL",
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY",
        SupportOpsAgent,
        memo=TrialMemo(),
    )
    assert ok.verdict == "PASS"
    assert ok.expected_change == ("CANCELLED", "CANCEL_DENIED")
    with pytest.raises(AgentPropertyViolation) as info:
        check_direction(
            supportops_project,
            "END_CANCELLED<-N7_CANCEL",
            "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY",
            make_factory(SupportOpsAgent, {"ignore_plan_rules": 1.0}),
            memo=TrialMemo(),
        )
    assert info.value.result.base.verdict == "PASS"
    assert info.value.result.perturbed.verdict == "FAIL"


def test_direction_needs_a_change_of_outcome(supportops_project: Project, cancel: Scenario) -> None:
    with pytest.raises(agentprop.InvalidArgument, match="same outcome"):
        check_direction(supportops_project, cancel, cancel, SupportOpsAgent)


def test_decision_signature_marks_broken_runs() -> None:
    trace = agentprop.Trace(
        turns=[
            agentprop.scenarios.Turn(
                index=0,
                user_message="hi",
                errors=[agentprop.scenarios.RunError(kind="timeout", message="slow")],
            )
        ]
    )
    assert decision_signature(trace) == "ERROR:timeout"
    ok = agentprop.Trace(
        turns=[
            agentprop.scenarios.Turn(index=0, user_message="hi", response={"decision": "CLARIFY"})
        ]
    )
    assert decision_signature(ok) == "CLARIFY"
