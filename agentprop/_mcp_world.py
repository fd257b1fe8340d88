"""A case's world as an MCP server, through the official ``mcp`` SDK.

Any MCP-capable agent can then be tested without an adapter: it lists the spec's tools plus
``respond`` (whose input schema is the response contract), reads the user's messages from the
``user_message`` prompt, and calls tools; agentprop records the session as one trial, exactly as
the runtime records a Python agent, and decides it like every other run.

**One session, one trial.** A session is one conversation of the case: a fresh world (seeded per
trial, canaries planted, failures injected), the case's user messages, the bindings' context. It
is run by the runtime itself (:func:`agentprop.arun_conversation`) with a bridge for an agent:
each tool call of the session is made through the current turn's
:class:`~agentprop.TurnContext`, so tool calls, per-turn slices, ``respond`` validation (an
invalid ``respond`` is a tool error the agent may correct), ``max_tool_calls_per_turn``, unknown
tools, errors and timeouts are recorded by the same code as for every other agent.

**How the conversation reaches the agent** (the turn protocol):

- the prompt ``user_message`` (no arguments) returns the user's message for the next turn as
  one user-role message. Asking for it is what ends the turn before: a turn lasts from one
  ``user_message`` to the next, as a Python agent's turn lasts from one ``turn()`` call to its
  return. When the conversation has no more messages the prompt returns no message at all (and
  says so in its description): the session is over.
- the tool ``respond`` ends the turn's work with the structured response. On the last turn of a
  served case it also ends the conversation (its result says ``conversation_over``).
- the resource ``agentprop://context`` is the runtime context of the bindings (e.g. the signed-in
  ``account_id``), as JSON.

A tool failure is a result with ``isError`` set, the text ``KIND: message`` and the structured
content ``{"error": {"kind": KIND, "message": ...}}``; a success carries the output as JSON text
(and as structured content when it is an object). Output schemas are not declared, so an MCP
client never rejects a world output (a planted canary, an injected failure value) on its own.

Where the session comes from:

- :class:`CaseServer` serves one case for agents that connect on their own (``agentprop
  serve``): over stdio one process is one session; over streamable HTTP (loopback) each
  ``Mcp-Session-Id`` session is one. Finished trials are judged by the case's property and fed
  to the case's sequential test; the verdict is printed as soon as it is reached.
- :class:`McpAgent` is the other way round: agentprop runs the trial (``agentprop run``,
  :func:`agentprop.check`, shrinking) and the agent is an MCP client, connected in-process to a
  server for that trial's world.

MCP's 2026-07-28 revision has no sessions over HTTP; the HTTP server advertises the handshake
revisions only, so the SDK's clients (``mode="auto"``) fall back to sessions, and a sessionless
request is refused with an error that says so.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import mcp_types as types
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from agentprop._check import record_for, scenario_settings
from agentprop._oracle import CheckResult, OracleSettings, decide_runs
from agentprop._project import Project
from agentprop._properties import mft_verdicts
from agentprop._response import respond_tool_schema
from agentprop._runtime import TurnContext, arun_conversation
from agentprop._scenario import Scenario, make_world
from agentprop._spec.model import Spec
from agentprop._trace import Trace
from agentprop._version import __version__
from agentprop._world import stable_seed
from agentprop.errors import InputError, ToolError

USER_MESSAGE_PROMPT = "user_message"
CONTEXT_URI = "agentprop://context"
_SESSION_HEADER = "mcp-session-id"


class McpSessionEnded(Exception):
    """The MCP client went away (or its agent code raised) before the conversation was over."""


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

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    # ------------------------------------------------------------- runtime side

    async def turn(self, message: str, ctx: TurnContext) -> None:
        cond = self._condition()
        async with cond:
            if self._closed:
                raise self._ended(f"the MCP session ended before turn {ctx.turn_index} began")
            self._ctx, self._message, self._index, self._turn_over = ctx, message, ctx.turn_index, False
            cond.notify_all()
            await cond.wait_for(lambda: self._turn_over or self._closed)
            if not self._turn_over and not ctx.responded:
                raise self._ended(f"the MCP session ended during turn {ctx.turn_index}, before respond")

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
    def over(self) -> bool:
        return self._finished or self._closed

    async def context_for_call(self) -> TurnContext | None:
        """The open turn's context (waiting for the next turn to open), or ``None`` when the
        conversation is over."""
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.over or (self._ctx is not None and not self._turn_over))
            return None if self.over else self._ctx

    async def next_message(self) -> tuple[int, str] | None:
        """End the turn whose message was handed out last, then hand out the next turn's
        message: ``(turn index, message)``, or ``None`` when the conversation is over."""
        cond = self._condition()
        async with cond:
            if self._ctx is not None and not self._turn_over and self._fetched == self._index:
                self._turn_over = True
                cond.notify_all()
            await cond.wait_for(lambda: self.over or (self._ctx is not None and not self._turn_over and self._index > self._fetched))
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


def _tool_list(spec: Spec) -> list[types.Tool]:
    tools = [
        types.Tool(name=t.name, description=t.description or None, input_schema=dict(t.input_schema or {"type": "object"}))
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
            input_schema=respond_tool_schema(spec),
        )
    )
    return tools


def _error_result(kind: str, message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{kind}: {message}")],
        structured_content={"error": {"kind": kind, "message": message}},
        is_error=True,
    )


def _ok_result(value: Any) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))],
        structured_content=value if isinstance(value, dict) else None,
    )


def instructions_for(spec: Spec, context: Mapping[str, Any]) -> str:
    ctx = ", ".join(f"{k}={v}" for k, v in context.items()) or "none"
    return (
        f"agentprop test world for spec {spec.spec_id} ({spec.title}). Each session is one conversation: "
        f"get the user's next message with the `{USER_MESSAGE_PROMPT}` prompt (asking for it ends the previous turn; "
        "no message means the conversation is over), use the tools, and end each turn with the `respond` tool. "
        f"Runtime context ({CONTEXT_URI}): {ctx}."
    )


BridgeFor = Callable[[Any], Awaitable[TrialBridge]]
"""How a request finds its trial: from the request context (per session)."""


def build_server(spec: Spec, bridge_for: BridgeFor, *, context: Mapping[str, Any], sessions: bool = False) -> Server[Any]:
    """The MCP server of a spec's world, its requests routed to trials by ``bridge_for``.

    ``sessions``: the server is shared by many sessions (streamable HTTP), so it advertises
    only the handshake revisions of MCP, whose sessions tell trials apart."""
    tools = _tool_list(spec)
    context_json = json.dumps(dict(context), ensure_ascii=False)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        bridge = await bridge_for(ctx)
        turn = await bridge.context_for_call()
        if turn is None:
            return _error_result("protocol", "the conversation is over; this session takes no more tool calls")
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

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=USER_MESSAGE_PROMPT,
                    description="The user's message for the next turn; asking for it ends the previous turn. "
                    "No message: the conversation is over.",
                )
            ]
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != USER_MESSAGE_PROMPT:
            raise MCPError(types.INVALID_PARAMS, f"no prompt {params.name!r}; this server has `{USER_MESSAGE_PROMPT}`")
        bridge = await bridge_for(ctx)
        got = await bridge.next_message()
        if got is None:
            return types.GetPromptResult(description="the conversation is over", messages=[])
        index, message = got
        return types.GetPromptResult(
            description=f"turn {index}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=message))],
        )

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[types.Resource(name="context", uri=CONTEXT_URI, description="the runtime context of the conversation", mime_type="application/json")]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != CONTEXT_URI:
            raise MCPError(types.INVALID_PARAMS, f"no resource {params.uri}; this server has {CONTEXT_URI}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=CONTEXT_URI, mime_type="application/json", text=context_json)])

    server: Server[Any] = Server(
        f"agentprop-{spec.spec_id}",
        version=__version__,
        instructions=instructions_for(spec, context),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
    if sessions:

        async def discover(ctx: Any, params: Any) -> types.DiscoverResult:
            # no modern revision: clients fall back to the initialize handshake and its sessions
            return types.DiscoverResult(supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS), capabilities=server.get_capabilities())

        server.add_request_handler("server/discover", types.RequestParams, discover)
    return server


def trial_server(spec: Spec, bridge: TrialBridge, *, context: Mapping[str, Any]) -> Server[Any]:
    """A server for exactly one trial (stdio, in-process): every connection drives ``bridge``."""

    async def the_bridge(ctx: Any) -> TrialBridge:
        return bridge

    return build_server(spec, the_bridge, context=context)


# ----------------------------------------------------------------- a served case


@dataclass
class ServedTrial:
    """One session of a served case: its bridge and the runtime task recording it."""

    index: int
    bridge: TrialBridge
    task: asyncio.Task[Trace]
    session_id: str | None = None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:120] or "case"


def default_record_path(project: Project, scenario: Scenario) -> Path:
    """Where a served case keeps its finished trials (one trace per line)."""
    return project.base_dir / ".agentprop" / "mcp" / project.spec.spec_id / f"{_slug(scenario.id)}.jsonl"


@dataclass
class CaseServer:
    """Serve one case's world over MCP; each session is one trial, recorded and decided.

    ``record``: a JSON-lines file of finished trials (a trace per line). Trials recorded there
    before count towards the decision and the next trial continues their numbering, so one
    stdio process per session adds up to a decision. ``on_trial(trace, result)`` is called
    after every finished trial with the decision so far (INCONCLUSIVE until it is reached).
    """

    project: Project
    scenario: Scenario
    settings: OracleSettings | None = None
    record: Path | None = None
    turn_timeout_s: float | None = 300.0
    seed: int = 0
    on_trial: Callable[[Trace, CheckResult], None] | None = None
    traces: list[Trace] = field(default_factory=list)
    rule: str | None = None
    _open: dict[str, ServedTrial] = field(default_factory=dict, repr=False)
    _next: int = 0
    _done: dict[int, Trace] = field(default_factory=dict, repr=False)
    _lock: asyncio.Lock | None = field(default=None, repr=False)
    _decided: asyncio.Event | None = field(default=None, repr=False)
    _seen_sessions: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if self.settings is None:
            chosen = scenario_settings(self.project, self.scenario)
            self.settings, self.rule = chosen.settings, chosen.rule
        self._grounding = self.project.bindings.response_grounding(self.project.spec)
        self._first = self.seed * 1_000_003
        if self.record is not None and self.record.exists():
            self.traces = _read_record(self.record, self.project.spec.spec_id, self.scenario.id)
        self._next = self._first + len(self.traces)
        self._over = TrialBridge()
        self._over._closed = True

    # ------------------------------------------------------------- trials

    @property
    def messages(self) -> list[str]:
        return self.scenario.messages

    def start_trial(self, session_id: str | None = None) -> ServedTrial:
        """Open the next trial (its world and its runtime task); call inside the event loop."""
        index = self._next
        self._next += 1
        spec, bindings = self.project.spec, self.project.bindings
        world = make_world(spec, bindings, self.scenario, seed=stable_seed("world", self.scenario.id), nonce=str(index))
        bridge = TrialBridge(final_turn=len(self.scenario.messages) - 1)

        async def run() -> Trace:
            return await arun_conversation(
                spec, lambda: bridge, self.scenario.messages, world, case_id=self.scenario.id, trial=index,
                context=bindings.context, turn_timeout_s=self.turn_timeout_s, agent_name="mcp",
            )

        trial = ServedTrial(index=index, bridge=bridge, task=asyncio.ensure_future(run()), session_id=session_id)
        if session_id is not None:
            self._open[session_id] = trial
        trial.task.add_done_callback(lambda _t: asyncio.ensure_future(self._finished(trial)))
        return trial

    async def end_trial(self, trial: ServedTrial) -> Trace:
        """The session is gone: end its conversation and return the recorded trace."""
        await trial.bridge.close()
        return await trial.task

    async def _finished(self, trial: ServedTrial) -> None:
        if trial.session_id is not None:
            self._open.pop(trial.session_id, None)
        await trial.bridge.close()  # later requests of the session get "the conversation is over"
        try:
            trace = trial.task.result()
        except BaseException:  # the runtime never raises for agent faults; nothing to record
            return
        self._done[trial.index] = trace
        # trials join the decision in trial order (a session that ends first is not favoured)
        added: list[Trace] = []
        while (self._first + len(self.traces)) in self._done:
            t = self._done.pop(self._first + len(self.traces))
            self.traces.append(t)
            added.append(t)
        if self.record is not None and added:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            with self.record.open("a", encoding="utf-8") as fh:
                for t in added:
                    fh.write(t.model_dump_json() + "\n")
        result = self.result()
        if result.verdict != "INCONCLUSIVE" and self._decided is not None:
            self._decided.set()
        if self.on_trial is not None:
            for t in added:
                self.on_trial(t, result)

    def judge(self, trace: Trace) -> Any:
        return record_for(mft_verdicts(self.project.spec, self.scenario, trace, grounding=self._grounding))

    def result(self) -> CheckResult:
        """The decision over the trials finished so far (INCONCLUSIVE while undecided)."""
        assert self.settings is not None
        result = decide_runs(self.traces, self.settings, judge=self.judge, name=self.scenario.id, first_trial=self._first)
        if self.rule:
            result.settings["rule"] = self.rule
        return result

    # ------------------------------------------------------------- transports

    def server_for(self, trial: ServedTrial) -> Server[Any]:
        """A server whose every connection is ``trial`` (stdio, in-process)."""
        return trial_server(self.project.spec, trial.bridge, context=self.project.bindings.context)

    async def serve_stdio(self) -> Trace:
        """Serve one session over this process's stdin and stdout; returns its trace."""
        from mcp.server.stdio import stdio_server

        trial = self.start_trial()
        server = self.server_for(trial)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return await self.end_trial(trial)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Client]:
        """An in-process session: an SDK :class:`mcp.Client` connected to a new trial (for
        tests); the trial ends when the block does."""
        trial = self.start_trial()
        try:
            async with Client(self.server_for(trial)) as client:
                yield client
        finally:
            await self.end_trial(trial)

    async def _bridge_for_session(self, ctx: Any) -> TrialBridge:
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        sid = headers.get(_SESSION_HEADER) if headers is not None else None
        if not sid:
            raise MCPError(
                types.INVALID_REQUEST,
                "agentprop's world server needs an MCP session: each session is one trial of the case. "
                "Connect with the initialize handshake (the SDK's Client does in mode 'auto' or 'legacy'); "
                "MCP 2026-07-28 requests carry no session",
            )
        trial = self._open.get(sid)
        if trial is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                trial = self._open.get(sid)
                if trial is None:
                    if sid in self._seen_sessions:
                        return self._over  # its conversation has ended: it is told so
                    trial = self.start_trial(session_id=sid)
                    self._seen_sessions.add(sid)  # a session runs one conversation
        return trial.bridge

    def http_app(self) -> Any:
        """A Starlette app serving this case over streamable HTTP at ``/mcp`` (loopback)."""
        server = build_server(self.project.spec, self._bridge_for_session, context=self.project.bindings.context, sessions=True)
        app = server.streamable_http_app(host="127.0.0.1")
        return _SessionEnds(app, self)

    async def session_deleted(self, sid: str) -> None:
        trial = self._open.get(sid)
        if trial is not None:
            await trial.bridge.close()

    async def wait_decided(self) -> None:
        if self._decided is None:
            self._decided = asyncio.Event()
        if self.result().verdict != "INCONCLUSIVE":
            return
        await self._decided.wait()

    async def serve_http(self, sock: socket.socket, *, until_decided: bool = False, stop: asyncio.Event | None = None) -> None:
        """Serve over streamable HTTP on the bound socket ``sock`` until ``stop`` is set (or,
        with ``until_decided``, the case is decided); open trials are ended on the way out."""
        import uvicorn

        self._decided = asyncio.Event()
        config = uvicorn.Config(self.http_app(), log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        waits: set[asyncio.Future[Any]] = {serving}
        if until_decided:
            waits.add(asyncio.ensure_future(self.wait_decided()))
        if stop is not None:
            waits.add(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits - {serving}:
                w.cancel()
            for trial in list(self._open.values()):
                await self.end_trial(trial)
            server.should_exit = True
            await asyncio.gather(serving, return_exceptions=True)


class _SessionEnds:
    """ASGI wrapper: a ``DELETE`` of a session (the client closing it) ends its trial."""

    def __init__(self, app: Any, owner: CaseServer) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("method") == "DELETE":
            sid = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == _SESSION_HEADER.encode()), None)
            if sid:
                await self.owner.session_deleted(sid)
        await self.app(scope, receive, send)


def _read_record(path: Path, spec_id: str, case_id: str) -> list[Trace]:
    traces: list[Trace] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            trace = Trace.from_json(line)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not a recorded trial ({str(exc).splitlines()[0]})", fix=f"delete {path} to start the case's trials afresh") from None
        if trace.spec_id != spec_id or trace.case_id != case_id:
            raise InputError(
                f"{path}:{n}: a trial of {trace.spec_id} {trace.case_id}, not of {spec_id} {case_id}",
                fix="give each case its own --record file, or delete this one",
            )
        traces.append(trace)
    return traces


class HttpCaseServer:
    """A :class:`CaseServer` served over streamable HTTP on a free loopback port, on a thread
    of its own (the Python API and pytest fixture behind ``agentprop serve --http``)::

        with HttpCaseServer(case_server) as running:
            async with mcp.Client(running.url) as client: ...
        running.case.result()
    """

    def __init__(self, case: CaseServer) -> None:
        self.case = case
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpCaseServer:
        def main() -> None:
            async def serve() -> None:
                self._loop = asyncio.get_running_loop()
                self._stop = asyncio.Event()
                self._started.set()
                await self.case.serve_http(self._sock, stop=self._stop)

            try:
                asyncio.run(serve())
            except BaseException as exc:  # reported by stop()
                self._error = exc
                self._started.set()

        self._thread = threading.Thread(target=main, name="agentprop-mcp-http", daemon=True)
        self._thread.start()
        self._started.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> HttpCaseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ----------------------------------------------------------------- the client side


class McpConversation:
    """The client side of the turn protocol, over an SDK :class:`mcp.Client`.

    ``async for message in conversation`` yields each user message (asking for the next one
    ends the turn before); :meth:`call` and :meth:`respond` call tools and turn tool errors
    into :class:`~agentprop.ToolError`; :meth:`play` plays a plain-Python agent's turn
    (``turn(message, ctx)``) over the session. ``rng``: the random source a simulated agent
    should draw from (under :class:`McpAgent`, the runtime's, seeded from case and trial).
    """

    def __init__(self, client: Client, *, rng: random.Random | None = None) -> None:
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
            self._context = json.loads(first.text) if isinstance(first, types.TextResourceContents) else {}
        return dict(self._context)

    async def call(self, name: str, /, **args: Any) -> Any:
        """Call a tool; its output, or :class:`~agentprop.ToolError` when it failed."""
        result = await self.client.call_tool(name, args)
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        if result.is_error:
            err = (result.structured_content or {}).get("error") if isinstance(result.structured_content, dict) else None
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

    async def play(self, turn_fn: Callable[[str, Any], Any], message: str, *, spec: Spec | None = None) -> None:
        """Play ``turn_fn(message, ctx)``, a plain-Python agent's turn, over this session: its
        ``ctx.call`` and ``ctx.respond`` become MCP tool calls (see
        :class:`agentprop.testing.puppet.TurnPuppet`). An exception of the agent is raised."""
        from agentprop.testing.puppet import Call, Finished, Respond, TurnPuppet

        puppet = TurnPuppet(turn_fn, message, spec=spec, context=await self.context(), rng=self.rng, turn_index=self.turn_index, memory=self.memory)
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


class McpAgent:
    """Base class of an agent that reaches its world over MCP, run by agentprop in-process.

    Subclass it and write :meth:`converse`; agentprop makes one instance per conversation (pass
    the class as the agent: ``--agent my_module:MyMcpAgent``), serves that trial's world over
    MCP in the same process, and hands your code an SDK :class:`mcp.Client` connected to it::

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

    async def converse(self, client: Client, conversation: McpConversation) -> None:
        raise NotImplementedError("write converse(client, conversation) in your McpAgent subclass")

    async def turn(self, message: str, ctx: TurnContext) -> None:
        bridge = getattr(self, "_bridge", None)
        if bridge is None:
            bridge = self._bridge = TrialBridge()
            server = trial_server(ctx.spec, bridge, context=ctx.context)
            self._client_task = asyncio.ensure_future(self._client_main(server, ctx.rng, bridge))
        await bridge.turn(message, ctx)

    async def _client_main(self, server: Server[Any], rng: random.Random, bridge: TrialBridge) -> None:
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
            raise McpSessionEnded(f"the MCP agent did not end its session within {self.close_timeout_s} s of the conversation's end")
        exc = task.exception()
        if exc is not None and bridge._close_error is not exc:
            raise exc


def _unwrap(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one exception each."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def log_trial(out: TextIO) -> Callable[[Trace, CheckResult], None]:
    """An ``on_trial`` callback that prints one line per trial and the verdict once reached."""
    announced: list[bool] = [False]

    def log(trace: Trace, result: CheckResult) -> None:
        errors = trace.all_errors()
        what = f"{len(trace.turns)} turn(s), {len(trace.tool_calls)} tool call(s)"
        if errors:
            what += f", {errors[0].kind}: {errors[0].message}"
        print(f"trial {trace.trial}: {what}; decisions {trace.decisions}", file=out)
        print(f"  so far: {result.passes}/{result.runs} passed; "
              + ("undecided, keep the agent running" if result.verdict == "INCONCLUSIVE" else f"verdict {result.verdict}"), file=out)
        if result.verdict != "INCONCLUSIVE" and not announced[0]:
            announced[0] = True
            print(result.summary(), file=out)
        out.flush()

    return log


__all__ = [
    "CONTEXT_URI",
    "USER_MESSAGE_PROMPT",
    "CaseServer",
    "HttpCaseServer",
    "McpAgent",
    "McpConversation",
    "McpSessionEnded",
    "ServedTrial",
    "TrialBridge",
    "build_server",
    "default_record_path",
    "log_trial",
    "trial_server",
]
