"""What a budget buys: the fault zoos at budgets of 1x, 3x and 10x the number of cases and
unlimited, beside one run per case (``--runs 1``), all in this one process.

Usage:
``python benchmarks/budget.py [--json PATH] [--zoo pack|blind|both] [--quick | --full]
[--blind-rate P]``; ``python benchmarks/budget.py --rejudge JSON [--json PATH]``

Two zoos. ``pack``: the pack-derived faults of :data:`find.ZOO` on the bundled examples (by
default the first of each example; ``--full``: all of them). ``blind``: the faults of the frozen
blind spec zoo ``benchmarks/_specs_zoo`` (its MANIFEST's knobs at their
``probability_for_tests``, or ``--blind-rate``; read only, its hash checked first) the manifest
marks detectable (by default the first of each spec; ``--full``: all of them). For every fault the
spec's default run (the ``ci`` profile, every kind, ``--explore 12``, seed 0, no corpus, nothing
shrunk) is made at each budget with the fault on, plus once with ``--runs 1`` (fixed, one run a
case, no budget: an INV case one run of its first paraphrase, its original's being its path's MFT
run), whose runs started are counted per case kind. A fault is *found* when the run reports a bug
(failures grouped by signature) that the spec's correct agent does not show in its own runs
(unlimited, and at the same budget, or with ``--runs 1``, when it was run there): a correct
agent's false alarm is not a find. The correct agents run unlimited, at 1x (``--full``: at every
budget) and with ``--runs 1``: any case that is FAIL or UNSTABLE at a budget is a false alarm unless
a frozen blind adjudication (``benchmarks/_adjudication``) judged that very input valid and the
agent wrong on it (then it is counted as the agent's error, beside the false alarms); the
bundled examples' unlimited runs give the default's runs started per case
(``default_runs_per_case``).

``--json PATH`` writes ``found_rate_at_1x``, ``found_rate_at_3x``, ``found_rate_at_10x``,
``found_rate_unlimited``, ``found_rate_one_run_per_case``, ``default_runs_per_case``,
``false_alarms`` (over the zoos run), ``one_run_per_case_by_kind`` (the baseline's cases and
runs started per kind), the same per zoo under ``zoos`` (with the correct agents' failing inputs,
which ``--rejudge`` judges again against the adjudications of a later day, running nothing) and
the per-fault entries.
Targets (issue #31): found at 1x >= one run per case; found at 3x >= 0.9 of unlimited; default
runs per case <= 3; false alarms 0. Seeded: a rerun prints the same table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from find import ZOO, project_of  # noqa: E402

from agentprop import load_agent, load_project  # noqa: E402
from agentprop._agents.project import Project  # noqa: E402
from agentprop._decide.memo import TrialMemo  # noqa: E402
from agentprop._decide.records import (  # noqa: E402
    AnyRecord,
    DecisionStart,
    Recorder,
    TrialLine,
    recording,
)
from agentprop._modelapi.budget import Budget  # noqa: E402
from agentprop._pipeline.report.model import RunReport  # noqa: E402
from agentprop._pipeline.run import RunSettings, arun_cases, shrink_failures  # noqa: E402
from agentprop._scenario.trace import Trace  # noqa: E402
from benchmarks._support.adjudicated import Adjudications, Failure, failure_of  # noqa: E402

EXAMPLES = ("supportops", "expenseguard", "datainsights")
MULTIPLES = (1, 3, 10)
QUICK_PER_EXAMPLE = 1
BLIND = ROOT / "benchmarks" / "_specs_zoo"
ZOOS = ("pack", "blind")
KINDS = ("MFT", "EXPLORE", "PROBE", "BOUNDARY", "DIR", "INV", "JUDGE", "REGRESSION", "CORPUS")


class KindTally(Recorder):
    """A recorder that writes nothing and counts the runs started per case kind (a decision
    is labelled MFT, or named after its case: ``INV …``, ``DIR …``, ``EXPLORE …``)."""

    def __init__(self) -> None:  # no files: Recorder's own __init__ opens them
        self._lock = threading.Lock()
        self._next = 0
        self.lines = 0
        self.shard = None
        self.kind_of: dict[int, str] = {}
        self.started: Counter[str] = Counter()

    def write(self, record: AnyRecord) -> None:
        with self._lock:
            if isinstance(record, DecisionStart):
                word = record.case.split(" ", 1)[0].upper()
                # a decision named by its scenario alone is that scenario's MFT check
                self.kind_of[record.decision] = record.kind or (word if word in KINDS else "MFT")
            elif isinstance(record, TrialLine) and record.status == "started":
                self.started[self.kind_of.get(record.decision, "MFT")] += 1

    def write_trace(self, trace_id: str, trace: Trace) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Target:
    """One fault of a zoo: the spec it breaks, its knob and rate."""

    zoo: str
    spec: str
    """The example (``pack``) or the blind zoo's spec directory (``blind``)."""
    knob: str
    rate: float


@dataclass
class Outcome:
    cases: int
    started: int
    bugs: set[str]
    """The keys of the bugs the run reported (failures grouped by signature, turn left out)."""
    failing: list[str]
    """The cases that are FAIL or UNSTABLE (a false alarm when the agent is correct, unless a
    blind adjudication judged the input valid and the agent wrong: see :func:`zoo_summary`)."""
    seconds: float
    failures: list[Failure] = field(default_factory=list)
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per case kind: its ``cases`` and the ``runs_started`` for them (counted when asked)."""


_BLIND_PROJECTS: dict[str, Project] = {}


def project(zoo: str, spec: str) -> Project:
    if zoo == "pack":
        return project_of(spec)
    if spec not in _BLIND_PROJECTS:
        _BLIND_PROJECTS[spec] = load_project(BLIND / spec)
    return _BLIND_PROJECTS[spec]


def run(
    zoo: str,
    spec: str,
    faults: dict[str, float],
    *,
    max_runs: int | None = None,
    one_run: bool = False,
    count_kinds: bool = False,
) -> Outcome:
    """``agentprop run SPEC [--fault K=P] [--max-runs N | --runs 1] --corpus none
    --shrink-budget 0``, in process: bugs are grouped (what "found" reads), none is shrunk.
    ``count_kinds``: count the runs started per case kind (:class:`KindTally`)."""
    proj = project(zoo, spec)
    agent = load_agent(proj.bindings.agent or "", proj.base_dir, dict(faults))
    settings = RunSettings(runs=1) if one_run else RunSettings()
    budget = Budget(max_runs=max_runs)
    started = time.perf_counter()

    async def go() -> RunReport:
        report = await arun_cases(
            proj,
            agent,
            proj.scenarios(),
            settings,
            problems=proj.problems,
            budget=budget,
            memo=TrialMemo(),
        )
        shrink_failures(proj, agent, report, budget=0, corpus=None)  # groups the failures into bugs
        return report

    tally = KindTally() if count_kinds else None
    with recording(tally) if tally is not None else contextlib.nullcontext():
        report = asyncio.run(go())
    by_kind: dict[str, dict[str, int]] = {}
    if tally is not None:
        cases = Counter(c.kind for c in report.cases)
        by_kind = {
            k: {"cases": cases[k], "runs_started": tally.started[k]}
            for k in sorted(set(cases) | set(tally.started), key=_kind_order)
        }
    bugs = {b.key for b in report.bugs if b.origin == "cases"}
    bad = [c for c in report.cases if c.verdict in ("FAIL", "UNSTABLE")]
    return Outcome(
        report.metrics.cases,
        budget.snapshot().runs,
        bugs,
        [c.id for c in bad],
        time.perf_counter() - started,
        [failure_of(spec, 0, c.id, c.messages, (f.clause for f in c.failures)) for c in bad],
        by_kind,
    )


def _kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def add_kinds(into: dict[str, dict[str, int]], more: dict[str, dict[str, Any]]) -> None:
    for kind, counts in more.items():
        mine = into.setdefault(kind, {"cases": 0, "runs_started": 0})
        for key in mine:
            mine[key] += counts[key]


def per_case(by_kind: dict[str, dict[str, int]]) -> dict[str, dict[str, float | int | None]]:
    """``by_kind`` with each kind's runs started per case."""
    return {
        kind: {**c, "runs_per_case": c["runs_started"] / c["cases"] if c["cases"] else None}
        for kind, c in sorted(by_kind.items(), key=lambda kv: _kind_order(kv[0]))
    }


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((BLIND / "MANIFEST.json").read_text(encoding="utf-8"))
    return data


def check_blind_frozen() -> None:
    """The blind zoo is read only: refuse to measure on a copy that differs from its freeze."""
    done = subprocess.run(
        [sys.executable, str(BLIND / "freeze.py")], capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode != 0:
        raise SystemExit(
            "benchmarks/_specs_zoo does not match its FREEZE.sha256: "
            f"{(done.stdout + done.stderr).strip()}"
        )


def blind_faults(rate: float | None = None, *, full: bool = True) -> tuple[list[Target], list[str]]:
    """The blind zoo's faults the manifest marks detectable (``full``: all; else the first of
    each spec), and the knobs it marks not."""
    chosen: list[Target] = []
    skipped: list[str] = []
    for s in manifest()["specs"]:
        mine: list[Target] = []
        for f in s["faults"]:
            if not f.get("detectable_in_principle", True):
                skipped.append(f"{s['name']}:{f['knob']}")
                continue
            mine.append(
                Target(
                    "blind",
                    s["name"],
                    f["knob"],
                    rate if rate is not None else float(f.get("probability_for_tests", 1.0)),
                )
            )
        chosen += mine if full else mine[:QUICK_PER_EXAMPLE]
    return chosen, skipped


def chosen_faults(full: bool) -> list[Target]:
    """The pack zoo's faults: the first of each example, or (``full``) all of them, the
    examples taken in turn (so a run cut short has measured each example alike)."""
    per_example = [[z for z in ZOO if z.example == ex] for ex in EXAMPLES]
    faults = (
        [f for turn in itertools.zip_longest(*per_example) for f in turn if f is not None]
        if full
        else [f for mine in per_example for f in mine[:QUICK_PER_EXAMPLE]]
    )
    return [Target("pack", f.example, f.knob, f.rate) for f in faults]


@dataclass
class ZooResult:
    entries: list[dict[str, Any]] = field(default_factory=list)
    cases: dict[str, int] = field(default_factory=dict)
    clean: dict[str, dict[str, Outcome]] = field(default_factory=dict)
    clean_one_run: dict[str, Outcome] = field(default_factory=dict)
    """The correct agent with ``--runs 1``: its bugs are not finds of the baseline."""
    skipped: list[str] = field(default_factory=list)
    one_run_by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    """The baseline's (``--runs 1``, every fault's run) cases and runs started per kind."""


def measure_zoo(
    zoo: str,
    targets: list[Target],
    full: bool,
    log: Any,
    skipped: list[str] | None = None,
    after_each: Callable[[ZooResult], None] = lambda r: None,
) -> ZooResult:
    """Measure ``targets``; ``after_each`` sees the result so far after each fault."""
    out = ZooResult(skipped=list(skipped or []))
    specs = list(dict.fromkeys(t.spec for t in targets)) if zoo == "blind" else list(EXAMPLES)
    for spec in specs:
        unlimited = run(zoo, spec, {})
        out.cases[spec] = unlimited.cases
        out.clean[spec] = {"unlimited": unlimited}
        for k in MULTIPLES if full else MULTIPLES[:1]:
            out.clean[spec][f"{k}x"] = run(zoo, spec, {}, max_runs=k * out.cases[spec])
        out.clean_one_run[spec] = run(zoo, spec, {}, one_run=True)
        failing = sum(len(o.failing) for o in out.clean[spec].values())
        print(
            f"  clean {zoo}:{spec}: {out.cases[spec]} cases, {unlimited.started} runs started "
            f"unlimited, {failing} failing case(s) over its budgets (judged in the summary), "
            f"{len(out.clean_one_run[spec].failing)} with --runs 1",
            file=log,
        )
    for t in targets:
        knobs = {t.knob: t.rate}
        n = out.cases[t.spec]
        clean = out.clean[t.spec]

        def found(o: Outcome, at: str, clean: dict[str, Outcome] = clean) -> bool:
            known = clean["unlimited"].bugs | (clean[at].bugs if at in clean else set())
            return bool(o.bugs - known)

        def found_one_run(o: Outcome, spec: str = t.spec) -> bool:
            return bool(o.bugs - out.clean[spec]["unlimited"].bugs - out.clean_one_run[spec].bugs)

        row: dict[str, Any] = {"zoo": zoo, "spec": t.spec, "knob": t.knob, "rate": t.rate}
        for k in MULTIPLES:
            o = run(zoo, t.spec, knobs, max_runs=k * n)
            row[f"found_at_{k}x"], row[f"runs_at_{k}x"] = found(o, f"{k}x"), o.started
        o = run(zoo, t.spec, knobs)
        row["found_unlimited"], row["runs_unlimited"] = found(o, "unlimited"), o.started
        o = run(zoo, t.spec, knobs, one_run=True, count_kinds=True)
        row["found_one_run_per_case"], row["runs_one_run_per_case"] = found_one_run(o), o.started
        row["cases_one_run_per_case"] = o.cases
        row["one_run_per_case_by_kind"] = o.by_kind
        add_kinds(out.one_run_by_kind, o.by_kind)
        out.entries.append(row)
        after_each(out)
        print(
            f"  {zoo}:{t.spec}:{t.knob}: "
            + ", ".join(f"{k}={v}" for k, v in row.items() if k.startswith("found")),
            file=log,
        )
    return out


def rates(entries: list[dict[str, Any]]) -> dict[str, float | None]:
    """Found rates over ``entries`` (``None``: no fault was run, so nothing was measured)."""
    keys = {f"found_rate_at_{k}x": f"found_at_{k}x" for k in MULTIPLES}
    keys |= {
        "found_rate_unlimited": "found_unlimited",
        "found_rate_one_run_per_case": "found_one_run_per_case",
    }
    n = len(entries)
    return {
        name: (sum(bool(e[key]) for e in entries) / n if n else None) for name, key in keys.items()
    }


def zoo_summary(r: ZooResult, full: bool) -> dict[str, Any]:
    alarms = {
        f"{spec} {which}": c.failing
        for spec, runs in r.clean.items()
        for which, c in runs.items()
        if c.failing
    }
    # a correct agent's failure is a false alarm unless a blind adjudicator judged its input
    # valid and its expectation following from the spec (benchmarks/_adjudication)
    failures = [f for runs in r.clean.values() for c in runs.values() for f in c.failures]
    started = sum(runs["unlimited"].started for runs in r.clean.values())
    total = sum(r.cases.values())
    return {
        "faults": len(r.entries),
        "entries": r.entries,
        **rates(r.entries),
        "default_runs_per_case": started / total if total else None,
        "default_runs_per_case_by_spec": {
            spec: runs["unlimited"].started / r.cases[spec] for spec, runs in r.clean.items()
        },
        "default_runs_started_by_spec": {
            spec: runs["unlimited"].started for spec, runs in r.clean.items()
        },
        # the correct agents with --runs 1: their cases and runs started
        "one_run_per_case_clean": {
            spec: {"cases": o.cases, "runs_started": o.started}
            for spec, o in r.clean_one_run.items()
        },
        "cases": r.cases,
        **judge(failures),
        "clean_failure_cases": alarms,
        # what --rejudge re-counts against the adjudications of a later day
        "clean_failure_inputs": [
            {**asdict(f), "turns": list(f.turns), "clauses": sorted(f.clauses)} for f in failures
        ],
        "clean_budgets": "every budget" if full else "unlimited and 1x",
        "clean_failures_one_run_per_case": {
            spec: o.failing for spec, o in r.clean_one_run.items() if o.failing
        },
        "runs_one_run_per_case": sum(e["runs_one_run_per_case"] for e in r.entries),
        "cases_one_run_per_case": sum(e["cases_one_run_per_case"] for e in r.entries),
        "one_run_per_case_by_kind": per_case(r.one_run_by_kind),
        "runs_unlimited": sum(e["runs_unlimited"] for e in r.entries),
        "not_detectable_skipped": r.skipped,
    }


def judge(failures: list[Failure]) -> dict[str, Any]:
    """The correct agents' failures split by the blind adjudications now in
    ``benchmarks/_adjudication`` (what is not judged there is a false alarm)."""
    judged = Adjudications.load()
    tally = judged.tally(failures)
    return {
        "false_alarms": tally.false_alarms,
        "clean_failures": tally.failures,
        "clean_agent_errors": tally.agent_errors,
        "clean_unadjudicated": tally.unadjudicated,
        "adjudications": judged.files,
    }


def measure(
    full: bool,
    zoos: tuple[str, ...] = ZOOS,
    *,
    blind_rate: float | None = None,
    log: Any = sys.stderr,
    partial: Callable[[dict[str, Any]], None] = lambda s: None,
) -> dict[str, Any]:
    """The figures of ``zoos``; ``partial`` gets them so far (``"partial": true``) after each
    fault, so a run stopped early leaves what it measured."""
    results: dict[str, ZooResult] = {}
    plan: dict[str, tuple[list[Target], list[str]]] = {}
    if "pack" in zoos:
        plan["pack"] = (chosen_faults(full), [])
    if "blind" in zoos:
        check_blind_frozen()
        plan["blind"] = blind_faults(blind_rate, full=full)
    planned = sum(len(targets) for targets, _ in plan.values())

    def so_far(r: ZooResult, zoo: str) -> None:
        summary = combine({**results, zoo: r}, full)
        partial({**summary, "partial": True, "faults_planned": planned})

    for zoo, (targets, skipped) in plan.items():
        results[zoo] = measure_zoo(
            zoo, targets, full, log, skipped, lambda r, zoo=zoo: so_far(r, zoo)
        )
    return {**combine(results, full), "partial": False, "faults_planned": planned}


def combine(results: dict[str, ZooResult], full: bool) -> dict[str, Any]:
    return summed({z: zoo_summary(r, full) for z, r in results.items()}, full)


def summed(per_zoo: dict[str, dict[str, Any]], full: bool) -> dict[str, Any]:
    """The figures over the zoos, from each zoo's (:func:`zoo_summary`)."""
    entries = [e for z in per_zoo.values() for e in z["entries"]]
    by_kind: dict[str, dict[str, int]] = {}
    for z in per_zoo.values():
        add_kinds(by_kind, z["one_run_per_case_by_kind"])
    return {
        "zoos_run": list(per_zoo),
        "full": full,
        "faults": len(entries),
        **rates(entries),
        # the issue's figure: the bundled examples' correct agents (not measured
        # without the pack zoo)
        "default_runs_per_case": per_zoo["pack"]["default_runs_per_case"]
        if "pack" in per_zoo
        else None,
        **totals(per_zoo),
        "runs_one_run_per_case": sum(e["runs_one_run_per_case"] for e in entries),
        "cases_one_run_per_case": sum(e["cases_one_run_per_case"] for e in entries),
        "one_run_per_case_by_kind": per_case(by_kind),
        "runs_unlimited": sum(e["runs_unlimited"] for e in entries),
        "zoos": per_zoo,
        "entries": entries,
    }


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``--json`` of runs of different zoos (``--zoo pack``, ``--zoo blind``) as one."""
    per_zoo: dict[str, dict[str, Any]] = {}
    for part in parts:
        for zoo, z in part["zoos"].items():
            if zoo in per_zoo:
                raise SystemExit(f"--merge: the {zoo} zoo is in more than one of the files")
            per_zoo[zoo] = z
    return {
        **summed(per_zoo, all(p["full"] for p in parts)),
        "partial": any(p.get("partial") for p in parts),
        "faults_planned": sum(p.get("faults_planned", p["faults"]) for p in parts),
        "rejudged": any(p.get("rejudged") for p in parts),
    }


def totals(per_zoo: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The correct agents' failures and false alarms over the zoos."""
    return {
        key: sum(z[key] for z in per_zoo.values())
        for key in ("false_alarms", "clean_failures", "clean_agent_errors")
    }


def rejudge(s: dict[str, Any]) -> dict[str, Any]:
    """``s`` (a ``--json`` of this benchmark) with its correct agents' failures judged again
    against the adjudications now in ``benchmarks/_adjudication``: nothing is run again."""
    for z in s["zoos"].values():
        failures = [
            Failure(
                f["spec"], int(f["seed"]), f["case"], tuple(f["turns"]), frozenset(f["clauses"])
            )
            for f in z["clean_failure_inputs"]
        ]
        z.update(judge(failures))
    s.update(totals(s["zoos"]))
    s["rejudged"] = True
    return s


def _rate(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "not measured"


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def checks(s: dict[str, Any]) -> dict[str, bool | None]:
    """Each target: met, not met, or ``None`` when a figure it needs was not measured."""
    one, unlimited, at1, at3 = (
        s.get(k)
        for k in (
            "found_rate_one_run_per_case",
            "found_rate_unlimited",
            "found_rate_at_1x",
            "found_rate_at_3x",
        )
    )
    runs = s.get("default_runs_per_case")
    return {
        "found at 1x >= one run per case": None if at1 is None or one is None else at1 >= one,
        "found at 3x >= 0.9 of unlimited": None
        if at3 is None or unlimited is None
        else at3 >= 0.9 * unlimited,
        "default runs per case <= 3": None if runs is None else runs <= 3,
        "false alarms 0": s["false_alarms"] == 0,
    }


def render(s: dict[str, Any]) -> str:
    lines = [f"{'fault':<52} {'1x':>6} {'3x':>6} {'10x':>6} {'unlim.':>7} {'runs 1':>7}"]
    for e in s["entries"]:
        marks = [("found" if e[f"found_at_{k}x"] else "-") for k in MULTIPLES]
        name = f"{e.get('zoo', 'pack')}:{e.get('spec', e.get('example'))}:{e['knob']}@{e['rate']:g}"
        lines.append(
            f"{name:<52} {marks[0]:>6} {marks[1]:>6} {marks[2]:>6} "
            f"{'found' if e['found_unlimited'] else '-':>7} "
            f"{'found' if e['found_one_run_per_case'] else '-':>7}"
        )
    for zoo, z in s.get("zoos", {}).items():
        lines.append(
            f"{zoo} zoo ({z['faults']} faults): found 1x {_rate(z['found_rate_at_1x'])}, 3x "
            f"{_rate(z['found_rate_at_3x'])}, 10x {_rate(z['found_rate_at_10x'])}, unlimited "
            f"{_rate(z['found_rate_unlimited'])}; one run per case "
            f"{_rate(z['found_rate_one_run_per_case'])}; correct agents: {z['clean_failures']} "
            f"failure(s) ({z['clean_budgets']}), of which {z['clean_agent_errors']} judged "
            f"agent errors on valid inputs by a blind adjudication, {z['false_alarms']} false "
            f"alarm(s) (tester errors or not judged); with --runs 1 "
            f"{sum(map(len, z.get('clean_failures_one_run_per_case', {}).values()))} failing "
            "case(s) (bugs not counted as the baseline's finds); "
            f"{_rate(z['default_runs_per_case'])} runs started per case unlimited"
            + (
                "; not detectable by the manifest, not run: "
                f"{', '.join(z['not_detectable_skipped'])}"
                if z.get("not_detectable_skipped")
                else ""
            )
        )
    one, unlimited = s["found_rate_one_run_per_case"], s["found_rate_unlimited"]
    lines += [
        f"found rate, all zoos run: 1x {_rate(s['found_rate_at_1x'])}, 3x "
        f"{_rate(s['found_rate_at_3x'])}, 10x {_rate(s['found_rate_at_10x'])}, unlimited "
        f"{_rate(unlimited)}; one run per case (baseline, same process) {_rate(one)}",
        f"ratio 1x / one run per case: {s['found_rate_at_1x'] / one:.2f}"
        if one and s["found_rate_at_1x"] is not None
        else "ratio 1x / one run per case: not measured (baseline found nothing or was not run)",
        f"runs started with each fault on: unlimited default {s['runs_unlimited']}, one run per "
        f"case (--runs 1) {s['runs_one_run_per_case']} for {s.get('cases_one_run_per_case', 0)} "
        f"cases ({_rate(ratio(s['runs_one_run_per_case'], s.get('cases_one_run_per_case', 0)))} "
        "a case)"
        if s["entries"]
        else "",
        "one run per case (--runs 1), runs started / cases by kind: "
        + (
            ", ".join(
                f"{kind} {k['runs_started']}/{k['cases']} ({_rate(k['runs_per_case'])})"
                for kind, k in s.get("one_run_per_case_by_kind", {}).items()
            )
            or "not measured"
        ),
        "default runs started per case, bundled examples' correct agents: "
        f"{_rate(s['default_runs_per_case'])}",
        f"false alarms, correct agents of the zoos run: {s['false_alarms']} (their failures "
        f"{s['clean_failures']}, judged agent errors on valid inputs {s['clean_agent_errors']}; "
        "adjudications: "
        + (", ".join(sorted({a for z in s["zoos"].values() for a in z["adjudications"]})) or "none")
        + (", re-judged after the run" if s.get("rejudged") else "")
        + ")",
    ]
    lines.append(
        "targets: "
        + "; ".join(
            f"{k}: {'not measured' if ok is None else 'met' if ok else 'NOT MET'}"
            for k, ok in checks(s).items()
        )
    )
    if s.get("partial"):
        lines.append(
            f"(partial: {s['faults']} of {s.get('faults_planned', '?')} faults measured, the run "
            "stopped before the rest; the figures are over those measured)"
        )
    if not s["full"]:
        quick = [f"{z['faults']} {name} faults" for name, z in s.get("zoos", {}).items()] or [
            f"{s['faults']} faults"
        ]
        lines.append(
            f"(quick: {', '.join(quick)}, the first of each spec; --full runs "
            "every fault of the zoos)"
        )
    return "\n".join(line for line in lines if line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument(
        "--zoo",
        choices=("pack", "blind", "both"),
        default="both",
        help="which fault zoo(s) to run (default both)",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_true",
        help="the first fault of each spec; correct agents unlimited and at 1x (the default)",
    )
    size.add_argument(
        "--full",
        action="store_true",
        help="every fault of the zoos, not the first of each spec; correct agents at every budget",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="run nothing: join the --json of runs of different zoos (--zoo pack, --zoo blind) "
        "into one and print its table",
    )
    parser.add_argument(
        "--rejudge",
        metavar="JSON",
        help="run nothing: judge the correct agents' failures of an earlier --json again against "
        "the adjudications now in benchmarks/_adjudication, and print its table",
    )
    parser.add_argument(
        "--blind-rate",
        type=float,
        metavar="P",
        help="fire the blind zoo's knobs with probability P (default: the manifest's)",
    )
    args = parser.parse_args(argv)
    zoos = ZOOS if args.zoo == "both" else (args.zoo,)

    def write(summary: dict[str, Any]) -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2), encoding="utf-8")

    if args.merge:
        summary = merged([json.loads(Path(f).read_text(encoding="utf-8")) for f in args.merge])
    elif args.rejudge:
        summary = rejudge(json.loads(Path(args.rejudge).read_text(encoding="utf-8")))
    else:
        summary = measure(args.full, zoos, blind_rate=args.blind_rate, partial=write)
    print(render(summary))
    write(summary)
    # a target that was not measured is not met
    return 0 if all(ok is True for ok in checks(summary).values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
