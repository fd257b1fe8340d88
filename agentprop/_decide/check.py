"""``agentprop.check``: decide a property of an agent on one scenario, statistically.

:func:`check` is :func:`acheck` run to completion plus the raise of
:class:`~agentprop.AgentPropertyViolation` unless the verdict is PASS. Both replay the session's
corpus for the scenario first, decide with the oracle (runs memoised, the property judged
afresh), and record the result in the session. :func:`decide_scenario` is the engine under
them, with no corpus replay and no recording.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentprop._agents.loading import LoadedAgent, as_loaded_agent
from agentprop._agents.project import Project
from agentprop._decide.corpus import found_with, judge_replay
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import (
    CheckResult,
    Mode,
    OracleSettings,
    TrialRecord,
    adecide,
    count_judge_calls,
    judged_settings,
)
from agentprop._decide.permits import RunPermits
from agentprop._decide.plain import (
    PLAIN_SPEC_ID,
    Case,
    Judge,
    PlainAgent,
    PlainContext,
    ToolFunctions,
    agent_ref,
    case_key,
    decide_plain,
    plain_corpus,
    plain_fingerprint,
    plain_run,
)
from agentprop._decide.run_key import run_digest
from agentprop._decide.safety import CaseSettings, case_settings
from agentprop._decide.session import (
    CorpusNote,
    Session,
    current_session,
    current_test,
    settings_scope,
)
from agentprop._decide.settings import Resolved, resolve
from agentprop._decide.settings import settings as AgentSettings
from agentprop._decide.verdicts import record_for
from agentprop._judge.case import compile_mft
from agentprop._judge.properties import Property, PropertyResult, verdicts_of
from agentprop._judge.verdict import Verdict
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.context import current_model_context, model_call_context
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._util.aio import call_off_loop, run_sync
from agentprop.errors import AgentPropertyViolation, InfrastructureError, InvalidArgument

__all__ = [
    "Property",
    "PropertyResult",
    "ViolationContext",
    "acheck",
    "check",
    "decide_scenario",
    "record_for",
    "scenario_settings",
    "settings_scope",
    "verdicts_of",
]


async def decide_scenario(
    project: Project,
    scenario: Scenario,
    agent: Any,
    *,
    messages: Sequence[str] | None = None,
    prop: Property | None = None,
    settings: OracleSettings | None = None,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    concurrency: int = 1,
    name: str | None = None,
    seed: int = 0,
    permits: RunPermits | None = None,
) -> CheckResult:
    """Decide ``prop`` (default: the scenario's MFT) for ``agent`` on ``scenario``: the engine
    under :func:`check` and :func:`acheck`, used as is by the pipeline's cases (no corpus
    replay, nothing recorded in the session; never raises for a failed property).

    ``seed`` selects the trial indices (``seed * 1_000_003`` onwards): the same seed replays
    the same samples (memo, API cache, simulated agents' ``ctx.rng``); another seed draws
    new ones."""
    loaded = as_loaded_agent(agent)
    rule: str | None = None
    if settings is None:
        chosen = scenario_settings(project, scenario)
        settings, rule = chosen.settings, chosen.rule
    msgs = list(messages) if messages is not None else scenario.messages
    if len(msgs) != len(scenario.turns) and prop is None:
        raise InvalidArgument(
            f"messages has {len(msgs)} turn(s) but scenario {scenario.id} expects "
            f"{len(scenario.turns)}; give one message per turn, or pass prop= to check something "
            "other than the scenario's MFT"
        )

    # the spec is read once, here: every run is judged by the compiled case (or by ``prop``)
    verdicts: Callable[[Trace], list[Verdict]] = (
        compile_mft(
            project.spec, scenario, project.bindings.response_grounding(project.spec)
        ).verdicts
        if prop is None
        # the user's property, off the loop: it may start a loop of its own (asyncio.run)
        else lambda trace: verdicts_of(call_off_loop(prop, trace))
    )

    async def run_trial(i: int) -> Trace:
        return await project.arun(
            scenario, loaded.factory, trial=i, agent_name=loaded.ref, messages=msgs
        )

    def judge(trace: Trace) -> TrialRecord:
        return record_for(verdicts(trace))

    # a model judge's property is decided on its corrected rate
    settings = judged_settings(settings, prop)
    judge_calls_before = getattr(prop, "calls", 0)
    chosen_budget = budget if budget is not None else current_session().budget
    # the check's budget is also the budget of the model calls its runs make (an agent without a
    # budget of its own charges it): passed down through the model-call context
    with model_call_context(current_model_context().with_budget(chosen_budget)):
        result = await adecide(
            run_trial,
            settings,
            judge=judge,
            name=name or scenario.id,
            memo=memo if memo is not None else current_session().memo,
            input_digest=run_digest(project, scenario, msgs, seed),
            fingerprint=loaded.fingerprint,
            budget=chosen_budget,
            concurrency=concurrency,
            first_trial=seed * 1_000_003,
            permits=permits,
        )
    if rule is not None:
        result.settings["rule"] = rule
    return count_judge_calls(result, prop, judge_calls_before)


def scenario_settings(
    project: Project,
    scenario: Scenario,
    *,
    max_runs: int | None = None,
    explicit: dict[str, Any] | None = None,
) -> CaseSettings:
    """The oracle settings of ``scenario`` when the caller gives none: the spec's, or
    zero-failure certification for a safety case (:mod:`agentprop._decide.safety`). ``explicit``
    (``mode``/``tau``/``runs`` the user gave) wins, and the rule says so."""
    given = {k: v for k, v in (explicit or {}).items() if v is not None}
    base = OracleSettings.for_spec(project.spec, max_runs=max_runs, **given)
    named = " ".join(f"{k}={v}" for k, v in given.items()) or None
    return case_settings(project.spec, project.bindings, scenario, base, explicit=named)


@dataclass
class ViolationContext:
    """What a failed check ran on: enough to shrink it or save it to the corpus."""

    project: Project
    scenario: Scenario
    messages: list[str]
    agent: LoadedAgent
    prop: Property | None
    seed: int


def _not_the_agents(result: CheckResult) -> InfrastructureError:
    """The error, not the agent's, that left ``result`` undecided: raised instead of an
    :class:`AgentPropertyViolation`, so pytest reports it as an error of the test's setup and
    nothing is shrunk or saved to the corpus."""
    err = result.infrastructure_error
    assert err is not None
    return InfrastructureError(
        f"{result.name or 'check'}: not decided, for a reason that is not the agent's "
        f"({err.kind}): {err.message}",
        kind=err.kind,
    )


def _violation(
    result: CheckResult, context: ViolationContext | PlainContext | None
) -> AgentPropertyViolation:
    exc = AgentPropertyViolation(result)
    exc.context = context
    return exc


@dataclass
class _Outcome:
    result: CheckResult
    context: ViolationContext | PlainContext | None
    note: str | None = None
    """What a failing corpus replay meant (added to the raised violation)."""


async def _check_outcome(call: _CheckCall, session: Session) -> _Outcome:
    project, scenario = call.project, call.scenario
    # _decide sent the other calls elsewhere
    assert isinstance(project, Project) and isinstance(scenario, Scenario | str)
    agent, messages, prop = call.agent, call.messages, call.prop
    memo, budget = call.memo, call.budget
    sc = project.scenario(scenario) if isinstance(scenario, str) else scenario
    rule: str | None = None
    oracle, resolved = _resolved(call)
    if oracle is None:
        chosen = scenario_settings(
            project, sc, max_runs=resolved.max_runs, explicit=resolved.explicit()
        )
        oracle, rule = chosen.settings, chosen.rule
    settings = oracle
    trial_seed = resolved.seed
    loaded = as_loaded_agent(agent)
    msgs = list(messages) if messages is not None else sc.messages
    memo = memo if memo is not None else session.memo
    budget = budget if budget is not None else session.budget
    if session.corpus is not None:
        replayed = await _replay_corpus_first(
            session, project, sc, loaded, settings, memo, budget, trial_seed
        )
        if replayed is not None:
            return replayed
    result = await decide_scenario(
        project,
        sc,
        loaded,
        messages=messages,
        prop=prop,
        settings=settings,
        memo=memo,
        budget=budget,
        concurrency=call.concurrency,
        name=call.name,
        seed=trial_seed,
    )
    if rule is not None:
        result.settings["rule"] = rule
    session.record(current_test(), result)
    return _Outcome(result, ViolationContext(project, sc, msgs, loaded, prop, trial_seed))


async def acheck(
    project: Project | PlainAgent,
    scenario: Scenario | str | Sequence[str],
    agent: Any = None,
    *,
    messages: Sequence[str] | None = None,
    prop: Property | None = None,
    mode: Mode | None = None,
    tau: float | None = None,
    runs: int | None = None,
    max_runs: int | None = None,
    settings: OracleSettings | AgentSettings | None = None,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    concurrency: int = 1,
    name: str | None = None,
    seed: int | None = None,
    tools: ToolFunctions | None = None,
    judge: Judge | None = None,
) -> CheckResult:
    """:func:`check` for async code: the same arguments and behaviour, but it returns the
    result instead of raising for a failed property."""
    call = _CheckCall.of("acheck", locals())
    return (await _decide(call, current_session())).result


def check(
    project: Project | PlainAgent,
    scenario: Scenario | str | Sequence[str],
    agent: Any = None,
    *,
    messages: Sequence[str] | None = None,
    prop: Property | None = None,
    mode: Mode | None = None,
    tau: float | None = None,
    runs: int | None = None,
    max_runs: int | None = None,
    settings: OracleSettings | AgentSettings | None = None,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    concurrency: int = 1,
    name: str | None = None,
    seed: int | None = None,
    tools: ToolFunctions | None = None,
    judge: Judge | None = None,
    raise_on_failure: bool = True,
) -> CheckResult:
    """Decide ``prop`` (default: the scenario's MFT) for ``agent`` on ``scenario``; or, with no
    project, ``check(agent, messages, case_or_property, tools=..., judge=...)`` for a plain
    agent (:mod:`agentprop._decide.plain`).

    ``scenario`` may be a scenario or its id. Settings default to the spec's, or to
    zero-failure certification for a safety case (see :meth:`OracleSettings.for_spec`);
    ``settings=agentprop.settings(...)`` (or the scope: profile, marker, ``@settings``,
    ``with settings``; see :mod:`agentprop._decide.settings`) overrides them; an
    ``OracleSettings`` replaces the oracle's whole. The keywords ``mode``, ``tau``, ``runs``,
    ``max_runs`` and ``seed`` are the deprecated spelling of those settings fields (a
    ``DeprecationWarning`` says so). ``memo`` and ``budget`` default to the session's. The
    settings' ``seed`` picks the trial indices (default 0, or the pytest ``--agentprop-seed``;
    ``--agentprop-fresh`` picks a random one).
    The session's corpus entries for the scenario's case are replayed first: a replay that
    fails is the result (a regression when it fails with the entry's signature).

    Raises :class:`~agentprop.AgentPropertyViolation` unless the verdict is PASS (set
    ``raise_on_failure=False`` to get the result instead). ``acheck`` is the same, awaited.
    """
    __tracebackhide__ = True  # a failure points at the test's line, not at agentprop's source
    call = _CheckCall.of("check", locals())
    session = current_session()  # in the caller's context, so a fresh default session persists
    return _raise_or_return(run_sync(_decide(call, session)), raise_on_failure)


@dataclass(frozen=True)
class _CheckCall:
    """One call of :func:`check` or :func:`acheck`, its deprecated keywords folded
    into ``settings``."""

    project: Project | PlainAgent
    scenario: Scenario | str | Sequence[str]
    agent: Any
    messages: Sequence[str] | None
    prop: Property | None
    mode: Mode | None
    tau: float | None
    runs: int | None
    max_runs: int | None
    settings: OracleSettings | AgentSettings | None
    memo: TrialMemo | None
    budget: Budget | None
    concurrency: int
    name: str | None
    seed: int | None
    tools: ToolFunctions | None
    judge: Judge | None

    @classmethod
    def of(cls, where: str, given: dict[str, Any]) -> _CheckCall:
        """The call from the caller's arguments (its ``locals()``); warns for
        deprecated keywords."""
        settings, (mode, tau, runs, max_runs, seed) = _fold_keywords(
            where, given["settings"], *(given[k] for k in _SETTINGS_KEYWORDS), stacklevel=4
        )
        folded = {
            "settings": settings,
            "mode": mode,
            "tau": tau,
            "runs": runs,
            "max_runs": max_runs,
            "seed": seed,
        }
        return cls(
            **{
                f.name: folded[f.name] if f.name in folded else given[f.name]
                for f in dataclasses.fields(cls)
            }
        )


async def _decide(call: _CheckCall, session: Session) -> _Outcome:
    """The one decision of a ``check``/``acheck`` call: a plain agent's, or a spec's case's."""
    if not isinstance(call.project, Project):
        return await _plain_outcome(
            _PlainCall(call.project, call.scenario, call.agent, call.tools, call.judge),
            call,
            session,
        )
    if call.tools is not None or call.judge is not None:
        raise _spec_tier_keywords()
    if isinstance(call.scenario, Sequence) and not isinstance(call.scenario, str):
        raise _messages_as_scenario()
    return await _check_outcome(call, session)


_SETTINGS_KEYWORDS = ("mode", "tau", "runs", "max_runs", "seed")
"""``check``'s keywords that are fields of :class:`agentprop.settings` (deprecated there)."""


def _fold_keywords(
    where: str, given: OracleSettings | AgentSettings | None, *values: Any, stacklevel: int = 3
) -> tuple[OracleSettings | AgentSettings | None, tuple[Any, ...]]:
    """``check(..., runs=3)`` is the deprecated spelling of
    ``check(..., settings=agentprop.settings(runs=3))``: warn, naming the settings fields, and fold
    the keywords into ``given`` (they win over it, as before). With an ``OracleSettings`` they are
    left for the caller to refuse."""
    used = {k: v for k, v in zip(_SETTINGS_KEYWORDS, values, strict=True) if v is not None}
    if not used:
        return given, values
    shown = ", ".join(f"{k}={v!r}" for k, v in used.items())
    warnings.warn(
        f"{where}({shown}) is deprecated: the {'field' if len(used) == 1 else 'fields'} "
        f"{', '.join(used)} of agentprop.settings go in settings=, e.g. {where}(..., "
        f"settings=agentprop.settings({shown}))",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    if isinstance(given, OracleSettings):
        return given, values
    return AgentSettings(given, **used), (None,) * len(values)


def _raise_or_return(outcome: _Outcome, raise_on_failure: bool) -> CheckResult:
    __tracebackhide__ = True
    tell_hypothesis(outcome.result, spec_free=isinstance(outcome.context, PlainContext))
    if raise_on_failure and outcome.result.infrastructure_error is not None:
        raise _not_the_agents(outcome.result)
    if raise_on_failure and outcome.result.verdict != "PASS":
        exc = _violation(outcome.result, outcome.context)
        if outcome.note:
            exc.add_note(outcome.note)
        raise exc
    return outcome.result


def tell_hypothesis(result: CheckResult, *, spec_free: bool = False) -> None:
    """Inside ``@given``: ``target()`` the observed failure rate (Hypothesis then steers towards
    inputs that fail more often) and ``event()`` the rule that decided. Outside, nothing."""
    from hypothesis import event, target
    from hypothesis.control import currently_in_test_context
    from hypothesis.errors import InvalidArgument as HypothesisInvalidArgument

    if not currently_in_test_context() or not result.runs:
        return
    # Hypothesis shrinks the drawn input first (the plugin's statistical shrink follows)
    if spec_free:
        result.settings["shrunk_by"] = "hypothesis"
    label = f"agentprop failure rate: {result.name or 'check'}"
    with contextlib.suppress(HypothesisInvalidArgument):  # the same label twice in one example
        target(1.0 - result.pass_rate, label=label)
    event(
        "agentprop rule",
        f"{result.settings.get('rule') or result.settings.get('mode', '?')} -> {result.verdict} "
        f"by {result.decided_by}",
    )


def _messages_as_scenario() -> InvalidArgument:
    return InvalidArgument(
        "check(project, scenario, agent): the second argument is a scenario or its id; give the "
        "messages as messages="
    )


def _spec_tier_keywords() -> InvalidArgument:
    return InvalidArgument(
        "check(project, scenario, agent) got tools= or judge=, which are for a plain agent: "
        "call check(agent, messages, case_or_property, tools=..., judge=...) without a project, "
        "or pass prop= to a project's check"
    )


@dataclass
class _PlainCall:
    """A spec-free ``check(agent, messages, prop)`` call, its arguments checked."""

    agent: PlainAgent
    messages: list[str]
    prop: Case | Callable[..., PropertyResult]
    tools: ToolFunctions | None

    def __init__(
        self, agent: Any, messages: Any, prop: Any, tools: ToolFunctions | None, judge: Judge | None
    ) -> None:
        if isinstance(messages, str):
            messages = [messages]
        if not isinstance(messages, Sequence) or not all(isinstance(m, str) for m in messages):
            raise InvalidArgument(
                "check(agent, messages, ...): messages must be a string or a list of strings, "
                f"not {type(messages).__name__}"
            )
        if prop is None and judge is None:
            raise InvalidArgument(
                "check(agent, messages) needs something to check: a Case, a property trace -> "
                "bool | Verdict, or judge="
            )
        if judge is not None:
            if prop is None:
                prop = Case(judge=judge)
            elif isinstance(prop, Case):
                if prop.judge is not None:
                    raise InvalidArgument(
                        "check(): the Case has a judge and judge= gives another; keep one"
                    )
                prop = dataclasses.replace(prop, judge=judge)
            else:
                raise InvalidArgument(
                    "check(): judge= goes with a Case (or alone), not with a property function; "
                    "combine them in one property"
                )
        self.agent, self.messages, self.prop, self.tools = agent, list(messages), prop, tools


def _resolved(call: _CheckCall) -> tuple[OracleSettings | None, Resolved]:
    """The settings of one check (:func:`agentprop._decide.settings.resolve`): an
    ``OracleSettings`` given whole replaces the oracle's; the seed is resolved either way."""
    given, mode, tau, runs, max_runs, seed = (
        call.settings,
        call.mode,
        call.tau,
        call.runs,
        call.max_runs,
        call.seed,
    )
    if isinstance(given, OracleSettings):
        if any(v is not None for v in (mode, tau, runs, max_runs)):
            raise InvalidArgument(
                "check() got settings=OracleSettings(...) together with mode/tau/runs/max_runs; "
                "an OracleSettings replaces them all: pass one or the other, or pass "
                "settings=agentprop.settings(...), which the arguments refine"
            )
        return given, resolve(seed=seed)
    return None, resolve(given, mode=mode, tau=tau, runs=runs, max_runs=max_runs, seed=seed)


async def _plain_outcome(plain: _PlainCall, call: _CheckCall, session: Session) -> _Outcome:
    oracle, resolved = _resolved(call)
    settings = oracle if oracle is not None else resolved.oracle()
    trial_seed = resolved.seed
    run = plain_run(plain.agent, plain.tools)
    chosen_budget = call.budget if call.budget is not None else session.budget
    memo = call.memo if call.memo is not None else session.memo
    label = call.name or (
        plain.prop.name if isinstance(plain.prop, Case) and plain.prop.name else run.name
    )
    context = PlainContext(
        run,
        plain.messages,
        plain.prop,
        settings,
        trial_seed,
        label,
        case_key(label, plain.messages, plain.prop),
    )
    with model_call_context(current_model_context().with_budget(chosen_budget)):
        replayed = await _replay_plain_corpus_first(session, context, memo, chosen_budget)
        if replayed is not None:
            return replayed
        result = await decide_plain(
            run,
            plain.messages,
            plain.prop,
            settings,
            memo=memo,
            budget=chosen_budget,
            seed=trial_seed,
            name=label,
        )
    session.record(current_test(), result)
    return _Outcome(result, context)


async def _replay_plain_corpus_first(
    session: Session, context: PlainContext, memo: TrialMemo, budget: Budget
) -> _Outcome | None:
    """Replay the corpus entries of a spec-free check's case (same label, originals of the
    messages and property; found with the same agent) before its own runs, as
    :func:`_replay_corpus_first` does for a scenario: every check of the case replays them,
    memoised, so Hypothesis's replay of any example fails the same way (never Flaky)."""
    corpus = plain_corpus(session.corpus)
    if corpus is None:
        return None
    for entry in corpus.entries(
        spec_id=PLAIN_SPEC_ID, agent_ref=agent_ref(context.run), scenario_id=context.key
    ):
        messages = entry.scenario.messages
        result = await decide_plain(
            context.run,
            messages,
            context.prop,
            context.settings,
            memo=memo,
            budget=budget,
            seed=context.seed,
            name=f"corpus {entry.id} ({context.label})",
        )
        action, message = judge_replay(entry, result, confidence=context.settings.confidence)
        if session.first_replay(entry.id):
            if action == "regression":
                corpus.seen_again(entry, fingerprint=plain_fingerprint(context.run))
            elif action == "retired":
                corpus.retire(entry, message)
            session.note_replay(CorpusNote(current_test(), entry.id, action, message))
        session.record(current_test(), result)
        if result.verdict != "PASS":
            replay = dataclasses.replace(context, messages=list(messages))
            return _Outcome(result, replay, note=message)
    return None


async def _replay_corpus_first(
    session: Session,
    project: Project,
    scenario: Scenario,
    agent: LoadedAgent,
    settings: OracleSettings,
    memo: TrialMemo,
    budget: Budget,
    seed: int,
) -> _Outcome | None:
    """Replay the corpus entries of ``scenario``'s case. Failing with the entry's signature is
    a regression (the entry's ``last_seen`` is updated); failing otherwise is a different
    failure, not a regression; a clean enough pass retires the entry. Returns the first
    failing replay, or ``None`` when every replay passed.

    Every check of the case replays them (memoised: the same runs, the same verdict each time),
    so a check's outcome never depends on which call came first: when Hypothesis calls the test
    again with the same input, it fails again, never Flaky. What a replay means for the corpus
    (retire, seen again, the summary's note) is acted on once per session."""
    if session.corpus is None:
        return None
    corpus = session.corpus.for_project(project)
    base_id = scenario.id.split("/")[0]
    for entry in corpus.entries(spec_id=project.spec.spec_id, agent_ref=agent.ref):
        if (
            entry.scenario_id.split("/")[0] != base_id
            or entry.prop != "mft"
            or not found_with(entry, agent)
        ):
            continue
        result = await decide_scenario(
            project,
            entry.scenario,
            agent,
            settings=settings,
            memo=memo,
            budget=budget,
            seed=seed,
            name=f"corpus {entry.id} ({entry.scenario_id})",
        )
        action, message = judge_replay(entry, result, confidence=settings.confidence)
        if session.first_replay(entry.id):
            if action == "regression":
                corpus.seen_again(entry, fingerprint=agent.fingerprint)
            elif action == "retired":
                corpus.retire(entry, message)
            session.note_replay(CorpusNote(current_test(), entry.id, action, message))
        session.record(current_test(), result)
        if result.verdict != "PASS":
            return _Outcome(
                result,
                ViolationContext(
                    project, entry.scenario, entry.scenario.messages, agent, None, seed
                ),
                note=message,
            )
    return None
