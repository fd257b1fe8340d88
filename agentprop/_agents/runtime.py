"""The runtime: run an agent over a conversation in a world and record the trace.

The agent protocol is small. An *agent factory* is called once per conversation and returns an
*agent*: a callable ``agent(message, ctx)`` (sync or ``async``), or an object with such a
``turn`` method. For each user message the agent calls tools through ``ctx.call(name, **args)``
and ends the turn with ``ctx.respond(**fields)``. The runtime

- records every tool call exactly once, in per-turn slices;
- validates ``respond`` against the response contract (an invalid call raises
  :class:`~agentprop.errors.ToolError` back into the agent, which may retry);
- enforces ``max_tool_calls_per_turn`` and refuses tools the spec does not declare;
- records agent exceptions and timeouts as errored runs; it never lets them crash the runner;
- gives the agent ``ctx.rng``, a random source seeded from ``(case, trial)``, so simulated
  agents are reproducible;
- calls the agent's ``close_conversation()`` (sync or ``async``), when it has one, once the
  conversation is over however it ended, so an agent holding a connection for the whole
  conversation (an MCP client, :mod:`agentprop.mcp`) can let it go; an exception there is
  recorded as an ``agent_exception`` of the run.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import queue
import random
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, Union

from agentprop._spec.response import validate_response
from agentprop._spec.model import Spec
from agentprop._util.aio import run_sync
from agentprop._util.scrub import scrub_text
from agentprop._scenario.trace import INFRASTRUCTURE_KINDS, RunError, ToolCall, Trace, Turn, Usage
from agentprop._scenario.world import World, copy_json, stable_seed
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


class TurnContext:
    """What an agent sees during one turn: tools, the response channel, context and a seeded
    random source."""

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
        self._closed = False
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
        if self._closed:
            raise ToolError("protocol", "this turn is over; tool calls after the turn ended are refused")
        if name == "respond":
            return self.respond(**args)
        step = len(self._turn.tool_calls)
        record = ToolCall(name=name, args=copy_json(args), turn_index=self._turn.index, step=step)
        self._turn.tool_calls.append(record)
        if self._responded:
            record.error, record.error_kind = "tool call after respond", "protocol"
            self._turn.errors.append(
                RunError(kind="protocol", message=f"{name} was called after respond; respond must be the final action", turn_index=self._turn.index)
            )
            raise ToolError("protocol", "respond was already called this turn; it must be the final action")
        if name not in self.spec.tools_by_name:
            record.error, record.error_kind = f"unknown tool {name!r}", "unknown_tool"
            self._turn.errors.append(
                RunError(kind="unknown_tool", message=f"the agent called {name!r}, which spec {self.spec.spec_id} does not declare", turn_index=self._turn.index)
            )
            raise ToolError("unknown_tool", f"no tool named {name!r}; available: {', '.join(self.tool_names)}")
        self._non_respond_calls += 1
        limit = self.spec.max_tool_calls_per_turn
        if limit is not None and self._non_respond_calls > limit:
            record.error, record.error_kind = f"more than {limit} tool calls this turn", "limit_exceeded"
            self._turn.errors.append(
                RunError(kind="limit_exceeded", message=f"call {self._non_respond_calls} ({name}) exceeds max_tool_calls_per_turn={limit}", turn_index=self._turn.index)
            )
            raise ToolError("limit_exceeded", f"max_tool_calls_per_turn={limit} reached; respond now")
        try:
            result = self.world.call(name, args)
        except ToolError as exc:
            record.error, record.error_kind = exc.message, exc.kind
            raise
        record.result = copy_json(result)
        return result

    def respond(self, /, **fields: Any) -> dict[str, Any]:
        """End the turn with the structured response. Raises :class:`ToolError` if it does not
        satisfy the response contract (the agent may correct it and call again)."""
        if self._closed:
            raise ToolError("protocol", "this turn is over")
        if self._responded:
            self._turn.errors.append(
                RunError(kind="respond_twice", message="respond was called more than once in a turn", turn_index=self._turn.index)
            )
            raise ToolError("respond_twice", "respond was already called this turn")
        valid, problem = validate_response(self.spec, dict(fields))
        if valid is None:
            self._invalid_response = problem
            self._turn.raw_response = copy_json(fields)
            raise ToolError("invalid_respond", f"respond does not satisfy the response contract: {problem}")
        self._turn.response = valid
        self._turn.raw_response = copy_json(fields)
        self._responded = True
        return {"acknowledged": True}

    def say(self, text: str) -> None:
        """Record free text shown to the user outside ``respond`` (checked for leaks too)."""
        self._turn.text = (self._turn.text + "\n" + text) if self._turn.text else text

    def add_usage(
        self, *, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float | None = 0.0, model_calls: int = 1
    ) -> None:
        """Record model usage for this turn (API-backed agents). ``cost_usd=None``: the calls'
        cost is unknown (a model without a price); they are counted in ``unpriced_calls``."""
        usage = self._turn.usage
        if cost_usd is None:
            self._turn.usage = usage + Usage(
                input_tokens=input_tokens, output_tokens=output_tokens, model_calls=model_calls, unpriced_calls=model_calls
            )
            return
        if type(input_tokens) is int and type(output_tokens) is int and type(model_calls) is int and type(cost_usd) in (float, int) and not usage.unpriced_calls:
            # what ``usage + Usage(...)`` gives, validating one model instead of two
            self._turn.usage = Usage(
                input_tokens=usage.input_tokens + input_tokens,
                output_tokens=usage.output_tokens + output_tokens,
                cost_usd=usage.cost_usd + float(cost_usd),
                model_calls=usage.model_calls + model_calls,
            )
            return
        self._turn.usage = usage + Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd, model_calls=model_calls
        )


class TurnAgent(Protocol):
    def turn(self, message: str, ctx: TurnContext) -> None | Awaitable[None]: ...


Agent = Union[Callable[[str, TurnContext], Union[None, Awaitable[None]]], TurnAgent]
AgentFactory = Callable[[], Agent]


def _turn_callable(agent: Agent) -> Callable[[str, TurnContext], Any]:
    fn = getattr(agent, "turn", None)
    if callable(fn):
        return fn  # type: ignore[no-any-return]
    if callable(agent):
        return agent
    raise TypeError(
        f"an agent must be callable as agent(message, ctx) or have a turn(message, ctx) method; got {type(agent).__name__}"
    )


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


class _DaemonWorkers:
    """Daemon threads that run sync agent turns, reused from turn to turn.

    A turn goes to an idle worker, or to a new daemon thread when none is idle. A worker whose
    turn outlived its timeout is simply not idle: nothing ever waits for it, so it holds up
    neither other turns nor interpreter shutdown (it is a daemon thread), exactly like the
    thread-per-turn it replaces. Each turn runs in a fresh, empty ``contextvars`` context, as it
    would on a new thread. Idle workers beyond ``max_idle``, or idle longer than
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


async def _in_daemon_thread(fn: Callable[[str, TurnContext], Any], message: str, ctx: TurnContext) -> Any:
    """Run a sync agent turn on a daemon thread (see :class:`_DaemonWorkers`). Unlike the
    default executor, a thread that outlives its timeout does not hold up ``asyncio.run`` at
    shutdown; it finds its context closed (every further tool call is refused) and is
    abandoned."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value = fn(message, ctx)
        except BaseException as exc:  # delivered to the awaiting coroutine
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(settle, None, exc)
                except RuntimeError:  # the loop closed meanwhile
                    pass
            return
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(settle, value, None)
            except RuntimeError:
                pass

    _WORKERS.submit(target, f"agentprop-agent-{ctx.case_id}-{ctx.trial}")
    return await future


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


async def _run_turn(fn: Callable[[str, TurnContext], Any], message: str, ctx: TurnContext, timeout_s: float | None) -> None:
    # ``asyncio.timeout`` rather than ``wait_for``: the turn runs in the runner's own task, as
    # ``wait_for`` itself does from Python 3.12 on, instead of a new task per turn (a timeout
    # still raises TimeoutError here after cancelling the turn).
    if _is_async(fn):
        await _within(fn(message, ctx), timeout_s)
        return
    if timeout_s is None:
        result = fn(message, ctx)
    else:
        async with asyncio.timeout(timeout_s):
            result = await _in_daemon_thread(fn, message, ctx)
    if inspect.isawaitable(result):
        async with asyncio.timeout(timeout_s):
            await result


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
    """Run one conversation and return its trace (never raises for agent faults)."""
    trace = Trace(
        case_id=case_id,
        trial=trial,
        agent=agent_name,
        spec_id=spec.spec_id,
        world_seed=world.seed,
        canaries=dict(world.canaries),
    )
    started = time.perf_counter()
    rng = _ConversationRandom(case_id, trial)
    memory: dict[str, Any] = {}
    try:
        agent = agent_factory()
        fn = _turn_callable(agent)
    except Exception as exc:  # the factory itself is agent code
        trace.errors.append(_run_error(exc, None, prefix="agent factory raised "))
        trace.duration_s = time.perf_counter() - started
        return trace
    for index, message in enumerate(messages):
        turn = Turn(index=index, user_message=message)
        trace.turns.append(turn)
        ctx = TurnContext(spec=spec, world=world, turn=turn, history=trace.turns[:-1], context=dict(context or {}), rng=rng, memory=memory, case_id=case_id, trial=trial)
        t0 = time.perf_counter()
        stop = False
        if turn_timeout_s is not None:
            ctx.deadline = asyncio.get_running_loop().time() + turn_timeout_s
        try:
            await _run_turn(fn, message, ctx, turn_timeout_s)
        except asyncio.TimeoutError as exc:
            # a plain timeout, or a model call that would have waited past the deadline (it
            # says what the server asked for): either way the turn's timeout is what ended it
            why = f": {exc}" if str(exc) else ""
            turn.errors.append(RunError(kind="timeout", message=f"the agent did not finish the turn within {turn_timeout_s} s{why}", turn_index=index))
            stop = True
        except Exception as exc:
            turn.errors.append(_run_error(exc, index))
            stop = True
        finally:
            ctx._closed = True
            turn.duration_s = time.perf_counter() - t0
        if not stop and not ctx.responded:
            if ctx._invalid_response is not None:
                turn.errors.append(RunError(kind="invalid_respond", message=ctx._invalid_response, turn_index=index))
            else:
                turn.errors.append(RunError(kind="no_respond", message="the turn ended without a respond call", turn_index=index))
        if stop:
            break
    await _close_conversation(agent, trace, turn_timeout_s)
    trace.duration_s = time.perf_counter() - started
    return trace


async def _close_conversation(agent: Agent, trace: Trace, timeout_s: float | None) -> None:
    """Call the agent's ``close_conversation()`` hook, if it has one (errors are recorded)."""
    close = getattr(agent, "close_conversation", None)
    if not callable(close):
        return
    try:
        async with asyncio.timeout(timeout_s):
            result = close()
            if inspect.isawaitable(result):
                await result
    except asyncio.TimeoutError:
        trace.errors.append(RunError(kind="timeout", message=f"close_conversation() did not finish within {timeout_s} s"))
    except Exception as exc:
        trace.errors.append(
            RunError(kind="agent_exception", message=f"close_conversation() raised {type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        )
def _run_error(exc: Exception, turn_index: int | None, *, prefix: str = "") -> RunError:
    """The record of an exception that ended a run: an agent exception, or (for an
    :class:`~agentprop.errors.InfrastructureError`) the error's own kind, so the run is never
    judged as the agent's failure. Message and traceback are scrubbed of secrets."""
    kind = exc.kind if isinstance(exc, InfrastructureError) and exc.kind in INFRASTRUCTURE_KINDS else "agent_exception"
    return RunError(
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
