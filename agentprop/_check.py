"""``agentprop.check``: decide a property of an agent on one scenario, statistically.

::

    project = agentprop.load_project("examples/supportops")
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    agentprop.check(project, scenario, SupportOpsAgent)            # MFT by default
    agentprop.check(project, scenario, SupportOpsAgent, messages=[paraphrase, "Yes"])
    agentprop.check(project, scenario, agent, prop=lambda trace: agentprop.numbers_grounded(trace))

It runs the agent as often as the oracle needs (each run memoised per trial and judged by the
property on every decision, so an edited property is judged on the stored runs), and raises
:class:`~agentprop.AgentPropertyViolation` unless the verdict is PASS.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Union

from agentprop._agents import LoadedAgent, make_factory
from agentprop._budget import Budget
from agentprop._contracts import Verdict
from agentprop._memo import TrialMemo
from agentprop._corpus import Corpus, ProjectCorpora, judge_replay
from agentprop._oracle import AgentPropertyViolation, CheckResult, Mode, OracleSettings, TrialRecord, adecide
from agentprop._project import Project
from agentprop._properties import mft_verdicts
from agentprop._run_key import run_digest
from agentprop._safety import CaseSettings, case_settings
from agentprop._scenario import Scenario
from agentprop._slots import RunSlots
from agentprop._sync import run_sync
from agentprop._trace import Trace
from agentprop.errors import InvalidArgument

PropertyResult = Union[Verdict, bool, Sequence[Verdict]]
Property = Callable[[Trace], PropertyResult]

_default_memo = TrialMemo()
_session_budget: Budget | None = None
_lock = threading.Lock()

_overrides: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("agentprop_overrides", default={})
"""Oracle settings imposed by the surrounding test (pytest marker, profile)."""


@dataclass
class CheckRecord:
    """A decided check, kept for the pytest terminal summary."""

    test: str
    result: CheckResult


_results: list[CheckRecord] = []
_current_test: contextvars.ContextVar[str] = contextvars.ContextVar("agentprop_test", default="")


def recorded_results() -> list[CheckRecord]:
    with _lock:
        return list(_results)


def clear_recorded_results() -> None:
    with _lock:
        _results.clear()


@contextlib.contextmanager
def settings_scope(test: str = "", **overrides: Any) -> Iterator[None]:
    """Within this scope, :func:`check` uses these overrides (``mode``, ``tau``, ``runs``,
    ``max_runs``, ``seed``) unless a call passes its own, and records results under ``test``."""
    merged = {**_overrides.get(), **{k: v for k, v in overrides.items() if v is not None}}
    t1 = _overrides.set(merged)
    t2 = _current_test.set(test or _current_test.get())
    try:
        yield
    finally:
        _overrides.reset(t1)
        _current_test.reset(t2)


def default_memo() -> TrialMemo:
    """The memo :func:`check` uses when none is given (in memory, per process; the pytest
    plugin replaces it with an on-disk one)."""
    return _default_memo


def set_default_memo(memo: TrialMemo) -> None:
    global _default_memo
    with _lock:
        _default_memo = memo


def session_budget() -> Budget | None:
    return _session_budget


def set_session_budget(budget: Budget | None) -> None:
    global _session_budget
    with _lock:
        _session_budget = budget


def as_loaded_agent(agent: Any) -> LoadedAgent:
    if isinstance(agent, LoadedAgent):
        return agent
    loaded = getattr(agent, "loaded", None)
    if callable(loaded) and not isinstance(agent, type):
        result = loaded()  # e.g. AnthropicAgent: its own name and behaviour fingerprint
        if isinstance(result, LoadedAgent):
            return result
    if agent is None:
        raise InvalidArgument("check() needs an agent: a class, a factory, an agent function or a LoadedAgent")
    return make_factory(agent)


def _verdicts(result: PropertyResult) -> list[Verdict]:
    if isinstance(result, Verdict):
        return [result]
    if isinstance(result, bool):
        return [Verdict(passed=result, contract="property", explanation="the property returned " + str(result))]
    if isinstance(result, Sequence):
        out = list(result)
        if not all(isinstance(v, Verdict) for v in out):
            raise InvalidArgument("a property must return a Verdict, a bool, or a list of Verdicts")
        return out
    raise InvalidArgument(f"a property must return a Verdict, a bool, or a list of Verdicts; got {type(result).__name__}")


def record_for(verdicts: list[Verdict]) -> TrialRecord:
    """One run's outcome from its verdicts: the first failing one names the failure."""
    failed = next((v for v in verdicts if not v.passed), None)
    if failed is None:
        return TrialRecord(passed=True)
    return TrialRecord(passed=False, signature=failed.signature, explanation=failed.explanation, clause=failed.clause)


async def acheck(
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
    slots: RunSlots | None = None,
) -> CheckResult:
    """Async core of :func:`check` (never raises for a failed property).

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
            f"messages has {len(msgs)} turn(s) but scenario {scenario.id} expects {len(scenario.turns)}; "
            "give one message per turn, or pass prop= to check something other than the scenario's MFT"
        )

    grounding = project.bindings.response_grounding(project.spec)

    async def run_trial(i: int) -> Trace:
        return await project.arun(scenario, loaded.factory, trial=i, agent_name=loaded.ref, messages=msgs)

    def judge(trace: Trace) -> TrialRecord:
        return record_for(mft_verdicts(project.spec, scenario, trace, grounding=grounding) if prop is None else _verdicts(prop(trace)))

    result = await adecide(
        run_trial,
        settings,
        judge=judge,
        name=name or scenario.id,
        memo=memo if memo is not None else _default_memo,
        input_digest=run_digest(project, scenario, msgs, seed),
        fingerprint=loaded.fingerprint,
        budget=budget if budget is not None else _session_budget,
        concurrency=concurrency,
        first_trial=seed * 1_000_003,
        slots=slots,
    )
    if rule is not None:
        result.settings["rule"] = rule
    return result


def scenario_settings(project: Project, scenario: Scenario, *, max_runs: int | None = None, explicit: dict[str, Any] | None = None) -> CaseSettings:
    """The oracle settings of ``scenario`` when the caller gives none: the spec's, or
    zero-failure certification for a safety case (:mod:`agentprop._safety`). ``explicit``
    (``mode``/``tau``/``runs`` the user gave) wins, and the rule says so."""
    given = {k: v for k, v in (explicit or {}).items() if v is not None}
    base = OracleSettings.for_spec(project.spec, max_runs=max_runs, **given)
    named = " ".join(f"{k}={v}" for k, v in given.items()) or None
    return case_settings(project.spec, project.bindings, scenario, base, explicit=named)


def check(
    project: Project,
    scenario: Scenario | str,
    agent: Any,
    *,
    messages: Sequence[str] | None = None,
    prop: Property | None = None,
    mode: Mode | None = None,
    tau: float | None = None,
    runs: int | None = None,
    max_runs: int | None = None,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    concurrency: int = 1,
    raise_on_failure: bool = True,
    name: str | None = None,
    seed: int | None = None,
) -> CheckResult:
    """Decide ``prop`` (default: the scenario's MFT) for ``agent`` on ``scenario``.

    ``scenario`` may be a scenario or its id. Settings default to the spec's (see
    :meth:`OracleSettings.for_spec`); ``mode``, ``tau``, ``runs`` and ``max_runs`` override
    them. ``seed`` picks the trial indices (default 0, or the pytest ``--agentprop-seed``;
    ``--agentprop-fresh`` picks a random one). Raises :class:`~agentprop.AgentPropertyViolation`
    unless the verdict is PASS (set ``raise_on_failure=False`` to get the result instead).
    """
    sc = project.scenario(scenario) if isinstance(scenario, str) else scenario
    scoped = _overrides.get()
    explicit = {
        "mode": mode if mode is not None else scoped.get("mode"),
        "tau": tau if tau is not None else scoped.get("tau"),
        "runs": runs if runs is not None else scoped.get("runs"),
    }
    chosen = scenario_settings(project, sc, max_runs=max_runs if max_runs is not None else scoped.get("max_runs"), explicit=explicit)
    settings = chosen.settings
    trial_seed = seed if seed is not None else int(scoped.get("seed", 0))
    loaded = as_loaded_agent(agent)
    msgs = list(messages) if messages is not None else sc.messages
    if _default_corpus is not None:
        _replay_corpus_first(project, sc, loaded, settings, memo, budget, trial_seed, raise_on_failure)
    result = run_sync(acheck(project, sc, loaded, messages=messages, prop=prop, settings=settings, memo=memo, budget=budget, concurrency=concurrency, name=name, seed=trial_seed))
    result.settings["rule"] = chosen.rule
    with _lock:
        _results.append(CheckRecord(_current_test.get(), result))
    if raise_on_failure and result.verdict != "PASS":
        raise _violation(result, ViolationContext(project, sc, msgs, loaded, prop, trial_seed))
    return result


@dataclass
class ViolationContext:
    """What a failed check ran on: enough to shrink it or save it to the corpus."""

    project: Project
    scenario: Scenario
    messages: list[str]
    agent: LoadedAgent
    prop: Property | None
    seed: int


def _violation(result: CheckResult, context: ViolationContext) -> AgentPropertyViolation:
    exc = AgentPropertyViolation(result)
    exc.context = context  # type: ignore[attr-defined]
    return exc


_default_corpus: Corpus | ProjectCorpora | None = None
_replayed: set[str] = set()


@dataclass
class CorpusNote:
    """What a corpus replay inside :func:`check` meant (for the pytest summary)."""

    test: str
    entry: str
    action: str
    message: str


_corpus_notes: list[CorpusNote] = []


def recorded_corpus_notes() -> list[CorpusNote]:
    with _lock:
        return list(_corpus_notes)


def set_default_corpus(corpus: Corpus | ProjectCorpora | None) -> None:
    """Make :func:`check` replay this corpus's reproducers for a scenario (once per session)
    before deciding the scenario itself (the pytest plugin's ``--agentprop-corpus``;
    :class:`ProjectCorpora` uses each project's corpus beside its bindings)."""
    global _default_corpus
    with _lock:
        _default_corpus = corpus
        _replayed.clear()
        _corpus_notes.clear()


def default_corpus() -> Corpus | ProjectCorpora | None:
    return _default_corpus


def _replay_corpus_first(
    project: Project,
    scenario: Scenario,
    agent: LoadedAgent,
    settings: OracleSettings,
    memo: TrialMemo | None,
    budget: Budget | None,
    seed: int,
    raise_on_failure: bool,
) -> None:
    """Replay the corpus entries of ``scenario``'s case. Failing with the entry's signature is
    a regression (raised; the entry's ``last_seen`` is updated); failing otherwise is raised
    as a different failure, not a regression; a clean enough pass retires the entry."""
    if _default_corpus is None:
        return
    corpus = _default_corpus.for_project(project)
    base_id = scenario.id.split("/")[0]
    for entry in corpus.entries(spec_id=project.spec.spec_id, agent_ref=agent.ref):
        if entry.scenario_id.split("/")[0] != base_id or entry.prop != "mft":
            continue
        with _lock:
            if entry.id in _replayed:
                continue
            _replayed.add(entry.id)
        result = run_sync(acheck(project, entry.scenario, agent, settings=settings, memo=memo, budget=budget, seed=seed, name=f"corpus {entry.id} ({entry.scenario_id})"))
        action, message = judge_replay(entry, result, confidence=settings.confidence)
        if action == "regression":
            corpus.seen_again(entry, fingerprint=agent.fingerprint)
        elif action == "retired":
            corpus.retire(entry, message)
        with _lock:
            _results.append(CheckRecord(_current_test.get(), result))
            _corpus_notes.append(CorpusNote(_current_test.get(), entry.id, action, message))
        if raise_on_failure and result.verdict != "PASS":
            exc = _violation(result, ViolationContext(project, entry.scenario, entry.scenario.messages, agent, None, seed))
            exc.add_note(message)
            raise exc
