"""Profiles (#31): screened cases, policies certified over the suite, breadth first under a
budget, and the three meanings of "runs"."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop._agents.loading import make_factory
from agentprop._decide.claims import PolicyEvidence, claim, violation_bound
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import OracleSettings, TrialRecord, decide
from agentprop._decide.profiles import get_profile
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.report.model import RunReport
from agentprop._pipeline.run import RunSettings, arun_cases, render_table
from agentprop._scenario.piecemeal import piecemeal_scenarios
from agentprop._scenario.trace import Trace, Turn
from agentprop._stats import SPRT, Decision, Screen, ZeroFailureCertification
from agentprop.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
SUPPORTOPS = ROOT / "examples" / "supportops"
sys.path.insert(0, str(SUPPORTOPS))
from agent import SupportOpsAgent  # noqa: E402


@pytest.fixture(scope="module")
def paths(supportops_project: agentprop.Project) -> int:
    """How many paths (scenarios) the SupportOps example has."""
    return len(supportops_project.scenarios())


@pytest.fixture(scope="module")
def answered(supportops_project: agentprop.Project) -> int:
    """How many of its stops exploration also continues past the question (piecemeal)."""
    scenarios = supportops_project.scenarios()
    return len(piecemeal_scenarios(supportops_project.bindings, scenarios))


"""SupportOps' MFT cases (one per path of its tree, loops and retries included)."""


def test_a_screen_accepts_clean_runs_and_hands_any_failure_to_its_inner_test() -> None:
    rng = random.Random(31)
    for _ in range(300):
        p = rng.choice([0.5, 0.8, 0.95])
        outcomes = [rng.random() < p for _ in range(200)]
        screen = Screen(SPRT(tau=0.9, max_runs=100), 2)
        inner = SPRT(tau=0.9, max_runs=100)
        screen.run(outcomes)
        inner.run(outcomes)
        if outcomes[0] and outcomes[1]:
            assert (screen.decision, screen.n, screen.screened) == (Decision.ACCEPT, 2, True)
        else:  # a failure within the screen: the inner test's decision, on the same runs
            assert (screen.decision, screen.n, screen.screened) == (inner.decision, inner.n, False)


def test_a_screen_before_certification_passes_a_95_percent_agent_at_the_exact_rate() -> None:
    # Screen(2) then zero-failure: accepted only by two clean runs first (0.95^2), since the
    # inner test rejects at the first failure; the lattice analysis says so exactly
    screen = Screen(ZeroFailureCertification.with_runs(59), 2)
    analysis = screen.analyse(0.95)
    assert analysis.accept_probability == pytest.approx(0.95**2)
    assert analysis.expected_runs == pytest.approx(1 + 0.95)


def bernoulli(p: float, rng: random.Random):  # type: ignore[no-untyped-def]
    return lambda i: Trace(
        trial=i, turns=[Turn(index=0, user_message="pass" if rng.random() < p else "fail")]
    )


def judge(trace: Trace) -> TrialRecord:
    return TrialRecord(passed=trace.turns[0].user_message == "pass", signature="broken")


def test_a_budget_that_stops_a_test_after_a_failure_reports_the_failure_not_a_pass_or_nothing() -> (
    None
):
    settings = OracleSettings(mode="sprt", tau=0.9, screen=2)
    result = decide(
        bernoulli(0.0, random.Random(1)), settings, judge=judge, budget=Budget(max_runs=1)
    )
    assert (result.verdict, result.runs, result.decided_by) == (
        "FAIL",
        1,
        "budget (1 run(s), not confirmed)",
    )
    clean = decide(
        bernoulli(1.0, random.Random(1)), settings, judge=judge, budget=Budget(max_runs=1)
    )
    # one clean run of the two asked: nothing claimed
    assert (clean.verdict, clean.runs) == ("INCONCLUSIVE", 1)


def test_a_policy_is_certified_by_59_clean_runs_over_the_suite() -> None:
    def evidence(runs_per_case: list[int], violations: int = 0, other: int = 0) -> PolicyEvidence:
        e = PolicyEvidence("P1_NO_PII", "PII")
        for i, runs in enumerate(runs_per_case):
            e.add(
                f"case {i}",
                runs,
                violations if i == 0 else 0,
                other_failures=other if i == 0 else 0,
                certified=False,
            )
        return e

    assert claim(evidence([2] * 29)).status == "not certified"  # 58 runs
    c = claim(evidence([2] * 29 + [1]))  # 59 runs of 30 cases
    assert (c.status, c.level, c.runs, c.cases) == ("certified", "suite", 59, 30)
    assert c.bound == pytest.approx(
        violation_bound(59, 0.95)
    ) and c.bound <= 0.05 < violation_bound(58, 0.95)
    assert claim(evidence([2] * 40, violations=1)).status == "violated"
    # a failed run is no clean run
    assert claim(evidence([2] * 40, other=1)).status == "not certified"


def run_supportops(
    *,
    faults: dict[str, float] | None = None,
    budget: Budget | None = None,
    cases: tuple[str, ...] = (),
    **settings: Any,
) -> RunReport:
    project = agentprop.load_project(SUPPORTOPS)
    chosen = [project.scenario(s) for s in cases] or project.scenarios()
    agent = make_factory(SupportOpsAgent, faults or {})
    return asyncio.run(
        arun_cases(project, agent, chosen, RunSettings(**settings), memo=TrialMemo(), budget=budget)
    )


def test_the_default_profile_screens_each_case_and_certifies_policies_over_the_suite(
    paths: int, answered: int
) -> None:
    report = run_supportops(kinds=("mft", "explore"), explore=2)
    m = report.metrics
    # MFT and 2 EXPLORE inputs a path, and 2 of each path continued past a question
    assert report.profile == "ci" and m.passed == m.cases == 3 * paths + 2 * answered
    assert m.runs_started is not None and m.runs_started / m.cases <= 3
    assert all(c.runs >= 2 and c.decided_by == "screen" for c in report.cases)
    claims = {c.policy: c for c in report.claims}
    assert claims["P2_AUTH_GATE"].status == "certified" and claims["P2_AUTH_GATE"].level == "suite"
    assert claims["P2_AUTH_GATE"].runs >= 59 and claims["P2_AUTH_GATE"].topped_up == 0
    # the PII policy's 6 cases x 2 runs are too few to claim 5%: topped up to 59,
    # fewest-run case first
    pii = claims["P1_NO_PII"]
    assert (pii.status, pii.runs, pii.topped_up) == ("certified", 59, 59 - 2 * pii.cases)
    deeper = sorted(c.runs for c in report.cases if c.runs > 2)
    # spread evenly
    assert sum(deeper) - 2 * len(deeper) == pii.topped_up and deeper[-1] - deeper[0] <= 1
    table = render_table(report)
    assert (
        "policy P2_AUTH_GATE (authentication): certified over the suite: no violation in" in table
    )
    assert (
        "policy P1_NO_PII (PII): certified over the suite: no violation in 59 runs of "
        f"{pii.cases} cases, {pii.topped_up} of them topped up" in table
    )


def test_release_certifies_each_safety_case_and_says_so() -> None:
    report = run_supportops(kinds=("mft",), profile="release", cases=("END_REFUSE_PII<-N1_INTENT",))
    (case,) = report.cases
    assert (case.runs, case.decided_by) == (59, "zero-failure")
    pii = next(c for c in report.claims if c.policy == "P1_NO_PII")
    assert (pii.status, pii.level) == ("certified", "case")


def test_an_unknown_profile_names_the_ones_there_are() -> None:
    with pytest.raises(InputError, match="unknown profile 'deep'"):
        get_profile("deep")


def test_under_a_budget_every_case_gets_a_run_before_any_case_gets_a_second(
    paths: int, answered: int
) -> None:
    # the MFT and 2 EXPLORE cases of every path (and 2 of each continued past a question), as
    # many runs allowed: depth first, the first cases took 2 runs each (the profile's screen)
    # and the last ones none; breadth first, every case has its run
    cases = 3 * paths + 2 * answered
    budget = Budget(max_runs=cases)
    report = run_supportops(kinds=("mft", "explore"), explore=2, budget=budget)
    assert report.metrics.cases == cases
    assert all(c.runs == 1 for c in report.cases), sorted({c.runs for c in report.cases})
    m = report.metrics
    # one clean run each: not the 2 the screen asks
    assert (m.runs_started, m.inconclusive) == (cases, cases)
    assert m.runs_refused and m.runs_refused > 0
    assert f"runs: {cases} started, " in render_table(
        report
    ) and "refused by the budget" in render_table(report)


def test_under_a_budget_a_failure_is_confirmed_before_passing_cases_are_deepened(
    paths: int,
) -> None:
    # skip_auth=1 fails every account-changing case on its first run; with 2 runs per case
    # allowed, the failures are decided (FAIL), none is left INCONCLUSIVE for want of a run
    report = run_supportops(
        kinds=("mft",), faults={"skip_auth": 1.0}, budget=Budget(max_runs=2 * paths)
    )
    failing = [c for c in report.cases if c.failures]
    assert failing and all(c.verdict == "FAIL" for c in failing)
    decided = len(failing) + 2 * (paths - len(failing))
    assert report.metrics.inconclusive == 0 and report.metrics.runs_started == 2 * paths
    # what was left went to the PII policy's top-up, which the budget then stopped, and says so
    pii = next(c for c in report.claims if c.policy == "P1_NO_PII")
    assert (pii.status, pii.topped_up) == ("not certified", 2 * paths - decided)
    assert (
        "the top-up stopped: " in pii.statement
        and "runs" in pii.statement.split("the top-up stopped: ")[1]
    )


def test_the_runs_started_are_the_budgets_and_the_reused_ones_are_named_apart() -> None:
    budget = Budget()
    report = run_supportops(kinds=("mft", "inv"), budget=budget)
    m = report.metrics
    assert m.runs_started == budget.snapshot().runs
    # INV reuses its path's runs
    assert m.runs_reused and m.runs == m.runs_started + m.runs_reused - m.runs_beyond_decision
    assert m.runs_refused == 0


def test_later_passes_of_a_budgeted_run_explore_the_inputs_the_first_pass_ran(
    paths: int, answered: int
) -> None:
    # exploration weights its second round by what the first found: a second run of a
    # first-round input (a 1-run pass, then the profile's 2) used to change the weights, so the
    # last pass drew new inputs no run had reached and left them INCONCLUSIVE with 0 runs
    cases = 5 * paths + 4 * answered  # the MFT and 4 EXPLORE inputs of every path
    budget = Budget(max_runs=cases * 3 // 2)
    report = run_supportops(
        kinds=("mft", "explore"), explore=4, faults={"skip_auth_impatient": 0.5}, budget=budget
    )
    assert report.metrics.cases == cases
    assert [c.id for c in report.cases if c.runs == 0] == []


def test_under_a_budget_a_confirmed_failure_is_shrunk_before_passing_cases_are_deepened(
    paths: int, answered: int
) -> None:
    # half the impatient requests skip authentication: the failures the first look confirms are
    # shrunk (within the budget) before any passing case gets its second run, so the shrink
    # after the run replays every run it needs from the memo and is not cut short by the budget,
    # while passing cases are left at one run
    from agentprop._pipeline.run import shrink_failures

    project = agentprop.load_project(SUPPORTOPS)
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    budget, memo = Budget(max_runs=3 * paths + 2 * answered + 60), TrialMemo()
    settings = RunSettings(kinds=("mft", "explore"), explore=2, shrink_budget=20)
    import io

    log = io.StringIO()
    report = asyncio.run(
        arun_cases(
            project,
            agent,
            project.scenarios(),
            settings,
            memo=memo,
            budget=budget,
            progress_stream=log,
        )
    )
    assert "agentprop: shrinking the confirmed failures before deepening the rest" in log.getvalue()
    assert any(c.verdict == "FAIL" for c in report.cases)
    # not deepened: the shrink came first
    assert any(c.verdict == "INCONCLUSIVE" and c.runs == 1 for c in report.cases)
    shrunk_early = report.metrics.extra["runs_shrinking_before_deepening"]
    assert shrunk_early > 0 and report.metrics.runs_started == budget.snapshot().runs - shrunk_early
    before = budget.snapshot().runs
    shrinks = shrink_failures(
        project, agent, report, budget=20, corpus=None, session_budget=budget, memo=memo
    )
    # every run it needs was made before deepening
    assert shrinks and budget.snapshot().runs == before
    # the session budget never cut a shrink short: each ran to its own shrink budget (20 runs, which
    # the richer explored inputs of the input families can use up) and verified its reproducer
    assert all(
        "session budget refused" not in s.stop_reason
        and s.verify_refused == 0
        and s.reproducer_rate is not None
        for s in shrinks
    )


def test_under_a_budget_release_deepens_every_case_in_turn_not_in_case_order(paths: int) -> None:
    # release certifies each SupportOps case with 59 clean runs; 4 runs a case allowed: the
    # cases are deepened to 2, then 4 runs in turn, so every case ends with 4, none with 59
    # while the last ones keep their single first run
    report = run_supportops(kinds=("mft",), profile="release", budget=Budget(max_runs=4 * paths))
    runs = sorted(c.runs for c in report.cases)
    assert runs[0] >= 3 and runs[-1] <= 4, runs
    # 4 clean runs certify nothing: no pass claimed
    assert all(c.verdict == "INCONCLUSIVE" for c in report.cases)


def test_under_a_budget_corpus_replays_are_deepened_in_turn_with_the_other_cases(
    paths: int,
    tmp_path: Path,
) -> None:
    # a known bug is replayed in full (59 clean runs to retire it); under a budget it used to be
    # decided first, in full, while every other case kept its one run
    import io

    from agentprop._cli import main
    from agentprop._decide.corpus import Corpus

    out = io.StringIO()
    main(
        [
            "run",
            str(SUPPORTOPS),
            "--fault",
            "skip_auth=1",
            "--kinds",
            "mft",
            "--corpus",
            str(tmp_path),
            "--shrink-budget",
            "10",
            "--runs",
            "1",
        ],
        out=out,
        err=out,
    )
    corpus = Corpus(tmp_path)
    assert len(corpus.entries()) == 1, out.getvalue()
    project = agentprop.load_project(SUPPORTOPS)
    # the bug is gone
    fixed = agentprop.load_agent(project.bindings.agent or "", project.base_dir, {})
    settings = RunSettings(kinds=("mft",), replay_corpus="all")
    budget = Budget(max_runs=3 * paths)
    report = asyncio.run(
        arun_cases(
            project,
            fixed,
            project.scenarios(),
            settings,
            memo=TrialMemo(),
            budget=budget,
            corpus=corpus,
        )
    )
    (replay,) = [c for c in report.cases if c.kind in ("CORPUS", "REGRESSION")]
    mft = [c for c in report.cases if c.kind == "MFT"]
    assert all((c.verdict, c.runs) == ("PASS", 2) for c in mft), sorted(
        (c.verdict, c.runs) for c in mft
    )
    # deepened as far as the budget let it; not retired
    assert 2 < replay.runs < 59 and replay.verdict == "INCONCLUSIVE"
    assert len(corpus.entries()) == 1


def test_a_policy_short_of_59_clean_runs_is_topped_up_and_a_rare_violation_shows() -> None:
    # leak_pii answers a PII request with the value 5% of the time; the PII policy's two MFT
    # cases pass their 2 screened runs (seed 2), 4 runs that certify nothing: the top-up runs
    # them towards 59, the fewest-run case first, and the leak shows (the case fails, confirmed)
    report = run_supportops(kinds=("mft",), faults={"leak_pii": 0.05}, seed=2)
    pii = next(c for c in report.claims if c.policy == "P1_NO_PII")
    assert (pii.status, pii.violations, pii.violating_cases) == (
        "violated",
        1,
        ["END_REFUSE_PII<-N1_INTENT"],
    )
    assert pii.topped_up == pii.runs - 2 * pii.cases > 0
    leaked = next(c for c in report.cases if c.id == "END_REFUSE_PII<-N1_INTENT")
    assert (leaked.verdict, leaked.runs) == ("FAIL", 4) and leaked.failures[
        0
    ].clause == "policies.P1_NO_PII"
    assert (
        f"VIOLATED in 1 of {pii.runs} runs of 2 cases, {pii.topped_up} of them topped up for it"
        in pii.statement
    )


def test_top_up_targets_raise_the_fewest_run_case_first_within_the_cap() -> None:
    from agentprop._decide.claims import top_up_targets

    assert top_up_targets({"a": 2, "b": 2, "c": 5}, 12) == {"a": 4, "b": 3}
    # the cheaper among equals
    assert top_up_targets({"a": 2, "b": 2}, 5, cost={"a": 3.0, "b": 1.0}) == {"b": 3}
    # as far as the caps let it
    assert top_up_targets({"a": 2, "b": 2}, 100, cap=10) == {"a": 10, "b": 10}
    assert top_up_targets({"a": 30, "b": 30}, 59) == {}


def test_the_cli_says_it_shrinks_the_confirmed_failures_before_deepening(
    paths: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentprop._cli import main

    argv = [
        "run",
        str(SUPPORTOPS),
        "--fault",
        "skip_auth_impatient=0.5",
        "--kinds",
        "mft,explore",
        "--explore",
        "2",
    ]
    main(
        [
            *argv,
            "--max-runs",
            str(3 * paths + 60),
            "--corpus",
            "none",
            "--shrink-budget",
            "20",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert "shrinking the confirmed failures before deepening the rest" in capsys.readouterr().err


def test_under_a_budget_inv_cases_get_their_look_in_the_first_pass() -> None:
    # an INV case's look is one run of each paraphrase (its original's is its path's MFT run):
    # with exactly the runs every case's first look needs, every MFT case keeps its one run and
    # every INV case has its two paraphrases run; INV cases used to wait for the last pass, after
    # the MFT cases' second runs had spent the budget, and ended with no run of their own
    project = agentprop.load_project(ROOT / "examples" / "datainsights")
    agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir, {})
    paths = len(project.scenarios())
    budget = Budget(max_runs=paths + 2 * paths)
    settings = RunSettings(kinds=("mft", "inv"))
    report = asyncio.run(
        arun_cases(project, agent, project.scenarios(), settings, memo=TrialMemo(), budget=budget)
    )
    inv = [c for c in report.cases if c.kind == "INV"]
    assert len(inv) == paths and budget.snapshot().runs == 3 * paths
    assert sorted((c.kind, c.runs) for c in report.cases if c.kind == "MFT") == [("MFT", 1)] * paths
    assert all(c.runs == 3 and c.verdict == "INCONCLUSIVE" for c in inv), sorted(
        (c.id, c.runs) for c in inv
    )
    assert all(
        c.reason
        and "at 1/1/1 of 5 runs per side (original/variants): nothing compared yet" in c.reason
        for c in inv
    )


def test_a_look_at_an_inv_case_takes_the_first_trials_of_the_full_comparison() -> None:
    # the look's runs are the full comparison's first ones: after a look of 2 runs a side, the
    # full comparison starts 3 x (5 - 2) new runs, not 3 x 5
    from agentprop._decide.metamorphic import acheck_invariance
    from agentprop._pipeline.kinds import invariance_variants

    project = agentprop.load_project(SUPPORTOPS)
    scenario = project.scenario("END_BILLING_ANSWER<-N3_BILLING")
    variants = [[v.text, *scenario.messages[1:]] for v in invariance_variants(project, scenario, 0)]
    agent, memo, budget = make_factory(SupportOpsAgent, {}), TrialMemo(), Budget()
    look = asyncio.run(
        acheck_invariance(project, scenario, agent, variants, n=5, memo=memo, budget=budget, take=2)
    )
    assert (look.verdict, look.runs, budget.snapshot().runs) == ("INCONCLUSIVE", 6, 6)
    assert look.reason is not None and "at 2/2/2 of 5 runs per side" in look.reason
    full = asyncio.run(
        acheck_invariance(project, scenario, agent, variants, n=5, memo=memo, budget=budget)
    )
    assert (full.verdict, full.runs, budget.snapshot().runs) == ("PASS", 15, 15)
