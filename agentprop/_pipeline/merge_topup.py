"""The pooled top-up of a sharded run, made once its shards are merged
(``agentprop run SPEC ... --top-up-shards DIR...``).

An unsharded run under a pooled profile tops up a safety policy whose cases all passed but fall
short of the runs a pooled claim needs (:func:`agentprop._pipeline.run.top_up_policies`). Which
policies, which cases and how many runs depend on every case of the run, so no shard can make it;
the job that merges the shards can, with the run's agent: it chooses what the unsharded run
chooses from the merged cases, decides each chosen case again under the oracle settings its shard
recorded, behind the same screen, its shard's recorded runs reused (put back into a memo from
the shard's traces) and only the runs beyond them made, so the topped-up cases and claims are the
unsharded run's. With ``--records TOP`` it records the top-up's trials like a shard's (its
shard index is 0), and ``agentprop merge DIR... TOP`` makes the same top-up again from the shards'
and the top-up's records alone, with no agent (:func:`replayed_top_up`): every run it needs is
in them (or was refused by its budget, and is refused again), and a run that is not is an
error, never made.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentprop._agents.loading import LoadedAgent
from agentprop._decide.memo import TrialMemo
from agentprop._decide.records import (
    REPORT_FILE,
    TRACES_FILE,
    DecisionStart,
    TrialLine,
    read_records,
    records_files,
)
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.merge import MergedRun
from agentprop._pipeline.merge_report import TopUp, _TopUpInterrupted
from agentprop._pipeline.run import (
    TopUpRuns,
    case_lanes,
    redecide_case,
    top_up_policies,
)
from agentprop._scenario.trace import Trace
from agentprop._util import aio
from agentprop.errors import InputError

if TYPE_CHECKING:
    from agentprop._agents.project import Project
    from agentprop._decide.oracle import CheckResult
    from agentprop._pipeline.report.model import CaseReport
    from agentprop._scenario.build import Scenario

__all__ = ["merged_top_up", "replayed_top_up"]


def merged_top_up(
    run: MergedRun,
    agent: LoadedAgent,
    budget: Budget,
    *,
    concurrency: int = 1,
    replay: dict[str, tuple[DecisionStart, list[TrialLine], Path]] | None = None,
    decisions: dict[str, tuple[DecisionStart, list[TrialLine], Path]] | None = None,
    attach: Callable[[], None] | None = None,
    detach: Callable[[], None] | None = None,
) -> TopUp:
    """The top-up of the merged ``run`` with ``agent`` (the run's own, checked by the caller to
    be the shards'), booked in ``budget``; what :func:`~agentprop._pipeline.merge_report.
    merge_reports` calls when its shards skipped a top-up an unsharded run makes. ``replay``:
    per case, a recorded top-up's decision of it, whose runs are put back into the memo too;
    ``decisions``: the shards' final decisions, when already read (:func:`_final_decisions`).
    ``attach``/``detach`` are called as the top-up's task starts and ends (the CLI's signal
    handling: a signal in between cancels it, and it raises
    :class:`~agentprop._pipeline.merge_report._TopUpInterrupted`)."""

    def top_up(
        project: Project,
        cases: list[CaseReport],
        checks: dict[str, tuple[Scenario, CheckResult]],
    ) -> tuple[list[CaseReport], dict[str, tuple[int, str | None]]]:
        memo = TrialMemo()
        traces = _ShardTraces()
        found_in = decisions if decisions is not None else _final_decisions(run)
        sem = asyncio.Semaphore(max(1, concurrency))
        lanes = case_lanes(agent, concurrency)

        async def redecide(case: CaseReport, runs: int) -> CaseReport:
            found = found_in.get(case.id)
            if found is None:  # no decision recorded for it: it stands as its shard decided
                return case
            start, lines, directory = found
            _remember(memo, traces, start, lines, directory)
            again = (replay or {}).get(case.id)
            if again is not None:  # the top-up's own runs of it, recorded when it was made
                _remember(memo, traces, *again)
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
            if attach is not None:
                attach()
            try:
                return await top_up_policies(project, cases, checks, redecide, budget)
            finally:
                if detach is not None:
                    detach()

        try:
            return aio.run(go())
        except asyncio.CancelledError:
            raise _TopUpInterrupted from None

    return top_up


def replayed_top_up(run: MergedRun) -> TopUp:
    """The top-up of the merged ``run`` made again from the records of the one made when its
    shards were merged (``run.top_up``), with no agent: each run comes from the shards' or the
    top-up's records. A top-up its budget cut short is made again exactly: the runs its budget
    refused (recorded as refused) are refused again, and its stop names the recorded limit. A
    top-up that did not finish, or whose records lack a run it needs, is an error naming it."""
    where = run.top_up
    assert where is not None
    if not (where / REPORT_FILE).is_file():
        raise InputError(
            f"the top-up in {where} did not finish (it has no {REPORT_FILE})",
            fix="make the top-up again: the shards' command with --top-up-shards DIR... and a "
            "fresh --records directory",
        )
    missed: list[int] = []

    def not_recorded() -> Any:
        missed.append(1)
        raise LookupError("a run the top-up's records do not hold")

    def top_up(
        project: Project,
        cases: list[CaseReport],
        checks: dict[str, tuple[Scenario, CheckResult]],
    ) -> tuple[list[CaseReport], dict[str, tuple[int, str | None]]]:
        decisions = _final_decisions(run)
        fingerprints = {s.fingerprint for s, _, _ in decisions.values()}
        stand_in = LoadedAgent(
            ref="(the top-up's records)",
            factory=not_recorded,
            fingerprint=next(iter(fingerprints), ""),
            concurrent=False,
        )
        replay = _final_decisions(run, [where], every_stage=True)
        refused, limit = _recorded_refusals(where)
        # every run it made is in the memo (a hit books nothing): the runs its budget refused
        # are the only ones asked for again, and a budget of none refuses them again
        budget = Budget(max_runs=0) if refused else Budget()
        made = merged_top_up(run, stand_in, budget, replay=replay, decisions=decisions)
        out_cases, topped = made(project, cases, checks)
        again = budget.snapshot()
        if missed or len(fingerprints) > 1 or again.refused_runs != refused:
            wanted = len(missed) + max(0, again.refused_runs - refused)
            raise InputError(
                f"the records in {where} do not hold every run of the top-up they record "
                f"({wanted} run(s) missing"
                + (
                    f"; its budget refused {refused} run(s), {again.refused_runs} now"
                    if refused
                    else ""
                )
                + "): they are of another run, or were edited",
                fix="make the top-up again: the shards' command with --top-up-shards DIR... and "
                "a fresh --records directory",
            )
        if refused:  # stopped by the top-up's own limit, as recorded, not this replay's
            ours = again.exhausted_reason
            topped = {
                p: (runs, limit if why is not None and why == ours else why)
                for p, (runs, why) in topped.items()
            }
        return out_cases, topped

    return top_up


def _recorded_refusals(where: Path) -> tuple[int, str]:
    """How many runs a recorded top-up's budget refused (its ``refused`` trial lines), and the
    limit it named (its report's budget, as the top-up command wrote it)."""
    refused = sum(
        1 for r in read_records(where) if isinstance(r, TrialLine) and r.status == "refused"
    )
    if not refused:
        return 0, ""
    try:
        report = json.loads((where / REPORT_FILE).read_text(encoding="utf-8"))
        limit = report["metrics"]["extra"]["budget"]["exhausted_reason"]
    except (ValueError, KeyError, TypeError):
        limit = None
    return refused, limit if isinstance(limit, str) and limit else "the budget is spent"


def _final_decisions(
    run: MergedRun, directories: list[Path] | None = None, *, every_stage: bool = False
) -> dict[str, tuple[DecisionStart, list[TrialLine], Path]]:
    """Per MFT or EXPLORE case, its last decision in the final pass (what the merge decided it
    by; ``every_stage``: its last decision), that decision's trial lines and its shard's
    directory (of ``directories``, by default the shards')."""
    out: dict[str, tuple[DecisionStart, list[TrialLine], Path]] = {}
    given = (
        directories if directories is not None else [d for _, d in sorted(run.directories.items())]
    )
    for directory in given:
        if not records_files(directory):
            continue
        starts: dict[int, DecisionStart] = {}
        lines: dict[int, list[TrialLine]] = {}
        for r in read_records(directory):
            if isinstance(r, DecisionStart) and (
                every_stage or (r.kind in ("MFT", "EXPLORE") and r.stage in (None, "final"))
            ):
                starts[r.decision] = r
                lines[r.decision] = []
            elif isinstance(r, TrialLine) and r.decision in lines:
                lines[r.decision].append(r)
        for number, start in starts.items():
            out[start.case] = (start, lines[number], directory)
    return out


class _ShardTraces:
    """The shards' traces files, each scanned once for where each trace's line starts: every
    topped-up case's runs are then read by seeking to their lines, not by reading the whole
    file again for each case."""

    def __init__(self) -> None:
        self._offsets: dict[Path, dict[str, int]] = {}

    def get(self, directory: Path, wanted: set[str]) -> dict[str, Trace]:
        file = directory / TRACES_FILE
        found: dict[str, Trace] = {}
        if not wanted or not file.is_file():
            return found
        offsets = self._offsets.get(directory)
        if offsets is None:
            offsets = self._offsets[directory] = _line_offsets(file)
        with open(file, "rb") as f:
            for ref in sorted(wanted & offsets.keys(), key=offsets.__getitem__):
                f.seek(offsets[ref])
                try:
                    found[ref] = Trace.model_validate(json.loads(f.readline())["trace"])
                except (ValidationError, ValueError, KeyError):
                    continue  # a torn last line: that run is then not put back
        return found


def _line_offsets(file: Path) -> dict[str, int]:
    """Where the line of each trace of a traces file starts (its first line of an id)."""
    offsets: dict[str, int] = {}
    at = 0
    with open(file, "rb") as f:
        for line in f:
            head = line[:80]
            if b'"id":"' in head:
                ref = head.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode("utf-8", "replace")
                offsets.setdefault(ref, at)
            at += len(line)
    return offsets


def _remember(
    memo: TrialMemo,
    traces: _ShardTraces,
    start: DecisionStart,
    lines: list[TrialLine],
    directory: Path,
) -> None:
    """Put the runs a decision's trial lines name back into ``memo`` (from its shard's traces),
    so deciding the case again reuses them as the unsharded run's memo does."""
    found = traces.get(directory, {t.trace for t in lines if t.trace is not None})
    for t in lines:
        trace = found.get(t.trace or "")
        if trace is not None:
            memo.put(memo.key(start.input_digest, start.fingerprint, t.trial), trace)
