"""Where a budgeted run's deepening pass spends what the budget has left (#31): the failing,
riskiest and weakest cases first, the others held back for the next pass."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop._agents.loading import make_factory
from agentprop._decide.holds import held, holding
from agentprop._decide.memo import TrialMemo
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.anytime import held_back, priority, runs_left, runs_needed
from agentprop._pipeline.report.model import CaseReport
from agentprop._pipeline.run import RunSettings, arun_cases, shrink_failures

ROOT = Path(__file__).resolve().parent.parent
SUPPORTOPS = ROOT / "examples" / "supportops"
sys.path.insert(0, str(SUPPORTOPS))
from agent import SupportOpsAgent  # noqa: E402

SAFE = "ci: 2 clean runs, else zero-failure, 59 clean runs (safety: policies.P1_NO_PII)"


def case(
    case_id: str,
    kind: str = "MFT",
    runs: int = 1,
    passes: int | None = None,
    verdict: str = "INCONCLUSIVE",
    rule: str | None = None,
) -> CaseReport:
    passes = runs if passes is None else passes
    return CaseReport(
        id=case_id,
        node="N",
        kind=kind,
        verdict=verdict,
        runs=runs,
        passes=passes,
        pass_rate=passes / runs if runs else 0.0,
        rule=rule,
    )  # type: ignore[arg-type]


def test_the_order_puts_failures_then_risky_kinds_then_safety_cases_then_the_weakest_first() -> (
    None
):
    cases = [
        case("mft deep", runs=3),
        case("mft", runs=1),
        case("explore safety", kind="EXPLORE", rule=SAFE),
        case("dir", kind="DIR", runs=2),
        case("probe", kind="PROBE"),
        case("near miss", kind="EXPLORE", runs=3, passes=2),
    ]
    ordered = [c.id for c in sorted(cases, key=priority)]
    # probe: fewer runs
    assert ordered == ["near miss", "probe", "dir", "explore safety", "mft", "mft deep"]


def test_runs_needed_counts_sides_and_skips_what_no_depth_changes() -> None:
    assert runs_needed(case("a", runs=1), 4) == 3
    assert runs_needed(case("dir", kind="DIR", runs=2), 2) == 2  # two sides of 2
    inv = case("inv", kind="INV", runs=3)
    inv.messages, inv.details = ["p1", "p2"], {"runs_per_side": 5}
    assert runs_needed(inv, 8) == 3 * 5 - 3  # three sides, at most 5 runs each
    assert runs_needed(case("f", runs=1, passes=0, verdict="FAIL"), 4) == 0
    assert runs_needed(case("corpus", kind="CORPUS"), 4) == 0  # never held: not counted either


def test_a_pass_holds_back_the_cases_past_what_the_runs_left_reach() -> None:
    budget = Budget(max_runs=10)
    for _ in range(7):
        budget.start_run()
    assert runs_left(budget.snapshot()) == 3
    cases = [
        case("mft 1"),
        case("mft 2"),
        case("probe", kind="PROBE"),
        case("dir", kind="DIR", runs=2),
    ]
    names = {"dir": ("DIR base x", "DIR perturbed y")}
    # depth 2: the DIR case (2 runs) and the PROBE case (1) fit in 3; both MFT cases wait
    assert held_back(cases, 2, budget.snapshot(), names) == {"mft 1", "mft 2"}
    # all fit: nothing held
    assert held_back(cases, 2, Budget(max_runs=100).snapshot(), names) == frozenset()
    assert held_back(cases, 2, Budget().snapshot(), names) == frozenset()  # no limit: nothing held


def test_a_hold_is_for_the_block_and_its_tasks_only() -> None:
    async def inside() -> bool:
        return held("x")

    async def main() -> tuple[bool, bool, bool]:
        with holding({"x"}):
            task = asyncio.ensure_future(inside())
            now = held("x")
        return now, await task, held("x")

    assert asyncio.run(main()) == (True, True, False)


def test_under_a_budget_probe_and_dir_cases_are_deepened_before_cheap_mft_ones() -> None:
    # SupportOps' 25 MFT, 105 PROBE and 18 DIR cases with 258 runs: every case gets its first
    # look, then what is left takes the PROBE and DIR cases to the profile's 2 clean runs before
    # any MFT case; in stage order the MFT cases took them all and 9 PROBE cases kept one run
    project = agentprop.load_project(SUPPORTOPS)
    agent = make_factory(SupportOpsAgent, {})
    settings = RunSettings(kinds=("mft", "probe", "dir"))
    report = asyncio.run(
        arun_cases(
            project,
            agent,
            project.scenarios(),
            settings,
            memo=TrialMemo(),
            budget=Budget(max_runs=258),
        )
    )
    runs = {
        kind: sorted(c.runs for c in report.cases if c.kind == kind)
        for kind in ("MFT", "PROBE", "DIR")
    }
    assert len(runs["PROBE"]) == 105 and len(runs["DIR"]) == 18
    assert runs["PROBE"][0] == 2 and runs["DIR"][0] >= 3, runs  # a DIR side is cut at most
    assert runs["MFT"][0] == 1, runs  # cheap cases wait


def test_the_runs_left_under_a_dollar_or_token_limit_are_estimated_from_the_runs_so_far() -> None:
    from agentprop._modelapi.budget import ModelPrice

    budget = Budget(max_usd=1.0, prices={"m": ModelPrice(1.0, 1.0)})
    assert runs_left(budget.snapshot()) is None  # nothing spent yet: nothing to estimate from
    for _ in range(2):
        budget.start_run()
        budget.charge("m", 62_500, 62_500)  # $0.125 a run
    assert runs_left(budget.snapshot()) == 6  # $0.75 left at $0.125 a run
    tokens = Budget(max_tokens=1000, max_runs=50)
    tokens.start_run()
    tokens.charge("m", 100, 100)
    assert runs_left(tokens.snapshot()) == 4  # the tighter of 49 runs and 800 tokens at 200 a run


def test_a_budgeted_run_reports_the_time_of_every_pass_not_the_last_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # each pass takes one second of a fake clock; the summary's duration covers them all
    import agentprop._pipeline.run as run_module

    clock = [0.0]
    passes = [0]
    real = run_module._arun_cases

    async def one_second_a_pass(*args: Any, **kwargs: Any) -> Any:
        passes[0] += 1
        clock[0] += 1.0
        return await real(*args, **kwargs)

    monkeypatch.setattr(run_module, "_arun_cases", one_second_a_pass)
    monkeypatch.setattr(run_module.time, "perf_counter", lambda: clock[0])
    project = agentprop.load_project(SUPPORTOPS)
    agent = make_factory(SupportOpsAgent, {})
    report = asyncio.run(
        arun_cases(
            project,
            agent,
            project.scenarios(),
            RunSettings(kinds=("mft",)),
            memo=TrialMemo(),
            budget=Budget(max_runs=40),
        )
    )
    assert passes[0] >= 3  # breadth, confirm, at least one deepening, the last
    assert report.metrics.duration_s == passes[0]


def test_a_budget_of_one_run_a_case_gives_every_case_a_run_and_reports_what_failed() -> None:
    # DataInsights' 10 MFT and 10 INV cases, 20 runs, one case at a time, an agent that makes
    # up the figures it states: every MFT case gets its run (the INV cases' originals reuse
    # them) and every INV case whose base passed a run of one paraphrase before any INV case
    # a second; the two runs that failed are reported as a bug, not confirmed. Before, the
    # first INV cases took a run of each of their two paraphrases and the last ones none.
    project = agentprop.load_project(ROOT / "examples" / "datainsights")
    agent = agentprop.load_agent(
        project.bindings.agent or "", project.base_dir, {"hallucinate_numbers": 1.0}
    )
    budget = Budget(max_runs=20)
    report = asyncio.run(
        arun_cases(
            project,
            agent,
            project.scenarios(),
            RunSettings(kinds=("mft", "inv"), concurrency=1),
            memo=TrialMemo(),
            budget=budget,
        )
    )
    assert budget.snapshot().runs == 20 == len(report.cases)
    mft = [c for c in report.cases if c.kind == "MFT"]
    inv = [c for c in report.cases if c.kind == "INV" and c.verdict != "NOT APPLICABLE"]
    assert len(mft) == 10 and len(inv) == 8
    assert all(c.runs == 1 for c in mft)
    # the original (reused) and one paraphrase at least; none got both before all got one
    assert all(c.runs >= 2 for c in inv), [(c.id, c.runs) for c in inv]
    failed = [c for c in mft if c.verdict == "FAIL"]
    assert failed and all(c.runs == 1 and "not confirmed" in c.decided_by for c in failed)
    shrink_failures(project, agent, report, budget=0, corpus=None)
    assert [b.key.split(":")[0] for b in report.bugs] == ["response_grounded"]
