"""The runtime: run an agent over a conversation in a world and record the trace.

An agent factory gives an agent per conversation; each turn the agent calls ``ctx.call`` and
ends with ``ctx.respond``. The runtime records every tool call once, validates ``respond``,
enforces the spec's limits, records agent exceptions and timeouts as errored runs (never a
crash), seeds ``ctx.rng`` from (case, trial), always calls ``close_conversation()``, and scrubs
secrets from the trace it returns.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
import queue
import random
import signal
import threading
import time
import traceback
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn, Protocol

from pydantic_core import PydanticSerializationError

from agentprop._agents.ownloop import OWN_LOOPS, _OwnLoop
from agentprop._scenario.trace import (
    INFRASTRUCTURE_KINDS,
    ErrorKind,
    RunError,
    ToolCall,
    Trace,
    Turn,
    Usage,
)
from agentprop._scenario.world import World, answer, copy_json, stable_seed
from agentprop._spec.model import Spec
from agentprop._spec.response import validate_response
from agentprop._util.aio import call_off_loop, is_async, run_sync
from agentprop._util.scrub import might_hold_secret, scrub_data, scrub_text
from agentprop.errors import InfrastructureError, ToolError


class _ConversationRandom:
    """A conversation's random source, seeded from ``(case, trial)`` and made on first use:
    seeding costs microseconds per run that most agents never need."""

    __slots__ = ("_case_id", "_trial", "_rng")

    def __init__(self, case_id: str, trial: int) -> None:
        self._case_id = case_id
        self._trial = trial
        self._rng: random.Random | None = None

    def get(self) -> random.Random:
        if self._rng is None:
            self._rng = random.Random(stable_seed("agent-rng", self._case_id, self._trial))
        return self._rng


MAX_CALLS_PER_TURN = 1_000
"""Tool calls recorded in one turn, whatever the spec's ``max_tool_calls_per_turn``: an agent
looping on calls (refused or not) has its turn ended there, so its trace stays bounded."""
MAX_REFUSED_CALLS_PER_TURN = 20
"""Calls refused in one turn (over the spec's limit, after respond, unknown tools, a second
respond) before the turn is ended."""
MAX_TEXT_CHARS = 1_000_000
"""The most characters one reply (``respond``'s fields, ``say``'s text) or one tool call's
arguments may hold; a bigger one ends the turn with a ``limit_exceeded`` error."""


class TurnContext:
    """What an agent sees during one turn: tools, the response channel, context and a seeded
    random source. What a turn records is bounded (:data:`MAX_CALLS_PER_TURN`,
    :data:`MAX_REFUSED_CALLS_PER_TURN`, :data:`MAX_TEXT_CHARS`): past a bound the turn is
    ended with a ``limit_exceeded`` error naming it."""

    def __init__(
        self,
        *,
        spec: Spec,
        world: World,
        turn: Turn,
        history: Sequence[Turn],
        context: Mapping[str, Any],
        rng: random.Random | _ConversationRandom,
        memory: dict[str, Any],
        case_id: str = "",
        trial: int = 0,
    ) -> None:
        self.spec = spec
        self.case_id = case_id
        """The scenario being run (for API agents' cache keys and logs)."""
        self.trial = trial
        """The trial index of this run: repeats of a case differ in it, replays share it."""
        self.world = world
        self._turn = turn
        self.history: tuple[Turn, ...] = tuple(history)
        self.context: Mapping[str, Any] = context
        self._rng: random.Random | _ConversationRandom = rng
        self.memory = memory
        self._responded = False
        self._invalid_response: str | None = None
        self._non_respond_calls = 0
        self._refused = 0
        self._closed = False
        self._stopped = False
        """The turn was ended on a bound (:meth:`_stop`)."""
        self._on_stop: Callable[[], None] | None = None
        """Told when the turn is ended on a bound (the worker running it need not be waited for)."""
        self.deadline: float | None = None
        """When this turn's time runs out, in the event loop's clock (``loop.time()``), or
        ``None`` (no timeout). Model agents pass it down so that no retry waits past it."""

    @property
    def rng(self) -> random.Random:
        """A random source seeded from ``(case, trial)``, one stream across the turns of a
        conversation, so simulated agents are reproducible."""
        source = self._rng
        if isinstance(source, _ConversationRandom):
            source = self._rng = source.get()
        return source

    @rng.setter
    def rng(self, value: random.Random) -> None:
        self._rng = value

    @property
    def turn_index(self) -> int:
        return self._turn.index

    @property
    def user_message(self) -> str:
        return self._turn.user_message

    @property
    def responded(self) -> bool:
        return self._responded

    @property
    def calls_this_turn(self) -> list[ToolCall]:
        return list(self._turn.tool_calls)

    @property
    def tool_names(self) -> list[str]:
        """The tools an agent may call (``respond`` excluded)."""
        return [t.name for t in self.spec.action_tools]

    def call(self, name: str, /, **args: Any) -> Any:
        """Call a tool of the spec and return its output, or raise :class:`ToolError`."""
        return self._call(name, args, keep=False)

    def _call(self, name: str, args: dict[str, Any], *, keep: bool) -> Any:
        """:meth:`call`. With ``keep``, a fresh output of the world (:func:`answer`, ``shared``:
        what is the same in every run shared with other runs' records) is recorded in the trace
        as it is and returned: the caller must not change it (the model agents only encode it),
        and it is not copied once for the trace and once for the caller."""
        if self._closed:
            if self._stopped and self._on_stop is not None:
                # an abandoned worker (only a worker's turns have _on_stop) still looping on
                # calls: let it spin slowly; an inline turn is not abandoned, it ends now
                time.sleep(0.05)
            raise ToolError(
                "protocol", "this turn is over; tool calls after the turn ended are refused"
            )
        if name == "respond":
            return self.respond(**args)
        step = len(self._turn.tool_calls)
        if step >= MAX_CALLS_PER_TURN:
            self._stop(
                f"the agent made {step} tool calls in one turn, the most agentprop records "
                "(MAX_CALLS_PER_TURN)"
            )
        size = len(repr(args))
        if size > MAX_TEXT_CHARS:
            self._stop(
                f"the arguments of {name} are {size:,} characters, over the "
                f"{MAX_TEXT_CHARS:,} agentprop records"
            )
        record = ToolCall(name=name, args=copy_json(args), turn_index=self._turn.index, step=step)
        self._turn.tool_calls.append(record)
        if self._responded:
            self._refuse(
                "protocol",
                f"{name} was called after respond; respond must be the final action",
                "respond was already called this turn; it must be the final action",
                record,
                "tool call after respond",
            )
        if name not in self.spec.tools_by_name:
            self._refuse(
                "unknown_tool",
                f"the agent called {name!r}, which spec {self.spec.spec_id} does not declare",
                f"no tool named {name!r}; available: {', '.join(self.tool_names)}",
                record,
                f"unknown tool {name!r}",
            )
        self._non_respond_calls += 1
        limit = self.spec.max_tool_calls_per_turn
        if limit is not None and self._non_respond_calls > limit:
            self._refuse(
                "limit_exceeded",
                f"call {self._non_respond_calls} ({name}) exceeds max_tool_calls_per_turn={limit}",
                f"max_tool_calls_per_turn={limit} reached; respond now",
                record,
                f"more than {limit} tool calls this turn",
            )
        try:
            result, fresh = answer(self.world, name, args, shared=keep)
        except ToolError as exc:
            record.error, record.error_kind = exc.message, exc.kind
            raise
        record.result = result if keep and fresh else copy_json(result)
        return result

    def respond(self, /, **fields: Any) -> dict[str, Any]:
        """End the turn with the structured response. Raises :class:`ToolError` if it does not
        satisfy the response contract (the agent may correct it and call again)."""
        if self._closed:
            raise ToolError("protocol", "this turn is over")
        if self._responded:
            self._refuse(
                "respond_twice",
                "respond was called more than once in a turn",
                "respond was already called this turn",
            )
        size = len(repr(fields))
        if size > MAX_TEXT_CHARS:
            self._stop(
                f"the reply (respond's fields) is {size:,} characters, over the "
                f"{MAX_TEXT_CHARS:,} agentprop records"
            )
        valid, problem = validate_response(self.spec, dict(fields))
        if valid is None:
            self._invalid_response = problem
            self._turn.raw_response = copy_json(fields)
            raise ToolError(
                "invalid_respond", f"respond does not satisfy the response contract: {problem}"
            )
        self._turn.response = valid
        self._turn.raw_response = copy_json(fields)
        self._responded = True
        return {"acknowledged": True}

    def say(self, text: str) -> None:
        """Record free text shown to the user outside ``respond`` (checked for leaks too)."""
        if self._closed:  # the turn is over (timed out, or ended on a bound): not recorded
            return
        if len(self._turn.text) + len(text) > MAX_TEXT_CHARS:
            self._stop(
                f"the agent's free text (say) reached {len(self._turn.text) + len(text):,} "
                f"characters, over the {MAX_TEXT_CHARS:,} agentprop records"
            )
        self._turn.text = (self._turn.text + "\n" + text) if self._turn.text else text

    def _refuse(
        self,
        kind: ErrorKind,
        message: str,
        answer: str,
        record: ToolCall | None = None,
        error: str | None = None,
    ) -> NoReturn:
        """Refuse a call the agent should not have made: count it (:meth:`_count_refusal`), record
        a ``kind`` run error saying ``message`` (and ``error`` on the call's ``record``), and
        answer the agent with ``answer``."""
        self._count_refusal()
        if record is not None:
            record.error, record.error_kind = error, kind
        self._turn.errors.append(RunError(kind=kind, message=message, turn_index=self._turn.index))
        raise ToolError(kind, answer)

    def _count_refusal(self) -> None:
        self._refused += 1
        if self._refused > MAX_REFUSED_CALLS_PER_TURN:
            self._stop(
                f"the agent kept calling after {MAX_REFUSED_CALLS_PER_TURN} of its calls were "
                "refused this turn (MAX_REFUSED_CALLS_PER_TURN)"
            )

    def _stop(self, why: str) -> NoReturn:
        """End the turn on a bound: record ``why`` as a ``limit_exceeded`` error; every later
        call of this turn is refused, unrecorded."""
        self._closed = self._stopped = True
        self._turn.errors.append(
            RunError(
                kind="limit_exceeded",
                message=f"{why}: the turn is ended",
                turn_index=self._turn.index,
            )
        )
        if self._on_stop is not None:
            self._on_stop()
        raise ToolError("limit_exceeded", f"{why}; this turn is over")

    def add_usage(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = 0.0,
        model_calls: int = 1,
    ) -> None:
        """Record model usage for this turn (API-backed agents). ``cost_usd=None``: the calls'
        cost is unknown (a model without a price); they are counted in ``unpriced_calls``."""
        usage = self._turn.usage
        if cost_usd is None:
            self._turn.usage = usage + Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                model_calls=model_calls,
                unpriced_calls=model_calls,
            )
            return
        if (
            type(input_tokens) is int
            and type(output_tokens) is int
            and type(model_calls) is int
            and type(cost_usd) in (float, int)
            and not usage.unpriced_calls
        ):
            # what ``usage + Usage(...)`` gives, validating one model instead of two
            self._turn.usage = Usage(
                input_tokens=usage.input_tokens + input_tokens,
                output_tokens=usage.output_tokens + output_tokens,
                cost_usd=usage.cost_usd + float(cost_usd),
                model_calls=usage.model_calls + model_calls,
            )
            return
        self._turn.usage = usage + Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
            model_calls=model_calls,
        )


class TurnAgent(Protocol):
    def turn(self, message: str, ctx: TurnContext) -> None | Awaitable[None]: ...


Agent = Callable[[str, TurnContext], None | Awaitable[None]] | TurnAgent
AgentFactory = Callable[[], Agent]


def _hook(agent: object, name: str) -> Any:
    """``agent.name``, or ``None`` when it has none -- also when looking it up raises (an
    agent whose ``__getattr__`` raises for names it does not know)."""
    try:
        return getattr(agent, name, None)
    except Exception:
        return None


def _turn_callable(agent: Agent) -> Callable[[str, TurnContext], Any]:
    fn: object = _hook(agent, "turn")
    if callable(fn):
        return fn
    if callable(agent):
        return agent
    raise TypeError(
        "an agent must be callable as agent(message, ctx) or have a turn(message, ctx) method; "
        f"got {type(agent).__name__}"
    )


class _DaemonWorkers:
    """Daemon threads that run sync agents' conversations, reused from one to the next.

    A conversation goes to an idle worker, or to a new daemon thread when none is idle. A
    worker whose turn outlived its timeout is simply not idle: nothing ever waits for it, so it
    holds up neither other conversations nor interpreter shutdown (it is a daemon thread).
    Each job runs in a fresh, empty ``contextvars`` context (and each turn in one of its own),
    as it would on a new thread. Idle workers beyond ``max_idle``, or idle longer than
    ``idle_timeout`` seconds, exit.
    """

    def __init__(self, *, max_idle: int = 64, idle_timeout: float = 30.0) -> None:
        self._max_idle = max_idle
        self._idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[tuple[Callable[[], None], str]]] = []
        self._pid = os.getpid()

    def submit(self, job: Callable[[], None], name: str) -> None:
        """Run ``job()`` (which must not raise) on a daemon thread named ``name``."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's threads do not exist here
                self._pid, self._idle = os.getpid(), []
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._work, args=(inbox,), name=name, daemon=True).start()
        inbox.put((job, name))

    def _work(self, inbox: queue.SimpleQueue[tuple[Callable[[], None], str]]) -> None:
        me = threading.current_thread()
        while True:
            try:
                job, name = inbox.get(timeout=self._idle_timeout)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # nobody picked this worker meanwhile: retire
                        self._idle.remove(inbox)
                        return
                continue  # a job is on its way
            me.name = name
            contextvars.Context().run(job)
            me.name = "agentprop-agent-idle"
            with self._lock:
                if len(self._idle) >= self._max_idle:
                    return
                self._idle.append(inbox)


_WORKERS = _DaemonWorkers()


async def _within(awaitable: Awaitable[Any], timeout_s: float | None) -> None:
    """``async with asyncio.timeout(timeout_s): await awaitable``, with the same semantics
    (the task is cancelled at the deadline and the cancellation surfaces as ``TimeoutError``,
    unless someone else cancelled the task too), at a fraction of the cost per turn: one timer
    handle and a closure instead of a context-manager object."""
    if timeout_s is None:
        await awaitable
        return
    task = asyncio.current_task()
    if task is None:  # not inside a task: let asyncio.timeout say so
        async with asyncio.timeout(timeout_s):
            await awaitable
        return
    loop = asyncio.get_running_loop()
    cancelling = task.cancelling()
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    deadline = loop.time() + timeout_s
    handle = loop.call_soon(expire) if deadline <= loop.time() else loop.call_at(deadline, expire)
    try:
        await awaitable
    except BaseException as exc:
        handle.cancel()
        if expired and task.uncancel() <= cancelling and type(exc) is asyncio.CancelledError:
            raise TimeoutError from exc
        raise
    handle.cancel()
    if expired:
        task.uncancel()


def _agentprops(*owners: object) -> bool:
    """Whether any of ``owners`` (functions, classes) is defined in agentprop."""
    modules = (getattr(o, "__module__", None) or "" for o in owners)
    return any(m == "agentprop" or m.startswith("agentprop.") for m in modules)


def _needs_own_loop(agent: object, fn: Callable[..., Any]) -> bool:
    """Whether an async agent's turns run on a loop of their own: a user's do; agentprop's own
    (model agents sharing loop-bound clients, MCP, adapters) stay on the runner's loop."""
    return is_async(fn) and not _agentprops(fn, *type(agent).__mro__)


BUILDS = "_agentprop_builds"
"""The attribute by which a factory agentprop wrapped around a user's class or function (a
fault-knob factory: ``Agent(faults=...)``) names it (see :func:`_built_from`)."""


def _built_from(factory: AgentFactory) -> object:
    """What ``factory`` builds its agent from: a ``functools.partial``'s function, the class or
    function a factory of agentprop's wraps (:data:`BUILDS`), else the factory itself."""
    made = factory.func if isinstance(factory, functools.partial) else factory
    wrapped = _hook(made, BUILDS)
    return made if wrapped is None else wrapped


def _sync_agent_class(factory: AgentFactory) -> bool:
    """Whether ``factory`` builds a user's agent class whose turns are sync: its constructor
    then runs as its turns do, with no loop of agentprop's around it, so it too may start a
    loop of its own (``asyncio.run``)."""
    made = _built_from(factory)
    if not inspect.isclass(made) or _agentprops(*made.__mro__[:-1]):
        return False
    turn = getattr(made, "turn", None)
    # the class's own __call__ (the instances' turn), not type's
    return not is_async(turn if callable(turn) else made.__call__)  # noqa: B004


def _sync_factory_function(factory: AgentFactory) -> bool:
    """Whether ``factory`` is a user's sync function (not a class, not ``async``, not
    agentprop's own): it is called as :func:`_build` says."""
    made = _built_from(factory)
    return (
        callable(made)
        and not inspect.isclass(made)
        and not is_async(made)
        and not _agentprops(made, type(made))
    )


_LOOP_RUNNING = (
    "cannot be called from a running event loop",  # asyncio.run, asyncio.Runner.run
    "event loop is already running",  # loop.run_until_complete on the running loop
    "while another loop is running",  # a new loop's run_until_complete
    "already running asyncio in this thread",  # anyio.run
)
"""What the ``RuntimeError`` says when code that starts a loop of its own meets ours."""

_OWN_LOOP_FACTORIES: weakref.WeakSet[object] = weakref.WeakSet()
"""The sync factory functions seen to start a loop of their own: built with the loop set aside
at once, not first tried on it."""


def _met_our_loop(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from or while handling) is code starting
    a loop of its own inside ours: the running loop's fault, not the agent's."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, RuntimeError) and any(m in str(cause) for m in _LOOP_RUNNING):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _close_unstarted(exc: BaseException) -> None:
    """Close the coroutines asyncio refused to run on our loop (``asyncio.run(main())``: its
    frames in ``exc``'s traceback hold them, unstarted), so none warns it "was never awaited":
    the factory makes them again off the loop."""
    tb = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        local = tb.tb_frame.f_locals.values() if module.split(".")[0] == "asyncio" else ()
        for value in list(local):
            if (
                inspect.iscoroutine(value)
                and inspect.getcoroutinestate(value) == inspect.CORO_CREATED
            ):
                value.close()
        tb = tb.tb_next


def _remember_own_loop(factory: AgentFactory) -> None:
    try:
        _OWN_LOOP_FACTORIES.add(factory)
    except TypeError:  # not weakly referable: tried on the loop again next time
        pass


def _build(factory: AgentFactory) -> Agent:
    """The agent ``factory`` makes. A user's sync agent class is called in this thread with
    the loop set aside (:func:`call_off_loop`), so it may start a loop of its own
    (``asyncio.run``) as its sync turns may. A user's sync factory function may do either: build
    an async agent that needs the running loop (``asyncio.get_running_loop()``, an HTTP
    session), or start a loop of its own. It is called on the loop; if it fails only because it
    met our loop (:func:`_met_our_loop`), it is called again with the loop set aside (so what
    it did before that runs twice, once), and from then on at once. No thread hop, which a run
    of a trivial agent would pay for. Anything else (an async agent's class, agentprop's own
    factories) is built on the loop, where its loop-bound clients belong."""
    if _sync_agent_class(factory):
        return call_off_loop(factory)
    if not _sync_factory_function(factory):
        return factory()
    try:
        seen = factory in _OWN_LOOP_FACTORIES
    except TypeError:  # unhashable
        seen = False
    if seen:
        return call_off_loop(factory)
    try:
        return factory()
    except Exception as exc:
        if not _met_our_loop(exc):
            raise
        _close_unstarted(exc)
    _remember_own_loop(factory)
    return call_off_loop(factory)


async def _run_turn(
    fn: Callable[[str, TurnContext], Any],
    message: str,
    ctx: TurnContext,
    timeout_s: float | None,
    own: _OwnLoop | None = None,
) -> None:
    """One turn on the event loop: an async agent's (within ``timeout_s``, in the runner's own
    task, no new task per turn, or as a task of the agent's own loop), or a sync agent's when
    no timeout needs a thread."""
    if is_async(fn):
        coro = fn(message, ctx)
        await _within(coro if own is None else own.run(coro), timeout_s)
        return
    result = call_off_loop(fn, message, ctx)  # it may start a loop of its own (asyncio.run)
    if inspect.isawaitable(result):
        async with asyncio.timeout(timeout_s):
            await result


LiveTurns = Callable[[int, Trace], str | None]
"""Writes follow-up turn ``index`` from the conversation so far (the simulated user reading the
agent's live question); ``None``: the scripted message is sent."""

live_turns: contextvars.ContextVar[LiveTurns | None] = contextvars.ContextVar(
    "agentprop_live_turns", default=None
)
"""The live turn writer of the conversations run in this context (``None``: every turn is the
scripted message). Set around one case's runs by the caller that owns the writer."""


class _Turns:
    """The turns of one conversation, begun and ended the same way whether the agent runs on
    the event loop or on a worker thread."""

    def __init__(
        self,
        spec: Spec,
        trace: Trace,
        messages: Sequence[str],
        world: World,
        context: Mapping[str, Any] | None,
        case_id: str,
        trial: int,
        timeout_s: float | None,
    ) -> None:
        self.spec = spec
        self.trace = trace
        self.messages = messages
        self.world = world
        self.context = context
        self.case_id = case_id
        self.trial = trial
        self.timeout_s = timeout_s
        self.rng = _ConversationRandom(case_id, trial)
        self.memory: dict[str, Any] = {}
        self.loop = asyncio.get_running_loop()
        self.live = live_turns.get()

    def written(self, index: int) -> str | None:
        """Turn ``index`` as the live writer writes it from the conversation so far (``None``:
        no writer, the first turn, or the writer wrote nothing: the scripted message is sent).
        Blocking: call it off the event loop."""
        if self.live is None or index == 0:
            return None
        try:
            return self.live(index, self.trace)
        except Exception:  # noqa: BLE001 (the writer's failure is never the agent's: the scripted turn is sent)
            return None

    async def written_async(self, index: int) -> str | None:
        return (
            None
            if self.live is None or index == 0
            else await asyncio.to_thread(self.written, index)
        )

    def begin(self, index: int, text: str | None = None) -> tuple[Turn, TurnContext]:
        turn = Turn(index=index, user_message=self.messages[index] if text is None else text)
        self.trace.turns.append(turn)
        ctx = TurnContext(
            spec=self.spec,
            world=self.world,
            turn=turn,
            history=self.trace.turns[:-1],
            context=dict(self.context or {}),
            rng=self.rng,
            memory=self.memory,
            case_id=self.case_id,
            trial=self.trial,
        )
        if self.timeout_s is not None:  # what a model call's retries may not wait past
            ctx.deadline = self.loop.time() + self.timeout_s
        return turn, ctx

    def timeout(self, index: int, exc: BaseException | None = None) -> RunError:
        # a plain timeout, or a model call that would have waited past the deadline (it says
        # what the server asked for): either way the turn's timeout is what ended it
        why = f": {exc}" if exc is not None and str(exc) else ""
        return RunError(
            kind="timeout",
            message=f"the agent did not finish the turn within {self.timeout_s} s{why}",
            turn_index=index,
        )

    @staticmethod
    def exception(exc: Exception, index: int) -> RunError:
        """The error of a turn that raised ``exc`` (call inside the ``except`` block: it keeps
        the traceback): the agent's, or the kind of an error that is not the agent's."""
        return _run_error(exc, index)

    @staticmethod
    def end(turn: Turn, ctx: TurnContext, t0: float, error: RunError | None) -> bool:
        """Close the turn (later tool calls are refused) and record how it ended; returns
        whether the conversation stops here (an error ends it)."""
        ctx._closed = True
        turn.duration_s = time.perf_counter() - t0
        if error is not None:
            turn.errors.append(error)
            return True
        if not ctx.responded:
            if ctx._invalid_response is not None:
                turn.errors.append(
                    RunError(
                        kind="invalid_respond", message=ctx._invalid_response, turn_index=turn.index
                    )
                )
            else:
                turn.errors.append(
                    RunError(
                        kind="no_respond",
                        message="the turn ended without a respond call",
                        turn_index=turn.index,
                    )
                )
        return False


async def _converse_on_loop(
    turns: _Turns,
    fn: Callable[[str, TurnContext], Any],
    start: int = 0,
    own: _OwnLoop | None = None,
) -> None:
    """The turns from ``start`` on, each awaited on the event loop (or on ``own``)."""
    for index in range(start, len(turns.messages)):
        turn, ctx = turns.begin(index, await turns.written_async(index))
        t0 = time.perf_counter()
        error: RunError | None = None
        try:
            await _run_turn(fn, turn.user_message, ctx, turns.timeout_s, own)
        except TimeoutError as exc:
            error = turns.timeout(index, exc)
        except Exception as exc:
            error = turns.exception(exc, index)
        except BaseException as exc:
            error = _agent_stop(exc, index)
            if error is None:  # a cancellation, or a real Ctrl-C: the caller's
                ctx._closed = True
                turn.duration_s = time.perf_counter() - t0
                raise
        if turns.end(turn, ctx, t0, error):
            return


class _Segment:
    """What the event loop and the worker thread running a sync agent's turns share (under
    ``lock``): the turn running and since when, and whether the loop has given up on it."""

    __slots__ = ("abandoned", "ctx", "handed", "index", "lock", "started", "t0", "turn")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.abandoned = False
        self.index = -1
        """The turn the thread is running (-1: none, between turns or not started)."""
        self.started = 0.0
        """``time.monotonic()`` when that turn started (the timeout runs from there)."""
        self.t0 = 0.0
        self.turn: Turn | None = None
        self.ctx: TurnContext | None = None
        self.handed: tuple[int, Turn, TurnContext, float, Any] | None = None
        """A turn whose sync call returned an awaitable, handed to the loop to await."""


async def _converse_in_thread(turns: _Turns, fn: Callable[[str, TurnContext], Any]) -> None:
    """A sync agent's turns, all on one daemon worker thread: one thread hop per conversation,
    not one per turn. The loop waits for the conversation, and gives up on a turn that outlives
    the timeout: the turn is recorded as timed out and closed (its later tool calls are
    refused), the conversation ends, and the thread, which nothing waits for, is abandoned as
    before. A turn that returns an awaitable is awaited on the loop, and the next turns go back
    to a thread."""
    start = 0
    while start < len(turns.messages):
        handed = await _thread_segment(turns, fn, start)
        if handed is None:
            return
        index, turn, ctx, t0, awaitable = handed
        error: RunError | None = None
        try:
            async with asyncio.timeout(turns.timeout_s):
                await awaitable
        except TimeoutError as exc:
            error = turns.timeout(index, exc)
        except Exception as exc:
            error = turns.exception(exc, index)
        except BaseException as exc:
            error = _agent_stop(exc, index)
            if error is None:
                ctx._closed = True
                raise
        if turns.end(turn, ctx, t0, error):
            return
        start = index + 1


async def _thread_segment(
    turns: _Turns, fn: Callable[[str, TurnContext], Any], start: int
) -> tuple[int, Turn, TurnContext, float, Any] | None:
    """Run turns ``start``, ``start + 1``, … on a worker thread until the conversation ends or
    a turn returns an awaitable (returned, for the loop to await)."""
    assert turns.timeout_s is not None
    timeout_s = turns.timeout_s
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    seg = _Segment()

    def settle(error: BaseException | None) -> None:
        if not done.done():
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(None)

    def notify(error: BaseException | None = None) -> None:
        if loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(settle, error)
        except RuntimeError:  # the loop closed meanwhile
            pass

    stopped: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not stopped.done():
            stopped.set_result(None)

    def stop_now() -> None:
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(wake)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def job() -> None:
        try:
            for index in range(start, len(turns.messages)):
                text = turns.written(index)  # on this worker thread, outside the lock
                with seg.lock:
                    if seg.abandoned:
                        return
                    turn, ctx = turns.begin(index, text)
                    ctx._on_stop = stop_now
                    seg.index, seg.turn, seg.ctx = index, turn, ctx
                    seg.started, seg.t0 = time.monotonic(), time.perf_counter()
                error: RunError | None = None
                result: Any = None
                try:
                    # each turn in a fresh, empty context, as on a thread of its own
                    result = contextvars.Context().run(fn, turn.user_message, ctx)
                except Exception as exc:
                    error = turns.exception(exc, index)
                # on a worker thread: the agent's own, never a Ctrl-C
                except (SystemExit, KeyboardInterrupt) as exc:
                    error = _agent_stop(exc, index)
                    if error is None:
                        raise
                with seg.lock:
                    if seg.abandoned:  # the loop recorded the timeout and moved on
                        return
                    seg.index = -1
                    if error is None and inspect.isawaitable(result):
                        seg.handed = (index, turn, ctx, seg.t0, result)
                        break
                    if turns.end(turn, ctx, seg.t0, error):
                        break
        except BaseException as exc:  # agent code raised SystemExit or the like: the caller's
            notify(exc)
            return
        notify()

    _WORKERS.submit(job, f"agentprop-agent-{turns.case_id}-{turns.trial}")
    try:
        while not done.done():
            with seg.lock:
                deadline = seg.started + timeout_s if seg.index >= 0 else None
                if (
                    seg.index >= 0
                    and seg.ctx is not None
                    and seg.ctx._stopped
                    and seg.turn is not None
                ):
                    # ended on a bound (an agent looping on refused calls): do not wait for it
                    seg.abandoned = True
                    turns.end(seg.turn, seg.ctx, seg.t0, None)
                    return None
            if stopped.done():  # a stop the worker got past by itself: wait for the next one
                stopped = loop.create_future()
            remaining = timeout_s if deadline is None else deadline - time.monotonic()
            if remaining > 0:
                await asyncio.wait(
                    (done, stopped), timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                continue
            with seg.lock:
                if seg.index >= 0 and seg.started + timeout_s <= time.monotonic():
                    assert seg.turn is not None and seg.ctx is not None
                    seg.abandoned = True
                    turns.end(seg.turn, seg.ctx, seg.t0, turns.timeout(seg.index))
                    return None
        done.result()
    except BaseException:  # cancelled: give up on the thread as on a timeout
        with seg.lock:
            seg.abandoned = True
            if seg.ctx is not None:
                seg.ctx._closed = True
        raise
    return seg.handed


async def arun_conversation(
    spec: Spec,
    agent_factory: AgentFactory,
    messages: Sequence[str],
    world: World,
    *,
    case_id: str = "",
    trial: int = 0,
    context: Mapping[str, Any] | None = None,
    turn_timeout_s: float | None = 60.0,
    agent_name: str = "",
) -> Trace:
    """Run one conversation and return its trace (never raises for agent faults).

    An async agent's turns run on an event loop (a user's on one of its own, taken from
    :data:`~agentprop._agents.ownloop.OWN_LOOPS` and given back if clean), each within
    ``turn_timeout_s``. A sync agent's turns run on one worker thread for the whole
    conversation, so that a turn stuck past the timeout can be abandoned; with
    ``turn_timeout_s=None`` they run inline, with the loop set aside. Either way they, and a
    user's sync agent class or sync factory function as it builds the agent (:func:`_build`),
    may start a loop of their own (``asyncio.run``)."""
    trace = Trace(
        case_id=case_id,
        trial=trial,
        agent=agent_name,
        spec_id=spec.spec_id,
        world_seed=world.seed,
        canaries=dict(world.canaries),
    )
    started = time.perf_counter()
    try:
        agent = _build(agent_factory)
        fn = _turn_callable(agent)
    except BaseException as exc:  # the factory itself is agent code
        error = (
            _run_error(exc, None, prefix="agent factory raised ")
            if isinstance(exc, Exception)
            else _agent_stop(exc, None, prefix="agent factory: ")
        )
        if error is None:
            raise
        trace.errors.append(error)
        trace.duration_s = time.perf_counter() - started
        return _finished(trace)
    turns = _Turns(spec, trace, messages, world, context, case_id, trial, turn_timeout_s)
    own = (
        OWN_LOOPS.take(f"agentprop-agent-loop-{case_id}-{trial}")
        if turn_timeout_s is not None and _needs_own_loop(agent, fn)
        else None
    )
    try:
        if messages and turn_timeout_s is not None and not is_async(fn):
            await _converse_in_thread(turns, fn)
        else:
            await _converse_on_loop(turns, fn, own=own)
        await _close_conversation(agent, trace, turn_timeout_s, own)
    except BaseException:  # cancelled, or a real Ctrl-C: the loop is not waited for
        if own is not None:
            own.stop()
        raise
    if own is not None:  # kept for the next conversation if clean, else abandoned
        await OWN_LOOPS.give_back(own)
    trace.duration_s = time.perf_counter() - started
    return _finished(trace)


def _finished(trace: Trace) -> Trace:
    """``trace`` as a run returns it: valid Unicode (an agent's lone surrogate must not lose the
    run's report, nor the scrubber's JSON) and scrubbed of secrets. Its JSON, written once,
    answers both for the common trace: pydantic refuses to write a lone surrogate, so only a
    trace it refuses is walked string by string."""
    try:
        text = trace.model_dump_json()
    except PydanticSerializationError:
        text = trace.make_valid_unicode().model_dump_json()
    return _scrubbed(trace, text)


def _scrubbed(trace: Trace, text: str) -> Trace:
    """``trace`` (whose JSON is ``text``) with every secret in it redacted (itself when it
    holds none, the common case: one search over its JSON)."""
    if not might_hold_secret(text):
        return trace
    canaries = trace.canaries  # planted by the world, compared with replies: kept as they are
    clean = Trace.model_validate(scrub_data(trace.model_dump(mode="json")))
    clean.canaries = canaries
    return clean


async def _close_conversation(
    agent: Agent, trace: Trace, timeout_s: float | None, own: _OwnLoop | None = None
) -> None:
    """Call the agent's ``close_conversation()`` hook, if it has one (errors are recorded); an
    async hook of an agent with its own loop runs there."""
    close = _hook(agent, "close_conversation")
    if not callable(close):
        return
    try:
        async with asyncio.timeout(timeout_s):
            # a sync hook runs on a worker thread, so one that blocks is still timed out
            result = (
                close()
                if is_async(close)
                else call_off_loop(close)
                if timeout_s is None
                else await _on_worker(close, "agentprop-close")
            )
            if inspect.isawaitable(result):
                await (
                    own.run(result) if own is not None and inspect.iscoroutine(result) else result
                )
    except TimeoutError:
        trace.errors.append(
            RunError(
                kind="timeout", message=f"close_conversation() did not finish within {timeout_s} s"
            )
        )
    except Exception as exc:
        trace.errors.append(_run_error(exc, None, prefix="close_conversation() raised "))
    except BaseException as exc:
        error = _agent_stop(exc, None, prefix="close_conversation(): ")
        if error is None:
            raise
        trace.errors.append(error)


async def _on_worker(fn: Callable[[], Any], name: str) -> Any:
    """``fn()`` on a daemon worker thread, awaited: its result or its exception. Cancelled
    (a timeout), the thread is abandoned as a timed-out turn's is."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def job() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(), None)
        except BaseException as exc:  # handed to the loop, which judges it
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop closed meanwhile: nobody waits any more
            pass

    _WORKERS.submit(job, name)
    return await done


def _agent_stop(exc: BaseException, turn_index: int | None, *, prefix: str = "") -> RunError | None:
    """The run error of a ``SystemExit`` or ``KeyboardInterrupt`` that the agent's own code
    raised (``sys.exit(5)``, ``raise KeyboardInterrupt``): an agent ends its run, never the
    process. ``None`` for what must go on up: a cancellation, or a real Ctrl-C
    (:func:`_real_interrupt`). Call it inside the ``except`` block (it keeps the traceback)."""
    if isinstance(exc, SystemExit):
        what = f"the agent called sys.exit({exc.code!r}) (SystemExit)"
    elif isinstance(exc, KeyboardInterrupt) and not _real_interrupt(exc):
        what = "the agent raised KeyboardInterrupt"
    else:
        return None
    return RunError(
        kind="agent_exception",
        message=scrub_text(
            f"{prefix}{what}: an agent must not end the process; the run ends "
            "here, as on an exception"
        ),
        turn_index=turn_index,
        traceback=scrub_text(traceback.format_exc()),
    )


def _real_interrupt(exc: BaseException) -> bool:
    """Whether a ``KeyboardInterrupt`` may be a real Ctrl-C: only the main thread receives
    signals, and under ``asyncio.run`` a Ctrl-C is raised by its SIGINT handler (the innermost
    frame); with Python's default handler in force it cannot be told apart, so it counts."""
    if threading.current_thread() is not threading.main_thread():
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None and tb.tb_frame.f_code.co_name == "_on_sigint":
        return True
    return signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _run_error(exc: Exception, turn_index: int | None, *, prefix: str = "") -> RunError:
    """The record of an exception that ended a run: an agent exception, or (for an
    :class:`~agentprop.errors.InfrastructureError`) the error's own kind, so the run is never
    judged as the agent's failure. Message and traceback are scrubbed of secrets."""
    kind = (
        exc.kind
        if isinstance(exc, InfrastructureError) and exc.kind in INFRASTRUCTURE_KINDS
        else "agent_exception"
    )
    return RunError(
        # one of INFRASTRUCTURE_KINDS (ErrorKinds) or agent_exception; `in` does not narrow a str
        kind=kind,  # type: ignore[arg-type]
        message=scrub_text(f"{prefix}{type(exc).__name__}: {exc}"),
        turn_index=turn_index,
        traceback=scrub_text(traceback.format_exc()),
    )


def run_conversation(
    spec: Spec,
    agent_factory: AgentFactory,
    messages: Sequence[str],
    world: World,
    **kwargs: Any,
) -> Trace:
    """Synchronous wrapper of :func:`arun_conversation` (safe inside a running event loop)."""
    return run_sync(arun_conversation(spec, agent_factory, messages, world, **kwargs))
