"""The spec-free tier: test the agent you have, with no spec and no bindings.

An agent is any callable taking the messages; a :class:`Case` says what a run must do, a property
is any ``trace -> bool | Verdict``. :func:`decide_plain` decides with the common oracle. Invariants:
a run never raises through the runner; the same (messages, agent source, tools, seed, trial) is
the same memo key, so Hypothesis never reports Flaky.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import random
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import jsonschema
from pydantic import BaseModel, ValidationError

from agentprop._agents.loading import make_factory
from agentprop._decide.corpus import PLAIN_SPEC_ID, Corpus, ProjectCorpora
from agentprop._decide.memo import TrialMemo, input_key
from agentprop._decide.oracle import (
    CheckResult,
    OracleSettings,
    TrialRecord,
    adecide,
    count_judge_calls,
    judged_settings,
)
from agentprop._decide.verdicts import record_for
from agentprop._judge.contracts import forbids_tools, no_run_errors, requires_tools
from agentprop._judge.properties import PropertyResult, verdicts_of
from agentprop._judge.verdict import Verdict
from agentprop._modelapi.budget import Budget
from agentprop._scenario.build import Scenario, ScenarioTurn
from agentprop._scenario.trace import RunError, ToolCall, Trace, Turn
from agentprop._util.aio import call_off_loop, is_async
from agentprop.errors import InvalidArgument
from agentprop.strategies._internal.paraphrase import Paraphrase

__all__ = [
    "PLAIN_SPEC_ID",
    "Case",
    "Judge",
    "PlainAgent",
    "PlainContext",
    "PlainRun",
    "Result",
    "ToolFunctions",
    "Tools",
    "agent_ref",
    "case_key",
    "decide_plain",
    "plain_corpus",
    "plain_digest",
    "plain_fingerprint",
    "plain_run",
    "run_plain_agent",
]

Judge: TypeAlias = Callable[["Case", "Result"], PropertyResult]
"""``judge(case, result)``: a bool, a :class:`Verdict` or a list of them."""


@dataclass(frozen=True)
class Result:
    """What one run produced, as a judge sees it: ``output`` is the result validated against the
    case's schema (a model instance for a pydantic schema), else the agent's result as returned
    (a dict, or the text); ``trace`` is the whole run."""

    trace: Trace
    output: Any

    @property
    def tools(self) -> list[str]:
        return self.trace.tool_names()

    @property
    def text(self) -> str:
        return "\n".join(t.user_visible_text for t in self.trace.turns if t.user_visible_text)


@dataclass(frozen=True)
class Case:
    """What a run of the agent must do, with no spec (the Agent-TDD ``EvalCase``).

    ``expected_tools`` must all be called, ``forbidden_tools`` never; ``scope`` (if given) holds
    what a call may touch: a call is in scope when its tool's name, or its ``scope`` argument,
    is in the set. ``schema`` (a pydantic model or a JSON Schema) is what the final result must
    validate against. ``baseline`` is an approved run: a run must call the same set of tools.
    ``judge(case, result)`` is any further property. ``name`` names the case in reports.

    A model judge (one with a measured error: ``correction()``) decides the case on its
    corrected rate, as when it is the property itself; it must then be the case's only promise,
    since its correction does not hold for a verdict that mixes in the others."""

    name: str = ""
    expected_tools: Sequence[str] = ()
    forbidden_tools: Sequence[str] = ()
    scope: Iterable[str] | None = None
    schema: type[BaseModel] | Mapping[str, Any] | None = None
    baseline: Trace | None = None
    judge: Judge | None = None

    def __post_init__(self) -> None:
        for attr in ("expected_tools", "forbidden_tools"):
            value = getattr(self, attr)
            if isinstance(value, str):
                raise InvalidArgument(
                    f"Case({attr}={value!r}): give a list of tool names, e.g. {attr}=[{value!r}]"
                )
        both = set(self.expected_tools) & set(self.forbidden_tools)
        if both:
            raise InvalidArgument(
                f"Case: {', '.join(sorted(both))} is both expected and forbidden; keep it in "
                "one of the two lists"
            )
        if (
            self.schema is not None
            and not isinstance(self.schema, Mapping)
            and not (isinstance(self.schema, type) and issubclass(self.schema, BaseModel))
        ):
            raise InvalidArgument(
                "Case(schema=...) must be a pydantic model class or a JSON Schema dict, not "
                f"{type(self.schema).__name__}"
            )
        if isinstance(self.schema, Mapping):
            try:
                jsonschema.validators.validator_for(self.schema).check_schema(dict(self.schema))
            except jsonschema.SchemaError as exc:
                raise InvalidArgument(
                    f"Case(schema=...) is not a valid JSON Schema: {exc.message}"
                ) from None
        if self.judge is not None and not callable(self.judge):
            raise InvalidArgument("Case(judge=...) must be a callable judge(case, result)")
        others = [
            name
            for name, given in (
                ("expected_tools", bool(self.expected_tools)),
                ("forbidden_tools", bool(self.forbidden_tools)),
                ("scope", self.scope is not None),
                ("schema", self.schema is not None),
                ("baseline", self.baseline is not None),
            )
            if given
        ]
        if others and _model_judge(self.judge) is not None:
            raise InvalidArgument(
                f"Case(judge=<model judge>) also has {', '.join(others)}: a model judge's "
                "verdicts are corrected for its measured error, which does not hold for a "
                "verdict that mixes in other promises; check them apart: check(agent, messages, "
                f"Case(judge=judge)) and check(agent, messages, Case({others[0]}=...))"
            )

    def output_of(self, trace: Trace) -> tuple[Any, Verdict | None]:
        """The run's result validated against ``schema``, and the schema's verdict (``None``
        without a schema)."""
        raw = _raw_output(trace)
        if self.schema is None:
            return raw, None
        if raw is None:
            return None, _verdict(
                False,
                "result_schema",
                "the agent returned no result to validate against the schema",
                detail="no_result",
            )
        if isinstance(self.schema, Mapping):
            errors = sorted(
                jsonschema.validators.validator_for(self.schema)(self.schema).iter_errors(raw),
                key=lambda e: list(e.path),
            )
            if errors:
                where = "/".join(map(str, errors[0].path)) or "(top)"
                return raw, _verdict(
                    False,
                    "result_schema",
                    f"the result does not match the schema at {where}: {errors[0].message}",
                    detail=where,
                )
            return raw, _verdict(True, "result_schema", "the result matches the schema")
        try:
            return self.schema.model_validate(raw), _verdict(
                True, "result_schema", f"the result is a valid {self.schema.__name__}"
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "(top)"
            return raw, _verdict(
                False,
                "result_schema",
                f"the result is not a valid {self.schema.__name__}: {where}: {first['msg']}",
                detail=where,
            )

    def verdicts(self, trace: Trace) -> list[Verdict]:
        """Every promise of the case on one run, in order: tools, scope, baseline, schema, judge."""
        out: list[Verdict] = []
        if self.expected_tools:
            out.append(requires_tools(trace, self.expected_tools))
        if self.forbidden_tools:
            out.append(forbids_tools(trace, self.forbidden_tools))
        if self.scope is not None:
            out.append(_in_scope(trace, set(self.scope)))
        if self.baseline is not None:
            out.append(_same_tools(trace, self.baseline))
        output, schema_verdict = self.output_of(trace)
        if schema_verdict is not None:
            out.append(schema_verdict)
        if self.judge is not None:
            # off the loop: a user's judge may start a loop of its own (asyncio.run)
            judged = verdicts_of(call_off_loop(self.judge, self, Result(trace, output)))
            out.extend(
                v if v.contract != "property" else v.model_copy(update={"contract": "judge"})
                for v in judged
            )
        return out or [_verdict(True, "case", "the case makes no promise")]


def _model_judge(judge: object) -> object | None:
    """``judge`` when it is a model judge (its error is measured: it has ``correction()``)."""
    return judge if callable(getattr(judge, "correction", None)) else None


def _verdict(passed: bool, contract: str, explanation: str, detail: str | None = None) -> Verdict:
    return Verdict(
        passed=passed, contract=contract, explanation=explanation, detail=None if passed else detail
    )


def _raw_output(trace: Trace) -> Any:
    turn = trace.turns[-1] if trace.turns else None
    if turn is None:
        return None
    if turn.response is not None:
        return turn.response
    if turn.text:
        try:
            return json.loads(turn.text)
        except ValueError:
            return turn.text
    return None


def _in_scope(trace: Trace, allowed: set[str]) -> Verdict:
    for c in trace.tool_calls:
        touched = c.args.get("scope", c.name)
        if c.name not in allowed and touched not in allowed:
            return Verdict(
                passed=False,
                contract="within_scope",
                explanation=f"turn {c.turn_index + 1}, step {c.step + 1}: {c.name} touches "
                f"{touched!r}, outside the allowed scope {sorted(allowed)}",
                turn=c.turn_index,
                step=c.step,
                detail=f"called={c.name}",
            )
    return _verdict(True, "within_scope", f"every call stayed within {sorted(allowed)}")


def _same_tools(trace: Trace, baseline: Trace) -> Verdict:
    now, then = set(trace.tool_names()), set(baseline.tool_names())
    added, removed = sorted(now - then), sorted(then - now)
    if added or removed:
        parts = ([f"added {', '.join(added)}"] if added else []) + (
            [f"dropped {', '.join(removed)}"] if removed else []
        )
        return _verdict(
            False,
            "baseline",
            f"the run's tools differ from the approved baseline's: {'; '.join(parts)}",
            detail=(added or removed)[0],
        )
    return _verdict(True, "baseline", "the run called the baseline's tools")


class Tools:
    """The tools a test gives an agent, as Python functions; every call is recorded.

    ``tools.query_order(order_id="O-1")`` (or ``tools.call("query_order", ...)``) calls the
    function and records the call, its arguments and its result or exception (re-raised to the
    agent) into the run's trace; ``await tools.acall(...)`` for async tools. ``tools.rng`` is
    the run's seeded random source (the same trial draws the same numbers)."""

    def __init__(
        self, functions: Mapping[str, Callable[..., Any]], rng: random.Random | None = None
    ) -> None:
        self._functions = dict(functions)
        self.calls: list[ToolCall] = []
        self.rng = rng or random.Random(0)

    @staticmethod
    def named(
        tools: Mapping[str, Callable[..., Any]] | Sequence[Callable[..., Any]],
    ) -> dict[str, Callable[..., Any]]:
        """``{name: function}`` from a mapping, or from functions named by their ``__name__``."""
        if isinstance(tools, Mapping):
            out = dict(tools)
        else:
            out = {getattr(f, "__name__", ""): f for f in tools}
        for name, fn in out.items():
            if not name or not callable(fn):
                raise InvalidArgument(
                    f"tools: {name or fn!r} is not a named callable; pass {{'name': function}} or "
                    "functions with a __name__"
                )
        return out

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._functions:
            raise AttributeError(
                f"no tool {name!r}; the tools are {', '.join(sorted(self._functions)) or '(none)'}"
            )
        if inspect.iscoroutinefunction(self._functions[name]):

            async def acalled(**args: Any) -> Any:
                return await self.acall(name, **args)

            return acalled

        def called(**args: Any) -> Any:
            return self.call(name, **args)

        return called

    @contextlib.contextmanager
    def _recorded(self, name: str, args: dict[str, Any]) -> Iterator[ToolCall]:
        """Record a call of tool ``name``, and the exception it raises (re-raised)."""
        if name not in self._functions:
            raise InvalidArgument(
                f"no tool {name!r}; the tools are {', '.join(sorted(self._functions)) or '(none)'}"
            )
        call = ToolCall(name=name, args=dict(args), step=len(self.calls))
        self.calls.append(call)
        try:
            yield call
        except Exception as exc:
            call.error, call.error_kind = f"{type(exc).__name__}: {exc}", "tool_exception"
            raise

    def call(self, name: str, /, **args: Any) -> Any:
        with self._recorded(name, args) as call:
            call.result = self._functions[name](**args)
        return call.result

    async def acall(self, name: str, /, **args: Any) -> Any:
        with self._recorded(name, args) as call:
            value = self._functions[name](**args)
            call.result = await value if inspect.isawaitable(value) else value
        return call.result


ToolFunctions: TypeAlias = Mapping[str, Callable[..., Any]] | Sequence[Callable[..., Any]]
"""The tools a test gives a plain agent: ``{name: function}``, or functions
named by ``__name__``."""

PlainAgent: TypeAlias = Callable[..., Any]
"""``agent(messages)`` or ``agent(messages, tools)``, sync or async, optionally taking ``rng=``."""


@dataclass(frozen=True)
class PlainRun:
    """How to run a plain agent: the agent, its tools (``None``: it takes only messages) and a
    name for reports."""

    agent: PlainAgent
    tools: dict[str, Callable[..., Any]] | None = None
    name: str = ""
    takes_rng: bool = field(default=False)


def _takes_rng(agent: PlainAgent) -> bool:
    try:
        return "rng" in inspect.signature(agent).parameters
    except (TypeError, ValueError):
        return False


def plain_run(agent: PlainAgent, tools: ToolFunctions | None) -> PlainRun:
    if not callable(agent):
        raise InvalidArgument(
            "check(agent, messages, ...): the agent must be callable (a function of the "
            f"messages), not {type(agent).__name__}"
        )
    named = Tools.named(tools) if tools is not None else None
    return PlainRun(
        agent, named, getattr(agent, "__name__", type(agent).__name__), _takes_rng(agent)
    )


def plain_fingerprint(run: PlainRun) -> str:
    """What identifies the agent's behaviour in the memo: its name, where it is defined and the
    source of its module, and the same for each tool (editing either makes new runs)."""
    parts: list[Any] = [
        getattr(run.agent, "__qualname__", run.name),
        run.name,
        getattr(getattr(run.agent, "__code__", None), "co_firstlineno", 0),
        make_factory(run.agent, ref=run.name).fingerprint,
    ]
    for name, fn in sorted((run.tools or {}).items()):
        parts.append([name, make_factory(fn, ref=name).fingerprint])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def _as_response(value: Any) -> tuple[dict[str, Any] | None, str]:
    if value is None:
        return None, ""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json"), ""
    if isinstance(value, Mapping):
        return json.loads(json.dumps(dict(value), default=str)), ""
    return None, str(value)


async def run_plain_agent(run: PlainRun, messages: Sequence[str], trial: int, seed: int) -> Trace:
    """One run of a plain agent over ``messages``: its trace (never raises for the agent)."""
    rng = random.Random(f"{seed}/{trial}/{list(messages)}")
    box = Tools(run.tools, rng) if run.tools is not None else None
    args: list[Any] = [list(messages)] + ([box] if box is not None else [])
    kwargs: dict[str, Any] = {"rng": rng} if run.takes_rng else {}
    started = time.perf_counter()
    errors: list[RunError] = []
    value: Any = None
    try:
        if is_async(run.agent):
            value = await run.agent(*args, **kwargs)
        else:  # off the loop, as the runtime runs a sync agent: it may start a loop of its own
            value = await asyncio.to_thread(run.agent, *args, **kwargs)
            if isinstance(value, Awaitable):
                value = await value
    except Exception as exc:
        errors.append(
            RunError(
                kind="agent_exception",
                message=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(),
            )
        )
    calls = box.calls if box is not None else []
    if isinstance(value, Trace):
        trace = value.model_copy(deep=True)
        if calls and not trace.tool_calls:
            if not trace.turns:
                trace.turns = [Turn(index=0, user_message=messages[-1] if messages else "")]
            trace.turns[-1].tool_calls = list(calls)
    else:
        turns = [Turn(index=i, user_message=m) for i, m in enumerate(messages)] or [
            Turn(index=0, user_message="")
        ]
        response, text = _as_response(value)
        last = turns[-1]
        last.tool_calls, last.response, last.raw_response, last.text = (
            list(calls),
            response,
            response,
            text,
        )
        trace = Trace(turns=turns)
    last_index = len(trace.turns) - 1
    for c in calls:  # the box's calls went to the last turn
        c.turn_index = last_index
    for e in errors:
        e.turn_index = last_index
    trace.errors.extend(errors)
    trace.trial, trace.agent = trial, trace.agent or run.name
    trace.duration_s = trace.duration_s or time.perf_counter() - started
    return trace


def plain_verdicts(prop: Case | Callable[..., PropertyResult]) -> Callable[[Trace], list[Verdict]]:
    """The verdicts of one run under ``prop``: a :class:`Case`, a ``trace -> bool | Verdict``
    property, or a ``judge(case, result)`` (judged with an empty case)."""
    judged: Callable[[Trace], list[Verdict]]
    if isinstance(prop, Case):
        judged = prop.verdicts
    elif not callable(prop):
        raise InvalidArgument(
            "check(agent, messages, prop): prop must be a Case, a property trace -> bool | "
            f"Verdict or a judge(case, result), not {type(prop).__name__}"
        )
    elif _positional_count(prop) >= 2:
        judged = Case(judge=prop).verdicts
    else:

        def judged(trace: Trace) -> list[Verdict]:
            return verdicts_of(call_off_loop(prop, trace))

    def verdicts(trace: Trace) -> list[Verdict]:
        # a run that broke (the agent raised) fails whatever the property says of what is left
        return [no_run_errors(trace)] if trace.errored else judged(trace)

    return verdicts


def _positional_count(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


async def decide_plain(
    run: PlainRun,
    messages: Sequence[str],
    prop: Case | Callable[..., PropertyResult],
    settings: OracleSettings,
    *,
    memo: TrialMemo | None,
    budget: Budget | None,
    seed: int,
    name: str = "",
) -> CheckResult:
    """Decide ``prop`` for the plain agent on ``messages``: the engine under the spec-free
    :func:`agentprop.check` (never raises for a failed property)."""
    verdicts = plain_verdicts(prop)
    digest = plain_digest(run, messages, seed)  # the shrinker's runs of the same messages share it

    async def run_trial(i: int) -> Trace:
        return await run_plain_agent(run, messages, i, seed)

    def judge(trace: Trace) -> TrialRecord:
        return record_for(verdicts(trace))

    label = name or (prop.name if isinstance(prop, Case) and prop.name else run.name)
    # Case(judge=model judge): the judge
    judged_by = (_model_judge(prop.judge) or prop) if isinstance(prop, Case) else prop
    judge_calls_before = getattr(judged_by, "calls", 0)
    result = await adecide(
        run_trial,
        # a model judge's property is decided on its corrected rate
        judged_settings(settings, judged_by),
        judge=judge,
        name=label,
        memo=memo,
        input_digest=digest,
        fingerprint=plain_fingerprint(run),
        budget=budget,
        first_trial=seed * 1_000_003,
    )
    return count_judge_calls(result, judged_by, judge_calls_before)


# --- the case a spec-free check decides (its corpus key) -----------------------------------


@dataclass
class PlainContext:
    """What a failed spec-free check ran on: enough to shrink it and save it to the corpus."""

    run: PlainRun
    messages: list[str]
    prop: Case | Callable[..., PropertyResult]
    settings: OracleSettings
    seed: int
    label: str
    key: str
    """The case (:func:`case_key` of the check's own messages): a replay of its corpus entry
    keeps it, so the same bug found again updates that entry."""


def plain_digest(run: PlainRun, messages: Sequence[str], seed: int) -> str:
    """The memo's input key of a spec-free run (what :func:`decide_plain` stores runs under)."""
    return input_key(
        {
            "plain": 1,
            "messages": [str(m) for m in messages],
            "tools": sorted(run.tools or {}),
            "seed": seed,
        }
    )


def agent_ref(run: PlainRun) -> str:
    """``module:qualname`` of the agent: what a corpus entry was found with."""
    module = getattr(run.agent, "__module__", None) or "?"
    return f"{module}:{getattr(run.agent, '__qualname__', run.name)}"


def prop_id(prop: Case | Callable[..., PropertyResult]) -> str:
    if isinstance(prop, Case):
        judge = getattr(prop.judge, "__qualname__", "") if prop.judge is not None else ""
        schema = getattr(prop.schema, "__name__", None) or (
            json.dumps(prop.schema, sort_keys=True, default=str) if prop.schema else ""
        )
        return json.dumps(
            [
                prop.name,
                sorted(prop.expected_tools),
                sorted(prop.forbidden_tools),
                sorted(prop.scope or []),
                schema,
                judge,
                prop.baseline is not None,
            ]
        )
    return str(getattr(prop, "__qualname__", type(prop).__name__))


def originals(messages: Sequence[str]) -> list[str]:
    """Each message's original: what the drawn paraphrase was made from, or the text itself."""
    return [m.original if isinstance(m, Paraphrase) else str(m) for m in messages]


def case_key(
    label: str, messages: Sequence[str], prop: Case | Callable[..., PropertyResult]
) -> str:
    """The case a spec-free check decides, whatever paraphrase Hypothesis drew of its messages:
    ``label#digest`` of the originals and the property (the corpus entry's scenario id)."""
    digest = hashlib.sha256(json.dumps([originals(messages), prop_id(prop)]).encode()).hexdigest()[
        :10
    ]
    return f"{label}#{digest}"


def plain_scenario(key: str, messages: Sequence[str]) -> Scenario:
    """The messages as a scenario value (what the corpus and the shrink report hold)."""
    return Scenario(
        id=key,
        spec_id=PLAIN_SPEC_ID,
        leaf="",
        path=[],
        turns=[ScenarioTurn(user_message=str(m)) for m in messages],
    )


def plain_corpus(corpus: Corpus | ProjectCorpora | None) -> Corpus | None:
    """The corpus spec-free entries go to: an explicit corpus directory, or the session's
    default one for checks without a project (``None`` when there is none)."""
    if isinstance(corpus, Corpus):
        return corpus
    if isinstance(corpus, ProjectCorpora):
        return corpus.plain
    return None
