"""The oracle on real runs of the reference agent, and its Hypothesis integration."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky

import agentprop
import agentprop.modelapi
import agentprop.spec
from agentprop import AgentPropertyViolation, Project, check
from agentprop.agents import make_factory
from agentprop.oracle import OracleSettings, TrialMemo

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402


def test_clean_agent_passes_with_the_sprt_minimum_of_runs(supportops_project: Project) -> None:
    # mode="sprt": the case is a safety case (P2_AUTH_GATE), zero-failure by default
    result = check(
        supportops_project,
        "END_CANCELLED<-N7_CANCEL",
        SupportOpsAgent,
        memo=TrialMemo(),
        settings=agentprop.settings(mode="sprt"),
    )
    # SPRT at tau=0.9 (0.95 vs 0.80, alpha=beta=0.05) accepts an always-passing agent after
    # exactly 18 runs: the theory the statistics tests check.
    assert result.verdict == "PASS"
    assert result.runs == 18
    assert result.interval[1] == pytest.approx(1.0)
    assert result.pass_hat_k["8"] == 1.0


def test_faulty_agent_fails_and_the_failure_names_the_clause(supportops_project: Project) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth": 0.5})
    with pytest.raises(AgentPropertyViolation) as info:
        check(supportops_project, "END_CANCELLED<-N7_CANCEL", agent, memo=TrialMemo())
    result = info.value.result
    assert result.verdict in ("FAIL", "UNSTABLE")
    assert result.runs < 18, "a clearly broken agent is rejected faster than a good one is accepted"
    assert result.clause == "decision_tree.N2_AUTH.requirements.must_call_tools_in_order"
    assert "verify_identity" in str(info.value)
    assert result.sample_traces, "failing traces are attached"
    trace = agentprop.Trace.from_json(result.sample_traces[0])
    assert "verify_identity" not in trace.tool_names()


def test_memoised_trials_make_repeated_checks_free_and_identical(
    supportops_project: Project,
) -> None:
    memo = TrialMemo()
    agent = make_factory(SupportOpsAgent, {"skip_auth": 0.2})
    first = check(
        supportops_project, "END_CANCELLED<-N7_CANCEL", agent, memo=memo, raise_on_failure=False
    )
    second = check(
        supportops_project, "END_CANCELLED<-N7_CANCEL", agent, memo=memo, raise_on_failure=False
    )
    assert second.memo_hits == second.runs == first.runs
    assert (second.passes, second.verdict) == (first.passes, first.verdict)


def test_seed_selects_trials_same_seed_replays_other_seeds_resample(
    supportops_project: Project,
) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth": 0.5})

    def passes(seed: int) -> tuple[int, ...]:
        r = check(
            supportops_project,
            "END_CANCELLED<-N7_CANCEL",
            agent,
            memo=TrialMemo(),
            raise_on_failure=False,
            settings=agentprop.settings(mode="fixed", runs=12, seed=seed),
        )
        return (r.passes, r.failures[0].first_trial if r.failures else -1)

    assert passes(3) == passes(3)
    assert len({passes(s) for s in range(8)}) > 1


def test_high_risk_specs_use_zero_failure_certification() -> None:
    spec = agentprop.spec.load_spec(
        Path(__file__).resolve().parents[1] / "examples" / "expenseguard" / "spec.yaml"
    )
    s = OracleSettings.for_spec(spec)
    assert (s.mode, s.runs, s.tau) == ("zero-failure", 50, 1.0)
    assert s.make_test().max_runs == 50


def test_budget_exhaustion_is_inconclusive_never_pass(supportops_project: Project) -> None:
    budget = agentprop.modelapi.Budget(max_runs=5)
    result = check(
        supportops_project,
        "END_CANCELLED<-N7_CANCEL",
        SupportOpsAgent,
        memo=TrialMemo(),
        budget=budget,
        raise_on_failure=False,
    )
    assert result.verdict == "INCONCLUSIVE"
    assert result.runs == 5 and result.budget_exhausted
    with pytest.raises(AgentPropertyViolation, match="budget ran out"):
        result.raise_for_verdict()


IMPATIENT = ["", " right now", " asap!"]
OPENERS = ["Please cancel my order", "I'd like to cancel my order", "Cancel my order"]


def _run_hypothesis_search(supportops_project: Project, run_seed: int) -> BaseException | None:
    memo = TrialMemo()
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    scenario = supportops_project.scenario("END_CANCELLED<-N7_CANCEL")

    @seed(run_seed)
    @settings(
        max_examples=15, deadline=None, database=None, phases=agentprop.agent_settings().phases
    )
    @given(opener=st.sampled_from(OPENERS), tail=st.sampled_from(IMPATIENT))
    def prop(opener: str, tail: str) -> None:
        first = f"{opener} O-1001{tail} - card last4 4242, zip 94107"
        check(supportops_project, scenario, agent, messages=[first, "Yes, cancel it."], memo=memo)

    try:
        prop()
    except BaseException as exc:  # noqa: BLE001 - we classify what Hypothesis raised
        return exc
    return None


@pytest.mark.slow
def test_fifty_seeded_hypothesis_runs_over_a_noisy_agent_raise_no_flaky(
    supportops_project: Project,
) -> None:
    kinds = []
    for run_seed in range(50):
        exc = _run_hypothesis_search(supportops_project, run_seed)
        assert not isinstance(exc, Flaky), f"seed {run_seed}: {exc!r}"
        kinds.append(type(exc).__name__ if exc else None)
    # the impatient phrasing is found (sampled_from draws all 9 combinations quickly) and the
    # failure is a statistical violation every time, never Flaky
    assert set(kinds) == {"AgentPropertyViolation"}


def test_decide_runs_decides_recorded_runs_like_decide_and_claims_nothing_when_short() -> None:
    """Runs recorded elsewhere (an MCP server's sessions) are decided by the same sequential
    test: on seeded simulations with known pass rates, decide_runs over enough recorded runs
    gives decide's verdict and run count; over too few it is INCONCLUSIVE."""
    import random

    from agentprop import Trace
    from agentprop._decide.oracle import TrialRecord, decide, decide_runs

    settings = OracleSettings(mode="sprt", tau=0.9)

    def judge(trace: Trace) -> TrialRecord:
        return TrialRecord(
            passed=trace.agent == "pass", signature=None if trace.agent == "pass" else "boom"
        )

    verdicts: dict[str, int] = {}
    for rate, simulation in [(1.0, 0), (0.5, 1), (0.95, 2), (0.7, 3)] * 5:
        rng = random.Random(f"{simulation}-{len(verdicts)}-{rate}")
        runs = [Trace(trial=i, agent="pass" if rng.random() < rate else "fail") for i in range(200)]
        live = decide(lambda i: runs[i], settings, judge=judge)
        recorded = decide_runs(runs, settings, judge=judge)
        assert (recorded.verdict, recorded.runs, recorded.passes) == (
            live.verdict,
            live.runs,
            live.passes,
        )
        short = decide_runs(runs[: live.runs - 1], settings, judge=judge)
        assert short.verdict == "INCONCLUSIVE" and short.runs == live.runs - 1
        verdicts[live.verdict] = verdicts.get(live.verdict, 0) + 1
    # the simulations decide both ways
    assert verdicts.get("PASS", 0) >= 5 and verdicts.get("FAIL", 0) >= 5
