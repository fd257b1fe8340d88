"""``--runs N`` is N runs of every case: an INV case N runs a side, not a hidden 20, so that
``--runs 1`` starts one run a case (an INV case's original run being its path's MFT run)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentprop import load_agent, load_project
from agentprop._decide.memo import TrialMemo
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.report.model import RunReport
from agentprop._pipeline.run import RunSettings, arun_cases, render_table

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def run(runs: int) -> tuple[RunReport, int]:
    project = load_project(QUICKSTART)
    agent = load_agent(project.bindings.agent or "", project.base_dir, {})
    budget = Budget()
    report = asyncio.run(
        arun_cases(
            project,
            agent,
            project.scenarios(),
            RunSettings(runs=runs, kinds=("mft", "inv")),
            budget=budget,
            memo=TrialMemo(),
        )
    )
    return report, budget.snapshot().runs


def test_runs_1_starts_one_run_an_inv_case_and_says_it_compared_nothing() -> None:
    report, started = run(1)
    inv = [c for c in report.cases if c.kind == "INV"]
    mft = [c for c in report.cases if c.kind == "MFT"]
    assert inv and mft
    # one run of each MFT case, one of each INV case's first paraphrase (the old code: 20 a side)
    assert started == len(mft) + len(inv)
    for case in inv:
        assert case.verdict == "INCONCLUSIVE"
        assert case.reason is not None and case.reason.startswith(
            "--runs 1: 1 run(s) a side, the first paraphrase only"
        )
        assert "--runs 5 or more compares every paraphrase" in case.reason
        # the rule names the runs taken, not only the test's planned 5 a side
        assert case.rule is not None and "1 of its 5 runs per side taken" in case.rule


@pytest.mark.parametrize("runs", [5, 6])
def test_runs_n_from_5_compares_every_paraphrase_on_n_runs_a_side(runs: int) -> None:
    report, started = run(runs)
    inv = [c for c in report.cases if c.kind == "INV"]
    mft = [c for c in report.cases if c.kind == "MFT"]
    assert all(c.verdict == "PASS" for c in report.cases)
    # the original side is its MFT case's N runs; each of two paraphrases N more
    assert started == runs * len(mft) + 2 * runs * len(inv)
    assert all(c.rule is not None and f"{runs} runs per side" in c.rule for c in inv)


def test_the_table_counts_an_undecided_inv_case_as_inconclusive_not_failed() -> None:
    report, _ = run(1)
    table = render_table(report)
    assert "INV cases: 0/2 passed, 2 INCONCLUSIVE (listed above)" in table
    assert "failures listed above" not in table
