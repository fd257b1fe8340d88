"""``agentprop run``: run an agent over a spec's cases and decide each case.

Each case is repeated and decided from its pass rate. Cases run concurrently (an asyncio
semaphore bounds how many runs are in flight); a live progress line shows cases done, runs,
cost and an ETA when stderr is a terminal.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

from agentprop import __version__
from agentprop._agents import LoadedAgent
from agentprop._contracts import Verdict
from agentprop._project import Project
from agentprop._properties import first_failure, mft_verdicts
from agentprop._report import AgentInfo, CaseReport, FailureSummary, Metrics, RunReport, SpecInfo
from agentprop._scenario import Scenario
from agentprop._trace import Trace


@dataclass
class RunSettings:
    runs: int | None = None
    """Runs per case (default: the spec's ``defaults.reliability.reruns``)."""
    min_pass_rate: float | None = None
    """Pass threshold (default: the spec's ``defaults.reliability.min_pass_rate``)."""
    unstable_floor: float = 0.7
    """Below this rate a case FAILs; between it and ``min_pass_rate`` it is UNSTABLE."""
    concurrency: int = 8
    seed: int = 0
    turn_timeout_s: float | None = 60.0


@dataclass
class CaseOutcome:
    scenario: Scenario
    traces: list[Trace] = field(default_factory=list)
    failures: list[tuple[int, Verdict]] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.traces)

    @property
    def passes(self) -> int:
        return self.runs - len(self.failures)


class Progress:
    """A one-line live status on a terminal; silent otherwise."""

    def __init__(self, total_cases: int, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total_cases
        self.done = 0
        self.runs = 0
        self.cost = 0.0
        self.started = time.perf_counter()

    def update(self, *, runs: int = 0, cost: float = 0.0, case_done: bool = False) -> None:
        self.runs += runs
        self.cost += cost
        if case_done:
            self.done += 1
        if not self.live:
            return
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        self.stream.write(
            f"\r\x1b[K  cases {self.done}/{self.total}  runs {self.runs}  cost ${self.cost:.4f}  "
            f"elapsed {elapsed:.1f}s  ETA {eta:.1f}s"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def classify(rate: float, min_pass_rate: float, unstable_floor: float) -> str:
    if rate >= min_pass_rate:
        return "PASS"
    if rate < unstable_floor:
        return "FAIL"
    return "UNSTABLE"


async def _run_case(
    project: Project,
    agent: LoadedAgent,
    scenario: Scenario,
    runs: int,
    settings: RunSettings,
    sem: asyncio.Semaphore,
    progress: Progress,
) -> CaseOutcome:
    outcome = CaseOutcome(scenario)

    async def one(i: int) -> tuple[int, Trace]:
        async with sem:
            trial = settings.seed * 1_000_003 + i
            trace = await project.arun(scenario, agent.factory, trial=trial, agent_name=agent.ref, turn_timeout_s=settings.turn_timeout_s)
            progress.update(runs=1, cost=trace.usage.cost_usd)
            return i, trace

    results = sorted(await asyncio.gather(*(one(i) for i in range(runs))), key=lambda r: r[0])
    for i, trace in results:
        outcome.traces.append(trace)
        failed = first_failure(mft_verdicts(project.spec, scenario, trace))
        if failed is not None:
            outcome.failures.append((i, failed))
    progress.update(case_done=True)
    return outcome


def _case_report(outcome: CaseOutcome, settings: RunSettings, min_pass_rate: float) -> CaseReport:
    s = outcome.scenario
    rate = outcome.passes / outcome.runs if outcome.runs else 0.0
    counts: Counter[str] = Counter(v.signature for _, v in outcome.failures)
    first: dict[str, tuple[int, Verdict]] = {}
    for i, v in outcome.failures:
        first.setdefault(v.signature, (i, v))
    usage = [t.usage for t in outcome.traces]
    return CaseReport(
        id=s.id,
        node=s.leaf,
        via=s.via,
        path=s.path,
        kind="MFT",
        messages=s.messages,
        expected_decisions=[t.expect_decision for t in s.turns],
        verdict=classify(rate, min_pass_rate, settings.unstable_floor),  # type: ignore[arg-type]
        runs=outcome.runs,
        passes=outcome.passes,
        pass_rate=rate,
        cost_usd=sum(u.cost_usd for u in usage),
        input_tokens=sum(u.input_tokens for u in usage),
        output_tokens=sum(u.output_tokens for u in usage),
        failures=[
            FailureSummary(signature=sig, explanation=first[sig][1].explanation, count=n, first_trial=first[sig][0])
            for sig, n in counts.most_common()
        ],
        capabilities=s.capabilities,
        branches=s.branches,
    )


async def arun_cases(
    project: Project,
    agent: LoadedAgent,
    scenarios: list[Scenario],
    settings: RunSettings,
    *,
    problems: list[str] | None = None,
    progress_stream: TextIO | None = None,
) -> RunReport:
    spec = project.spec
    runs = settings.runs if settings.runs is not None else spec.defaults.reliability.reruns
    min_pass_rate = settings.min_pass_rate if settings.min_pass_rate is not None else spec.defaults.reliability.min_pass_rate
    started = time.perf_counter()
    sem = asyncio.Semaphore(max(1, settings.concurrency))
    progress = Progress(len(scenarios), progress_stream)
    try:
        outcomes = await asyncio.gather(*(_run_case(project, agent, s, runs, settings, sem, progress) for s in scenarios))
    finally:
        progress.close()
    cases = [_case_report(o, settings, min_pass_rate) for o in outcomes]
    verdicts = Counter(c.verdict for c in cases)
    all_branches = {f"{n.node_id}#{i}" for n in spec.decision_tree for i, _ in enumerate(n.branches)}
    covered = {b for c in cases for b in c.branches}
    metrics = Metrics(
        cases=len(cases),
        passed=verdicts["PASS"],
        failed=verdicts["FAIL"],
        unstable=verdicts["UNSTABLE"],
        inconclusive=verdicts["INCONCLUSIVE"],
        case_pass_rate=verdicts["PASS"] / len(cases) if cases else 0.0,
        runs=sum(c.runs for c in cases),
        cost_usd=sum(c.cost_usd for c in cases),
        input_tokens=sum(c.input_tokens for c in cases),
        output_tokens=sum(c.output_tokens for c in cases),
        branch_coverage=len(covered & all_branches) / len(all_branches) if all_branches else None,
        duration_s=time.perf_counter() - started,
    )
    return RunReport(
        agentprop_version=__version__,
        spec=SpecInfo(
            id=spec.spec_id,
            title=spec.title,
            version=spec.version,
            base_version=spec.effective_base_version,
            risk_level=spec.risk_level,
            path=str(project.spec_path),
        ),
        agent=AgentInfo(ref=agent.ref, faults=agent.faults, fingerprint=agent.fingerprint),
        settings={"runs_per_case": runs, "min_pass_rate": min_pass_rate, "unstable_floor": settings.unstable_floor, "seed": settings.seed, "decision": "fixed"},
        cases=cases,
        problems=list(problems or []),
        metrics=metrics,
    )


def render_table(report: RunReport, *, width: int = 100) -> str:
    """The terminal summary: one line per case, then totals (fits one screen for a spec)."""
    lines = []
    idw = min(max((len(c.id) for c in report.cases), default=10), 48)
    lines.append(f"{'case':<{idw}}  {'verdict':<8} {'rate':>6} {'runs':>5}  first failure")
    for c in report.cases:
        fail = c.failures[0].explanation if c.failures else ""
        room = max(10, width - idw - 26)
        if len(fail) > room:
            fail = fail[: room - 1] + "…"
        lines.append(f"{c.id[:idw]:<{idw}}  {c.verdict:<8} {c.pass_rate:>6.0%} {c.runs:>5}  {fail}")
    m = report.metrics
    cov = f", branch coverage {m.branch_coverage:.0%}" if m.branch_coverage is not None else ""
    lines.append(
        f"{m.cases} cases: {m.passed} passed, {m.failed} failed, {m.unstable} unstable; "
        f"{m.runs} runs, ${m.cost_usd:.4f}{cov}, {m.duration_s:.1f}s"
    )
    return "\n".join(lines)
