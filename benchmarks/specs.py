"""The specs zoo of issue #23: trustworthy verdicts on specs nobody here wrote.

Usage: ``python benchmarks/specs.py [--json PATH] [--seeds N] [--kinds K] [--only NAME]``

``benchmarks/_specs_zoo`` (hash-frozen; checked first) holds four specs with bindings, a correct
agent each, fault knobs and planted spec defects, written blind. This benchmark measures:

- **false alarms**: cases of a correct agent that are not PASS, over ``--seeds`` seeds;
- **spec defects reported**: each planted defect (MANIFEST ``planted_spec_defects``) found by
  ``agentprop lint`` (a finding of the defect's kind naming its subject: the variable, tool,
  policy or field, see :func:`subject`) and by ``agentprop run`` (an untested item naming it);
- **found rate**: faults (each knob at probability 1, seed 1) with a failing case that the
  correct agent passes (a case failing on the correct agent too, seed 1, is a false alarm, not
  a finding), over the faults the manifest marks detectable; the undetectable ones (behind
  planted defect D2) must leave the run incomplete instead;
- **bugs per fault**: bugs (failure groups, unshrunk) of each found fault, mean;
- **reproducers valid rate**: each bug of each found fault is shrunk (``--shrink-budget`` runs)
  and its reproducer replayed (``--replay-runs`` runs per agent, fresh trials): it is valid when
  it is an instance of its scenario — the correct agent passes it (its expectations follow from
  its own choices) and the faulty agent fails it with the signature the shrinker chased.

Baseline, measured in the same run: the lint findings of the codes lint had before issue #23
(L001-L015, P001-P003), matched the same way; the ratio is reported/baseline. With
``--shrink-budget 0`` no reproducer is shrunk: ``reproducers_valid_rate`` is written as ``null``,
the output says it was not measured and the exit code is 1 (it is 1 whenever anything was not
measured).

``--json PATH`` writes ``{"false_alarms", "spec_defects_reported", "spec_defects_planted",
"found_rate", "bugs_per_fault", "reproducers_valid_rate", ...}``. Seeded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentprop import load_agent, load_project  # noqa: E402
from agentprop._agents.loading import LoadedAgent  # noqa: E402
from agentprop._agents.project import Project  # noqa: E402
from agentprop._decide.check import decide_scenario  # noqa: E402
from agentprop._decide.oracle import OracleSettings  # noqa: E402
from agentprop._decide.shrunk import ShrinkReport  # noqa: E402
from agentprop._pipeline.report.model import RunReport  # noqa: E402
from agentprop._pipeline.run import RunSettings, arun_cases, shrink_failures  # noqa: E402

ZOO = ROOT / "benchmarks" / "_specs_zoo"
FAILING = ("FAIL", "UNSTABLE")
OLD_CODES = {f"L{i:03d}" for i in range(1, 16)} | {"P001", "P002", "P003"}

# defect kind -> lint codes that report it
KIND_CODES: list[tuple[str, set[str]]] = [
    ("retry described twice", {"L017"}),
    ("more calls than", {"P001", "L016"}),
    ("no possible source", {"L019", "P005"}),
    ("policy names a tool", {"L020"}),
    ("failure with no route", {"L018"}),
    ("optional response field", {"L021"}),
]


def run_report(
    spec_dir: Path,
    faults: dict[str, float],
    kinds: tuple[str, ...],
    seed: int,
    explore: int,
    shrink_budget: int = 0,
) -> tuple[RunReport, list[ShrinkReport]]:
    project = load_project(spec_dir)
    agent = load_agent(project.bindings.agent or "", project.base_dir, faults)
    settings = RunSettings(kinds=kinds, seed=seed, explore=explore)
    report = asyncio.run(
        arun_cases(project, agent, project.scenarios(), settings, problems=project.problems)
    )
    shrunk = shrink_failures(project, agent, report, budget=shrink_budget, corpus=None, seed=seed)
    return report, shrunk


def replay(
    project: Project, agent: LoadedAgent, shrunk: ShrinkReport, prop: Any, runs: int
) -> tuple[bool, list[str]]:
    """``runs`` fresh runs of the reproducer (trials no shrink used): whether every run passed,
    and the signatures of the failures seen."""
    settings = OracleSettings(mode="fixed", runs=runs)
    result = asyncio.run(
        decide_scenario(project, shrunk.reproducer, agent, prop=prop, settings=settings, seed=991)
    )
    return result.passes == result.runs > 0, [f.signature for f in result.failures]


def reproducer_validity(
    spec_dir: Path, knob: str, report: RunReport, shrunk: list[ShrinkReport], runs: int
) -> list[dict[str, Any]]:
    """Each shrunk reproducer replayed on the correct and on the faulty agent."""
    project = load_project(spec_dir)
    correct = load_agent(project.bindings.agent or "", project.base_dir, {})
    faulty = load_agent(project.bindings.agent or "", project.base_dir, {knob: 1.0})
    out = []
    for bug in report.bugs:
        sr = next((s for s in shrunk if s.signature == bug.signature and bug.representative), None)
        if sr is None or bug.representative is None:
            continue
        explored = report._explored.get(bug.representative)
        prop = explored.prop if explored is not None else report._props.get(bug.representative)
        correct_passes, correct_sigs = replay(project, correct, sr, prop, runs)
        _, faulty_sigs = replay(project, faulty, sr, prop, runs)
        same = sr.signature in faulty_sigs
        out.append(
            {
                "bug": bug.id,
                "case": bug.representative,
                "signature": sr.signature,
                "choices_kept": sr.choices_kept,
                "correct_passes": correct_passes,
                "correct_failures": sorted(set(correct_sigs)),
                "faulty_same_signature": same,
                "faulty_failures": sorted(set(faulty_sigs)),
                "valid": correct_passes and same,
            }
        )
    return out


def lint_lines(spec_dir: Path) -> list[str]:
    """``agentprop lint SPEC_DIR``'s findings, from a fresh process (as a user runs it)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "agentprop._cli", "lint", str(spec_dir)],
        capture_output=True,
        text=True,
        env=env,
    )
    return [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if re.search(r"\b(error|warning|info) [A-Z]\d{3}:", line)
    ]


def _tokens(where: str) -> list[str]:
    return [
        t
        for t in re.findall(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+", where)
        if not t.startswith("max_")
    ]


# words of the spec format itself: they place a defect but do not name it
SPEC_KEYWORDS = {
    "failure_modes",
    "retry_policy",
    "input_schema",
    "output_schema",
    "response_contract",
    "optional_json_fields",
}


def subject(where: str) -> str:
    """The name a report of the defect must contain: the first name quoted in its ``where``
    (```loyalty_tier == gold```), else its first name that is not a word of the spec format
    (``N5_SEV1``, ``renew_loan``, ``total_due``). Matching any word of ``where`` let another
    tool's finding (one sharing ``retry_policy``) count for the defect."""
    quoted = [t for q in re.findall(r"`([^`]*)`", where) for t in _tokens(q)]
    return (quoted or [t for t in _tokens(where) if t not in SPEC_KEYWORDS])[0]


def defect_in_lint(
    defect: dict[str, Any], lines: list[str], codes_allowed: set[str] | None = None
) -> str | None:
    codes = set(next((c for k, c in KIND_CODES if k in defect["kind"]), set()))
    if codes_allowed is not None:
        codes &= codes_allowed
    name = subject(defect["where"])
    for line in lines:
        code = re.search(r"\b(?:error|warning|info) ([A-Z]\d{3}):", line)
        if code and code.group(1) in codes and re.search(rf"\b{re.escape(name)}\b", line):
            return line
    return None


def defect_in_run(defect: dict[str, Any], report: RunReport) -> str | None:
    if "retry described twice" in defect["kind"]:
        # read as one retry: no case expects the tool more than twice, no path through it lost
        project = load_project(ZOO / defect["spec"])
        tool = next(t for t in _tokens(defect["where"]) if t in project.spec.tools_by_name)
        most = max(
            sum(t.required_tools.count(tool) for t in sc.turns) for sc in project.scenarios()
        )
        lost = [p.path_id for p in project.path_problems if p.code == "P001"]
        return (
            f"at most {most} calls of {tool} expected; no unrealisable path"
            if most <= 2 and not lost
            else None
        )
    coverage = report.metrics.extra.get("coverage") or {}
    gaps = coverage.get("untested") or []
    # the defect's own name, or what the manifest says the run should name (END_GOLD_DESK)
    tokens = [
        subject(defect["where"]),
        *re.findall(r"END_[A-Z_]+|P\d_[A-Z_]+", defect.get("expected_run", "")),
    ]
    for gap in gaps:
        text = f"{gap['what']} {gap['id']} {gap['reason']}"
        if any(re.search(rf"\b{re.escape(t)}\b", text) for t in tokens):
            return text
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_path")
    parser.add_argument(
        "--seeds", type=int, default=3, help="seeds of each correct agent (default 3)"
    )
    parser.add_argument(
        "--kinds",
        default="mft,explore,boundary,probe",
        help="case kinds of every run (default mft,explore,boundary,probe)",
    )
    parser.add_argument(
        "--explore", type=int, default=4, help="inputs per path of EXPLORE cases (default 4)"
    )
    parser.add_argument("--only", help="one spec of the zoo")
    parser.add_argument(
        "--shrink-budget",
        type=int,
        default=40,
        help="runs per shrink of each found fault's bugs; 0 skips shrinking (default 40)",
    )
    parser.add_argument(
        "--replay-runs",
        type=int,
        default=10,
        help="runs of each reproducer on each agent (default 10)",
    )
    args = parser.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(","))
    started = time.perf_counter()

    frozen = subprocess.run(
        [sys.executable, str(ZOO / "freeze.py")], capture_output=True, text=True
    )
    why = (frozen.stdout + frozen.stderr).strip()[:200]
    print(f"zoo frozen: {'yes' if frozen.returncode == 0 else 'NO: ' + why}")
    manifest = json.loads((ZOO / "MANIFEST.json").read_text(encoding="utf-8"))
    specs = [s for s in manifest["specs"] if not args.only or s["name"] == args.only]
    defects = [
        d for d in manifest["planted_spec_defects"] if any(d["spec"] == s["name"] for s in specs)
    ]

    # correct agents
    false_alarms: list[str] = []
    by_kind: dict[str, int] = {}
    clean_reports: dict[str, RunReport] = {}
    for s in specs:
        for seed in range(1, args.seeds + 1):
            report, _ = run_report(ZOO / s["name"], {}, kinds, seed, args.explore)
            clean_reports.setdefault(s["name"], report)
            bad = [c.id for c in report.cases if c.verdict in FAILING]
            false_alarms += [f"{s['name']} seed {seed}: {c}" for c in bad]
            for c in report.cases:
                if c.verdict in FAILING:
                    by_kind[c.kind] = by_kind.get(c.kind, 0) + 1
            print(
                f"correct {s['name']} seed {seed}: {len(report.cases)} cases, "
                f"{len(bad)} not passing"
            )

    # planted defects
    reported_lint = reported_run = baseline = 0
    rows = []
    for d in defects:
        lines = lint_lines(ZOO / d["spec"])
        by_lint = defect_in_lint(d, lines)
        by_old = defect_in_lint(d, lines, OLD_CODES)
        by_run = defect_in_run(d, clean_reports[d["spec"]])
        reported_lint += by_lint is not None
        reported_run += by_run is not None
        baseline += by_old is not None
        rows.append(
            {
                "id": d["id"],
                "kind": d["kind"],
                "lint": by_lint,
                "run": by_run,
                "baseline_lint": by_old,
            }
        )
        print(
            f"{d['id']} {d['kind']}: lint {'yes' if by_lint else 'NO'}, run "
            f"{'yes' if by_run else 'no'}, baseline lint {'yes' if by_old else 'no'}"
        )

    # faults
    found = detectable = 0
    bugs: list[int] = []
    fault_rows = []
    replays: list[dict[str, Any]] = []
    for s in specs:
        for f in s["faults"]:
            report, shrunk = run_report(
                ZOO / s["name"],
                {f["knob"]: float(f.get("probability_for_tests", 1.0))},
                kinds,
                1,
                args.explore,
                args.shrink_budget,
            )
            checked = (
                reproducer_validity(ZOO / s["name"], f["knob"], report, shrunk, args.replay_runs)
                if shrunk
                else []
            )
            replays += [{"spec": s["name"], "knob": f["knob"], **r} for r in checked]
            clean_failing = {c.id for c in clean_reports[s["name"]].cases if c.verdict in FAILING}
            failing = [
                c.id for c in report.cases if c.verdict in FAILING and c.id not in clean_failing
            ]
            incomplete = bool((report.metrics.extra.get("coverage") or {}).get("untested"))
            if f.get("detectable_in_principle", True):
                detectable += 1
                found += bool(failing)
                if failing:
                    bugs.append(len(report.bugs))
            fault_rows.append(
                {
                    "spec": s["name"],
                    "knob": f["knob"],
                    "detectable": f.get("detectable_in_principle", True),
                    "failing_cases": len(failing),
                    "bugs": len(report.bugs),
                    "incomplete": incomplete,
                }
            )
            if failing:
                mark = "found"
            elif not f.get("detectable_in_principle", True):
                # behind a planted defect: no case can reach it; the run must say it is incomplete
                mark = "unreachable by design, not counted" + (
                    "; run incomplete, as it must be"
                    if incomplete
                    else "; BUT THE RUN SAID COMPLETE"
                )
            else:
                mark = "NOT FOUND" + (
                    " (the run was incomplete, but this fault is reachable)" if incomplete else ""
                )
            valid = (
                f"; reproducers valid {sum(r['valid'] for r in checked)}/{len(checked)}"
                if checked
                else ""
            )
            print(
                f"fault {s['name']}.{f['knob']}: {mark}; {len(failing)} failing case(s) the "
                f"correct agent passes, {len(report.bugs)} bug(s){valid}"
            )
            for r in checked:
                if not r["valid"]:
                    why = (
                        f"correct agent fails {', '.join(r['correct_failures'])}"
                        if not r["correct_passes"]
                        else f"faulty agent fails {', '.join(r['faulty_failures']) or 'nothing'}"
                    )
                    print(
                        f"  invalid reproducer of {r['case']} ({r['signature']}; kept "
                        f"{r['choices_kept'] or 'nothing'}): {why}"
                    )

    found_rate = found / detectable if detectable else None
    bugs_per_fault = sum(bugs) / len(bugs) if bugs else None
    valid_rate = sum(r["valid"] for r in replays) / len(replays) if replays else None
    ratio = f"{reported_lint / baseline:.2f}x" if baseline else f"{reported_lint} vs 0"
    print(
        f"false alarms: {len(false_alarms)} (correct agents, {args.seeds} seed(s) each, kinds "
        f"{','.join(kinds)}, explore {args.explore})"
    )
    print("  by kind: " + (", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())) or "none"))
    for case in false_alarms:
        print(f"  {case}")
    print(
        f"spec defects reported by lint: {reported_lint}/{len(defects)} (baseline, pre-#23 lint "
        f"codes: {baseline}/{len(defects)}; ratio {ratio}); by run: {reported_run}/{len(defects)}"
    )
    unreachable = [r for r in fault_rows if not r["detectable"]]
    print(
        f"found rate: {found}/{detectable} detectable faults"
        + (f" ({found_rate:.2f})" if found_rate is not None else "")
        + f"; {len(unreachable)} unreachable by design (behind a planted defect) not counted, "
        + f"{sum(r['incomplete'] for r in unreachable)} of them with the run incomplete"
    )
    print(
        "bugs per fault: "
        + (
            f"{bugs_per_fault:.2f} (mean over {len(bugs)} found faults, unshrunk groups)"
            if bugs_per_fault is not None
            else "no fault found"
        )
    )
    if valid_rate is None:
        why = (
            "--shrink-budget 0: nothing shrunk"
            if args.shrink_budget <= 0
            else "no reproducer was shrunk"
        )
        print(f"reproducers valid rate: not measured ({why})")
    else:
        print(
            f"reproducers valid rate: {sum(r['valid'] for r in replays)}/{len(replays)} "
            f"({valid_rate:.2f}; shrink budget {args.shrink_budget} runs, {args.replay_runs} "
            "replay runs per agent)"
        )
    print(f"{time.perf_counter() - started:.0f}s")
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "false_alarms": len(false_alarms),
                    "spec_defects_reported": reported_lint,
                    "spec_defects_reported_by_run": reported_run,
                    "spec_defects_planted": len(defects),
                    "baseline_spec_defects_reported": baseline,
                    "found_rate": found_rate,
                    "bugs_per_fault": bugs_per_fault,
                    "reproducers_valid_rate": valid_rate,
                    "not_measured": [] if valid_rate is not None else ["reproducers_valid_rate"],
                    "shrink_budget": args.shrink_budget,
                    "replay_runs": args.replay_runs,
                    "reproducers": replays,
                    "seeds": args.seeds,
                    "kinds": list(kinds),
                    "false_alarms_by_kind": by_kind,
                    "false_alarm_cases": false_alarms,
                    "defects": rows,
                    "faults": fault_rows,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return 0 if valid_rate is not None else 1  # 1: something was not measured


if __name__ == "__main__":
    raise SystemExit(main())
