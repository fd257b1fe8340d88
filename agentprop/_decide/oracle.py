"""The oracle: decide a property of a noisy agent from as few runs as possible.

Each run passes or fails; the oracle repeats runs and feeds them to a sequential test
(:mod:`agentprop._stats`): ``sprt`` (default), ``zero-failure`` or ``fixed``, optionally behind a
``screen``; a failure is always confirmed by the mode, never by the screen. When the budget
runs out first the verdict is INCONCLUSIVE, never a pass. Runs are memoised, the property is
judged afresh on every decision. :class:`AgentPropertyViolation` is the one exception every
statistical failure is raised as.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from agentprop._decide.holds import held
from agentprop._decide.memo import RunClaim, TrialMemo, trace_json
from agentprop._decide.permits import RunPermits
from agentprop._decide.records import DecisionLog, current_recorder

# the decision rule, re-exported: the oracle's names for its settings, verdicts and records
from agentprop._decide.rule import Mode as Mode
from agentprop._decide.rule import OracleSettings as OracleSettings
from agentprop._decide.rule import OracleVerdict as OracleVerdict
from agentprop._decide.rule import TrialRecord as TrialRecord
from agentprop._decide.rule import decision_of as decision_of
from agentprop._decide.rule import reach_verdict
from agentprop._judge.judges import JudgeCorrection
from agentprop._modelapi.budget import Budget
from agentprop._scenario.trace import RunError, Trace, Usage
from agentprop._stats import (
    SequentialTest,
    clopper_pearson_interval,
    pass_hat_k,
    wilson_interval,
)
from agentprop._util.aio import run_serving
from agentprop._util.bulk import BulkModel
from agentprop.errors import (
    AgentPropertyViolation,  # noqa: F401 (re-exported: defined in errors.py)
    InvalidArgument,
)


class FailureSeen(BulkModel):
    signature: str
    explanation: str
    clause: str | None = None
    count: int
    first_trial: int
    traceback: str | None = None
    """The traceback of the exception that ended the first failing run, when the agent raised."""


def _traceback_of(trace: Trace) -> str | None:
    return next((e.traceback for e in trace.all_errors() if e.traceback), None)


FAILING_PER_SIGNATURE = 3
"""Failing runs kept per signature for the report (the first ones, in trial order)."""
FAILING_PER_RESULT = 6
"""Failing runs kept per decision, over all signatures (the first of every signature first)."""
PASSING_PER_RESULT = 1
"""Passing runs kept per decision, as a sample of what a good run looks like."""


class SampledRun(BulkModel):
    """One run kept for the report (:attr:`CheckResult.sampled_runs`): what the property said
    of it and its trace, as JSON (:func:`agentprop._decide.memo.trace_json`)."""

    trial: int
    passed: bool
    signature: str | None = None
    explanation: str | None = None
    clause: str | None = None
    turn: int | None = None
    """0-based turn of the failure (``None``: the whole conversation, or a pass)."""
    step: int | None = None
    """0-based tool call within ``turn`` that broke the promise (``None``: the turn's reply)."""
    trace_json: str


class JudgedRate(BaseModel):
    """A judged property's pass rate: the judge's raw rate and the rate corrected for its
    measured error (Rogan–Gladen, with an interval carrying the calibration's uncertainty)."""

    raw_rate: float
    corrected_rate: float | None = None
    corrected_interval: tuple[float, float] | None = None
    judge_scale: tuple[float, float] | None = None
    """The hypotheses the SPRT tested on the judge's pass rate (``None``: it did not gate)."""
    gates: bool
    why_not: str | None = None
    judge_calls: int | None = None
    """Model calls asked of the judge for this decision (cache hits included)."""
    reasons: list[str] = Field(default_factory=list)
    """The judge's reason for each failing run: ``trial N: reason``."""


class CheckResult(BulkModel):
    """The decision on one property of one input."""

    name: str = ""
    verdict: OracleVerdict
    decided_by: str
    runs: int
    passes: int
    pass_rate: float
    interval: tuple[float, float]
    interval_exact: tuple[float, float]
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    variance: float = 0.0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    memo_hits: int = 0
    failures: list[FailureSeen] = Field(default_factory=list)
    sample_traces: list[str] = Field(default_factory=list)
    """JSON of up to three failing traces (the first of each signature)."""
    sampled_runs: list[SampledRun] = Field(default_factory=list, exclude=True, repr=False)
    """The runs kept for the report, in trial order: the first failing runs of each signature
    (:data:`FAILING_PER_SIGNATURE`, at most :data:`FAILING_PER_RESULT` in all) and the first
    passing ones (:data:`PASSING_PER_RESULT`); ``runs - len(sampled_runs)`` were left out. Not
    part of the result's JSON (the run report carries them, see ``cases[].traces``)."""
    budget_exhausted: bool = False
    infrastructure_error: RunError | None = None
    """The error, not the agent's, that stopped the decision (a cache miss in replay-only
    mode, no API key, a refused key, a spent budget inside a run ...): the verdict is then
    INCONCLUSIVE, decided by ``infrastructure``."""
    runs_beyond_decision: int = 0
    """Runs made ahead of the decision that it did not need (finished or cancelled in flight;
    only with trials in flight at once). Not in ``runs``; their cost is in ``cost_usd``."""
    settings: dict[str, Any] = Field(default_factory=dict)
    judged: JudgedRate | None = None
    """Set for a model judge's property (:class:`JudgedRate`)."""
    _decision: int | None = PrivateAttr(default=None)
    """The number of the decision the records hold of this result (``None``: not recorded)."""

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    @property
    def clause(self) -> str | None:
        return self.failures[0].clause if self.failures else None

    def summary(self) -> str:
        lo, hi = self.interval
        text = (
            f"{self.name or 'property'}: {self.verdict} — pass rate {self.pass_rate:.0%} "
            f"({self.passes}/{self.runs}), 95% CI [{lo:.2f}, {hi:.2f}], decided "
            f"by {self.decided_by}"
        )
        if self.settings.get("rule"):
            text += f"\n  settings: {self.settings['rule']}"
        if self.failures:
            f = self.failures[0]
            text += (
                f"\n  most frequent failure ({f.count}x, first at trial "
                f"{f.first_trial}): {f.explanation}"
            )
            if f.clause:
                text += f"\n  violated clause: {f.clause}"
        if self.judged is not None:
            j = self.judged
            if j.corrected_interval is not None and j.corrected_rate is not None:
                lo_c, hi_c = j.corrected_interval
                text += (
                    f"\n  judge: raw rate {j.raw_rate:.0%}, corrected {j.corrected_rate:.0%} "
                    f"[{lo_c:.2f}, {hi_c:.2f}]"
                )
            else:
                text += f"\n  judge: raw rate {j.raw_rate:.0%}, not corrected (no calibration)"
            if j.judge_calls is not None:
                text += f", {j.judge_calls} judge calls"
            if not j.gates:
                text += f"\n  the judge reports only: {j.why_not}"
        if self.budget_exhausted:
            text += "\n  the budget ran out before a decision: this is not a pass"
        if self.infrastructure_error is not None:
            e = self.infrastructure_error
            text += f"\n  not decided, for a reason that is not the agent's ({e.kind}): {e.message}"
        return text

    def raise_for_verdict(self) -> CheckResult:
        """Raise :class:`AgentPropertyViolation` unless the verdict is PASS."""
        __tracebackhide__ = True
        if self.verdict != "PASS":
            raise AgentPropertyViolation(self)
        return self


@dataclass
class TrialOutcome:
    trial: int
    record: TrialRecord
    trace: Trace
    memo_hit: bool = False


TrialFn = Callable[[int], Trace]
"""One run of the agent for trial ``i``."""
AsyncTrialFn = Callable[[int], Awaitable[Trace]]
Judge = Callable[[Trace], TrialRecord]
"""The property: what one run's trace says (pure: it is applied to stored runs again)."""


def _result(
    name: str,
    test: SequentialTest,
    outcomes: list[TrialOutcome],
    settings: OracleSettings,
    budget_out: bool,
    infra: RunError | None = None,
) -> CheckResult:
    n = test.n
    c = test.successes
    verdict, decided_by = reach_verdict(test, settings, budget_out, infra)
    counts: Counter[str] = Counter()
    first: dict[str, TrialOutcome] = {}
    for o in outcomes:
        if not o.record.passed:
            sig = o.record.signature or "failed"
            counts[sig] += 1
            first.setdefault(sig, o)
    failures = [
        FailureSeen(
            signature=sig,
            explanation=first[sig].record.explanation or sig,
            clause=first[sig].record.clause,
            count=k,
            first_trial=first[sig].trial,
            traceback=_traceback_of(first[sig].trace),
        )
        for sig, k in counts.most_common()
    ]
    samples = [trace_json(first[f.signature].trace) for f in failures[:3]]
    judged = _judged(test, outcomes, settings)
    sampled = sample_runs(outcomes)
    fresh = [o.trace.usage for o in outcomes if not o.memo_hit]  # a memo hit costs nothing again
    rate = c / n if n else 0.0
    ks = [k for k in (1, 2, 4, 8) if k <= n]
    return CheckResult(
        name=name,
        verdict=verdict,
        decided_by=decided_by,
        runs=n,
        passes=c,
        pass_rate=rate,
        interval=wilson_interval(c, n, settings.confidence) if n else (0.0, 1.0),
        interval_exact=clopper_pearson_interval(c, n, settings.confidence) if n else (0.0, 1.0),
        pass_hat_k={str(k): pass_hat_k(c, n, k) for k in ks},
        variance=rate * (1 - rate),
        cost_usd=sum(u.cost_usd for u in fresh),
        input_tokens=sum(u.input_tokens for u in fresh),
        output_tokens=sum(u.output_tokens for u in fresh),
        memo_hits=sum(o.memo_hit for o in outcomes),
        failures=failures,
        sample_traces=samples,
        sampled_runs=sampled,
        budget_exhausted=budget_out,
        infrastructure_error=infra if verdict == "INCONCLUSIVE" else None,
        settings={
            "mode": settings.mode,
            "tau": settings.tau,
            "alpha": settings.alpha,
            "beta": settings.beta,
            "max_runs": settings.max_runs,
            "runs": settings.runs,
            "screen": settings.screen,
        },
        judged=judged,
    )


def judged_settings(settings: OracleSettings, prop: object) -> OracleSettings:
    """``settings`` for deciding ``prop``: with its judge's correction when ``prop`` is a model
    judge (it has ``correction()``), else unchanged."""
    correction = getattr(prop, "correction", None)
    if not callable(correction):
        return settings
    found = correction()
    return (
        dataclasses.replace(settings, judge=found)
        if isinstance(found, JudgeCorrection)
        else settings
    )


def count_judge_calls(result: CheckResult, prop: object, before: int) -> CheckResult:
    """Record on a judged result how many calls the judge ``prop`` made since ``before``."""
    calls = getattr(prop, "calls", None)
    if result.judged is not None and isinstance(calls, int):
        result.judged.judge_calls = calls - before
    return result


def _judged(
    test: SequentialTest, outcomes: list[TrialOutcome], settings: OracleSettings
) -> JudgedRate | None:
    judge = settings.judge
    if judge is None:
        return None
    n, c = test.n, test.successes
    corrected = judge.corrected(c, n, settings.confidence)
    scale = settings.judge_scale()
    return JudgedRate(
        raw_rate=c / n if n else 0.0,
        corrected_rate=corrected.rate
        if corrected is not None and corrected.rate == corrected.rate
        else None,
        corrected_interval=corrected.interval if corrected is not None else None,
        judge_scale=scale,
        gates=scale is not None,
        why_not=None
        if scale is not None
        else (
            judge.why_not or "its calibration cannot tell the pass rates this case must separate"
        ),
        reasons=[
            f"trial {o.trial}: {o.record.explanation}" for o in outcomes if not o.record.passed
        ],
    )


def sample_runs(outcomes: list[TrialOutcome]) -> list[SampledRun]:
    """The runs a report keeps of one decision: the first failing run of every signature,
    then more of each up to :data:`FAILING_PER_SIGNATURE` while fewer than
    :data:`FAILING_PER_RESULT` are kept, and the first :data:`PASSING_PER_RESULT` passing
    runs; in trial order. A report of many runs stays bounded, and it says how many it left out."""
    failing = [o for o in outcomes if not o.record.passed]
    by_signature: dict[str, list[TrialOutcome]] = {}
    for o in failing:
        by_signature.setdefault(o.record.signature or "failed", []).append(o)
    chosen: list[TrialOutcome] = []
    for depth in range(FAILING_PER_SIGNATURE):
        for group in by_signature.values():
            if depth < len(group) and (depth == 0 or len(chosen) < FAILING_PER_RESULT):
                chosen.append(group[depth])
    chosen += [o for o in outcomes if o.record.passed][:PASSING_PER_RESULT]
    chosen.sort(key=lambda o: o.trial)
    return [
        SampledRun(
            trial=o.trial,
            passed=o.record.passed,
            signature=o.record.signature,
            explanation=o.record.explanation,
            clause=o.record.clause,
            turn=o.record.turn,
            step=o.record.step,
            trace_json=trace_json(o.trace),
        )
        for o in chosen
    ]


def cut_by_budget(trace: Trace) -> bool:
    """Whether the budget refused a model call of this run (a ``budget_exhausted`` error):
    the run says nothing about the agent, so it is neither judged nor kept, and the decision
    ends as if the run had never started (INCONCLUSIVE unless already decided)."""
    return any(e.kind == "budget_exhausted" for e in trace.all_errors())


def decide(
    run_trial: TrialFn,
    settings: OracleSettings,
    *,
    judge: Judge,
    name: str = "",
    memo: TrialMemo | None = None,
    input_digest: str = "",
    fingerprint: str = "",
    budget: Budget | None = None,
    first_trial: int = 0,
) -> CheckResult:
    """Decide a property by judging the runs ``run_trial(i)`` for ``i = first_trial,
    first_trial+1, …`` until the sequential test decides, the budget runs out or the run
    limit is reached. A run found in ``memo`` (under ``input_digest``, ``fingerprint``, ``i``)
    is judged without running the agent again. :func:`adecide`, one trial at a time, run to
    completion; ``run_trial`` runs in the caller's thread with no event loop around it, so it
    may start its own (``asyncio.run``)."""
    return run_serving(
        lambda run: adecide(
            run,
            settings,
            judge=judge,
            name=name,
            memo=memo,
            input_digest=input_digest,
            fingerprint=fingerprint,
            budget=budget,
            first_trial=first_trial,
        ),
        run_trial,
    )


def decide_runs(
    traces: Sequence[Trace],
    settings: OracleSettings,
    *,
    judge: Judge,
    name: str = "",
    first_trial: int = 0,
) -> CheckResult:
    """Decide a property from runs already made (the sessions of an MCP server, say): judge
    ``traces`` in order until the sequential test decides. When they run out first the verdict
    is INCONCLUSIVE: more runs are needed, and nothing is claimed."""
    test = settings.make_test()
    outcomes: list[TrialOutcome] = []
    for offset, trace in enumerate(traces):
        if test.done:
            break
        rec = judge(trace)
        outcomes.append(TrialOutcome(first_trial + offset, rec, trace))
        test.update(rec.passed)
    return _result(name, test, outcomes, settings, False)


class _Unkept:
    """The claim on a run when there is no memo: nothing is kept, nothing shared."""

    def store(self, trace: Trace) -> Trace:
        return trace

    def release(self) -> None:
        pass


_MAX_CUTS = 3
"""How many times one trial cut short by the budget is made again while the budget has room."""


class _Trials:
    """How :func:`adecide` gets the run of trial ``i``: from the memo, from another decision
    making the same run right now, or made here (the budget permitting, in a run permit)."""

    def __init__(
        self,
        run_trial: AsyncTrialFn,
        memo: TrialMemo | None,
        input_digest: str,
        fingerprint: str,
        budget: Budget | None,
        permits: RunPermits | None,
        name: str = "",
    ) -> None:
        self.run_trial = run_trial
        self.name = name
        """The decision's name: a pass of a budgeted run may hold it back
        (:mod:`agentprop._decide.holds`)."""
        self.memo = memo
        self.input_digest = input_digest
        self.fingerprint = fingerprint
        self.budget = budget
        self.permits = permits
        self.cuts: dict[int, int] = {}

    def begin(self, trial: int) -> Trace | asyncio.Future[bool] | RunClaim | _Unkept:
        if self.memo is None:
            return _Unkept()
        return self.memo.begin(self.memo.key(self.input_digest, self.fingerprint, trial))

    def may_start(self) -> bool:
        if held(self.name):  # this pass deepens other cases first
            return False
        return self.budget is None or self.budget.try_start_run()

    def room_left_for_runs(self) -> bool:
        """Whether no limit refuses a new run now (reservations held by runs in flight may have
        refused one a moment ago), and the decision is not held back."""
        return not held(self.name) and (self.budget is None or not self.budget.exhausted)

    def room_left(self, trial: int) -> bool:
        """Whether a run this decision's budget cut short (a model call refused while other
        calls held reservations) is worth making again: its token or dollar limit is not
        reached now, and the trial was not cut :data:`_MAX_CUTS` times already (a call refused
        by another budget, the agent's own, is not this one's to retry)."""
        budget = self.budget
        if (
            budget is None
            or (budget.max_usd is None and budget.max_tokens is None)
            or not budget.room_left_after_settling()
        ):
            return False
        self.cuts[trial] = self.cuts.get(trial, 0) + 1
        return self.cuts[trial] <= _MAX_CUTS

    async def make(
        self, trial: int, claim: RunClaim | _Unkept, holds_permit: bool = False
    ) -> tuple[Trace, bool]:
        """Make the run (its budget already granted) and keep it; ``(trace, True)``."""
        try:
            if self.permits is not None and not holds_permit:
                await self.permits.acquire()
                holds_permit = True
            trace = await self.run_trial(trial)
        except BaseException:
            claim.release()
            raise
        finally:
            if holds_permit:
                assert self.permits is not None
                self.permits.release()
        return claim.store(trace), True

    async def obtain(
        self, trial: int, begun: Trace | asyncio.Future[bool] | RunClaim | _Unkept | None = None
    ) -> tuple[Trace, bool] | None:
        """The run of ``trial`` and whether it was made here; ``None`` if it had to be made
        and the budget refused it."""
        while True:
            if begun is None:
                begun = self.begin(trial)
            if isinstance(begun, Trace):
                return begun, False
            if isinstance(begun, asyncio.Future):
                assert self.memo is not None
                trace = await self.memo.shared(
                    self.memo.key(self.input_digest, self.fingerprint, trial), begun
                )
                if trace is not None:
                    return trace, False
                begun = None  # its maker gave it up: make it here
                continue
            if not self.may_start():
                begun.release()
                return None
            return await self.make(trial, begun)


async def adecide(
    run_trial: AsyncTrialFn,
    settings: OracleSettings,
    *,
    judge: Judge,
    name: str = "",
    memo: TrialMemo | None = None,
    input_digest: str = "",
    fingerprint: str = "",
    budget: Budget | None = None,
    concurrency: int = 1,
    first_trial: int = 0,
    permits: RunPermits | None = None,
) -> CheckResult:
    """Like :func:`decide`, keeping up to ``concurrency`` trials in flight.

    Outcomes are fed to the test in trial order, so the decision and the trials it is made on
    are those of one trial at a time, whatever order the runs finish in. Once the test decides,
    the trials still in flight are cancelled; runs that finished ahead of the decision stay in
    the memo (a later decision on the same input reuses them). Both count in the result's
    ``runs_beyond_decision``, and finished ones in its cost. A trial whose run another decision
    is making right now (same input, agent and trial index) waits for that run instead of
    making it again. With ``permits`` (shared by the decisions of a run), every run made takes a
    permit: the trial the test needs next waits for one, a trial ahead of it only takes a free
    one (:mod:`agentprop._decide.permits`).
    """
    if concurrency < 1:
        raise InvalidArgument(f"concurrency={concurrency} must be at least 1")
    test = settings.make_test()
    trials = _Trials(run_trial, memo, input_digest, fingerprint, budget, permits, name)
    outcomes: list[TrialOutcome] = []
    infra: RunError | None = None
    recorder = current_recorder()
    log = (
        DecisionLog(recorder, name, input_digest, fingerprint, first_trial, settings)
        if recorder is not None
        else None
    )
    if concurrency == 1:
        budget_out = False
        i = first_trial
        while not test.done:
            got = await trials.obtain(i)
            if got is None:
                budget_out = True
                if log is not None:
                    log.unjudged(i, "refused")
                break
            trace, made = got
            taken = _feed(i, trace, made, trials, judge, test, outcomes, log)
            if taken == "again":
                continue
            if taken == "refused":
                budget_out = True
                break
            if taken == "infrastructure":
                infra = trace.infrastructure_error
                break
            i += 1
        result = _result(name, test, outcomes, settings, budget_out, infra)
        if log is not None:
            log.end(result)
            result._decision = log.decision
        return result
    beyond, beyond_usage, budget_out, infra = await _decide_in_flight(
        test, trials, judge, outcomes, concurrency, first_trial, log
    )
    result = _result(name, test, outcomes, settings, budget_out, infra)
    result.runs_beyond_decision = beyond
    result.cost_usd += sum(u.cost_usd for u in beyond_usage)
    result.input_tokens += sum(u.input_tokens for u in beyond_usage)
    result.output_tokens += sum(u.output_tokens for u in beyond_usage)
    if log is not None:
        log.end(result)
        result._decision = log.decision
    return result


def _feed(
    i: int,
    trace: Trace,
    made: bool,
    trials: _Trials,
    judge: Judge,
    test: SequentialTest,
    outcomes: list[TrialOutcome],
    log: DecisionLog | None,
) -> Literal["judged", "again", "refused", "infrastructure"]:
    """Judge trial ``i``'s run into ``test``, or say why it is not judged: a model call the
    budget refused (``again`` when other calls held the reservations, so it may be asked
    again; else ``refused``), or an error that is not the agent's (``infrastructure``: the
    decision stops). Either way the trial is recorded in ``log``."""
    if cut_by_budget(trace):  # a model call the budget refused: not a run of the agent
        again = trials.room_left(i)
        if log is not None:
            log.unjudged(
                i, "cut" if again else "refused", trace, made, error_kind="budget_exhausted"
            )
        return "again" if again else "refused"
    infra = trace.infrastructure_error
    if infra is not None:
        if log is not None:
            log.unjudged(i, "infrastructure", trace, made, error_kind=infra.kind)
        return "infrastructure"
    rec = judge(trace)
    if log is not None:
        log.judged(i, rec, trace, made)
    outcomes.append(TrialOutcome(i, rec, trace, not made))
    test.update(rec.passed)
    return "judged"


def _start_making(
    trials: _Trials, trial: int, claim: RunClaim | _Unkept, holds_permit: bool
) -> asyncio.Task[tuple[Trace, bool] | None]:
    """A task making ``trial``'s run (:meth:`_Trials.make`). A task cancelled before it ever
    ran never enters ``make`` (the decision can end in the step that dispatched it), so its
    claim on the memo and its permit are given back here, else decisions waiting for either
    would wait for ever."""
    started = False

    async def make() -> tuple[Trace, bool] | None:
        nonlocal started
        started = True
        return await trials.make(trial, claim, holds_permit)

    def give_back(task: asyncio.Task[tuple[Trace, bool] | None]) -> None:
        if started:
            return
        claim.release()
        if holds_permit:
            assert trials.permits is not None
            trials.permits.release()

    task = asyncio.ensure_future(make())
    task.add_done_callback(give_back)
    return task


async def _decide_in_flight(
    test: SequentialTest,
    trials: _Trials,
    judge: Judge,
    outcomes: list[TrialOutcome],
    width: int,
    first_trial: int,
    log: DecisionLog | None = None,
) -> tuple[int, list[Usage], bool, RunError | None]:
    """Feed ``test`` in trial order from up to ``width`` trials in flight; returns the runs
    made beyond the decision (finished or cancelled), the usage of the finished ones, whether
    the budget refused a trial the test needed, and the error, not the agent's, that stopped
    the decision (``None`` if none did)."""
    ready: dict[int, tuple[Trace, bool]] = {}
    flying: dict[asyncio.Task[tuple[Trace, bool] | None], int] = {}
    making: set[int] = set()
    """Trials in flight whose run is made here (the others wait for another decision's)."""
    end = first_trial + test.max_runs if test.max_runs is not None else None
    fed = dispatched = first_trial
    refused_at: int | None = None
    infra: RunError | None = None
    retry: list[int] = []
    """Trials the budget refused while other runs held reservations: asked again
    once one settles."""
    cancelled = 0
    try:
        while not test.done:
            while fed in ready:
                trace, made = ready.pop(fed)
                taken = _feed(fed, trace, made, trials, judge, test, outcomes, log)
                if taken == "again":
                    flying[asyncio.ensure_future(trials.obtain(fed))] = fed
                    making.add(fed)
                    break
                if taken == "refused":
                    refused_at = fed
                    break
                if taken == "infrastructure":
                    infra = trace.infrastructure_error
                    break
                fed += 1
                if test.done:
                    break
            if test.done or refused_at == fed or infra is not None:
                break
            while refused_at is None and len(flying) < width and (end is None or dispatched < end):
                j = dispatched
                begun = trials.begin(j)
                if isinstance(begun, Trace):
                    ready[j] = (begun, False)
                elif isinstance(begun, asyncio.Future):
                    flying[asyncio.ensure_future(trials.obtain(j, begun))] = j
                else:
                    holds_permit = trials.permits is not None and trials.permits.try_acquire()
                    if trials.permits is not None and not holds_permit and j != fed:
                        # ahead of need: only a permit nobody waits for (the next trial in
                        # order waits for one in its task)
                        begun.release()
                        break
                    if not trials.may_start():
                        begun.release()
                        if holds_permit:
                            assert trials.permits is not None
                            trials.permits.release()
                        if not flying:  # nothing holds a reservation that could come back
                            refused_at = j
                            if log is not None:
                                log.unjudged(j, "refused")
                        break  # else asked again once a run in flight settles
                    flying[_start_making(trials, j, begun, holds_permit)] = j
                    making.add(j)
                dispatched += 1
            if fed in ready or refused_at == fed:
                continue
            if not flying:
                break
            done, _ = await asyncio.wait(flying, return_when=asyncio.FIRST_COMPLETED)
            settled = False
            for task in done:
                j = flying.pop(task)
                making.discard(j)
                got = task.result()
                if got is None:
                    retry.append(j)
                else:
                    ready[j] = got
                    settled = True
            if retry and (settled or not flying) and trials.room_left_for_runs():
                for j in retry:
                    flying[asyncio.ensure_future(trials.obtain(j))] = j
                    making.add(j)
                retry.clear()
            elif retry and not flying:
                refused_at = min(retry) if refused_at is None else min(refused_at, *retry)
                if log is not None:
                    log.unjudged(refused_at, "refused")
                retry.clear()
    finally:
        for task, j in flying.items():
            task.cancel()
            cancelled += j in making
        if flying:
            await asyncio.gather(*flying, return_exceptions=True)
    unneeded = [trace for j, (trace, made) in ready.items() if made and j >= fed]
    if log is not None:
        for j, (trace, made) in sorted(ready.items()):
            if made and j >= fed:
                log.unjudged(j, "beyond", trace, made=True)
    budget_out = not test.done and refused_at is not None and infra is None
    return cancelled + len(unneeded), [t.usage for t in unneeded], budget_out, infra
