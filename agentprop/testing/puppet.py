"""Play a plain-Python agent's turn one action at a time, to drive another channel with it.

:class:`TurnPuppet` runs one turn on a daemon thread against a context whose ``call`` and
``respond`` do not act: each becomes an :class:`Action` for the async caller, who carries it out
elsewhere (an MCP client, a framework's scripted model) and answers with the result or a
:class:`~agentprop.ToolError`. The same decisions then reach the world through that channel.
"""

from __future__ import annotations

import asyncio
import queue
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentprop.errors import ToolError


@dataclass(frozen=True)
class Call:
    """The agent called a tool."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Respond:
    """The agent called ``respond``."""

    fields: dict[str, Any]


@dataclass(frozen=True)
class Finished:
    """The turn function returned (``error`` is what it raised, if anything)."""

    error: BaseException | None = None


Action = Call | Respond | Finished


@dataclass
class PlayedCall:
    """A call the puppeted agent made this turn (what ``ctx.calls_this_turn`` lists)."""

    name: str
    args: dict[str, Any]
    result: Any = None
    error: str | None = None
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Abandoned(BaseException):
    """Raised inside the agent's thread when the caller gives the turn up."""


_ABANDON = object()


@dataclass
class PuppetContext:
    """What the puppeted agent sees: the parts of :class:`~agentprop.TurnContext` a simulated
    agent uses, with ``call`` and ``respond`` forwarded to the puppet's caller."""

    user_message: str
    turn_index: int
    spec: Any
    """The agent's :class:`~agentprop.spec.Spec` (``ctx.spec``), if it reads one."""
    context: Mapping[str, Any]
    rng: random.Random
    memory: dict[str, Any]
    _puppet: TurnPuppet = field(repr=False)
    _calls: list[PlayedCall] = field(default_factory=list)
    _responded: bool = False

    @property
    def responded(self) -> bool:
        return self._responded

    @property
    def calls_this_turn(self) -> list[PlayedCall]:
        return list(self._calls)

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.spec.action_tools] if self.spec is not None else []

    def call(self, name: str, /, **args: Any) -> Any:
        if name == "respond":
            return self.respond(**args)
        record = PlayedCall(name=name, args=dict(args))
        self._calls.append(record)
        try:
            result = self._puppet._ask(Call(name, dict(args)))
        except ToolError as exc:
            record.error, record.error_kind = exc.message, exc.kind
            raise
        record.result = result
        return result

    def respond(self, **fields: Any) -> Any:
        result = self._puppet._ask(Respond(dict(fields)))
        self._responded = True
        return result

    def say(self, text: str) -> None:
        """Free text is not carried over a channel; it is dropped."""

    def add_usage(self, **_: Any) -> None:
        """A puppeted agent makes no model calls of its own."""


class TurnPuppet:
    """One turn of ``turn_fn(message, ctx)`` played on a daemon thread, an action at a time.

    ``next_action()`` waits for the agent's next :class:`Call` or :class:`Respond` (or
    :class:`Finished` when the turn function returns); every call and respond must be answered
    with :meth:`answer` before the agent goes on. :meth:`abandon` ends a turn the caller gives
    up on (the agent's thread unwinds with an exception it does not see as a tool error).
    ``memory`` is shared across the turns of a conversation when the caller passes the same
    dict each turn.
    """

    def __init__(
        self,
        turn_fn: Callable[[str, Any], Any],
        message: str,
        *,
        spec: Any = None,
        context: Mapping[str, Any] | None = None,
        rng: random.Random | None = None,
        turn_index: int = 0,
        memory: dict[str, Any] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._actions: asyncio.Queue[Action] = asyncio.Queue()
        self._answers: queue.SimpleQueue[tuple[Any, ToolError | None] | object] = (
            queue.SimpleQueue()
        )
        self._waiting = False
        self._done = False
        self.ctx = PuppetContext(
            user_message=message,
            turn_index=turn_index,
            spec=spec,
            context=dict(context or {}),
            rng=rng if rng is not None else random.Random(0),
            memory=memory if memory is not None else {},
            _puppet=self,
        )
        self._thread = threading.Thread(
            target=self._play, args=(turn_fn, message), name="agentprop-puppet", daemon=True
        )
        self._thread.start()

    def _post(self, action: Action) -> None:
        try:
            self._loop.call_soon_threadsafe(self._actions.put_nowait, action)
        except RuntimeError:  # the caller's loop is gone: nobody will answer
            raise _Abandoned() from None

    def _play(self, turn_fn: Callable[[str, Any], Any], message: str) -> None:
        error: BaseException | None = None
        try:
            turn_fn(message, self.ctx)
        except _Abandoned:
            return
        except BaseException as exc:  # handed to the caller, who decides what it means
            error = exc
        try:
            self._post(Finished(error))
        except _Abandoned:
            pass

    def _ask(self, action: Call | Respond) -> Any:
        self._post(action)
        answer = self._answers.get()
        if answer is _ABANDON or not isinstance(answer, tuple):
            raise _Abandoned()
        value, error = answer
        if error is not None:
            raise error
        return value

    async def next_action(self) -> Action:
        """The agent's next action (a call, a respond, or the end of its turn)."""
        if self._done:
            return Finished()
        action = await self._actions.get()
        if isinstance(action, Finished):
            self._done = True
        return action

    def answer(self, value: Any = None, *, error: ToolError | None = None) -> None:
        """Answer the pending call or respond: its result, or the tool error it raises."""
        self._answers.put((value, error))

    def abandon(self) -> None:
        """Give the turn up: the agent's thread unwinds (daemon; nothing waits for it)."""
        self._done = True
        self._answers.put(_ABANDON)


__all__ = ["Action", "Call", "Finished", "PlayedCall", "PuppetContext", "Respond", "TurnPuppet"]
