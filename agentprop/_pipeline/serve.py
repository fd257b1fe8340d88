"""Serve one case's world over MCP to agents that connect on their own (``agentprop serve``).

:class:`CaseServer` makes one trial per MCP session; finished trials are judged and fed, in
trial order, to the case's sequential test. Trials are appended to a record file with numbers
from a locked counter, so parallel stdio processes add up to one decision. Over HTTP only
clients holding the server's token are served; a session that calls tools before reading the
user's message is no trial.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import re
import secrets
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]  # no inter-process locking there

from agentprop._agents.mcp import (
    SESSION_ENDED,
    UNREAD_CALL,
    TrialBridge,
    build_server,
    trial_server,
)
from agentprop._agents.mcp_compat import Client, http_app, mcp_error, serve_stdio, types
from agentprop._agents.project import Project
from agentprop._agents.runtime import arun_conversation
from agentprop._decide.check import scenario_settings
from agentprop._decide.oracle import CheckResult, OracleSettings, decide_runs
from agentprop._decide.safety import CaseSettings, case_settings
from agentprop._decide.verdicts import record_for
from agentprop._judge.case import compile_mft
from agentprop._scenario.build import Scenario, make_world
from agentprop._scenario.trace import Trace
from agentprop._scenario.world import stable_seed
from agentprop._util.files import read_regular
from agentprop.errors import InputError

_SESSION_HEADER = "mcp-session-id"


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
    return (
        project.base_dir
        / ".agentprop"
        / "mcp"
        / project.spec.spec_id
        / f"{_slug(scenario.id)}.jsonl"
    )


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
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """What an HTTP client must present (``?token=`` in the URL, or a bearer token)."""
    traces: list[Trace] = field(default_factory=list)
    rule: str | None = None
    _open: dict[str, ServedTrial] = field(default_factory=dict, repr=False)
    _next: int = 0
    _done: dict[int, Trace | None] = field(default_factory=dict, repr=False)
    _lock: asyncio.Lock | None = field(default=None, repr=False)
    _decided: asyncio.Event | None = field(default=None, repr=False)
    _seen_sessions: set[str] = field(default_factory=set, repr=False)
    _closed_sessions: set[str] = field(default_factory=set, repr=False)
    skipped: int = 0
    """Sessions that ended before their client read a message or called a tool (not trials)."""
    split: int = 0
    """Of those, sessions that called tools without reading the user's message: one
    conversation split over several sessions (a new session per tool call)."""
    on_note: Callable[[str], None] | None = None
    """Told, once, when a session called tools without reading the user's message."""

    def __post_init__(self) -> None:
        if self.settings is None:
            chosen = scenario_settings(self.project, self.scenario)
            self.settings, self.rule = chosen.settings, chosen.rule
        self._case = compile_mft(
            self.project.spec,
            self.scenario,
            self.project.bindings.response_grounding(self.project.spec),
        )
        self._first = self.seed * 1_000_003
        if self.record is not None and self.record.exists():
            self.traces = _read_record(self.record, self.project.spec.spec_id, self.scenario.id)
        self._next = self._first + len(self.traces)
        self._joining: deque[int] = deque()
        """This server's trials not yet joined to the decision, in index order (trials join in
        that order, so a session that ends first is not favoured)."""
        self._over = TrialBridge()
        self._over._closed = True

    # ------------------------------------------------------------- trials

    @property
    def messages(self) -> list[str]:
        return self.scenario.messages

    def start_trial(self, session_id: str | None = None) -> ServedTrial:
        """Open the next trial (its world and its runtime task); call inside the event loop."""
        index = self._reserve()
        self._joining.append(index)
        spec, bindings = self.project.spec, self.project.bindings
        world = make_world(
            spec,
            bindings,
            self.scenario,
            seed=stable_seed("world", self.scenario.id),
            nonce=str(index),
        )
        bridge = TrialBridge(final_turn=len(self.scenario.messages) - 1)

        async def run() -> Trace:
            return await arun_conversation(
                spec,
                lambda: bridge,
                self.scenario.messages,
                world,
                case_id=self.scenario.id,
                trial=index,
                context=bindings.context,
                turn_timeout_s=self.turn_timeout_s,
                agent_name="mcp",
            )

        trial = ServedTrial(
            index=index, bridge=bridge, task=asyncio.ensure_future(run()), session_id=session_id
        )
        if session_id is not None:
            self._open[session_id] = trial
        trial.task.add_done_callback(lambda _t: asyncio.ensure_future(self._finished(trial)))
        return trial

    @property
    def in_progress(self) -> int:
        """Trials started by this server and not yet joined to the decision."""
        return len(self._joining)

    @property
    def counter(self) -> Path | None:
        """The file that hands out trial numbers to every process recording to :attr:`record`."""
        return (
            None
            if self.record is None
            else self.record.with_name(f"{self.record.name}.seed{self.seed}.next")
        )

    def _reserve(self) -> int:
        """The next trial number, unique across the processes that share the record file (one
        stdio process per session, started in parallel, would otherwise all count from the
        trials recorded when each started)."""
        counter = self.counter
        if counter is None:
            index = self._next
        else:
            counter.parent.mkdir(parents=True, exist_ok=True)
            with _locked(counter) as fd:
                text = os.read(fd, 64).decode("ascii", "replace").strip()
                index = max(self._next, int(text) if text.isdigit() else 0)
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                os.write(fd, str(index + 1).encode("ascii"))
        self._next = index + 1
        return index

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
        # a session whose client never read a message nor called a tool (it never connected,
        # or only listed the tools) is no trial of the agent: not judged, not recorded; nor is
        # one that read the message and hung up before any tool call, the first piece of a
        # conversation split over sessions (a client opening a session per request)
        abandoned = trial.bridge.read_a_message and not trace.tool_calls and _hung_up(trace)
        self._done[trial.index] = trace if trial.bridge.engaged and not abandoned else None
        if (trial.bridge.unread_calls and not trial.bridge.engaged) or abandoned:
            self.split += 1
            if self.split == 1 and self.on_note is not None:
                why = split_note() if not abandoned else abandoned_note()
                self.on_note(f"{self.scenario.id} trial {trial.index} is no trial: {why}")
        # trials join the decision in trial order (a session that ends first is not favoured)
        added: list[Trace] = []
        while self._joining and self._joining[0] in self._done:
            t = self._done.pop(self._joining.popleft())
            if t is None:
                self.skipped += 1
                continue
            self.traces.append(t)
            added.append(t)
        if self.record is not None and added:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            lines = "".join(t.model_dump_json() + "\n" for t in added)
            with (
                _locked(self.record.with_name(self.record.name + ".lock")),
                self.record.open("a", encoding="utf-8") as fh,
            ):
                fh.write(lines)  # whole lines, one process at a time
        result = self.result()
        if result.verdict != "INCONCLUSIVE" and self._decided is not None:
            self._decided.set()
        if self.on_trial is not None:
            for t in added:
                self.on_trial(t, result)

    def judge(self, trace: Trace) -> Any:
        return record_for(self._case.verdicts(trace))

    def result(self) -> CheckResult:
        """The decision over the trials finished so far (INCONCLUSIVE while undecided)."""
        assert self.settings is not None
        result = decide_runs(
            self.traces,
            self.settings,
            judge=self.judge,
            name=self.scenario.id,
            first_trial=self._first,
        )
        if self.rule:
            result.settings["rule"] = self.rule
        return result

    # ------------------------------------------------------------- transports

    def server_for(self, trial: ServedTrial) -> Any:
        """A server whose every connection is ``trial`` (stdio, in-process)."""
        return trial_server(self.project.spec, trial.bridge, context=self.project.bindings.context)

    async def serve_stdio(self) -> Trace:
        """Serve one session over this process's stdin and stdout; returns its trace."""
        trial = self.start_trial()
        await serve_stdio(self.server_for(trial))
        return await self.end_trial(trial)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Any]:
        """An in-process session: an SDK client (:func:`agentprop.mcp.Client`) connected to a new
        trial (for tests); the trial ends when the block does."""
        trial = self.start_trial()
        try:
            async with Client(self.server_for(trial)) as client:
                yield client
        finally:
            await self.end_trial(trial)

    async def _bridge_for_session(self, ctx: Any) -> TrialBridge:
        sid = _session_id(ctx)
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
        return _session_app(self)

    async def session_deleted(self, sid: str) -> None:
        self._closed_sessions.add(sid)
        trial = self._open.get(sid)
        if trial is not None:
            await trial.bridge.close()

    async def wait_decided(self) -> None:
        if self._decided is None:
            self._decided = asyncio.Event()
        if self.result().verdict != "INCONCLUSIVE":
            return
        await self._decided.wait()

    def pending_close(self) -> bool:
        """Whether a session that took part has not been closed by its client yet."""
        return bool(self._seen_sessions - self._closed_sessions)

    async def end_open(self) -> None:
        """End every open trial (the server is stopping)."""
        for trial in list(self._open.values()):
            await self.end_trial(trial)

    async def serve_http(
        self, sock: socket.socket, *, until_decided: bool = False, stop: asyncio.Event | None = None
    ) -> None:
        """Serve over streamable HTTP on the bound socket ``sock`` until ``stop`` is set (or,
        with ``until_decided``, the case is decided); open trials are ended on the way out."""
        self._decided = asyncio.Event()
        await _serve_http(self, sock, until_decided=until_decided, stop=stop)


async def _serve_http(
    owner: CaseServer | RunServer,
    sock: socket.socket,
    *,
    until_decided: bool,
    stop: asyncio.Event | None,
) -> None:
    import uvicorn

    config = uvicorn.Config(owner.http_app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    waits: set[asyncio.Future[Any]] = {serving}
    if until_decided:
        waits.add(asyncio.ensure_future(owner.wait_decided()))
    if stop is not None:
        waits.add(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if until_decided and not serving.done():
            # the client whose trial decided the case is still closing its session: serve
            # its DELETE (a few seconds at most) rather than refuse the connection
            deadline = asyncio.get_running_loop().time() + 5.0
            while owner.pending_close() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
    finally:
        for w in waits - {serving}:
            w.cancel()
        await owner.end_open()
        server.should_exit = True
        await asyncio.gather(serving, return_exceptions=True)


def _hung_up(trace: Trace) -> bool:
    """Whether the trial ended because its client closed the session mid-conversation."""
    return any(
        e.kind == "agent_exception" and SESSION_ENDED in e.message for e in trace.all_errors()
    )


# ----------------------------------------------------------------- a served run


@dataclass
class RunServer:
    """Serve every case of a run over one MCP server: each session is one trial of one case.

    A new session gets a trial of the first case, in run order, that is undecided and has no
    trial in progress; when every such case has one (concurrent sessions), of the undecided case
    with the fewest in progress that still has runs left. Each case decides over its own trials
    in trial order, as :class:`CaseServer` does, so its verdict is the one ``agentprop run``
    reaches on the same trials. When no case needs a trial the session is told the run is over
    (the ``user_message`` prompt has no message).
    """

    cases: list[CaseServer]
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    on_note: Callable[[str], None] | None = None
    _case_of: dict[str, CaseServer] = field(default_factory=dict, repr=False)
    _lock: asyncio.Lock | None = field(default=None, repr=False)
    _decided: asyncio.Event | None = field(default=None, repr=False)
    _seen_sessions: set[str] = field(default_factory=set, repr=False)
    _closed_sessions: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if not self.cases:
            raise InputError(
                "a served run needs at least one case",
                fix="give cases the run has (`agentprop cases PROJECT` lists them)",
            )
        self.project = self.cases[0].project
        self._over = TrialBridge()
        self._over._closed = True
        for case in self.cases:
            case.token = self.token
            case.on_note = self._note
            told = case.on_trial

            def joined(
                trace: Trace,
                result: CheckResult,
                told: Callable[[Trace, CheckResult], None] | None = told,
            ) -> None:
                if told is not None:
                    told(trace, result)
                if self._decided is not None and self.decided:
                    self._decided.set()

            case.on_trial = joined

    def _note(self, note: str) -> None:
        if self.on_note is not None:
            self.on_note(note)

    @property
    def decided(self) -> bool:
        """Whether no case needs another trial (each decided, or out of runs)."""
        return all(not _wants_trial(case) for case in self.cases)

    def next_case(self) -> CaseServer | None:
        """The case the next session serves, or ``None`` when the run is over."""
        wanting = [c for c in self.cases if _wants_trial(c)]
        idle = [c for c in wanting if not c.in_progress]
        if idle:
            return idle[0]
        return min(wanting, key=lambda c: c.in_progress) if wanting else None

    async def _bridge_for_session(self, ctx: Any) -> TrialBridge:
        sid = _session_id(ctx)
        case = self._case_of.get(sid)
        if case is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                case = self._case_of.get(sid)
                if case is None:
                    if sid in self._seen_sessions:
                        return self._over
                    self._seen_sessions.add(sid)
                    case = self.next_case()
                    if case is None:
                        return self._over  # the run is over: no message for this session
                    self._case_of[sid] = case
        return await case._bridge_for_session(ctx)

    def http_app(self) -> Any:
        """A Starlette app serving the run over streamable HTTP at ``/mcp`` (loopback)."""
        return _session_app(self)

    async def session_deleted(self, sid: str) -> None:
        self._closed_sessions.add(sid)
        case = self._case_of.get(sid)
        if case is not None:
            await case.session_deleted(sid)

    def pending_close(self) -> bool:
        return bool(self._seen_sessions - self._closed_sessions)

    async def end_open(self) -> None:
        for case in self.cases:
            await case.end_open()

    async def wait_decided(self) -> None:
        if self._decided is None:
            self._decided = asyncio.Event()
        if not self.decided:
            await self._decided.wait()

    async def serve_http(
        self, sock: socket.socket, *, until_decided: bool = False, stop: asyncio.Event | None = None
    ) -> None:
        """Serve the run on the bound socket ``sock`` until ``stop`` is set (or, with
        ``until_decided``, no case needs another trial); open trials are ended on the way out."""
        self._decided = asyncio.Event()
        await _serve_http(self, sock, until_decided=until_decided, stop=stop)

    def results(self) -> list[CheckResult]:
        """Each case's decision over its trials so far, in run order."""
        return [case.result() for case in self.cases]

    def summary(self) -> str:
        """The verdicts so far: a line per case (verdict, id, passes/runs, first
        failure), then the counts."""
        results = self.results()
        lines = [
            f"{r.verdict:<12} {r.name} ({r.passes}/{r.runs})"
            + (f": {r.failures[0].signature}" if r.failures else "")
            for r in results
        ]
        counts: dict[str, int] = {}
        for r in results:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        lines.append(
            f"{self.project.spec.spec_id}: {len(results)} case(s): "
            + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        )
        return "\n".join(lines)


def served_settings(
    project: Project,
    scenario: Scenario,
    *,
    mode: str | None = None,
    tau: float | None = None,
    runs: int | None = None,
) -> CaseSettings:
    """A served case's settings, chosen as ``agentprop run --mode/--tau/--runs`` chooses them
    (``--runs`` alone selects fixed mode, but not on a high-risk spec); none
    given: the case's own."""
    if mode is None and tau is None and runs is None:
        return scenario_settings(project, scenario)
    spec = project.spec
    chosen = mode or (
        "fixed" if runs is not None and spec.risk_level not in ("high", "critical") else None
    )
    oracle = OracleSettings.for_spec(spec, mode=chosen, tau=tau, runs=runs)
    explicit = " ".join(
        f"--{k} {v}" for k, v in (("mode", mode), ("tau", tau), ("runs", runs)) if v is not None
    )
    return case_settings(spec, project.bindings, scenario, oracle, explicit=explicit)


def _wants_trial(case: CaseServer) -> bool:
    """Whether ``case`` is undecided and has runs left beyond those finished or in progress."""
    if case.result().verdict != "INCONCLUSIVE":
        return False
    assert case.settings is not None
    cap = case.settings.make_test().max_runs or case.settings.runs
    return len(case.traces) + case.in_progress < cap


def _session_id(ctx: Any) -> str:
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    sid = headers.get(_SESSION_HEADER) if headers is not None else None
    if not sid:
        raise mcp_error(
            types.INVALID_REQUEST,
            "agentprop's world server needs an MCP session: each session is one trial of a case. "
            "Connect with the initialize handshake (the SDK's Client does in mode 'auto' or "
            "'legacy'); MCP 2026-07-28 requests carry no session",
        )
    return str(sid)


@contextmanager
def _locked(path: Path) -> Iterator[int]:
    """``path`` opened (created if need be) and locked against the other processes for the
    block; the descriptor is yielded. Where ``fcntl`` is missing (Windows) it is not locked."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def split_note() -> str:
    """What the log says of a session that called tools without reading the user's message."""
    return (
        "its session called tools without reading the user's message, so the calls were refused "
        "and nothing was recorded; one conversation split over several sessions looks like this "
        "(langchain-mcp-adapters opens a session per tool call unless the agent keeps one open: "
        "`async with client.session(NAME) as session`, `load_mcp_tools(session)`)"
    )


def abandoned_note() -> str:
    """What the log says of a session that read the user's message and ended
    before any tool call."""
    return (
        "its session read the user's message and ended before any tool call or respond, so "
        "nothing was recorded; a conversation split over several sessions starts like this (a "
        "client that opens a session per request, as langchain-mcp-adapters does unless the agent "
        "keeps one open: `async with client.session(NAME) as session`, "
        "`load_mcp_tools(session)`). Keep one session for the whole conversation"
    )


def url_with_token(base: str, token: str) -> str:
    """``base`` (``http://127.0.0.1:PORT/mcp``) with the server's token as its query."""
    return f"{base}?token={token}"


def _presented_token(scope: Any) -> str:
    query = parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0]
    auth = next(
        (v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"authorization"), ""
    )
    return auth[7:].strip() if auth[:7].lower() == "bearer " else ""


async def _refuse(send: Any) -> None:
    body = (
        b'{"error": "unauthorized: this agentprop server serves only clients that present its '
        b"token (the ?token=... of the URL agentprop serve --http printed, or "
        b'Authorization: Bearer TOKEN)"}'
    )
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _session_app(owner: CaseServer | RunServer) -> Any:
    """``owner``'s MCP server over streamable HTTP, each session bound by
    ``owner._bridge_for_session`` and refused without the token (:class:`_SessionEnds`)."""
    server = build_server(
        owner.project.spec,
        owner._bridge_for_session,
        context=owner.project.bindings.context,
        sessions=True,
    )
    return _SessionEnds(http_app(server), owner)


class _SessionEnds:
    """ASGI wrapper: a request without the server's token is refused (401); a ``DELETE`` of a
    session (the client closing it) ends its trial."""

    def __init__(self, app: Any, owner: CaseServer | RunServer) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and not hmac.compare_digest(
            _presented_token(scope).encode(), self.owner.token.encode()
        ):
            await _refuse(send)
            return
        if scope.get("type") == "http" and scope.get("method") == "DELETE":
            sid = next(
                (
                    v.decode("latin-1")
                    for k, v in scope.get("headers", [])
                    if k == _SESSION_HEADER.encode()
                ),
                None,
            )
            if sid:
                await self.owner.session_deleted(sid)
        await self.app(scope, receive, send)


MAX_RECORD_BYTES = 256 * 1024 * 1024
"""Largest record file read back (256 MiB: thousands of trials)."""


def _read_record(path: Path, spec_id: str, case_id: str) -> list[Trace]:
    fix = f"delete {path} to start the case's trials afresh (or pass --fresh)"
    data = read_regular(path, what="a record of trials", fix=fix, limit=MAX_RECORD_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path}:{bad}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}; damaged)",
            fix=fix,
        ) from None
    traces: list[Trace] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            trace = Trace.from_json(line)
        except ValueError as exc:
            raise InputError(
                f"{path}:{n}: not a recorded trial ({str(exc).splitlines()[0]})",
                fix=f"delete {path} to start the case's trials afresh",
            ) from None
        if trace.spec_id != spec_id or trace.case_id != case_id:
            raise InputError(
                f"{path}:{n}: a trial of {trace.spec_id} {trace.case_id}, not "
                f"of {spec_id} {case_id}",
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

    def __init__(self, case: CaseServer | RunServer) -> None:
        self.case = case
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        # listening from the start: a client that connects before the server thread accepts
        # waits in the backlog instead of being refused
        self._sock.listen(128)
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
        """The URL to give the client: the server's token included."""
        return url_with_token(f"http://127.0.0.1:{self.port}/mcp", self.case.token)

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


def log_trial(out: TextIO, *, case: bool = False) -> Callable[[Trace, CheckResult], None]:
    """An ``on_trial`` callback that prints one line per trial and the verdict once reached
    (``case``: each line names the trial's case, for a served run)."""
    announced: list[bool] = [False]

    def log(trace: Trace, result: CheckResult) -> None:
        errors = trace.all_errors()
        what = f"{len(trace.turns)} turn(s), {len(trace.tool_calls)} tool call(s)"
        if errors:
            what += f", {errors[0].kind}: {errors[0].message}"
        print(
            f"{trace.case_id} " * case
            + f"trial {trace.trial}: {what}; decisions {trace.decisions}",
            file=out,
        )
        print(
            f"  so far: {result.passes}/{result.runs} passed; "
            + (
                "undecided, keep the agent running"
                if result.verdict == "INCONCLUSIVE"
                else f"verdict {result.verdict}"
            ),
            file=out,
        )
        if result.verdict != "INCONCLUSIVE" and not announced[0]:
            announced[0] = True
            print(result.summary(), file=out)
        out.flush()

    return log


__all__ = [
    "UNREAD_CALL",
    "CaseServer",
    "HttpCaseServer",
    "RunServer",
    "ServedTrial",
    "abandoned_note",
    "served_settings",
    "default_record_path",
    "log_trial",
    "split_note",
]
