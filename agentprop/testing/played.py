"""A loopback OpenAI-compatible model whose decisions are a plain-Python agent's, per conversation.

:class:`PlayedOpenAI` is a loopback server speaking the API as
:class:`~agentprop.testing.OpenAIServer` does; each :meth:`~PlayedOpenAI.player` is one
conversation, reached by its own model name, and every request is answered by the played
agent's next action (:class:`~agentprop.testing.puppet.TurnPuppet`).
The played agent draws from the turn's random source, so a run through a framework records what
the same agent records in-process. Used to test framework adapters end to end.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import weakref
from collections.abc import Coroutine, Mapping
from typing import Any

from agentprop.errors import InvalidArgument, ToolError
from agentprop.testing.messages_server import Reply, text_reply, tool_use_reply
from agentprop.testing.openai_server import OpenAIServer
from agentprop.testing.puppet import Call, Finished, Respond, TurnPuppet

__all__ = ["PlayedOpenAI", "Player", "read_tool_result"]

_WAIT_S = 60.0
"""How long the server thread waits for the played agent's next action before giving up."""


def read_tool_result(text: str) -> tuple[Any, ToolError | None]:
    """A tool result as the adapters hand it to a model: JSON for an output, ``KIND: message``
    for a tool error (bare, or as PydanticAI 2 wraps a failed call: ``{"error": "KIND: ..."}``)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None, _tool_error(text)
    if isinstance(value, dict) and list(value) == ["error"] and isinstance(value["error"], str):
        return None, _tool_error(value["error"])
    return value, None


def _tool_error(text: str) -> ToolError:
    kind, sep, message = text.partition(": ")
    if sep and kind and " " not in kind:
        return ToolError(kind, message)
    return ToolError("tool_error", text)


def _text(content: Any) -> str:
    """The text of a message's content: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def _read_request(request: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """``(user message, [])`` when the request starts a turn, ``(None, results)`` when it
    carries the results of the model's last tool calls."""
    if OpenAIServer.api_of(request) == "responses":
        items = request.get("input")
        if isinstance(items, str):
            return items, []
        entries = [i for i in items or [] if isinstance(i, Mapping)]
        result_type, result_field = "function_call_output", "output"
    else:
        entries = [m for m in request.get("messages") or [] if isinstance(m, Mapping)]
        result_type, result_field = "tool", "content"
    results: list[str] = []
    for entry in reversed(entries):
        if result_type not in (entry.get("type"), entry.get("role")):
            break
        results.append(_text(entry.get(result_field)))
    if results:
        return None, results[::-1]
    if entries and entries[-1].get("role") == "user":
        return _text(entries[-1].get("content")), []
    raise InvalidArgument(
        "PlayedOpenAI: the request ends neither with a user message nor with tool results"
    )


def _tool_names(request: Mapping[str, Any]) -> list[str]:
    names = []
    for tool in request.get("tools") or []:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
            if isinstance(name, str):
                names.append(name)
    return names


def _respond_tool(request: Mapping[str, Any], spec: Any) -> str:
    """The tool a framework offers for the final answer: ``respond`` where the adapter offers
    it, else the one tool that is not one of the spec's actions (PydanticAI's output tool)."""
    offered = _tool_names(request)
    if "respond" in offered or not offered:
        return "respond"
    actions = {t.name for t in spec.action_tools}
    others = [name for name in offered if name not in actions]
    if len(others) != 1:
        raise InvalidArgument(
            f"PlayedOpenAI: cannot tell which offered tool takes the final answer among {others}: "
            "offer a tool named 'respond', or exactly one tool besides the spec's actions"
        )
    return others[0]


class Player:
    """One conversation of a played agent, reached through :attr:`model`."""

    def __init__(self, agent: Any, *, spec: Any, model: str) -> None:
        self.agent = agent
        self.spec = spec
        self.model = model
        self._ctx: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._puppet: TurnPuppet | None = None
        self._memory: dict[str, Any] = {}

    def begin(self, ctx: Any) -> None:
        """Start a turn (call it from the agent's async ``turn``, with its ``ctx``)."""
        self._ctx = ctx
        self._loop = asyncio.get_running_loop()

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if self._loop is None:
            coro.close()
            raise InvalidArgument(
                f"model {self.model!r} was asked before its turn began: call "
                "player.begin(ctx) in the agent's turn"
            )
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=_WAIT_S)

    async def _start(self, message: str) -> TurnPuppet:
        ctx = self._ctx
        return TurnPuppet(
            self.agent.turn,
            message,
            spec=self.spec,
            context=ctx.context,
            rng=ctx.rng,
            turn_index=ctx.turn_index,
            memory=getattr(ctx, "memory", self._memory),
        )

    def reply(self, request: Mapping[str, Any]) -> Reply:
        """The played agent's next action as the model's reply to ``request``."""
        message, results = _read_request(request)
        if message is not None or self._puppet is None:
            if self._puppet is not None:
                self._puppet.abandon()
            self._puppet = self._run(self._start(message or ""))
        else:
            for text in results:
                value, error = read_tool_result(text)
                self._puppet.answer(value, error=error)
        puppet = self._puppet
        assert puppet is not None
        action = self._run(puppet.next_action())
        if isinstance(action, Call):
            return tool_use_reply(action.name, action.args)
        if isinstance(action, Respond):
            return tool_use_reply(_respond_tool(request, self.spec), action.fields)
        assert isinstance(action, Finished)
        self._puppet = None
        if action.error is not None:
            raise action.error
        return text_reply("")


class PlayedOpenAI:
    """A loopback OpenAI-compatible server whose models are played agents (see the module).

    ``played.player(agent, spec=spec)`` registers one conversation and returns its
    :class:`Player`; give the framework ``base_url=played.base_url`` and ``model=player.model``.
    A conversation is forgotten when its player is no longer referenced. The server
    starts on first use and runs on daemon threads until :meth:`close`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._players: weakref.WeakValueDictionary[str, Player] = weakref.WeakValueDictionary()
        self._ids = itertools.count()
        self._server: OpenAIServer | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def base_url(self) -> str:
        with self._lock:
            if self._server is None:
                self._server = OpenAIServer(handler=self._handle)
                self._server.start()
            return self._server.base_url

    def http_client(self) -> Any:
        """An ``openai.DefaultAsyncHttpxClient`` shared by the conversations of the running event
        loop (a fresh one outside a loop): an HTTP client is bound to the loop it first ran on,
        and making one per conversation costs a TLS context each."""
        from openai import DefaultAsyncHttpxClient

        loop = asyncio._get_running_loop()
        if loop is None:
            return DefaultAsyncHttpxClient()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = DefaultAsyncHttpxClient()
            return client

    def player(self, agent: Any, *, spec: Any) -> Player:
        with self._lock:
            player = Player(agent, spec=spec, model=f"played-{next(self._ids)}")
            self._players[player.model] = player
        return player

    def _handle(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            player = self._players.get(str(request.get("model")))
        if player is None:
            raise InvalidArgument(
                f"PlayedOpenAI: no conversation plays model {request.get('model')!r}"
            )
        return player.reply(request)

    def close(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop()
