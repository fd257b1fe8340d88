"""The pooled top-up of a sharded run, made once its shards are merged
(``agentprop run SPEC ... --top-up-shards DIR...``).

An unsharded run under a pooled profile tops up a safety policy whose cases all passed but fall
short of the runs a pooled claim needs (:func:`agentprop._pipeline.run.top_up_policies`). Which
policies, which cases and how many runs depend on every case of the run, so no shard can make it;
the job that merges the shards can, with the run's agent: it chooses what the unsharded run
chooses from the merged cases, decides each chosen case again under the oracle settings its shard
recorded, behind the same screen, its shard's recorded runs reused (put back into a memo from
the shard's traces) and only the runs beyond them made, so the topped-up cases and claims are the
unsharded run's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentprop._decide.memo import TrialMemo
from agentprop._decide.records import DecisionStart, TrialLine, read_records, records_files
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.merge import MergedRun
from agentprop._pipeline.merge_report import TopUp, shard_traces
from agentprop._pipeline.run import (
    TopUpRuns,
    case_lanes,
    redecide_case,
    top_up_policies,
)
from agentprop._util import aio

if TYPE_CHECKING:
    from agentprop._agents.loading import LoadedAgent
    from agentprop._agents.project import Project
    from agentprop._decide.oracle import CheckResult
    from agentprop._pipeline.report.model import CaseReport
    from agentprop._scenario.build import Scenario

__all__ = ["merged_top_up"]


def merged_top_up(
    run: MergedRun, agent: LoadedAgent, budget: Budget, *, concurrency: int = 1
) -> TopUp:
    """The top-up of the merged ``run`` with ``agent`` (the run's own, checked by the caller to
    be the shards'), booked in ``budget``; what :func:`~agentprop._pipeline.merge_report.
    merge_reports` calls when its shards skipped a top-up an unsharded run makes."""

    def top_up(
        project: Project,
        cases: list[CaseReport],
        checks: dict[str, tuple[Scenario, CheckResult]],
    ) -> tuple[list[CaseReport], dict[str, tuple[int, str | None]]]:
        memo = TrialMemo()
        decisions = _final_decisions(run)
        sem = asyncio.Semaphore(max(1, concurrency))
        lanes = case_lanes(agent, concurrency)

        async def redecide(case: CaseReport, runs: int) -> CaseReport:
            found = decisions.get(case.id)
            if found is None:  # no decision recorded for it: it stands as its shard decided
                return case
            start, lines, directory = found
            _remember(memo, start, lines, directory)
            return await redecide_case(
                project,
                agent,
                case,
                runs,
                checks,
                start.settings.oracle(),
                TopUpRuns(memo, budget, run.info.seed, sem, lanes.for_case()),
            )

        async def go() -> tuple[list[CaseReport], dict[str, tuple[int, str | None]]]:
            return await top_up_policies(project, cases, checks, redecide, budget)

        return aio.run(go())

    return top_up


def _final_decisions(
    run: MergedRun,
) -> dict[str, tuple[DecisionStart, list[TrialLine], Path]]:
    """Per MFT or EXPLORE case, its last decision in the final pass (what the merge decided it
    by), that decision's trial lines and its shard's directory."""
    out: dict[str, tuple[DecisionStart, list[TrialLine], Path]] = {}
    for _index, directory in sorted(run.directories.items()):
        if not records_files(directory):
            continue
        starts: dict[int, DecisionStart] = {}
        lines: dict[int, list[TrialLine]] = {}
        for r in read_records(directory):
            if (
                isinstance(r, DecisionStart)
                and r.kind in ("MFT", "EXPLORE")
                and r.stage in (None, "final")
            ):
                starts[r.decision] = r
                lines[r.decision] = []
            elif isinstance(r, TrialLine) and r.decision in lines:
                lines[r.decision].append(r)
        for number, start in starts.items():
            out[start.case] = (start, lines[number], directory)
    return out


def _remember(
    memo: TrialMemo, start: DecisionStart, lines: list[TrialLine], directory: Path
) -> None:
    """Put the runs a decision's trial lines name back into ``memo`` (from its shard's traces),
    so deciding the case again reuses them as the unsharded run's memo does."""
    wanted = {t.trace for t in lines if t.trace is not None}
    traces: dict[str, Any] = shard_traces(directory, wanted)
    for t in lines:
        trace = traces.get(t.trace or "")
        if trace is not None:
            memo.put(memo.key(start.input_digest, start.fingerprint, t.trial), trace)
