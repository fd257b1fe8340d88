"""``agentprop run``: run an agent over a spec's cases and decide each case.

Each case is decided by the oracle (:mod:`agentprop._decide.oracle`): the SPRT by default,
zero-failure certification for high-risk specs, fixed N on request. Cases run concurrently (an
asyncio semaphore bounds how many runs are in flight); a live progress line shows cases done, runs,
cost and an ETA when stderr is a terminal, and without one a plain line every few seconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from agentprop._agents.loading import LoadedAgent, runs_concurrently
from agentprop._agents.project import Project
from agentprop._decide.check import Property, decide_scenario
from agentprop._decide.claims import PolicyEvidence, claim, top_up_targets
from agentprop._decide.corpus import (
    Corpus,
    CorpusEntry,
    entry_from_shrink,
    found_with,
    judge_replay,
)
from agentprop._decide.holds import holding
from agentprop._decide.memo import TrialMemo
from agentprop._decide.metamorphic import MIN_RUNS_PER_SIDE
from agentprop._decide.oracle import (
    FAILING_PER_RESULT,
    FAILING_PER_SIGNATURE,
    PASSING_PER_RESULT,
    CheckResult,
    OracleSettings,
)
from agentprop._decide.permits import CaseLanes, RunPermits
from agentprop._decide.profiles import get_profile, screened
from agentprop._decide.records import record_scope
from agentprop._decide.safety import (
    SAFETY_RUNS,
    CaseSettings,
    case_settings,
    describe,
    safety_policies,
    safety_reasons,
    safety_settings,
    strictness,
)
from agentprop._decide.shrink import shrink
from agentprop._decide.shrunk import ShrinkReport
from agentprop._decide.written import InputWriter
from agentprop._judge.judges import ModelJudge, bound_judge, spec_rubrics
from agentprop._judge.signature import bug_key
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.anytime import held_back
from agentprop._pipeline.bugs import SHRINKABLE_KINDS, divergence_key, find_bugs
from agentprop._pipeline.completeness import condition_coverage, untested
from agentprop._pipeline.defaults import DEFAULT_PER_PATH
from agentprop._pipeline.explore import (
    ExploredInput,
    LearnedWeights,
    channel_lines,
    channel_summary,
    exploration_lines,
    exploration_summary,
    explore_cases,
    world_not_tried,
    world_not_tried_lines,
)
from agentprop._pipeline.kinds import (
    SAFETY_CONTRACTS,
    Replay,
    case_from_check,
    decision_names,
    extra_cases,
    passing_cap,
    passing_quota,
)
from agentprop._pipeline.probe import probe_cases, probe_property
from agentprop._pipeline.report.model import (
    AgentInfo,
    BranchStatus,
    BugReport,
    CaseReport,
    CorpusEvent,
    DecisionTree,
    Metrics,
    PolicyClaimReport,
    RunReport,
    SpecInfo,
    TraceSampling,
    TreeBranch,
    TreeNode,
    case_metrics,
)
from agentprop._pipeline.shards import Shard
from agentprop._scenario.build import Scenario
from agentprop._spec.paths import loop_branches
from agentprop._stats import zero_failure_runs
from agentprop._util import aio
from agentprop._version import __version__
from agentprop.errors import InfrastructureError, InvalidArgument


@dataclass
class RunSettings:
    mode: str | None = None
    """``sprt``, ``zero-failure`` or ``fixed`` (default: from the spec's risk level)."""
    runs: int | None = None
    """Runs of fixed / zero-failure mode (``--runs`` alone selects fixed mode)."""
    tau: float | None = None
    """Required pass rate (default: the spec's ``defaults.reliability.min_pass_rate``)."""
    max_runs: int | None = None
    concurrency: int = 8
    kinds: tuple[str, ...] = ("mft", "explore", "probe", "boundary", "dir", "inv")
    case_filter: tuple[str, ...] = ()
    """Substrings of case ids to keep (``--case``); empty keeps everything."""
    """Which case kinds to run (see :mod:`agentprop._pipeline.kinds`)."""
    seed: int = 0
    turn_timeout_s: float | None = 60.0
    """Seconds each turn of a run may take (``--turn-timeout``); it is the project's
    :attr:`~agentprop._agents.project.Project.turn_timeout_s` for the cases run."""
    explore: int = DEFAULT_PER_PATH
    """Inputs explored per path (EXPLORE cases; 0 turns exploration off)."""
    keep_partial: bool = False
    """On cancellation (Ctrl-C under ``asyncio.run``), return the report of the cases decided
    so far, marked ``metrics.extra["interrupted"]``, instead of raising ``CancelledError``."""
    explore_seed: int | None = None
    """The seed of the inputs explored (``None``: ``seed``); ``seed`` stays the trials' namespace,
    so memoised and cached runs of the same inputs are reused."""
    replay_corpus: Literal["own", "all"] = "own"
    """Which corpus entries are replayed first: those found with this agent (reference and
    fault knobs), or ``all`` of the spec's (another agent's passes never retire an entry)."""
    profile: str | None = None
    """How deep each case is decided (:mod:`agentprop._decide.profiles`; ``None``: the default)."""
    stage: str = "final"
    """A pass of a budgeted run (:func:`arun_cases`): ``first`` (one run a case: an INV case
    runs its first variant only), ``breadth`` (one run a case, nothing
    confirmed), ``confirm`` (a screen of one run: failures confirmed), ``deepen`` (a screen of
    :attr:`depth` runs) or ``final`` (the profile)."""
    depth: int = 0
    """The screen of a ``deepen`` pass: every case up to this many clean runs."""
    input_writer: InputWriter | None = None
    """Writes turns by a model (``--input-model``, ``--simulated-user``): explored inputs may be
    model-written (:mod:`agentprop._decide.written`); ``None`` (the default):
    templates and packs only."""
    shard: Shard | None = None
    """Decide only this shard's cases (``--shard i/N``, :mod:`.shards`): the caller passes the
    shard's scenarios (their MFT, EXPLORE and INV cases); PROBE, BOUNDARY, DIR cases and corpus
    replays are kept by their ids here."""
    shrink_budget: int = 0
    """Runs per shrink (``--shrink-budget``). Under a limited budget, the failures confirmed
    by the first passes are shrunk with it before any passing case is deepened (0: not; the
    shrink after the run then replays those runs from the memo)."""


class Progress:
    """Progress of a run on stderr: a live status line on a terminal; without one (CI logs, a
    pipe) a plain line every ``interval_s`` seconds from a heartbeat thread (:meth:`start`), so a
    long run is never silent, and a line when a stage starts (:meth:`note`)."""

    def __init__(
        self,
        total_cases: int,
        stream: TextIO | None = None,
        *,
        interval_s: float = 5.0,
        budget: Budget | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.budget = budget
        """When given, the runs and cost shown are the budget's as they happen (counted from
        now), not only those of finished cases: one long case otherwise shows ``runs 0``."""
        self._budget_start = self._budget_counts()
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total_cases
        self.done = 0
        self.runs = 0
        self.cost = 0.0
        self.interval_s = interval_s
        self.started = time.perf_counter()
        self.stage: str | None = None
        self.to_plan: list[str] = []
        """Stages whose cases are not counted in ``total`` yet: no ETA is shown until they are."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def _runs_label(self) -> str:
        """With the budget, the runs shown are those started; without it, those judged by the
        cases finished (a run reused by several cases counts in each)."""
        return "runs started" if self.budget is not None else "runs judged"

    def _budget_counts(self) -> tuple[int, float]:
        if self.budget is None:
            return (0, 0.0)
        snap = self.budget.snapshot()
        return (snap.runs, snap.usd)

    def _counts(self) -> tuple[int, float]:
        """Runs and cost so far: the budget's since the start when there is one (every run
        started, in a finished case or not), else the sum over finished cases."""
        if self.budget is None:
            return (self.runs, self.cost)
        runs, usd = self._budget_counts()
        return (
            max(self.runs, runs - self._budget_start[0]),
            max(self.cost, usd - self._budget_start[1]),
        )

    def status(self) -> str:
        elapsed = time.perf_counter() - self.started
        runs, cost = self._counts()
        if self.stage is not None and not self.total:
            return f"{self.stage}  elapsed {elapsed:.1f}s"
        if self.to_plan:
            # the total will still grow: an ETA from it would promise too early an end
            return (
                f"cases {self.done}/{self.total}+ (more to come from {', '.join(self.to_plan)})  "
                f"{self._runs_label} {runs}  cost ${cost:.4f}  elapsed {elapsed:.1f}s"
            )
        line = (
            f"cases {self.done}/{self.total}  {self._runs_label} {runs}  cost ${cost:.4f}  "
            f"elapsed {elapsed:.1f}s"
        )
        if not self.done:  # nothing finished yet to extrapolate from ("ETA 0.0s" misled)
            return line
        return f"{line}  ETA {elapsed / self.done * (self.total - self.done):.1f}s"

    def planned(self, n: int, stage: str, *, final: bool = True) -> None:
        """``n`` more cases of ``stage`` are planned; ``final``: the stage plans no more."""
        self.total += n
        if final and stage in self.to_plan:
            self.to_plan.remove(stage)

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                self.stream.write(text)
                self.stream.flush()
            except (ValueError, OSError):  # the stream was closed under us: progress is optional
                pass

    def start(self) -> Progress:
        """Without a terminal, print the status every ``interval_s`` seconds until :meth:`close`."""
        if not self.live and self.interval_s > 0 and self._thread is None:
            self._thread = threading.Thread(
                target=self._beat, name="agentprop-progress", daemon=True
            )
            self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._write(f"agentprop: {self.status()}\n")

    def update(self, *, runs: int = 0, cost: float = 0.0, case_done: bool = False) -> None:
        self.runs += runs
        self.cost += cost
        if case_done:
            self.done += 1
        if self.live:
            self._write(f"\r\x1b[K  {self.status()}")

    def note(self, text: str) -> None:
        """A stage starting (``shrinking CASE``): over the status line on a terminal, a line of
        its own otherwise."""
        self.stage = text
        self._write(f"\r\x1b[K  {text}" if self.live else f"agentprop: {text}\n")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.live:
            self._write("\r\x1b[K")


def case_lanes(agent: LoadedAgent, concurrency: int) -> CaseLanes:
    """A model-backed (async) agent's case keeps up to ``concurrency`` trials in flight, all
    cases' runs sharing ``concurrency`` permits; a sync agent's case runs one trial at a time
    (its runs compete for the interpreter: more in flight would only add runs past the
    decision)."""
    if concurrency > 1 and runs_concurrently(agent):
        return CaseLanes(concurrency, RunPermits(concurrency))
    return CaseLanes()


def _case_report(scenario: Scenario, result: CheckResult, rule: str | None = None) -> CaseReport:
    case = case_from_check(scenario.id, "MFT", scenario, result, {})
    case.rule = rule
    return case


def explicit_settings(settings: RunSettings) -> str | None:
    """The user's explicit oracle settings (``--mode zero-failure --runs 20``), or ``None``."""
    given = [
        f"--{k} {v}"
        for k, v in (("mode", settings.mode), ("tau", settings.tau), ("runs", settings.runs))
        if v is not None
    ]
    return " ".join(given) or None


EXPLICIT_INV_RUNS = 20
"""An INV case's runs a side under explicit settings without ``--runs`` (``--mode``,
``--tau``): the profile is set aside, as for every case."""


def inv_plan(settings: RunSettings, profile_inv_runs: int, explicit: bool) -> dict[str, Any]:
    """How an INV case samples its sides (:func:`~agentprop._pipeline.kinds.extra_cases`'s
    ``inv_runs``, ``inv_take``, ``inv_variants``, ``inv_look``). Under the profile: its
    ``inv_runs`` a side, a budgeted pass taking its look (``first``: one run of the first
    paraphrase). ``--runs N`` means N runs a side, as it means N runs of every other case: every
    paraphrase compared when N reaches the test's fewest (5); below that only the first
    paraphrase, the case undecided, so ``--runs 1`` starts one run an INV case (its original's
    run is its path's MFT run). Other explicit settings: :data:`EXPLICIT_INV_RUNS` a side."""
    if not explicit:
        return {
            "inv_runs": profile_inv_runs,
            "inv_take": {"first": 1, "breadth": 1, "confirm": 1, "deepen": settings.depth}.get(
                settings.stage
            ),
            "inv_variants": 1 if settings.stage == "first" else None,
        }
    n = settings.runs
    if n is None:
        return {"inv_runs": EXPLICIT_INV_RUNS}
    if n >= MIN_RUNS_PER_SIDE:
        return {"inv_runs": n}
    return {
        "inv_runs": MIN_RUNS_PER_SIDE,
        "inv_take": n,
        "inv_variants": 1,
        "inv_look": f"--runs {n}: {n} run(s) a side, the first paraphrase only, short of the "
        f"{MIN_RUNS_PER_SIDE} the two-sample test needs (--runs {MIN_RUNS_PER_SIDE} or more "
        "compares every paraphrase); ran",
    }


def limited(budget: Budget | None) -> bool:
    """Whether ``budget`` can refuse a run (a limit on runs, tokens or dollars)."""
    return budget is not None and (
        budget.max_runs is not None or budget.max_usd is not None or budget.max_tokens is not None
    )


async def arun_cases(
    project: Project,
    agent: LoadedAgent,
    scenarios: list[Scenario],
    settings: RunSettings,
    *,
    problems: list[str] | None = None,
    progress_stream: TextIO | None = None,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    corpus: Corpus | None = None,
) -> RunReport:
    """Decide every case of the suite. Under a limited budget the suite is run breadth first,
    in passes over one memo: one run of every case (corpus replays included; an INV case's first
    look is one run of its first paraphrase, its original's being its path's), then one run of
    every INV case's other paraphrases, then the failures confirmed (a screen of one run) and
    shrunk (``settings.shrink_budget``), then every case deepened to 2, 4, 8 ... clean runs in
    turn (when the budget cannot reach them all, the failing, riskiest and weakest first:
    :mod:`agentprop._pipeline.anytime`) up to the profile's depth (a corpus replay's: in full);
    each pass reuses the runs of the one before, so a case the budget cut short keeps what its
    runs showed, and no case is left without a run while another got a second."""
    memo = memo if memo is not None else TrialMemo()
    if project.turn_timeout_s != settings.turn_timeout_s:
        project = dataclasses.replace(project, turn_timeout_s=settings.turn_timeout_s)
    in_passes = limited(budget) and explicit_settings(settings) is None
    # every pass explores the inputs the first one drew
    learned = LearnedWeights() if in_passes else None

    async def decide_all(these: RunSettings, scope: str) -> RunReport:
        with record_scope(stage=scope), passing_quota():
            return await _arun_cases(
                project,
                agent,
                scenarios,
                these,
                problems=problems,
                progress_stream=progress_stream,
                memo=memo,
                budget=budget,
                corpus=corpus,
                learned=learned,
            )

    if not in_passes:
        return await decide_all(settings, settings.stage)
    assert budget is not None
    at_start, started = budget.snapshot(), time.perf_counter()

    async def look(stage: str, depth: int = 0) -> RunReport:
        report = await decide_all(
            dataclasses.replace(settings, stage=stage, depth=depth),
            stage if stage != "deepen" else f"deepen {depth}",
        )
        if "interrupted" in report.metrics.extra:  # Ctrl-C: the run ends with this pass
            raise _Interrupted(report)
        return report

    shrink_runs = 0
    try:
        if settings.kinds:
            # every case's first run before any case's second: an INV case compares its
            # original with several paraphrases, one run each; the first pass runs one of them
            await look("first")
            if not budget.snapshot().exhausted:
                await look("breadth")
            confirmed = await look("confirm")
            if settings.shrink_budget > 0 and any(
                c.verdict in ("FAIL", "UNSTABLE") for c in confirmed.cases
            ):
                # a confirmed failure is shrunk before passing cases get more runs; nothing is
                # saved here: the shrink after the run replays these runs from the memo, saves it
                before = budget.snapshot().runs
                Progress(0, progress_stream, interval_s=0).note(
                    shrinking_note("the confirmed failures before deepening the rest", budget)
                )
                try:
                    # a daemon thread: a Ctrl-C does not wait for the shrink's every run
                    await aio.to_daemon_thread(
                        lambda: shrink_failures(
                            project,
                            agent,
                            confirmed,
                            budget=settings.shrink_budget,
                            corpus=None,
                            session_budget=budget,
                            memo=memo,
                            seed=settings.seed,
                        ),
                        "agentprop-shrink",
                    )
                except asyncio.CancelledError:
                    if not settings.keep_partial:
                        raise
                    _uncancel()
                    decided = len(confirmed.cases)
                    confirmed.metrics.extra["interrupted"] = {
                        "cases_planned": decided,
                        "cases_decided": decided,
                        "stage": "shrinking",
                    }
                    raise _Interrupted(confirmed) from None
                shrink_runs = budget.snapshot().runs - before
            # replays are decided in full (a known bug): deepened in turn with the rest,
            # whatever the profile
            replays_entries = corpus is not None and any(
                settings.replay_corpus == "all" or found_with(e, agent)
                for e in corpus.entries(spec_id=project.spec.spec_id)
            )
            latest, names = confirmed, decision_names(project)
            final_screen = None if replays_entries else get_profile(settings.profile).screen
            for depth in deepening(final_screen, through=True):
                # what the budget has left goes where a verdict is weakest or the risk highest
                # (_pipeline.anytime); the cases it cannot reach are held back for the next pass
                for _ in range(SUBPASSES):
                    snap = budget.snapshot()
                    if snap.exhausted:
                        break
                    held = held_back(latest.cases, depth, snap, names)
                    if not held and depth == final_screen:
                        break  # the last pass, in full, is this one
                    with holding(held):
                        latest = await look("deepen", depth)
                    if not held or budget.snapshot().runs == snap.runs:
                        break
        report = await decide_all(settings, settings.stage)
    except _Interrupted as stop:
        report = stop.report
    m, at_end = report.metrics, budget.snapshot()
    m.duration_s = time.perf_counter() - started  # every pass's time, not the last one's
    m.runs_started = at_end.runs - at_start.runs - shrink_runs
    m.runs_refused = at_end.refused_runs - at_start.refused_runs
    m.runs_reused = max(0, m.runs - (m.runs_started - m.runs_beyond_decision))
    if shrink_runs:
        m.extra["runs_shrinking_before_deepening"] = shrink_runs
    return report


def _uncancel() -> None:
    """The current task's cancellation (a Ctrl-C) is handled here: it goes no further up."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


class _Interrupted(Exception):
    """A pass of a budgeted run was interrupted (Ctrl-C, with ``keep_partial``): its partial
    report ends the run; no later pass starts."""

    def __init__(self, report: RunReport) -> None:
        super().__init__("interrupted")
        self.report = report


SUBPASSES = 3
"""The most passes one depth of a budgeted run is split into (the first deepens the cases ranked
first by :mod:`agentprop._pipeline.anytime`, the next the ones after them, budget permitting)."""

DEEPENING = (2, 4, 8, 16, 32)
"""The screens of the deepening passes of a budgeted run (:func:`arun_cases`)."""


def deepening(final_screen: int | None, *, through: bool = False) -> tuple[int, ...]:
    """The depths every case is taken to in turn before the profile's own (a screen of
    ``final_screen`` runs; ``None``: each case's own test, however deep); ``through``: the
    profile's screen too, so that its depth is reached in the same order as the others."""
    below = tuple(k for k in DEEPENING if final_screen is None or k < final_screen)
    return below + ((final_screen,) if through and final_screen is not None else ())


async def _arun_cases(
    project: Project,
    agent: LoadedAgent,
    scenarios: list[Scenario],
    settings: RunSettings,
    *,
    problems: list[str] | None = None,
    progress_stream: TextIO | None = None,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    corpus: Corpus | None = None,
    learned: LearnedWeights | None = None,
) -> RunReport:
    spec = project.spec
    mode = settings.mode or (
        "fixed"
        if settings.runs is not None and spec.risk_level not in ("high", "critical")
        else None
    )
    oracle = OracleSettings.for_spec(
        spec, mode=mode, tau=settings.tau, runs=settings.runs, max_runs=settings.max_runs
    )
    explicit = explicit_settings(settings)
    profile = get_profile(settings.profile)
    rules: dict[str, CaseSettings] = {}

    def own_rule(scenario: Scenario) -> CaseSettings:
        """Per-case settings (the safety rule, :mod:`agentprop._decide.safety`),
        once per scenario."""
        key = scenario.model_dump_json()
        if key not in rules:
            rules[key] = case_settings(spec, project.bindings, scenario, oracle, explicit=explicit)
        return rules[key]

    def at_stage(chosen: OracleSettings) -> OracleSettings:
        """``chosen`` (a case's settings at full depth) cut to this pass's depth
        (:attr:`RunSettings.stage`)."""
        if settings.stage in ("first", "breadth"):
            return dataclasses.replace(chosen, mode="fixed", runs=1, screen=None)
        if settings.stage == "confirm":
            return dataclasses.replace(chosen, screen=1)
        if settings.stage == "deepen" and (chosen.screen is None or chosen.screen > settings.depth):
            return dataclasses.replace(chosen, screen=settings.depth)
        return chosen

    def profiled(rule: CaseSettings) -> CaseSettings:
        """``rule`` under the profile, at this pass's depth."""
        final = screened(profile, rule)
        return (
            final
            if settings.stage == "final"
            else CaseSettings(at_stage(final.settings), rule.rule, rule.safety)
        )

    def case_rule(scenario: Scenario) -> CaseSettings:
        """The case's settings under the profile (explicit settings are taken as given)."""
        rule = own_rule(scenario)
        return rule if explicit is not None else profiled(rule)

    started = time.perf_counter()
    budget = budget if budget is not None else Budget()  # unlimited: it counts the runs started
    at_start = budget.snapshot()
    progress = Progress(
        len(scenarios) if "mft" in settings.kinds else 0, progress_stream, budget=budget
    )
    if settings.stage != "final":
        what = {
            "first": "one run a case",
            "breadth": "one run of every INV case's other paraphrases",
            "confirm": "failures confirmed",
            "deepen": f"every case to {settings.depth} clean runs",
        }
        progress.note(f"a first look under the budget ({what.get(settings.stage, settings.stage)})")
    memo = memo if memo is not None else TrialMemo()
    sem = asyncio.Semaphore(max(1, settings.concurrency))
    lanes = case_lanes(agent, settings.concurrency)

    checks: dict[str, tuple[Scenario, CheckResult]] = {}
    replays: dict[str, Replay] = {}

    props: dict[str, Property] = {}

    judges: dict[str, ModelJudge] = {}
    if project.bindings.judge is not None:
        judges = {
            r.rubric.name: bound_judge(r.rubric, project.bindings.judge, project.bindings.base_dir)
            for r in spec_rubrics(spec)
        }

    judged_oracle = dataclasses.replace(
        oracle, mode="sprt", tau=oracle.tau if 0.5 < oracle.tau < 1.0 else 0.9
    )
    """JUDGE cases: a judge's verdicts are never certain, so they are decided by the SPRT (at the
    spec's tau, 0.9 when it asks for certification), whatever the path's rule."""

    def case_judge(rubric: str) -> ModelJudge | None:
        """A judge of its own for one case (its call count is the case's), sharing
        the model client."""
        found = judges.get(rubric)
        return dataclasses.replace(found) if found is not None else None

    def corpus_prop(entry: CorpusEntry) -> Property | None:
        """A PROBE reproducer replays with the PROBE property (and is shrunk with it); a judged
        one with its rubric's judge (none when the bindings no longer name a judge model)."""
        judged = (
            case_judge(entry.prop.removeprefix("judge:"))
            if entry.prop.startswith(JUDGE_PROP)
            else None
        )
        if judged is not None:
            for kind in ("REGRESSION", "CORPUS"):
                props[f"{kind} {entry.id} {entry.scenario_id}"] = judged
            return judged
        if entry.prop != "probe":
            return None
        prop = probe_property(project, entry.scenario)
        for kind in ("REGRESSION", "CORPUS"):
            props[f"{kind} {entry.id} {entry.scenario_id}"] = prop
        return prop

    async def one(
        scenario: Scenario, case_id: str | None = None, prop: Property | None = None
    ) -> CheckResult:
        async with sem:
            # a known bug (a corpus replay) is decided in full: a screen would retire nothing
            settings_now = (own_rule if case_id is not None else case_rule)(scenario).settings
            # judged: the SPRT on the judge's verdicts, corrected for its error
            if isinstance(prop, ModelJudge):
                # staged like every case under a budget: one judged run in the first
                # pass, deepened later
                settings_now = at_stage(judged_oracle)
            # a PROBE reproducer: its clause is a safety clause unless the rule says otherwise
            elif prop is not None:
                settings_now = max(
                    (settings_now, safety_settings(oracle))
                    if explicit is None
                    else (settings_now,),
                    key=strictness,
                )
            # a judged one: above
            if (
                case_id is not None
                and case_id.startswith("corpus ")
                and not isinstance(prop, ModelJudge)
            ):
                # replays are breadth first too; the final pass decides them in full
                settings_now = at_stage(settings_now)
            with record_scope(kind="MFT" if case_id is None else None):
                result = await decide_scenario(
                    project,
                    scenario,
                    agent,
                    prop=prop,
                    settings=settings_now,
                    memo=memo,
                    budget=budget,
                    seed=settings.seed,
                    name=case_id,
                    **lanes.for_case(),
                )
        checks[case_id or scenario.id] = (scenario, result)
        progress.update(runs=result.runs, cost=result.cost_usd, case_done=True)
        return result

    kinds = set(settings.kinds)
    extra: list[CaseReport] = []
    explored: list[CaseReport] = []
    probed: list[CaseReport] = []
    explored_inputs: list[ExploredInput] = []
    regressions: list[CaseReport] = []
    judged_cases: list[CaseReport] = []
    events: list[CorpusEvent] = []
    every = corpus.entries(spec_id=spec.spec_id) if corpus is not None else []
    entries = [e for e in every if settings.replay_corpus == "all" or found_with(e, agent)]
    if settings.shard is not None:
        entries = [e for e in entries if settings.shard.keeps(f"corpus {e.id} {e.scenario_id}")]
    for damaged in corpus.damaged if corpus is not None else []:
        # skipped, not fatal: the other entries still replay
        where = damaged.location.path if damaged.location is not None else None
        events.append(
            CorpusEvent(
                entry=Path(str(where)).stem if where else "?",
                action="damaged",
                signature="",
                message=f"skipped damaged entry {str(damaged).splitlines()[0]}; fix: {damaged.fix}",
            )
        )
    explores = "explore" in kinds and settings.explore > 0
    progress.to_plan = [
        stage
        for stage, on in (
            ("explore", explores),
            ("probe", "probe" in kinds),
            ("boundary/dir/inv", bool(kinds & {"boundary", "dir", "inv"})),
        )
        if on
    ]
    results: list[CheckResult] = []
    interrupted = False
    try:
        progress.start()
        if entries:
            # known reproducers first: a bug that was found stays checked until it is gone
            progress.total += len(entries)
            rechecked = await asyncio.gather(
                *(
                    one(e.scenario, f"corpus {e.id} {e.scenario_id}", prop=corpus_prop(e))
                    for e in entries
                )
            )
            assert corpus is not None
            # an earlier pass only runs them: the final one judges the entries (and may retire them)
            chosen_entries = entries if settings.stage == "final" else []
            regressions = [
                _corpus_case(corpus, e, r, oracle, agent, checks, events)
                for e, r in zip(chosen_entries, rechecked)
            ]
            for e, case in zip(entries, regressions):
                case.rule = own_rule(e.scenario).rule
                if (
                    e.prop == "probe"
                    and explicit is None
                    and strictness(safety_settings(oracle))
                    > strictness(own_rule(e.scenario).settings)
                ):
                    case.rule = f"{describe(safety_settings(oracle))} (safety: a PROBE reproducer)"
        results = await asyncio.gather(*(one(s) for s in scenarios)) if "mft" in kinds else []
        if judges and "mft" in kinds:
            judged_cases = await _judge_cases(
                project, scenarios, case_judge, one, judged_oracle, props, progress
            )
            for case in judged_cases:
                replays[case.id] = _judge_replay(
                    project,
                    checks[case.id][0],
                    case.id,
                    case.details["rubric"],
                    case_judge,
                    judged_oracle,
                    memo,
                    budget,
                    settings.seed,
                )
        for scenario in scenarios if "mft" in kinds else []:
            replays[scenario.id] = _mft_replay(
                project, scenario, case_rule(scenario), memo, budget, settings.seed
            )
        if explores:
            explored, explored_inputs = await explore_cases(
                project,
                agent,
                scenarios,
                oracle,
                per_path=settings.explore,
                memo=memo,
                budget=budget,
                seed=settings.seed,
                input_seed=settings.explore_seed,
                concurrency=settings.concurrency,
                checks=checks,
                replays=replays,
                lanes=lanes,
                on_planned=lambda n: progress.planned(n, "explore", final=False),
                on_done=lambda c: progress.update(runs=c.runs, cost=c.cost_usd, case_done=True),
                settings_for=lambda sc: case_rule(sc).settings,
                learned=learned,
                writer=settings.input_writer,
            )
            progress.planned(0, "explore")
            bases = {e.case_id: e.base for e in explored_inputs}
            for case in explored:
                # an explored input of a safety path is held to the safety rule, as its MFT is
                case.rule = case_rule(bases[case.id]).rule
        if "probe" in kinds:
            probed, probe_inputs, probe_notes = await probe_cases(
                project,
                agent,
                project.scenarios(),
                oracle,
                rule_for=own_rule,
                explicit=explicit,
                profile_rule=profiled,
                memo=memo,
                budget=budget,
                seed=settings.seed,
                concurrency=settings.concurrency,
                checks=checks,
                replays=replays,
                case_filter=settings.case_filter,
                shard=settings.shard,
                on_planned=lambda n: progress.planned(n, "probe"),
                on_done=lambda c: progress.update(runs=c.runs, cost=c.cost_usd, case_done=True),
            )
            progress.planned(0, "probe")
            explored_inputs = explored_inputs + probe_inputs
            problems = [*(problems or []), *probe_notes]
        if kinds - {"mft"}:
            extra = await extra_cases(
                project,
                agent,
                scenarios,
                kinds,
                oracle,
                memo=memo,
                budget=budget,
                seed=settings.seed,
                concurrency=settings.concurrency,
                lanes=lanes,
                on_planned=lambda n: progress.planned(n, "boundary/dir/inv"),
                on_done=lambda c: progress.update(runs=c.runs, cost=c.cost_usd, case_done=True),
                case_filter=settings.case_filter,
                checks=checks,
                replays=replays,
                settings_for=lambda sc: case_rule(sc).settings,
                rule_for=lambda sc: case_rule(sc).rule,
                **inv_plan(settings, profile.inv_runs, explicit is not None),
                budgeted=limited(budget),
                shard=settings.shard,
            )
            progress.planned(0, "boundary/dir/inv")
    except asyncio.CancelledError:
        if not settings.keep_partial:
            raise
        interrupted = True
        _uncancel()
    finally:
        progress.close()
    if interrupted:  # the cases decided before the interruption; the rest are left out
        results = (
            [checks[sc.id][1] for sc in scenarios if sc.id in checks] if "mft" in kinds else []
        )
        scenarios = [sc for sc in scenarios if sc.id in checks] if "mft" in kinds else []
    cases = (
        regressions
        + [_case_report(s, r, case_rule(s).rule) for s, r in zip(scenarios, results)]
        + judged_cases
        + explored
        + probed
        + extra
    )
    topped: dict[str, tuple[int, str | None]] = {}
    if settings.shard is not None and explicit is None and profile.pooled:
        # a policy's cases are on several shards: its pooled top-up would differ shard by shard
        problems = [
            *(problems or []),
            f"shard {settings.shard}: policies are not topped up to a pooled claim "
            "(their cases span shards)",
        ]
    elif explicit is None and profile.pooled and settings.stage == "final" and not interrupted:
        bases = {e.case_id: e.base for e in explored_inputs}

        async def redecide(case: CaseReport, runs: int) -> CaseReport:
            """``case`` again, behind a screen of ``runs`` clean runs (its runs so far reused)."""
            scenario = checks[case.id][0]
            return await redecide_case(
                project,
                agent,
                case,
                runs,
                checks,
                case_rule(bases.get(case.id, scenario)).settings,
                TopUpRuns(memo, budget, settings.seed, sem, lanes.for_case()),
            )

        try:
            cases, topped = await top_up_policies(project, cases, checks, redecide, budget)
        except asyncio.CancelledError:  # Ctrl-C: every case stands as decided before the top-up
            if not settings.keep_partial:
                raise
            interrupted = True
            _uncancel()
    coverage = coverage_matrix(
        project, [c for c in cases if c.kind == "MFT"] or cases, every_case=cases
    )
    at_end = budget.snapshot()
    runs_started = at_end.runs - at_start.runs
    judged, beyond = sum(c.runs for c in cases), sum(c.runs_beyond_decision for c in cases)
    metrics = case_metrics(
        cases,
        coverage,
        runs_started=runs_started,
        runs_reused=max(0, judged - (runs_started - beyond)),
        runs_refused=at_end.refused_runs - at_start.refused_runs,
        duration_s=time.perf_counter() - started,
        extra={
            **(
                {"interrupted": {"cases_planned": progress.total, "cases_decided": len(cases)}}
                if interrupted
                else {}
            ),
            **(
                {
                    "exploration": exploration_summary(
                        [e for e in explored_inputs if e.kind == "EXPLORE"],
                        {c.id: c for c in explored},
                    )
                }
                if explored
                else {}
            ),
            **(
                {"input_model": settings.input_writer.summary()}
                if settings.input_writer is not None
                else {}
            ),
            **(
                {"channel": channel}
                if (channel := channel_summary(project.bindings.channel))
                else {}
            ),
            **(
                {"world_not_tried": left_out}
                if (
                    left_out := world_not_tried(
                        {
                            id(e.space): e.space for e in explored_inputs if e.kind == "EXPLORE"
                        }.values()
                    )
                )
                else {}
            ),
        },
    )
    report = RunReport(
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
        settings={
            "mode": oracle.mode,
            "tau": oracle.tau,
            "alpha": oracle.alpha,
            "beta": oracle.beta,
            "max_runs": oracle.max_runs,
            "runs": oracle.runs,
            "unstable_floor": oracle.unstable_floor,
            "confidence": oracle.confidence,
            "seed": settings.seed,
        },
        cases=cases,
        problems=list(problems or []),
        metrics=metrics,
        corpus=events,
        tree=decision_tree(project, coverage),
        trace_sampling=TraceSampling(
            kept=sum(len(c.traces) for c in cases),
            omitted=sum(c.traces_omitted for c in cases),
            failing_per_signature=FAILING_PER_SIGNATURE,
            failing_per_case=FAILING_PER_RESULT,
            passing_per_case=PASSING_PER_RESULT,
            passing_per_run=passing_cap(),
        ),
    )
    report.profile = None if explicit is not None else profile.name
    report.claims = policy_claims(
        project, cases, checks, per_case=explicit is not None or not profile.pooled, topped=topped
    )
    report._checks = checks
    report._replays = replays
    report._explored = {e.case_id: e for e in explored_inputs}
    report._props = props
    return report


JUDGE_RULE = "sprt at tau {tau:g} on the judge's verdicts, corrected for its measured error"
JUDGE_PROP = "judge:"
"""A corpus entry's ``prop`` for a judged reproducer: ``judge:`` and the rubric's name."""


async def _judge_cases(
    project: Project,
    scenarios: list[Scenario],
    case_judge: Callable[[str], ModelJudge | None],
    one: Callable[[Scenario, str | None, Property | None], Awaitable[CheckResult]],
    settings: OracleSettings,
    props: dict[str, Property],
    progress: Progress,
) -> list[CaseReport]:
    """A JUDGE case per rubric of the spec and scenario it applies to (a policy's: every
    scenario; a node's: the scenarios through it), decided on the judge's corrected rate."""
    planned: list[tuple[str, Scenario, ModelJudge]] = []
    for found in spec_rubrics(project.spec):
        for scenario in scenarios:
            judge = case_judge(found.rubric.name)
            if judge is not None and found.applies_to(scenario.path):
                case_id = f"JUDGE {found.rubric.name} {scenario.id}"
                props[case_id] = judge
                planned.append((case_id, scenario, judge))
    progress.total += len(planned)
    results = await asyncio.gather(
        *(one(scenario, case_id, judge) for case_id, scenario, judge in planned)
    )
    out: list[CaseReport] = []
    for (case_id, scenario, judge), result in zip(planned, results, strict=True):
        judged = result.judged.model_dump(mode="json") if result.judged is not None else None
        case = case_from_check(
            case_id,
            "JUDGE",
            scenario,
            result,
            {"rubric": judge.name, "judge_model": judge.model, "judged": judged},
        )
        case.rule = JUDGE_RULE.format(tau=settings.tau)
        out.append(case)
    return out


def _judge_replay(
    project: Project,
    scenario: Scenario,
    case_id: str,
    rubric: str,
    case_judge: Callable[[str], ModelJudge | None],
    settings: OracleSettings,
    memo: TrialMemo,
    budget: Budget | None,
    seed: int,
) -> Replay:
    """A JUDGE case decided again for another agent (a mutant): a judge that may not gate gives
    INCONCLUSIVE there too, so it kills no mutant."""

    async def replay(who: LoadedAgent) -> CaseReport:
        judge = case_judge(rubric)
        result = await decide_scenario(
            project,
            scenario,
            who,
            prop=judge,
            settings=settings,
            memo=memo,
            budget=budget,
            concurrency=1,
            seed=seed,
            name=case_id,
        )
        judged = result.judged.model_dump(mode="json") if result.judged is not None else None
        details = {
            "rubric": rubric,
            "judge_model": judge.model if judge is not None else None,
            "judged": judged,
        }
        case = case_from_check(case_id, "JUDGE", scenario, result, details)
        case.rule = JUDGE_RULE.format(tau=settings.tau)
        return case

    return replay


def case_policies(project: Project, case: CaseReport, scenario: Scenario) -> set[str]:
    """The safety policies ``case`` exercises: those of its path, and the one a
    PROBE case probes."""
    spec, bindings = project.spec, project.bindings
    mine = {
        r.removeprefix("policies.")
        for r in safety_reasons(spec, bindings, scenario)
        if r.startswith("policies.")
    }
    probed = str(case.details.get("clause") or "")
    if case.kind == "PROBE" and probed.startswith("policies."):
        mine.add(probed.removeprefix("policies."))
    return mine


@dataclass(frozen=True)
class TopUpRuns:
    """What the top-up's runs are made with: the memo holding the case's runs so far, the
    budget, the trials' seed, the run's concurrency and a case's lanes (``decide_scenario``'s
    keyword arguments)."""

    memo: TrialMemo | None
    budget: Budget
    seed: int
    sem: asyncio.Semaphore
    lanes: dict[str, Any]


async def redecide_case(
    project: Project,
    agent: Any,
    case: CaseReport,
    runs: int,
    checks: dict[str, tuple[Scenario, CheckResult]],
    oracle: OracleSettings,
    how: TopUpRuns,
) -> CaseReport:
    """``case`` decided again under ``oracle`` behind a screen of ``runs`` clean runs (its runs so
    far reused from ``how.memo``), for a policy's top-up; ``checks`` takes its new result. A case
    the budget cut short stands on its clean runs, as a screen of that many; one no new run was
    made for stands as it was."""
    scenario, old = checks[case.id]
    deeper = dataclasses.replace(oracle, screen=runs)
    async with how.sem:
        result = await decide_scenario(
            project,
            scenario,
            agent,
            settings=deeper,
            memo=how.memo,
            budget=how.budget,
            seed=how.seed,
            name=case.id,
            **how.lanes,
        )
    if result.verdict == "INCONCLUSIVE" and not result.failures:
        if result.runs <= old.runs:
            return case  # nothing more ran: the case stands as decided
        # the budget cut the top-up short: its clean runs still pass the case, as
        # a screen of that many
        async with how.sem:
            result = await decide_scenario(
                project,
                scenario,
                agent,
                settings=dataclasses.replace(deeper, screen=result.runs),
                memo=how.memo,
                budget=how.budget,
                seed=how.seed,
                name=case.id,
                **how.lanes,
            )
        if result.verdict != "PASS":
            return case
    checks[case.id] = (scenario, result)
    again = case_from_check(case.id, case.kind, scenario, result, case.details)
    again.rule = case.rule
    return again


TOP_UP_KINDS = ("MFT", "EXPLORE")
"""The kinds of case a policy is topped up with (another run of the same input)."""


def top_up_cases(
    project: Project,
    policy: str,
    cases: list[CaseReport],
    checks: dict[str, tuple[Scenario, CheckResult]],
) -> list[CaseReport]:
    """The cases that exercise ``policy`` when a pooled top-up could still certify it, else
    ``[]``: some case exercises it, none of their runs failed (no top-up certifies a violated
    policy), and their runs fall short of the clean runs a suite-level claim needs."""
    mine = [
        c for c in cases if c.id in checks and policy in case_policies(project, c, checks[c.id][0])
    ]
    results = [checks[c.id][1] for c in mine]
    needed = zero_failure_runs(0.95, 0.95)
    if any(r.passes < r.runs for r in results) or sum(r.runs for r in results) >= needed:
        return []
    return mine


NO_TOP_UP_POOL = "no passing MFT or EXPLORE case exercises it"
"""Why a policy with cases was not topped up: none it could run again."""


def unpooled_policies(
    project: Project, cases: list[CaseReport], checks: dict[str, tuple[Scenario, CheckResult]]
) -> dict[str, tuple[int, str]]:
    """The safety policies with cases but no passing MFT or EXPLORE case among them: a top-up
    adds them no run, and says why (the same whether the run was sharded or not)."""
    out: dict[str, tuple[int, str]] = {}
    for policy in safety_policies(project.spec, project.bindings):
        mine = top_up_cases(project, policy, cases, checks)
        if mine and not any(c.kind in TOP_UP_KINDS and c.verdict == "PASS" for c in mine):
            out[policy] = (0, NO_TOP_UP_POOL)
    return out


async def top_up_policies(
    project: Project,
    cases: list[CaseReport],
    checks: dict[str, tuple[Scenario, CheckResult]],
    redecide: Callable[[CaseReport, int], Awaitable[CaseReport]],
    budget: Budget,
) -> tuple[list[CaseReport], dict[str, tuple[int, str | None]]]:
    """Top up each safety policy whose cases all passed but ended short of the clean runs a
    suite-level claim needs: more runs of its passing MFT and EXPLORE cases, the fewest-run
    (then the shortest) first (:func:`agentprop._decide.claims.top_up_targets`), each case
    decided again behind a screen of its new runs (a failure there is confirmed as any other).
    Returns the cases (topped-up ones replaced) and, per policy topped up, the runs it added to
    their evidence and why it stopped short (``None``: it did not)."""
    needed = zero_failure_runs(0.95, 0.95)
    out = list(cases)
    topped: dict[str, tuple[int, str | None]] = dict(unpooled_policies(project, out, checks))
    for policy in safety_policies(project.spec, project.bindings):
        mine = top_up_cases(project, policy, out, checks)
        if not mine or policy in topped:
            continue
        pool = [c for c in mine if c.kind in TOP_UP_KINDS and c.verdict == "PASS"]
        others = sum(checks[c.id][1].runs for c in mine if c not in pool)
        targets = top_up_targets(
            {c.id: checks[c.id][1].runs for c in pool},
            needed - others,
            cost={c.id: float(len(checks[c.id][0].turns)) for c in pool},
            cap=SAFETY_RUNS,
        )
        before, judged = budget.snapshot(), sum(checks[c.id][1].runs for c in pool)
        again = await asyncio.gather(*(redecide(c, targets[c.id]) for c in pool if c.id in targets))
        replaced = {c.id: c for c in again}
        out = [replaced.get(c.id, c) for c in out]
        after = budget.snapshot()
        short = sum(checks[c.id][1].runs for c in mine) < needed
        why = (
            (after.exhausted_reason or "the budget is spent")
            if short and after.refused_runs > before.refused_runs
            else None
        )
        if short and why is None:
            why = "its cases' runs cannot reach the runs needed"
        # the runs judged (runs a model agent's case started ahead of its decision are not evidence)
        topped[policy] = (sum(checks[c.id][1].runs for c in pool) - judged, why if short else None)
    return out, topped


def policy_claims(
    project: Project,
    cases: list[CaseReport],
    checks: dict[str, tuple[Scenario, CheckResult]],
    *,
    per_case: bool,
    topped: dict[str, tuple[int, str | None]] | None = None,
) -> list[PolicyClaimReport]:
    """Each safety policy's claim over the cases decided here that exercise it (a PROBE case
    exercises the policy it probes): their runs pooled, a run with the policy's clause among its
    failures counted as a violation (:mod:`agentprop._decide.claims`). ``topped``: per policy,
    the runs its top-up started and why it stopped short (:func:`top_up_policies`)."""
    spec, bindings = project.spec, project.bindings
    unsafe = safety_policies(spec, bindings)
    if not unsafe:
        return []
    evidence = {p: PolicyEvidence(p, why) for p, why in unsafe.items()}
    for policy, (runs, stopped) in (topped or {}).items():
        if policy in evidence:
            evidence[policy].topped_up, evidence[policy].top_up_stopped = runs, stopped
    for case in cases:
        if case.id not in checks:
            continue
        scenario, result = checks[case.id]
        certified = (
            result.verdict == "PASS"
            and result.decided_by == "zero-failure"
            and result.runs >= SAFETY_RUNS
        )
        for policy in case_policies(project, case, scenario) & set(evidence):
            violations = sum(f.count for f in result.failures if f.clause == f"policies.{policy}")
            failed = result.runs - result.passes
            evidence[policy].add(
                case.id,
                result.runs,
                violations,
                other_failures=max(0, failed - violations),
                certified=certified,
            )
    return [
        PolicyClaimReport(**dataclasses.asdict(claim(e, per_case=per_case)))
        for e in evidence.values()
        if e.cases
    ]


def _corpus_case(
    corpus: Corpus,
    entry: CorpusEntry,
    result: CheckResult,
    oracle: OracleSettings,
    agent: LoadedAgent,
    checks: dict[str, tuple[Scenario, CheckResult]],
    events: list[CorpusEvent],
) -> CaseReport:
    """The case of one corpus replay: ``REGRESSION`` only when it failed with the entry's
    own signature (the entry is updated), else ``CORPUS``; a clean enough pass retires it."""
    own = found_with(entry, agent)
    action, message = judge_replay(entry, result, confidence=oracle.confidence, own=own)
    kind = "REGRESSION" if action == "regression" else "CORPUS"
    case_id = f"{kind} {entry.id} {entry.scenario_id}"
    checks[case_id] = checks.pop(f"corpus {entry.id} {entry.scenario_id}")
    try:
        if action == "regression" and own:
            corpus.seen_again(entry, fingerprint=agent.fingerprint)
        elif action == "retired":
            corpus.retire(entry, message)
    except OSError as exc:  # a full or read-only disk: the replay's verdict still stands
        message += f"; the corpus could not be updated ({exc.strerror or exc})"
    events.append(
        CorpusEvent(entry=entry.id, action=action, signature=entry.signature, message=message)
    )
    return case_from_check(
        case_id,
        kind,
        entry.scenario,
        result,
        {
            "signature": entry.signature,
            "created": entry.created,
            "corpus_entry": entry.id,
            "replay": action,
            "message": message,
        }
        | ({"cause": list(entry.cause)} if entry.cause else {}),
    )


def _mft_replay(
    project: Project,
    scenario: Scenario,
    rule: CaseSettings,
    memo: TrialMemo,
    budget: Budget | None,
    seed: int,
) -> Replay:
    async def replay(who: LoadedAgent) -> CaseReport:
        result = await decide_scenario(
            project,
            scenario,
            who,
            settings=rule.settings,
            memo=memo,
            budget=budget,
            concurrency=1,
            seed=seed,
            name=scenario.id,
        )
        return _case_report(scenario, result, rule.rule)

    return replay


def shrinking_note(what: str, budget: Budget | None) -> str:
    """The progress line of shrinking ``what``: with the budget spent no run starts, and only
    the runs already made (the memo's) are looked at, which the line says, naming the limit."""
    spent = budget.exhausted_reason if budget is not None else None
    if spent is None:
        return f"shrinking {what}"
    return (
        f"shrinking {what.removesuffix(' …')} from runs already made only: the budget is spent "
        f"({spent}), no new run starts"
    )


def shrink_failures(
    project: Project,
    agent: LoadedAgent,
    report: RunReport,
    *,
    budget: int,
    corpus: Corpus | None,
    session_budget: Budget | None = None,
    memo: TrialMemo | None = None,
    seed: int = 0,
    stream: TextIO | None = None,
) -> list[ShrinkReport]:
    """Group the failures into bugs (:mod:`agentprop._pipeline.bugs`), shrink each bug once on its
    simplest case, save the reproducers to the corpus and list the bugs in ``report.bugs``.
    ``budget`` (runs per shrink) 0 lists the bugs without shrinking. Returns the shrinks."""
    out: list[ShrinkReport] = []
    by_case: dict[str, ShrinkReport] = {}
    progress = Progress(0, stream) if stream is not None and budget > 0 else None
    stopped: dict[str, str] = {}

    def note_shrinking(case: str) -> None:
        if progress is not None:
            progress.note(shrinking_note(f"{case} …", session_budget))

    def shrink_case(case: CaseReport, signature: str) -> ShrinkReport | None:
        if case.kind == "INV":
            return shrink_leak(case, signature)
        scenario, result = report._checks[case.id]
        note_shrinking(case.id)
        explored = report._explored.get(case.id)
        try:
            # shrink the explored (or PROBE) input's choices, in its base scenario
            if explored is not None:
                shrunk = shrink(
                    project,
                    explored.base,
                    agent,
                    choices=explored.choices,
                    space=explored.space,
                    failing=result,
                    signature=signature,
                    budget=budget,
                    memo=memo,
                    session_budget=session_budget,
                    seed=seed,
                    prop=explored.prop,
                    suspects=_shared_families(report, signature),
                )
            else:
                shrunk = shrink(
                    project,
                    scenario,
                    agent,
                    failing=result,
                    signature=signature,
                    budget=budget,
                    memo=memo,
                    session_budget=session_budget,
                    seed=seed,
                    prop=report._props.get(case.id),
                )
        except InfrastructureError as exc:  # not the agent's: no reproducer, nothing saved
            stopped[case.id] = (
                f"not shrunk: a run met an error that is not the agent's ({exc.kind}): "
                f"{str(exc).splitlines()[0]}"
            )
            return None
        out.append(shrunk)
        by_case[case.id] = shrunk
        return shrunk

    def shrink_leak(case: CaseReport, signature: str) -> ShrinkReport | None:
        """An INV case's leak, shrunk as the one conversation that leaked (the original or a
        variant's wording of the first turn), judged as a PROBE case is (no canary leaks, no
        forbidden tool, no run errors: promises that hold whatever the user says)."""
        found = leaked_input(project, case, signature)
        if found is None:
            return None
        scenario, messages = found
        note_shrinking(case.id)
        prop = probe_property(project, scenario)
        report._props[case.id] = prop
        try:
            shrunk = shrink(
                project,
                scenario,
                agent,
                messages=messages,
                signature=signature,
                budget=budget,
                memo=memo,
                session_budget=session_budget,
                seed=seed,
                prop=prop,
            )
        except InfrastructureError as exc:
            stopped[case.id] = (
                f"not shrunk: a run met an error that is not the agent's ({exc.kind}): "
                f"{str(exc).splitlines()[0]}"
            )
            return None
        out.append(shrunk)
        by_case[case.id] = shrunk
        return shrunk

    def shrinkable(case: CaseReport) -> bool:
        if case.kind == "INV":  # only its leak: a safety failure of one conversation
            return any(
                f.signature.startswith(SAFETY_CONTRACTS) for f in case.failures
            ) and case.verdict in ("FAIL", "UNSTABLE")
        return case.kind in SHRINKABLE_KINDS and case.id in report._checks

    try:
        if progress is not None:
            progress.start()
        key_of = divergence_key(
            project.scenarios(),
            lambda c: report._checks[c.id][0] if c.id in report._checks else None,
        )
        bugs = find_bugs(
            report, shrink_case if budget > 0 else None, shrinkable=shrinkable, key_of=key_of
        )
        for bug in bugs:
            if bug.representative in stopped:
                bug.note = stopped[bug.representative]
        for bug in bugs:
            if corpus is None or bug.origin != "cases" or bug.known or bug.representative is None:
                continue
            case = next(c for c in report.cases if c.id == bug.representative)
            shrunk = by_case.get(case.id)
            if shrunk is None or shrunk.reproducer_rate is None:
                continue  # saved unconfirmed too (marked), but not without a reproducer to re-run
            prop = report._props.get(case.id)
            if isinstance(prop, ModelJudge):
                prop_name = JUDGE_PROP + prop.name
            else:
                prop_name = "probe" if case.kind == "PROBE" or prop is not None else "mft"
            fresh = entry_from_shrink(
                shrunk,
                spec_id=project.spec.spec_id,
                spec_path=str(project.spec_path.parent),
                agent=agent,
                prop=prop_name,
                cause=bug.cause,
            )
            try:
                entry, new = corpus.record(fresh)
            except OSError as exc:  # a full or read-only disk: the reproducer stays in the report
                message = (
                    f"bug {bug.id} not saved to the corpus ({corpus.describe()}): "
                    f"{exc.strerror or exc}; its reproducer is in this report"
                )
                report.corpus.append(
                    CorpusEvent(
                        entry=fresh.id,
                        action="not-saved",
                        signature=fresh.signature,
                        message=message,
                    )
                )
                continue
            bug.corpus_entry = entry.id
            if case.shrunk is not None:
                case.shrunk["corpus_entry"] = entry.id
            unconfirmed = (
                ""
                if shrunk.confirmed
                else " (unconfirmed: its reproducer did not fail again in fresh runs)"
            )
            message = (
                f"saved bug {bug.id} as corpus entry {entry.id}{unconfirmed}"
                if new
                else f"bug {bug.id} was already corpus entry {entry.id} (same signature, same "
                f"case): updated, seen {entry.seen} times"
            )
            report.corpus.append(
                CorpusEvent(
                    entry=entry.id,
                    action="saved" if new else "updated",
                    signature=entry.signature,
                    message=message,
                )
            )
    finally:
        if progress is not None:
            progress.close()
    return out


def leaked_input(
    project: Project, case: CaseReport, signature: str
) -> tuple[Scenario, list[str]] | None:
    """The scenario and messages of the side of an INV case that met ``signature`` (a leak):
    its base scenario with the first turn worded as the variant that leaked (or as written, when
    the original leaked). ``None`` when the case does not say."""
    base_id = str((case.details.get("base") or {}).get("case") or "")
    try:
        scenario = project.scenario(base_id)
    except (KeyError, ValueError, InvalidArgument):
        return None

    def met(decisions: Any) -> bool:
        return isinstance(decisions, dict) and any(
            str(b).partition(" !")[2] == signature for b in decisions
        )

    if met(case.details.get("original")):
        return scenario, list(scenario.messages)
    for v in case.details.get("variants") or []:
        if isinstance(v, dict) and met(v.get("decisions")) and scenario.turns:
            return scenario, [str(v.get("message", "")), *scenario.messages[1:]]
    return None


def _shared_families(report: RunReport, signature: str) -> set[str]:
    """The choice families every explored input that failed with this bug shares: where its
    trigger most likely is. None when fewer than two inputs failed with it, or when they
    share only a template variant (most inputs use one: that says nothing)."""
    key = bug_key(signature)
    families = [
        set(c.details.get("families") or ())
        for c in report.cases
        if c.kind == "EXPLORE"
        and c.verdict in ("FAIL", "UNSTABLE")
        and any(bug_key(f.signature) == key for f in c.failures)
    ]
    shared = set.intersection(*families) if len(families) >= 2 else set()
    return shared if shared - {"template"} else set()


def coverage_matrix(
    project: Project, cases: list[CaseReport], *, every_case: list[CaseReport] | None = None
) -> dict[str, Any]:
    """The seed article's capability matrix plus branch coverage.

    Branches are ``NODE#k``. ``loop`` lists the branches that only lead back to an ancestor
    (loops are unrolled once, so scenarios take them); ``unrealisable`` ones lie on paths that
    no scenario can realise (see ``problems``), loop branches included. ``enforced`` is the
    coverage of every branch, untestable ones included (only branches a ``--case`` filter left
    out are not counted), which is held against the spec's ``tests.visible.min_branch_coverage``;
    ``realisable`` is the coverage of the realisable ones. ``untested`` lists every branch,
    path, decision, policy and retry no case reached, with the reason
    (:func:`agentprop._pipeline.completeness.untested`; ``every_case``: all the run's cases,
    which PROBE cases of policies are among).
    """
    spec = project.spec
    all_branches = [
        f"{n.node_id}#{i}" for n in spec.decision_tree for i, _ in enumerate(n.branches)
    ]
    covered = sorted({b for c in cases for b in c.branches} & set(all_branches))
    loops = [f"{n}#{i}" for n, i in loop_branches(spec)]
    unrealisable = [
        b for b in all_branches if b not in covered and b not in _filtered_out(project, cases)
    ]
    skipped = [b for b in all_branches if b in _filtered_out(project, cases)]
    realisable = [b for b in all_branches if b not in unrealisable]
    counted = [b for b in all_branches if b not in skipped]
    enforced = len(covered) / len(counted) if counted else 1.0
    minimum = ((spec.tests or {}).get("visible") or {}).get("min_branch_coverage")
    capabilities: dict[str, dict[str, int]] = {}
    for name in project.bindings.capabilities:
        mine = [c for c in cases if name in c.capabilities]
        capabilities[name] = {"cases": len(mine), "passed": sum(c.verdict == "PASS" for c in mine)}
    untagged = [c for c in cases if not c.capabilities]
    if untagged and capabilities:
        capabilities["(untagged)"] = {
            "cases": len(untagged),
            "passed": sum(c.verdict == "PASS" for c in untagged),
        }
    return {
        "capabilities": capabilities,
        "branches": {
            "all": all_branches,
            "covered": covered,
            "loop": loops,
            "unrealisable": unrealisable,
            "not_run": skipped,
            "enforced": enforced,
            "realisable": len(covered) / len(realisable) if realisable else 1.0,
            "min_branch_coverage": minimum,
            "met": minimum is None or enforced + 1e-12 >= float(minimum),
        },
        "untested": [
            u.as_dict()
            for u in untested(
                project, every_case if every_case is not None else cases, not_run=skipped
            )
        ],
        "conditions": condition_coverage(project, cases),
    }


def decision_tree(project: Project, coverage: dict[str, Any]) -> DecisionTree:
    """The spec's tree for the report: each branch ``taken``, ``untaken`` or ``unrealisable``
    (as in ``coverage``) and marked when it is a loop; terminal nodes are those no branch
    leaves (declared without branches, or named only by a branch's ``next``)."""
    spec = project.spec
    branches = coverage["branches"]
    covered, unrealisable, loops = (
        set(branches["covered"]),
        set(branches["unrealisable"]),
        set(branches["loop"]),
    )
    defined = {n.node_id for n in spec.decision_tree}
    nodes: list[TreeNode] = []
    terminals: dict[str, TreeNode] = {}
    for node in spec.decision_tree:
        out = []
        for i, b in enumerate(node.branches):
            bid = f"{node.node_id}#{i}"
            status: BranchStatus = (
                "taken" if bid in covered else "unrealisable" if bid in unrealisable else "untaken"
            )
            out.append(
                TreeBranch(
                    id=bid,
                    index=i,
                    when=b.when,
                    next=b.next,
                    description=b.description,
                    status=status,
                    loop=bid in loops,
                )
            )
            if b.next not in defined:
                terminals.setdefault(b.next, TreeNode(id=b.next, terminal=True))
        nodes.append(
            TreeNode(
                id=node.node_id,
                description=node.description,
                terminal=not node.branches,
                branches=out,
            )
        )
    return DecisionTree(
        root=spec.decision_tree[0].node_id if spec.decision_tree else "",
        nodes=nodes + list(terminals.values()),
    )


def _filtered_out(project: Project, cases: list[CaseReport]) -> set[str]:
    """Branches only covered by scenarios that were not run (``--case`` filters)."""
    ran = {c.id for c in cases}
    run_branches = {b for c in cases for b in c.branches}
    return {b for s in project.scenarios() if s.id not in ran for b in s.branches} - run_branches


_LISTED = ("MFT", "REGRESSION", "CORPUS")
"""Case kinds listed one per line even when they pass."""


def _bug_number(report: RunReport, bug_id: str) -> str:
    return next((str(i) for i, b in enumerate(report.bugs, 1) if b.id == bug_id), bug_id)


def _rate_text(bug: BugReport) -> str:
    return bug.rate_text


def _cases_text(ids: list[str], shown: int = 3) -> str:
    more = f" (+{len(ids) - shown} more)" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def _shrunk_text(case_id: str | None, original: object, kept: object, runs: int) -> str:
    """What shrinking did to a bug's representative case, in words: ``9 -> 2 units``, or that
    there was nothing to remove (a default scenario has no choices) or nothing could go."""
    if original == 0:
        return (
            f"shrunk {case_id}: nothing to remove (it is the path's default scenario, no "
            f"choices) in {runs} runs"
        )
    if original is not None and original == kept:
        return f"shrunk {case_id}: none of its {original} units could be removed in {runs} runs"
    return (
        f"shrunk {case_id}: {original if original is not None else '?'} -> "
        f"{kept if kept is not None else '?'} units in {runs} runs"
    )


def render_bugs(report: RunReport, *, width: int = 10_000) -> list[str]:
    """The bugs block that heads the terminal summary: per bug its signature, the cases
    that hit it, the minimal reproducer and its failure rate; then the failures met only
    while shrinking."""
    found = [b for b in report.bugs if b.origin == "cases"]
    met = [b for b in report.bugs if b.origin == "shrinking"]
    lines: list[str] = []
    if found:
        shrunk = sum(b.shrink_runs > 0 for b in found)
        lines.append(
            f"{len(found)} bug(s), failures grouped by signature (turn left out); "
            f"{shrunk} shrunk, once each:"
        )
    for i, bug in enumerate(found, 1):
        lines.append(f"bug {i} [{bug.id}]  {bug.key}")
        lines.append(f"    hit by {len(bug.cases)} case(s): {_cases_text(bug.cases)}")
        if bug.shrink_runs:
            sh = (
                next(
                    (c.shrunk for c in report.cases if c.id == bug.representative and c.shrunk),
                    None,
                )
                or {}
            )
            shrunk_text = _shrunk_text(
                bug.representative, sh.get("original_units"), sh.get("kept_units"), bug.shrink_runs
            )
            lines.append(f"    {shrunk_text}" + ("" if bug.minimal else " (not proven minimal)"))
            if bug.minimality:
                lines.append(f"    {bug.minimality}")
        elif bug.representative:
            lines.append(f"    representative case: {bug.representative} ({bug.note})")
        # an INV or DIR bug is a pair, shown by its diff lines
        if bug.rate_of not in ("variants", "pair"):
            lines.append(f"    reproducer: {bug.reproducer_messages!r}")
        if bug.choices_kept:
            lines.append(f"    choices kept: {bug.choices_kept}")
        lines.extend(f"    {d}" for d in bug.diff)
        if bug.world_kept:
            lines.append(f"    world changes needed: {', '.join(bug.world_kept)}")
        if bug.world_scenario:
            lines.append(f"    world the scenario sets: {', '.join(bug.world_scenario)}")
        rate = _rate_text(bug)
        entry = f"; corpus entry {bug.corpus_entry}" if bug.corpus_entry else ""
        if rate or entry:
            lines.append(f"    {rate}{entry}".rstrip())
        if bug.shrink_runs and bug.note:
            lines.append(f"    note: {bug.note}")
    if met:
        lines.append(
            f"{len(met)} other failure(s) met only while shrinking (not confirmed "
            "as bugs, not shrunk):"
        )
        for bug in met:
            lines.append(
                f"    {bug.key}  while shrinking {_cases_text(bug.cases)}; {_rate_text(bug)}; "
                f"first on {bug.reproducer_messages!r}"
            )
    return [line if len(line) <= width else line[: width - 1] + "…" for line in lines]


def runs_text(m: Metrics) -> str:
    """The three meanings of "runs", each named: started (what was spent), reused from the
    memo, refused by the budget; a report written before they were counted shows runs judged."""
    beyond = (
        f" ({m.runs_beyond_decision} of them ahead of a decision that did not need them)"
        if m.runs_beyond_decision
        else ""
    )
    if m.runs_started is None:
        return f"{m.runs} runs judged{beyond}"
    return (
        f"runs: {m.runs_started} started{beyond}, {m.runs_reused} reused from the memo, "
        f"{m.runs_refused} refused by the budget"
    )


def render_table(report: RunReport, *, width: int | None = None, verbose: bool = False) -> str:
    """The terminal summary: one line per case, then totals (fits one screen for a spec).

    The cost column appears only when something cost money; the first failure is cut to the
    terminal width (the JSON report has it whole). ``verbose``: under a case whose first
    failure is an exception the agent raised, its traceback."""
    if width is None:
        # cut to the terminal's width; in a log or a pipe keep every word
        width = shutil.get_terminal_size((120, 24)).columns if sys.stdout.isatty() else 10_000
    lines = render_bugs(report, width=width)
    idw = min(
        max(
            (len(c.id) for c in report.cases if c.kind in _LISTED or c.verdict != "PASS"),
            default=10,
        ),
        60,
    )
    show_cost = any(c.cost_usd > 0 for c in report.cases)
    cost_head = f" {'cost $':>8}" if show_cost else ""
    shown = [c for c in report.cases if c.kind in _LISTED or c.verdict != "PASS"]
    rw = min(max((len(c.rule or "") for c in shown), default=0), 60)
    rule_head = f"  {'decided by':<{rw}}" if rw else ""
    vw = 14 if any(c.verdict == "NOT APPLICABLE" for c in shown) else 12
    head = (
        f"{'case':<{idw}}  {'verdict':<{vw}} {'rate':>5} {'95% CI':>9} "
        f"{'runs':>4}{cost_head}{rule_head}  "
    )
    lines.append(head + "first failure")
    kinds_seen: dict[str, list[CaseReport]] = {}
    for c in report.cases:
        kinds_seen.setdefault(c.kind, []).append(c)
    for c in shown:
        fail = c.failures[0].explanation if c.failures else (c.reason or "")
        if c.bugs:
            fail = f"[bug {', '.join(_bug_number(report, b) for b in c.bugs)}] {fail}"
        room = max(20, width - len(head))
        if len(fail) > room:
            fail = fail[: room - 1] + "…"
        ci = f"{c.interval[0]:.2f}-{c.interval[1]:.2f}" if c.interval else ""
        cost = f" {c.cost_usd:>8.4f}" if show_cost else ""
        rule = f"  {(c.rule or '')[:rw]:<{rw}}" if rw else ""
        lines.append(
            f"{c.id[:idw]:<{idw}}  {c.verdict:<{vw}} {c.pass_rate:>5.0%} {ci:>9} "
            f"{c.runs:>4}{cost}{rule}  {fail}".rstrip()
        )
        tb = c.failures[0].traceback if verbose and c.failures else None
        if tb:
            lines.extend("    " + line for line in tb.rstrip().splitlines())
    lines.extend(f"corpus: {e.message}" for e in report.corpus)
    lines.extend(c.statement for c in report.claims)
    for kind, group in kinds_seen.items():
        if kind in _LISTED:
            continue
        passed = sum(c.verdict == "PASS" for c in group)
        na = sum(c.verdict == "NOT APPLICABLE" for c in group)
        decided = len(group) - na
        text = f"{kind} cases: {passed}/{decided} passed"
        if na:
            text += (
                f", {na} not applicable (base case did not pass; listed above, counted for nothing)"
            )
        undecided = sum(c.verdict == "INCONCLUSIVE" for c in group)
        if undecided:  # not a failure: its runs could not decide it (a budget, --runs 1)
            text += f", {undecided} INCONCLUSIVE (listed above)"
        if passed + undecided < decided:
            text += " (failures listed above)"
        lines.append(text)
    m = report.metrics
    lines.extend(exploration_lines(m.extra.get("exploration") or {}))
    lines.extend(channel_lines(m.extra.get("channel") or {}))
    lines.extend(world_not_tried_lines(m.extra.get("world_not_tried") or {}))
    cov = f", branch coverage {m.branch_coverage:.0%}" if m.branch_coverage is not None else ""
    coverage = m.extra.get("coverage") or {}
    caps = coverage.get("capabilities") or {}
    if caps:
        lines.append(
            "capabilities: " + ", ".join(f"{k} {v['passed']}/{v['cases']}" for k, v in caps.items())
        )
    br = coverage.get("branches") or {}
    if br:
        note = f"branches: {len(br['covered'])}/{len(br['all'])} taken"
        if br["loop"]:
            taken = [b for b in br["loop"] if b in br["covered"]]
            # a loop branch whose paths were not selected (--case) is "not run", not unrealised
            missed = [b for b in br["loop"] if b not in br["covered"] and b not in br["not_run"]]
            if taken:
                note += f"; loops unrolled once: {', '.join(taken)}"
            if missed:
                note += f"; loops not realised: {', '.join(missed)} (see the notes)"
        if br["unrealisable"]:
            note += f"; unrealisable: {', '.join(br['unrealisable'])}"
        if br["not_run"]:
            note += f"; not run: {', '.join(br['not_run'])}"
        if br.get("min_branch_coverage") is not None:
            verdict = "met" if br["met"] else "NOT MET"
            note += (
                f"; coverage of all branches {br['enforced']:.0%} (min_branch_coverage "
                f"{br['min_branch_coverage']}: {verdict})"
            )
        lines.append(note)
    conditions = coverage.get("conditions") or {}
    if conditions.get("atoms"):
        line = (
            f"conditions (MC/DC): {len(conditions['shown'])}/{len(conditions['atoms'])} atoms "
            "shown to change their branch alone"
        )
        if conditions.get("not_shown"):
            line += "; not shown: " + "; ".join(
                f"{a} ({r})" for a, r in conditions["not_shown"].items()
            )
        lines.append(line)
    gaps = coverage.get("untested") or []
    if gaps:
        lines.append(
            f"not tested ({len(gaps)}): "
            + "; ".join(f"{g['what']} {g['id']} ({g['reason']})" for g in gaps)
        )
    na_text = f", {m.not_applicable} not applicable" if m.not_applicable else ""
    lines.append(
        f"{m.cases} cases: {m.passed} passed, {m.failed} failed, {m.unstable} unstable{na_text}; "
        f"{runs_text(m)}, ${m.cost_usd:.4f}{cov}, {m.duration_s:.1f}s"
    )
    return "\n".join(lines)
