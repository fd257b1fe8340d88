"""The promises zoo: does agentprop refuse to pass an agent that breaks a promise?

Usage: ``python benchmarks/promises.py [--json PATH] [--seed S] [--clean-seeds N] [--only NAME]``

Each fault of ``benchmarks/_promises_zoo`` (one module per promise of issue #11: ordering
anchors, a binding that must not downgrade a requirement, a lying ``respond``, an invented
step, destructive help 5% of the time, an always-wrong path under INV, a never-retrying agent,
a mutation score with its control run) is injected through a fault knob of its project's agent
and looked for with a default ``agentprop run`` (or the entry's own check). Then the clean agent
of every project the zoo uses, and of the three bundled examples, runs every case on
``--clean-seeds`` seeds: any case that is not PASS is a false alarm.

Baseline, measured in the same run: the same faulty agents decided by **MFT decisions alone**
(only ``decision_is`` verdicts count: what a harness that checks the final answer, and not the
promises over the trace, would see). The ratio says how many more of the zoo's faults the
promises catch.

``--json PATH`` writes ``{"found_rate", "baseline_found_rate", "false_alarms", "faults",
"runs_total", "entries": [...]}``. Seeded: a rerun prints the same table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _promises_zoo import ZooFault, ZooOutcome, all_entries  # noqa: E402

from agentprop import load_agent, load_project  # noqa: E402
from agentprop._pipeline.report.model import RunReport  # noqa: E402
from agentprop._pipeline.run import RunSettings, arun_cases  # noqa: E402

EXAMPLES = ("examples/supportops", "examples/expenseguard", "examples/datainsights")
FAILING = ("FAIL", "UNSTABLE")


def run_project(
    project_dir: str,
    *,
    faults: dict[str, float],
    agent_ref: str | None,
    kinds: tuple[str, ...],
    cases: tuple[str, ...],
    seed: int,
) -> RunReport:
    project = load_project(ROOT / project_dir)
    ref = agent_ref or project.bindings.agent
    if not ref:
        raise SystemExit(
            f"{project_dir}: no agent (give ZooFault.agent or `agent:` in the bindings)"
        )
    agent = load_agent(ref, project.base_dir, faults)
    scenarios = project.scenarios()
    if cases:
        scenarios = [s for s in scenarios if any(c in s.id for c in cases)]
    settings = RunSettings(kinds=kinds, case_filter=cases, seed=seed)
    return asyncio.run(arun_cases(project, agent, scenarios, settings, problems=project.problems))


def _case_text(case: object) -> str:
    failures = getattr(case, "failures", [])
    return (
        " ".join(f"{f.signature} {f.explanation}" for f in failures)
        + " "
        + str(getattr(case, "details", ""))
    )


def look_for(entry: ZooFault, seed: int) -> tuple[ZooOutcome, ZooOutcome]:
    """(agentprop's outcome, the decision-only baseline's outcome) for one zoo fault."""
    if entry.check is not None:
        outcome = entry.check(seed)
        return outcome, ZooOutcome(
            found=False, runs=0, note="custom check: no decision-only equivalent"
        )
    report = run_project(
        entry.project,
        faults=entry.faults,
        agent_ref=entry.agent,
        kinds=entry.kinds,
        cases=entry.cases,
        seed=seed,
    )
    hits = [c for c in report.cases if c.verdict in FAILING and entry.expect in _case_text(c)]
    note = (
        f"{hits[0].kind} {hits[0].id}: "
        f"{hits[0].failures[0].explanation if hits[0].failures else hits[0].verdict}"
        if hits
        else "no failing case"
    )
    decision_only = [
        c
        for c in report.cases
        if c.verdict in FAILING and any(f.signature.startswith("decision_is:") for f in c.failures)
    ]
    return (
        ZooOutcome(found=bool(hits), runs=report.metrics.runs, note=note),
        ZooOutcome(found=bool(decision_only), runs=report.metrics.runs),
    )


def clean_runs(projects: list[str], seeds: int) -> tuple[int, int, list[str]]:
    """(false alarms, runs, descriptions) of the clean agents over ``seeds`` seeds."""
    alarms: list[str] = []
    runs = 0
    for project_dir in projects:
        for seed in range(seeds):
            report = run_project(
                project_dir,
                faults={},
                agent_ref=None,
                kinds=RunSettings().kinds,
                cases=(),
                seed=seed,
            )
            runs += report.metrics.runs
            alarms += [
                f"{project_dir} seed {seed}: {c.kind} {c.id} {c.verdict}"
                for c in report.cases
                if c.verdict != "PASS"
            ]
    return len(alarms), runs, alarms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="json_path", help="write the figures to this file")
    parser.add_argument("--seed", type=int, default=0, help="seed of the faulty runs (default 0)")
    parser.add_argument(
        "--clean-seeds", type=int, default=10, help="seeds the clean agents run on (default 10)"
    )
    parser.add_argument(
        "--only", action="append", default=[], help="run only zoo entries whose name contains this"
    )
    args = parser.parse_args(argv)

    entries = [e for e in all_entries() if not args.only or any(o in e.name for o in args.only)]
    started = time.perf_counter()
    rows = []
    runs_total = 0
    print(
        f"{'item':>4}  {'fault':<28} {'agentprop':<10} {'decision-only':<13} {'runs':>6}  finding"
    )
    for entry in entries:
        ours, baseline = look_for(entry, args.seed)
        runs_total += ours.runs
        rows.append(
            {
                "name": entry.name,
                "item": entry.item,
                "project": entry.project,
                "found": ours.found,
                "baseline_found": baseline.found,
                "runs": ours.runs,
                "note": ours.note,
            }
        )
        print(
            f"{entry.item:>4}  {entry.name:<28} {'found' if ours.found else 'MISSED':<10} "
            f"{'found' if baseline.found else 'missed':<13} {ours.runs:>6}  {ours.note[:90]}"
        )
    projects = sorted({*EXAMPLES, *(e.project for e in entries)})
    false_alarms, clean_total, alarms = clean_runs(projects, args.clean_seeds)
    runs_total += clean_total
    for a in alarms[:20]:
        print(f"false alarm: {a}")
    n = len(rows)
    found_rate = sum(r["found"] for r in rows) / n if n else 0.0
    baseline_rate = sum(r["baseline_found"] for r in rows) / n if n else 0.0
    ratio = f"{found_rate / baseline_rate:.2f}x" if baseline_rate else "n/a (baseline found none)"
    print(
        f"found {sum(r['found'] for r in rows)}/{n} = {found_rate:.2f} (decision-only baseline "
        f"{baseline_rate:.2f}, ratio {ratio}); false alarms {false_alarms} over {len(projects)} "
        f"clean agents x {args.clean_seeds} seeds; {runs_total} runs, "
        f"{time.perf_counter() - started:.0f}s"
    )
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "found_rate": found_rate,
                    "baseline_found_rate": baseline_rate,
                    "false_alarms": false_alarms,
                    "faults": n,
                    "runs_total": runs_total,
                    "entries": rows,
                    "false_alarm_cases": alarms,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
