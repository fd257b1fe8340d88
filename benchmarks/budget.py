"""What a budget buys: the fault zoo of ``find.py`` at budgets of 1x, 3x and 10x the number of
cases and unlimited, beside one run per case (``--runs 1``), all in this one process.

Usage: ``python benchmarks/budget.py [--json PATH] [--full]``

For every fault of :data:`find.ZOO` (by default the first of each example; ``--full``: all of
them) the example's default run (the ``ci`` profile, every kind, ``--explore 12``, seed 0, no
corpus, nothing shrunk) is made at each budget with the fault on, plus once with ``--runs 1``
(fixed, one run a case, no budget). A fault is *found* when the run reports a bug (a case FAIL or
UNSTABLE). Then the clean reference agents run unlimited and at 1x (``--full``: at every budget):
any case that is FAIL or UNSTABLE is a false alarm; their unlimited runs give the default's runs
started per case (``default_runs_per_case``).

``--json PATH`` writes ``found_rate_at_1x``, ``found_rate_at_3x``, ``found_rate_at_10x``,
``found_rate_unlimited``, ``found_rate_one_run_per_case``, ``default_runs_per_case``,
``false_alarms`` and the per-fault entries. Targets (issue #31): found at 1x >= one run per case;
found at 3x >= 0.9 of unlimited; default runs per case <= 3; false alarms 0. Seeded: a rerun
prints the same table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from find import ZOO, Fault, project_of  # noqa: E402

from agentprop import load_agent  # noqa: E402
from agentprop._decide.memo import TrialMemo  # noqa: E402
from agentprop._modelapi.budget import Budget  # noqa: E402
from agentprop._pipeline.report.model import RunReport  # noqa: E402
from agentprop._pipeline.run import RunSettings, arun_cases, shrink_failures  # noqa: E402

EXAMPLES = ("supportops", "expenseguard", "datainsights")
MULTIPLES = (1, 3, 10)
QUICK_PER_EXAMPLE = 1


@dataclass
class Outcome:
    cases: int
    started: int
    found: bool
    false_alarms: list[str]
    seconds: float


def run(example: str, faults: dict[str, float], *, max_runs: int | None = None, one_run: bool = False) -> Outcome:
    """``agentprop run examples/EXAMPLE [--fault K=P] [--max-runs N | --runs 1] --corpus none
    --shrink-budget 0``, in process: bugs are grouped (what "found" reads), none is shrunk."""
    project = project_of(example)
    agent = load_agent(project.bindings.agent or "", project.base_dir, dict(faults))
    settings = RunSettings(runs=1) if one_run else RunSettings()
    budget = Budget(max_runs=max_runs)
    started = time.perf_counter()

    async def go() -> RunReport:
        report = await arun_cases(project, agent, project.scenarios(), settings, problems=project.problems, budget=budget, memo=TrialMemo())
        shrink_failures(project, agent, report, budget=0, corpus=None)  # groups the failures into bugs
        return report

    report = asyncio.run(go())
    bugs = [b for b in report.bugs if b.origin == "cases"]
    alarms = [c.id for c in report.cases if c.verdict in ("FAIL", "UNSTABLE")]
    return Outcome(report.metrics.cases, budget.snapshot().runs, bool(bugs), alarms, time.perf_counter() - started)


def chosen_faults(full: bool) -> list[Fault]:
    if full:
        return list(ZOO)
    return [f for ex in EXAMPLES for f in [z for z in ZOO if z.example == ex][:QUICK_PER_EXAMPLE]]


def measure(full: bool, log: Any = sys.stderr) -> dict[str, Any]:
    cases: dict[str, int] = {}
    clean: dict[str, dict[str, Outcome]] = {}
    for ex in EXAMPLES:
        unlimited = run(ex, {})
        cases[ex] = unlimited.cases
        clean[ex] = {"unlimited": unlimited}
        for k in MULTIPLES if full else MULTIPLES[:1]:
            clean[ex][f"{k}x"] = run(ex, {}, max_runs=k * cases[ex])
        print(f"  clean {ex}: {cases[ex]} cases, {unlimited.started} runs started unlimited", file=log)
    entries: list[dict[str, Any]] = []
    for fault in chosen_faults(full):
        knobs = {fault.knob: fault.rate}
        n = cases[fault.example]
        row: dict[str, Any] = {"example": fault.example, "knob": fault.knob, "rate": fault.rate}
        for k in MULTIPLES:
            o = run(fault.example, knobs, max_runs=k * n)
            row[f"found_at_{k}x"], row[f"runs_at_{k}x"] = o.found, o.started
        o = run(fault.example, knobs)
        row["found_unlimited"], row["runs_unlimited"] = o.found, o.started
        o = run(fault.example, knobs, one_run=True)
        row["found_one_run_per_case"], row["runs_one_run_per_case"] = o.found, o.started
        entries.append(row)
        print(f"  {fault.example}:{fault.knob}: " + ", ".join(f"{k}={v}" for k, v in row.items() if k.startswith("found")), file=log)
    n = len(entries)

    def rate(key: str) -> float:
        return sum(bool(e[key]) for e in entries) / n if n else 0.0

    started = sum(clean[ex]["unlimited"].started for ex in EXAMPLES)
    total_cases = sum(cases.values())
    alarms = {f"{ex} {which}": c.false_alarms for ex in EXAMPLES for which, c in clean[ex].items() if c.false_alarms}
    return {
        "faults": n,
        "full": full,
        "found_rate_at_1x": rate("found_at_1x"),
        "found_rate_at_3x": rate("found_at_3x"),
        "found_rate_at_10x": rate("found_at_10x"),
        "found_rate_unlimited": rate("found_unlimited"),
        "found_rate_one_run_per_case": rate("found_one_run_per_case"),
        "default_runs_per_case": started / total_cases,
        "default_runs_per_case_by_example": {ex: clean[ex]["unlimited"].started / cases[ex] for ex in EXAMPLES},
        "cases": cases,
        "false_alarms": sum(len(v) for v in alarms.values()),
        "false_alarm_cases": alarms,
        "runs_one_run_per_case": sum(e["runs_one_run_per_case"] for e in entries),
        "runs_unlimited": sum(e["runs_unlimited"] for e in entries),
        "entries": entries,
    }


def render(s: dict[str, Any]) -> str:
    lines = [
        f"{'fault':<44} {'1x':>6} {'3x':>6} {'10x':>6} {'unlim.':>7} {'runs 1':>7}",
    ]
    for e in s["entries"]:
        marks = [("found" if e[f"found_at_{k}x"] else "-") for k in MULTIPLES]
        lines.append(
            f"{e['example'] + ':' + e['knob']:<44} {marks[0]:>6} {marks[1]:>6} {marks[2]:>6} "
            f"{'found' if e['found_unlimited'] else '-':>7} {'found' if e['found_one_run_per_case'] else '-':>7}"
        )
    one = s["found_rate_one_run_per_case"]
    unlimited = s["found_rate_unlimited"]
    lines += [
        f"found rate: 1x {s['found_rate_at_1x']:.2f}, 3x {s['found_rate_at_3x']:.2f}, 10x {s['found_rate_at_10x']:.2f}, "
        f"unlimited {unlimited:.2f}; one run per case (baseline, same process) {one:.2f}",
        f"ratio 1x / one run per case: {s['found_rate_at_1x'] / one:.2f}"
        if one
        else "ratio 1x / one run per case: not measured (baseline found nothing)",
        f"runs started: unlimited default {s['runs_unlimited']}, one run per case {s['runs_one_run_per_case']} "
        f"({s['runs_unlimited'] / s['runs_one_run_per_case']:.2f}x)"
        if s["runs_one_run_per_case"]
        else "",
        "default runs started per case, clean agents: "
        + ", ".join(f"{ex} {v:.2f}" for ex, v in s["default_runs_per_case_by_example"].items())
        + f"; all {s['default_runs_per_case']:.2f}",
        f"false alarms (clean agents, {'every budget' if s['full'] else 'unlimited and 1x'}): {s['false_alarms']}",
    ]
    checks = {
        "found at 1x >= one run per case": s["found_rate_at_1x"] >= one,
        "found at 3x >= 0.9 of unlimited": s["found_rate_at_3x"] >= 0.9 * unlimited,
        "default runs per case <= 3": s["default_runs_per_case"] <= 3,
        "false alarms 0": s["false_alarms"] == 0,
    }
    lines.append("targets: " + "; ".join(f"{k}: {'met' if ok else 'NOT MET'}" for k, ok in checks.items()))
    if not s["full"]:
        lines.append(f"(quick: {s['faults']} of {len(ZOO)} faults; --full runs them all)")
    return "\n".join(line for line in lines if line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--full", action="store_true", help=f"every fault of the zoo ({len(ZOO)}), not one per example; clean agents at every budget")
    args = parser.parse_args(argv)
    summary = measure(args.full)
    print(render(summary))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    met = (
        summary["found_rate_at_1x"] >= summary["found_rate_one_run_per_case"]
        and summary["found_rate_at_3x"] >= 0.9 * summary["found_rate_unlimited"]
        and summary["default_runs_per_case"] <= 3
        and summary["false_alarms"] == 0
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
