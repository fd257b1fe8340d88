"""Shrinking and the corpus for the spec-free tier (``agentprop.check(agent, messages, prop)``).

Each drawn paraphrase step is one unit of :mod:`agentprop._shrink`; candidates are re-rendered
by the plan that drew them, so protected slots are always present and no word is deleted.
Runs share the check's memo key. The reproducer is a corpus entry under spec id ``plain``,
keyed by :func:`case_key`, and replayed first by the next check of the same case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentprop._decide.corpus import AgentIdentity, CorpusEntry, entry_from_shrink
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import CheckResult
from agentprop._decide.plain import (
    PLAIN_SPEC_ID,
    PlainContext,
    agent_ref,
    plain_digest,
    plain_fingerprint,
    plain_scenario,
    plain_verdicts,
    run_plain_agent,
)
from agentprop._decide.shrunk import RateSummary, ShrinkReport, reconfirm
from agentprop._decide.verdicts import record_for
from agentprop._modelapi.budget import Budget
from agentprop._shrink import Calibration, Outcome, Unit
from agentprop._shrink import shrink as shrink_units
from agentprop._util.aio import run_sync
from agentprop.errors import InfrastructureError
from agentprop.strategies._internal.paraphrase import Paraphrase, rerender

__all__ = ["entry_for", "shrink_plain"]


def _units(messages: Sequence[str]) -> list[Unit[Any]]:
    units: list[Unit[Any]] = []
    for i, m in enumerate(messages):
        if isinstance(m, Paraphrase) and m.transforms and rerender(m, m.transforms) is not None:
            units.extend(
                Unit(("step", i, j), label=f"turn {i + 1}: {step}")
                for j, step in enumerate(m.transforms)
            )
    return units


def _build(messages: Sequence[str], kept: tuple[Unit[Any], ...]) -> tuple[str, ...]:
    keep = {(u.value[1], u.value[2]) for u in kept if u.value[0] == "step"}
    out: list[str] = []
    for i, m in enumerate(messages):
        if isinstance(m, Paraphrase) and m.transforms:
            steps = [s for j, s in enumerate(m.transforms) if (i, j) in keep]
            again = rerender(m, steps)
            out.append(again.text if again is not None else str(m))
        else:
            out.append(str(m))
    return tuple(out)


def _diff(messages: Sequence[str], kept: tuple[Unit[Any], ...]) -> list[str]:
    """Per turn, the reproducer and how it was made from the original (the kept steps)."""
    keep = {(u.value[1], u.value[2]) for u in kept if u.value[0] == "step"}
    out: list[str] = []
    for i, m in enumerate(messages):
        again = (
            rerender(m, [s for j, s in enumerate(m.transforms) if (i, j) in keep])
            if isinstance(m, Paraphrase)
            else None
        )
        out.append(
            f"turn {i + 1}: "
            + (again.describe() if again is not None else f"{str(m)!r} (as given)")
        )
    return out


def shrink_plain(
    context: PlainContext,
    failing: CheckResult,
    *,
    budget: int,
    memo: TrialMemo,
    session_budget: Budget | None = None,
    verify_runs: int = 30,
    max_verify_runs: int = 300,
) -> ShrinkReport:
    """Shrink the drawn choices of a failing spec-free check to a minimal reproducer, chasing
    the most frequent failure's signature; then re-run it on fresh trials. The report is the
    one the spec tier's :func:`agentprop.oracle.shrink` makes (the messages as a scenario value)."""
    run_spec = context.run
    verdicts = plain_verdicts(context.prop)
    fingerprint = plain_fingerprint(run_spec)
    base_trial = context.seed * 1_000_003
    key = context.key
    chased = failing.failures[0].signature if failing.failures else None
    calibration = None
    if chased is not None:
        hits = next((f.count for f in failing.failures if f.signature == chased), 0)
        calibration = Calibration(runs=failing.runs, failures=hits, signature=chased)
    refused: dict[str, Any] = {"n": 0, "why": None}

    def run(candidate: tuple[str, ...], trial: int) -> Outcome:
        digest = plain_digest(run_spec, candidate, context.seed)
        memo_key = memo.key(digest, fingerprint, base_trial + trial)
        trace = memo.get(memo_key)
        if trace is None:
            if session_budget is not None and not session_budget.try_start_run():
                refused["n"] += 1
                refused["why"] = (
                    refused["why"]
                    or session_budget.exhausted_reason
                    or "the session budget is spent"
                )
                return Outcome.refused()
            trace = memo.put(
                memo_key,
                run_sync(run_plain_agent(run_spec, candidate, base_trial + trial, context.seed)),
            )
            if trace.infrastructure_error is not None:
                raise InfrastructureError(
                    f"shrinking stopped: {trace.infrastructure_error.message}",
                    kind=trace.infrastructure_error.kind,
                )
        rec = record_for(verdicts(trace))
        return Outcome.passed() if rec.passed else Outcome.failure(rec.signature)

    step_units = _units(context.messages)
    units = tuple([Unit(("case",), protected=True, label=key), *step_units])

    def build(kept: tuple[Unit[Any], ...]) -> tuple[str, ...]:
        return _build(context.messages, kept)

    result = shrink_units(
        units, run, budget=budget, build=build, signature=chased, calibration=calibration
    )
    again = reconfirm(
        result,
        run,
        calibration,
        runs=verify_runs,
        max_runs=max_verify_runs,
        minimal=result.minimal,
        stop_reason=result.stop_reason,
    )
    minimal, stop_reason = again.minimal, again.stop_reason
    orig = result.original_rate
    reproducer = list(result.reproducer)
    kept = [u.describe() for u in result.units if u.value[0] == "step"]
    original = [str(m) for m in context.messages]
    return ShrinkReport(
        scenario=key,
        signature=str(result.signature),
        original_messages=original,
        reproducer_messages=reproducer,
        reproducer=plain_scenario(key, reproducer),
        diff=_diff(context.messages, result.units),
        original_units=result.original_leaves - 1,
        kept_units=result.kept_leaves - 1,
        runs=result.runs,
        queries=result.queries,
        budget=budget,
        budget_exhausted=result.budget_exhausted or refused["n"] > 0,
        minimal=minimal,
        stop_reason=stop_reason
        if not refused["n"]
        else f"the session budget refused {refused['n']} run(s); {stop_reason}",
        original_rate=RateSummary(
            failures=orig.failures, runs=orig.runs, rate=orig.rate, interval=orig.interval
        ),
        reproducer_rate=again.rate,
        verify_refused=again.refused,
        budget_spent=refused["why"] if refused["n"] else None,
        other_signatures={str(k): v for k, v in result.other_signatures.items()},
        choices_kept=", ".join(kept)
        if kept
        else (
            "none: the original wording fails"
            if step_units
            else "the messages were given as fixed text"
        ),
    )


def entry_for(context: PlainContext, report: ShrinkReport) -> CorpusEntry:
    """The corpus entry of a shrunk spec-free failure (replayed by the next check of its case)."""
    agent = AgentIdentity(ref=agent_ref(context.run), fingerprint=plain_fingerprint(context.run))
    return entry_from_shrink(
        report, spec_id=PLAIN_SPEC_ID, spec_path=None, agent=agent, prop="plain"
    )
