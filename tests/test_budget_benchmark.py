"""benchmarks/budget.py: the faults it runs on both zoos, and a table that says which targets were
met and which were not measured."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def budget() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "budget_benchmark", ROOT / "benchmarks" / "budget.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["budget_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_the_quick_run_takes_one_fault_per_example_and_full_takes_the_zoo(
    budget: ModuleType,
) -> None:
    quick = budget.chosen_faults(False)
    assert sorted(f.spec for f in quick) == sorted(budget.EXAMPLES)
    full = [(f.spec, f.knob, f.rate) for f in budget.chosen_faults(True)]
    assert sorted(full) == sorted((f.example, f.knob, f.rate) for f in budget.ZOO)
    # the examples in turn: a run stopped early has measured each of them alike
    assert [spec for spec, _, _ in full[:3]] == list(budget.EXAMPLES)
    assert full[:3] == [(f.spec, f.knob, f.rate) for f in quick]


def test_the_blind_zoo_runs_every_fault_its_manifest_calls_detectable(budget: ModuleType) -> None:
    manifest = json.loads(
        (ROOT / "benchmarks" / "_specs_zoo" / "MANIFEST.json").read_text(encoding="utf-8")
    )
    every = [
        (s["name"], f["knob"], f.get("detectable_in_principle", True))
        for s in manifest["specs"]
        for f in s["faults"]
    ]
    chosen, skipped = budget.blind_faults(full=True)
    assert [(t.spec, t.knob) for t in chosen] == [(s, k) for s, k, ok in every if ok]
    assert skipped == [f"{s}:{k}" for s, k, ok in every if not ok]
    assert {t.zoo for t in chosen} == {"blind"} and len(chosen) + len(skipped) == manifest[
        "fault_count"
    ]
    assert {t.rate for t in budget.blind_faults(0.5)[0]} == {0.5}


def summary(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "zoos_run": ["pack"],
        "faults": 3,
        "full": False,
        "found_rate_at_1x": 1.0,
        "found_rate_at_3x": 1.0,
        "found_rate_at_10x": 1.0,
        "found_rate_unlimited": 1.0,
        "found_rate_one_run_per_case": 1.0,
        "default_runs_per_case": 2.6,
        "false_alarms": 0,
        "clean_failures": 0,
        "clean_agent_errors": 0,
        "runs_one_run_per_case": 100,
        "runs_unlimited": 80,
        "zoos": {},
        "entries": [],
    }
    return {**base, **over}


def test_the_table_says_which_target_is_not_met(budget: ModuleType) -> None:
    assert "NOT MET" not in budget.render(summary())
    text = budget.render(summary(found_rate_at_1x=0.5, default_runs_per_case=3.5))
    assert (
        "found at 1x >= one run per case: NOT MET" in text
        and "default runs per case <= 3: NOT MET" in text
    )
    assert "found at 3x >= 0.9 of unlimited: met" in text
    # a baseline that found nothing gives no ratio, and says why
    assert "not measured (baseline found nothing or was not run)" in budget.render(
        summary(found_rate_one_run_per_case=0.0)
    )


def test_a_figure_not_measured_is_said_so_and_fails_its_target(budget: ModuleType) -> None:
    # the blind zoo alone: the bundled examples' runs per case were not measured
    blind_only = summary(zoos_run=["blind"], default_runs_per_case=None)
    text = budget.render(blind_only)
    assert (
        "default runs per case <= 3: not measured" in text
        and "runs started per case, bundled examples' correct agents: not measured" in text
    )
    assert budget.checks(blind_only)["default runs per case <= 3"] is None


def test_the_quick_blind_run_takes_the_first_detectable_fault_of_each_spec(
    budget: ModuleType,
) -> None:
    quick, _ = budget.blind_faults(full=False)
    full, _ = budget.blind_faults(full=True)
    assert [t.spec for t in quick] == list(dict.fromkeys(t.spec for t in full))
    assert all(t == next(f for f in full if f.spec == t.spec) for t in quick)


def test_the_baseline_counts_its_runs_started_per_kind(budget: ModuleType) -> None:
    # --runs 1 on the quickstart: one run of each MFT case, one of each INV case's paraphrase
    import asyncio

    from agentprop import load_agent, load_project
    from agentprop._decide.memo import TrialMemo
    from agentprop._decide.records import recording
    from agentprop._pipeline.run import RunSettings, arun_cases

    project = load_project(ROOT / "examples" / "quickstart")
    agent = load_agent(project.bindings.agent or "", project.base_dir, {})
    tally = budget.KindTally()
    with recording(tally):
        asyncio.run(
            arun_cases(
                project,
                agent,
                project.scenarios(),
                RunSettings(runs=1, kinds=("mft", "inv")),
                memo=TrialMemo(),
            )
        )
    assert dict(tally.started) == {"MFT": 2, "INV": 2}
    text = budget.render(
        summary(
            entries=[],
            one_run_per_case_by_kind=budget.per_case(
                {"MFT": {"cases": 2, "runs_started": 2}, "INV": {"cases": 2, "runs_started": 1}}
            ),
        )
    )
    assert "runs started / cases by kind: MFT 2/2 (1.00), INV 1/2 (0.50)" in text


def test_rejudge_counts_the_failures_again_without_running(budget: ModuleType) -> None:
    from benchmarks._support.adjudicated import failure_of

    failure = failure_of("nowhere", 0, "EXPLORE x", ["hi"], ["decision_tree.N1"])
    clean = budget.Outcome(1, 1, set(), ["EXPLORE x"], 0.0, [failure])
    zoo = budget.zoo_summary(
        budget.ZooResult(cases={"nowhere": 1}, clean={"nowhere": {"unlimited": clean}}), False
    )
    # as written by --json, then read back: the failing input survives the round trip
    written = json.loads(json.dumps(summary(false_alarms=0, zoos={"blind": zoo})))
    again = budget.rejudge(written)
    # nobody judged that input: a false alarm, in the zoo and in the total
    assert again["zoos"]["blind"]["false_alarms"] == 1 and again["false_alarms"] == 1
    assert again["zoos"]["blind"]["clean_failure_inputs"][0]["turns"] == ["hi"]
    assert "re-judged after the run" in budget.render(again)
    assert budget.checks(again)["false alarms 0"] is False


def test_merge_joins_the_zoos_of_two_runs_and_says_when_one_was_cut_short(
    budget: ModuleType,
) -> None:
    def zoo(found: bool, partial: bool) -> dict[str, Any]:
        row = {f"found_at_{k}x": found for k in budget.MULTIPLES} | {
            "zoo": "z",
            "spec": "s",
            "knob": "k",
            "rate": 1.0,
            "found_unlimited": True,
            "found_one_run_per_case": True,
            "runs_one_run_per_case": 10,
            "cases_one_run_per_case": 12,
            "runs_unlimited": 30,
            "one_run_per_case_by_kind": {},
        }
        clean = budget.Outcome(12, 30, set(), [], 0.0)
        result = budget.ZooResult(entries=[row], cases={"s": 12}, clean={"s": {"unlimited": clean}})
        result.one_run_by_kind = {"INV": {"cases": 2, "runs_started": 1}}
        return {**budget.combine({"pack" if found else "blind": result}, True), "partial": partial}

    both = budget.merged([zoo(True, False), zoo(False, True)])
    assert both["zoos_run"] == ["pack", "blind"] and both["faults"] == 2
    assert both["found_rate_at_1x"] == 0.5 and both["found_rate_one_run_per_case"] == 1.0
    assert both["one_run_per_case_by_kind"]["INV"]["runs_started"] == 2
    assert "(partial: 2 of 2 faults measured" in budget.render(both)
    with pytest.raises(SystemExit, match="more than one"):
        budget.merged([zoo(True, False), zoo(True, False)])
