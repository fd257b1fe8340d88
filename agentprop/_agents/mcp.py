"""One trial's world as an MCP server (the official ``mcp`` SDK), and agents that are MCP clients.

One session is one trial: a fresh world, the case's user messages, the bindings' context, run
by the runtime itself, so every tool call is recorded by the same code as for any agent. The
prompt ``user_message`` starts a turn, the tool ``respond`` ends it; a tool call before the
first message is refused (:data:`UNREAD_CALL`). :class:`McpAgent` is the agent side, connected
in-process; serving a case to agents that connect on their own is :mod:`agentprop._pipeline.serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import random
import secrets
import socket
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from agentprop._agents.mcp_compat import (
    Client,
    Handlers,
    get,
    http_app,
    mcp_error,
    new_server,
    types,
)
from agentprop._agents.runtime import TurnContext
from agentprop._spec.model import Spec
from agentprop._spec.response import respond_tool_schema
from agentprop._version import __version__
from agentprop.errors import McpSessionEnded, ToolError

T = TypeVar("T")

USER_MESSAGE_PROMPT = "user_message"
CONTEXT_URI = "agentprop://context"
SESSION_ENDED = "the MCP session ended"
"""How the error of a trial whose client closed its session mid-conversation begins."""


class TrialBridge:
    """The meeting point of one trial's two sides.

    The runtime sees an agent (:meth:`turn`, :meth:`close_conversation`): each turn publishes
    its message and :class:`~agentprop.TurnContext`, then waits until the MCP client ends it.
    The MCP handlers see the current turn (:meth:`context_for_call`) and the next user message
    (:meth:`next_message`, which ends the turn whose message was handed out last).
    ``final_turn``: the index of the last turn, when known; its valid ``respond`` ends the
    conversation (a served case), so a client that answers and then idles does not time out.
    """

    def __init__(self, *, final_turn: int | None = None) -> None:
        self._final_turn = final_turn
        self._cond: asyncio.Condition | None = None
        self._ctx: TurnContext | None = None
        self._message = ""
        self._index = -1
        self._fetched = -1
        self._turn_over = False
        self._closed = False
        self._close_error: BaseException | None = None
        self._finished = False
        self._touched = False
        self.unread_calls = 0
        """Tool calls refused because the session had not read a user message (see
        :data:`UNREAD_CALL`): a sign of one conversation split over several sessions."""

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    # ------------------------------------------------------------- runtime side

    async def turn(self, message: str, ctx: TurnContext) -> None:
        cond = self._condition()
        async with cond:
            if self._closed:
                raise self._ended(f"{SESSION_ENDED} before turn {ctx.turn_index + 1} began")
            self._ctx, self._message, self._index, self._turn_over = (
                ctx,
                message,
                ctx.turn_index,
                False,
            )
            cond.notify_all()
            await cond.wait_for(lambda: self._turn_over or self._closed)
            if not self._turn_over and not ctx.responded:
                raise self._ended(
                    f"{SESSION_ENDED} during turn {ctx.turn_index + 1}, before respond"
                )

    def _ended(self, what: str) -> BaseException:
        if self._close_error is not None:
            return self._close_error
        return McpSessionEnded(what)

    async def close_conversation(self) -> None:
        """The runtime is done with the conversation: tell the client there is nothing more."""
        cond = self._condition()
        async with cond:
            self._finished = True
            cond.notify_all()

    # ------------------------------------------------------------- client side

    async def close(self, error: BaseException | None = None) -> None:
        """The client went away (``error``: the exception its agent code raised)."""
        cond = self._condition()
        async with cond:
            self._closed = True
            if error is not None and self._close_error is None:
                self._close_error = error
            cond.notify_all()

    @property
    def engaged(self) -> bool:
        """Whether the client took part: read a user message or called a tool. A session that
        ended before either (a client that never connected, or only listed the tools) is no
        trial of the agent."""
        return self._fetched >= 0 or self._touched

    @property
    def read_a_message(self) -> bool:
        """Whether this session has read a user message (the ``user_message`` prompt)."""
        return self._fetched >= 0

    @property
    def over(self) -> bool:
        return self._finished or self._closed

    async def context_for_call(self) -> TurnContext | None:
        """The open turn's context (waiting for the next turn to open), or ``None`` when the
        conversation is over."""
        cond = self._condition()
        async with cond:
            await cond.wait_for(
                lambda: self.over or (self._ctx is not None and not self._turn_over)
            )
            if self.over:
                return None
            self._touched = True
            return self._ctx

    async def next_message(self) -> tuple[int, str] | None:
        """End the turn whose message was handed out last, then hand out the next turn's
        message: ``(turn index, message)``, or ``None`` when the conversation is over."""
        cond = self._condition()
        async with cond:
            if self._ctx is not None and not self._turn_over and self._fetched == self._index:
                self._turn_over = True
                cond.notify_all()
            await cond.wait_for(
                lambda: (
                    self.over
                    or (
                        self._ctx is not None
                        and not self._turn_over
                        and self._index > self._fetched
                    )
                )
            )
            if self.over:
                return None
            self._fetched = self._index
            return self._index, self._message

    async def responded(self, ctx: TurnContext) -> bool:
        """After a valid ``respond``: end the conversation if this was the final turn."""
        if self._final_turn is None or ctx.turn_index != self._final_turn:
            return False
        cond = self._condition()
        async with cond:
            self._turn_over = True
            cond.notify_all()
        return True


# ----------------------------------------------------------------- the server


def _tool_list(spec: Spec) -> list[Any]:
    tools = [
        types.Tool(
            name=t.name,
            description=t.description or None,
            inputSchema=dict(t.input_schema or {"type": "object"}),
        )
        for t in spec.action_tools
    ]
    respond = spec.tools_by_name.get("respond")
    tools.append(
        types.Tool(
            name="respond",
            description=(respond.description if respond is not None and respond.description else "")
            + (" " if respond is not None and respond.description else "")
            + "End your work on this turn with the structured response (the response contract); "
            "an invalid response is an error you may correct and send again.",
            inputSchema=respond_tool_schema(spec),
        )
    )
    return tools


UNREAD_CALL = (
    "this MCP session called a tool without reading the user's message (the `user_message` "
    "prompt). Each session is one conversation of the case: read the message and make every tool "
    "call of the conversation in that same session. A client that opens a session per tool call "
    "(langchain-mcp-adapters' MultiServerMCPClient.get_tools() does) splits one conversation over "
    "many sessions: open one with `async with client.session(NAME) as session` and load the tools "
    "from it (`load_mcp_tools(session)`)"
)
"""The error of a tool call made before the session read a user message; such a session is no
trial (a conversation split over sessions would otherwise count as several, none complete)."""


def _error_result(kind: str, message: str) -> Any:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{kind}: {message}")],
        structuredContent={"error": {"kind": kind, "message": message}},
        isError=True,
    )


def _ok_result(value: Any) -> Any:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))],
        structuredContent=value if isinstance(value, dict) else None,
    )


def instructions_for(spec: Spec, context: Mapping[str, Any]) -> str:
    ctx = ", ".join(f"{k}={v}" for k, v in context.items()) or "none"
    return (
        f"agentprop test world for spec {spec.spec_id} ({spec.title}). Each session is one "
        f"conversation: get the user's next message with the `{USER_MESSAGE_PROMPT}` prompt "
        "(asking for it ends the previous turn; no message means the conversation is over), use "
        "the tools, and end each turn with the `respond` tool. Runtime context "
        f"({CONTEXT_URI}): {ctx}."
    )


BridgeFor = Callable[[Any], Awaitable[TrialBridge]]
"""How a request finds its trial: from the request context (per session)."""


def build_server(
    spec: Spec, bridge_for: BridgeFor, *, context: Mapping[str, Any], sessions: bool = False
) -> Any:
    """The MCP server of a spec's world, its requests routed to trials by ``bridge_for``.

    ``sessions``: the server is shared by many sessions (streamable HTTP), so it advertises
    only the handshake revisions of MCP, whose sessions tell trials apart."""
    tools = _tool_list(spec)
    context_json = json.dumps(dict(context), ensure_ascii=False)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        bridge = await bridge_for(ctx)
        if not bridge.read_a_message and not bridge.over:
            bridge.unread_calls += 1
            return _error_result("protocol", UNREAD_CALL)
        turn = await bridge.context_for_call()
        if turn is None:
            return _error_result(
                "protocol", "the conversation is over; this session takes no more tool calls"
            )
        args = dict(params.arguments or {})
        try:
            if params.name == "respond":
                ack = turn.respond(**args)
                if await bridge.responded(turn):
                    ack = {**ack, "conversation_over": True}
                return _ok_result(ack)
            return _ok_result(turn.call(params.name, **args))
        except ToolError as exc:
            return _error_result(exc.kind, exc.message)

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=USER_MESSAGE_PROMPT,
                    description="The user's message for the next turn; asking for it ends the "
                    "previous turn. No message: the conversation is over.",
                )
            ]
        )

    async def get_prompt(ctx: Any, params: Any) -> Any:
        if params.name != USER_MESSAGE_PROMPT:
            raise mcp_error(
                types.INVALID_PARAMS,
                f"no prompt {params.name!r}; this server has `{USER_MESSAGE_PROMPT}`",
            )
        bridge = await bridge_for(ctx)
        got = await bridge.next_message()
        if got is None:
            return types.GetPromptResult(description="the conversation is over", messages=[])
        index, message = got
        return types.GetPromptResult(
            description=f"turn {index}",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=message)
                )
            ],
        )

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name="context",
                    uri=CONTEXT_URI,
                    description="the runtime context of the conversation",
                    mimeType="application/json",
                )
            ]
        )

    async def read_resource(ctx: Any, params: Any) -> Any:
        if str(params.uri) != CONTEXT_URI:
            raise mcp_error(
                types.INVALID_PARAMS, f"no resource {params.uri}; this server has {CONTEXT_URI}"
            )
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=CONTEXT_URI, mimeType="application/json", text=context_json
                )
            ]
        )

    handlers = Handlers(
        list_tools, call_tool, list_prompts, get_prompt, list_resources, read_resource
    )
    # sessions: no sessionless revision, so clients use the initialize handshake and its sessions
    return new_server(
        f"agentprop-{spec.spec_id}",
        version=__version__,
        instructions=instructions_for(spec, context),
        handlers=handlers,
        sessions_only=sessions,
    )


def trial_server(spec: Spec, bridge: TrialBridge, *, context: Mapping[str, Any]) -> Any:
    """A server for exactly one trial (stdio, in-process): every connection drives ``bridge``."""

    async def the_bridge(ctx: Any) -> TrialBridge:
        return bridge

    return build_server(spec, the_bridge, context=context)


# ----------------------------------------------------------------- the client side


class McpConversation:
    """The client side of the turn protocol, over an SDK client (:func:`~agentprop.mcp.Client`).

    ``async for message in conversation`` yields each user message (asking for the next one
    ends the turn before); :meth:`call` and :meth:`respond` call tools and turn tool errors
    into :class:`~agentprop.ToolError`; :meth:`play` plays a plain-Python agent's turn
    (``turn(message, ctx)``) over the session. ``rng``: the random source a simulated agent
    should draw from (under :class:`McpAgent`, the runtime's, seeded from case and trial).
    """

    def __init__(self, client: Any, *, rng: random.Random | None = None) -> None:
        self.client = client
        self.rng = rng if rng is not None else random.Random(0)
        self.memory: dict[str, Any] = {}
        self.turn_index = -1
        self._context: dict[str, Any] | None = None

    async def next_message(self) -> str | None:
        """The next user message (ending the turn before), or ``None`` when it is over."""
        result = await self.client.get_prompt(USER_MESSAGE_PROMPT)
        if not result.messages:
            return None
        self.turn_index += 1
        content = result.messages[0].content
        return content.text if isinstance(content, types.TextContent) else str(content)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[str]:
        while (message := await self.next_message()) is not None:
            yield message

    async def context(self) -> dict[str, Any]:
        """The runtime context (``agentprop://context``)."""
        if self._context is None:
            result = await self.client.read_resource(CONTEXT_URI)
            first = result.contents[0]
            self._context = (
                json.loads(first.text) if isinstance(first, types.TextResourceContents) else {}
            )
        return dict(self._context)

    async def call(self, name: str, /, **args: Any) -> Any:
        """Call a tool; its output, or :class:`~agentprop.ToolError` when it failed."""
        result = await self.client.call_tool(name, args)
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        if get(result, "is_error"):
            structured = get(result, "structured_content")
            err = structured.get("error") if isinstance(structured, dict) else None
            if isinstance(err, dict) and "kind" in err:
                raise ToolError(str(err["kind"]), str(err.get("message", "")))
            kind, _, message = text.partition(": ")
            raise ToolError(kind if message else "tool_error", message or text)
        try:
            return json.loads(text)
        except ValueError:
            return text

    async def respond(self, **fields: Any) -> Any:
        """End the turn's work with the structured response (a :class:`~agentprop.ToolError`
        if it breaks the response contract)."""
        return await self.call("respond", **fields)

    async def play(
        self, turn_fn: Callable[[str, Any], Any], message: str, *, spec: Spec | None = None
    ) -> None:
        """Play ``turn_fn(message, ctx)``, a plain-Python agent's turn, over this session: its
        ``ctx.call`` and ``ctx.respond`` become MCP tool calls (see
        :class:`agentprop.testing.puppet.TurnPuppet`). An exception of the agent is raised."""
        from agentprop.testing.puppet import Call, Finished, Respond, TurnPuppet

        puppet = TurnPuppet(
            turn_fn,
            message,
            spec=spec,
            context=await self.context(),
            rng=self.rng,
            turn_index=self.turn_index,
            memory=self.memory,
        )
        try:
            while True:
                action = await puppet.next_action()
                if isinstance(action, Finished):
                    if action.error is not None:
                        raise action.error
                    return
                try:
                    if isinstance(action, Call):
                        puppet.answer(await self.call(action.name, **action.args))
                    elif isinstance(action, Respond):
                        puppet.answer(await self.respond(**action.fields))
                except ToolError as exc:
                    puppet.answer(error=exc)
        except BaseException:
            puppet.abandon()
            raise


class McpAgent(ABC):
    """Base class of an agent that reaches its world over MCP, run by agentprop in-process.

    Subclass it and write :meth:`converse`; agentprop makes one instance per conversation (pass
    the class as the agent: ``--agent my_module:MyMcpAgent``), serves that trial's world over
    MCP in the same process, and hands your code an SDK client connected to it (``mcp.Client`` on
    mcp 2.x, a ``ClientSession`` on 1.x; see :func:`agentprop.mcp.Client`)::

        class MyAgent(McpAgent):
            async def converse(self, client, conversation):
                tools = (await client.list_tools()).tools
                async for message in conversation:
                    ...  # call tools with client.call_tool or conversation.call
                    await conversation.respond(decision=..., ...)

    The trial is recorded by the runtime and decided like every other run; an exception of
    :meth:`converse` is the run's ``agent_exception``. ``conversation.rng`` is the runtime's
    random source for this case and trial, so a simulated agent is reproducible.
    """

    close_timeout_s: float = 10.0

    def __init__(self) -> None:
        self._bridge: TrialBridge | None = None
        self._client_task: asyncio.Task[None] | None = None

    @abstractmethod
    async def converse(self, client: Any, conversation: McpConversation) -> None:
        """Your agent: take the turns' messages from ``conversation`` and act through ``client``
        (the tools, ``respond``) until ``conversation`` has no more (write it in your subclass)."""

    async def turn(self, message: str, ctx: TurnContext) -> None:
        bridge = getattr(self, "_bridge", None)
        if bridge is None:
            bridge = self._bridge = TrialBridge()
            server = trial_server(ctx.spec, bridge, context=ctx.context)
            self._client_task = asyncio.ensure_future(self._client_main(server, ctx.rng, bridge))
        await bridge.turn(message, ctx)

    async def _client_main(self, server: Any, rng: random.Random, bridge: TrialBridge) -> None:
        error: BaseException | None = None
        try:
            async with Client(server) as client:
                await self.converse(client, McpConversation(client, rng=rng))
        except BaseException as exc:
            error = _unwrap(exc)
            if error is not exc and isinstance(error, Exception):
                raise error from None  # the agent's exception, not the SDK's task group around it
            raise
        finally:
            await bridge.close(error if isinstance(error, Exception) else None)

    async def close_conversation(self) -> None:
        bridge, task = getattr(self, "_bridge", None), getattr(self, "_client_task", None)
        if bridge is None or task is None:
            return
        await bridge.close_conversation()
        done, _ = await asyncio.wait({task}, timeout=self.close_timeout_s)
        if not done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise McpSessionEnded(
                f"the MCP agent did not end its session within {self.close_timeout_s} s of "
                "the conversation's end"
            )
        exc = task.exception()
        if exc is not None and bridge._close_error is not exc:
            raise exc


class _TurnBridge(TrialBridge):
    """The bridge of a served agent: the runtime hands each turn's message to the agent's code
    directly, so every session of the trial's server acts on the open turn. ``sessions``: the
    MCP sessions that called a tool in the open turn."""

    def __init__(self) -> None:
        super().__init__()
        self.current: TurnContext | None = None
        self.sessions: set[str] = set()

    @property
    def read_a_message(self) -> bool:
        return True

    async def context_for_call(self) -> TurnContext | None:
        if self.current is None or self.over:
            return None
        self._touched = True
        return self.current

    async def next_message(self) -> tuple[int, str] | None:
        ctx = self.current
        return None if ctx is None else (ctx.turn_index, ctx.user_message)

    async def responded(self, ctx: TurnContext) -> bool:
        return False


class _TokenGuard:
    """ASGI wrapper: only requests that carry the server's token (``?token=`` or a bearer
    token) reach MCP; any local process can reach a loopback port."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            query = bytes(scope.get("query_string") or b"")
            auth = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
            presented = (
                query.partition(b"token=")[2].split(b"&")[0]
                if b"token=" in query
                else auth[7:].strip()
            )
            if not hmac.compare_digest(presented, self.token):
                body = (
                    b'{"error": "unauthorized: present the token of the URL '
                    b'agentprop gave the agent"}'
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _quiet_server_class() -> type[Any]:
    import uvicorn

    class QuietServer(uvicorn.Server):
        """A uvicorn server that leaves the process's signal handlers alone: many run at once,
        one per trial, and each would otherwise restore another's handler on exit."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer


def _session_of(ctx: Any) -> str | None:
    """The ``Mcp-Session-Id`` of a request's context (``None`` over stdio or without one)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    sid = headers.get("mcp-session-id") if headers is not None else None
    return str(sid) if sid else None


@dataclass(frozen=True)
class StdioCommand:
    """How an MCP client starts a stdio server for the open trial: ``command`` with ``args``,
    ``env`` merged over the client's environment. :meth:`params` is the dict the clients take
    (``StdioServerParameters(**cmd.params())``, the OpenAI Agents SDK's
    ``MCPServerStdio(params=cmd.params())``, langchain-mcp-adapters' ``{"transport": "stdio",
    **cmd.params()}``)."""

    command: str
    args: list[str]
    env: dict[str, str]

    def params(self) -> dict[str, Any]:
        return {"command": self.command, "args": list(self.args), "env": dict(self.env)}


def _stdio_command(url: str) -> StdioCommand:
    from agentprop._agents.mcp_stdio import URL_ENV

    root = str(Path(__file__).resolve().parents[2])  # where `agentprop` imports from
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return StdioCommand(
        command=sys.executable,
        args=["-m", "agentprop._agents.mcp_stdio"],
        env={URL_ENV: url, "PYTHONPATH": path},
    )


SPLIT_TURN = (
    "{agent}: the tool calls of one turn came over {n} MCP sessions (over stdio, a server process "
    "each): its MCP client opens a session per call. agentprop still counts the conversation as "
    "one trial, since the turn belongs to the runtime, not to a session; but a server's session "
    "state is lost between calls, each stdio call starts a process, and under `agentprop serve` "
    "(each session one trial) this client cannot be tested. Keep one session open for the "
    "conversation (langchain-mcp-adapters: `async with client.session(NAME) as session` and "
    "`load_mcp_tools(session)`)"
)
"""The warning for a turn whose tool calls came over several sessions (said once
per agent class)."""


class McpServedAgent(ABC):
    """Base class of an agent that reaches its world through a real MCP server: for each trial
    agentprop serves that trial's world over streamable HTTP on loopback, and every turn hands
    your code the user's message and the server's URL; ``self.stdio`` (a :class:`StdioCommand`)
    is the command a stdio client starts instead, a server process that relays its session to
    that trial. Any MCP client works -- a framework's (the OpenAI Agents SDK's
    ``MCPServerStreamableHttp`` or ``MCPServerStdio``, langchain-mcp-adapters, PydanticAI's
    ``MCPServerStreamableHTTP``) or the SDK's own ``Client(url)`` -- and it may open as many
    sessions (or stdio processes) as it likes: they all act on the open turn of this trial, and
    a turn spread over several is told once (:data:`SPLIT_TURN`). Write :meth:`mcp_turn`::

        class MyAgent(McpServedAgent):
            async def mcp_turn(self, message, url):
                async with MCPServerStreamableHttp(params={"url": url}) as server:
                # or: async with MCPServerStdio(params=self.stdio.params()) as server:
                    result = await Runner.run(Agent(..., mcp_servers=[server]), message)

    A client opened per turn ends its session with the turn; :meth:`keep_open` keeps one for
    the whole conversation (over stdio: one server process per trial). The agent ends a turn
    with the server's ``respond`` tool, or returns text (said to the user). ``self.ctx`` is the
    open turn's :class:`~agentprop.TurnContext` (its ``rng`` for a simulated
    agent). The trial is recorded and decided like every other run, so such agents get every
    case kind, exploration, probes and shrinking.
    """

    start_timeout_s: float = 10.0
    _warned_split: ClassVar[bool] = False
    """Set on a class (never inherited: read from its own ``__dict__``) once
    :data:`SPLIT_TURN` was said."""

    @abstractmethod
    async def mcp_turn(self, message: str, url: str) -> str | None:
        """One turn: act through the MCP server at ``url`` (the token is in its query)."""

    async def turn(self, message: str, ctx: TurnContext) -> None:
        if getattr(self, "_served", None) is None:
            await self._start(ctx)
        bridge: _TurnBridge = self._served[0]
        bridge.current, self.ctx = ctx, ctx
        bridge.sessions = set()
        try:
            said = await self.mcp_turn(message, self.url)
        finally:
            bridge.current = None
        name = type(self).__qualname__
        if len(bridge.sessions) > 1 and not type(self).__dict__.get("_warned_split"):
            type(self)._warned_split = True
            warnings.warn(
                SPLIT_TURN.format(agent=name, n=len(bridge.sessions)), UserWarning, stacklevel=2
            )
        if said and said.strip() and not ctx.responded:
            ctx.say(said)

    async def _start(self, ctx: TurnContext) -> None:
        import uvicorn

        bridge = _TurnBridge()
        token = secrets.token_urlsafe(18)

        async def bridge_for(request: Any) -> TrialBridge:
            sid = _session_of(request)
            if sid is not None and bridge.current is not None:
                bridge.sessions.add(sid)
            return bridge

        app = _TokenGuard(http_app(build_server(ctx.spec, bridge_for, context=ctx.context)), token)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        server = _quiet_server_class()(
            uvicorn.Config(app, log_level="warning", log_config=None, lifespan="on")
        )
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout_s
        while not server.started and not task.done() and loop.time() < deadline:
            await asyncio.sleep(0.005)
        if not server.started:
            server.should_exit = True
            sock.close()
            raise McpSessionEnded(
                "agentprop's MCP server for this trial did not start within "
                f"{self.start_timeout_s} s"
            )
        self._served = (bridge, server, task, sock)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp?token={token}"
        self.stdio = _stdio_command(self.url)

    async def keep_open(self, name: str, make: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """What the context manager ``make()`` yields, entered on the first call under ``name``
        and kept open until the conversation ends. A stdio client kept so is one server process
        for the whole trial, its session the conversation's::

            server = await self.keep_open("mcp", lambda: MCPServerStdio(params=self.stdio.params()))
        """
        kept: dict[str, Any] = self.__dict__.setdefault("_kept", {})
        if name not in kept:
            stack: AsyncExitStack = self.__dict__.setdefault("_kept_stack", AsyncExitStack())
            kept[name] = await stack.enter_async_context(make())
        return kept[name]  # type: ignore[no-any-return]

    async def close_conversation(self) -> None:
        stack: AsyncExitStack | None = self.__dict__.pop("_kept_stack", None)
        self.__dict__.pop("_kept", None)
        try:
            if stack is not None:
                # the clients first: they end their sessions while the server is up
                await stack.aclose()
        finally:
            await self._stop_serving()

    async def _stop_serving(self) -> None:
        served = getattr(self, "_served", None)
        if served is None:
            return
        bridge, server, task, sock = served
        await bridge.close()
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
        sock.close()


def _unwrap(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one exception each."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


__all__ = [
    "CONTEXT_URI",
    "USER_MESSAGE_PROMPT",
    "McpAgent",
    "McpConversation",
    "McpServedAgent",
    "McpSessionEnded",
    "SESSION_ENDED",
    "SPLIT_TURN",
    "StdioCommand",
    "TrialBridge",
    "UNREAD_CALL",
    "build_server",
    "instructions_for",
    "trial_server",
]
