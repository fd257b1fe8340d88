"""A scripted, offline stand-in for the Anthropic Messages API.

:class:`MessagesServer` is a real HTTP server on ``127.0.0.1`` that answers
``POST /v1/messages`` from a script: queued replies first, then an optional handler (text, tool
use, faults such as 429 or a dropped connection). A request the script cannot answer gets a 400
saying so, never a hang. Every request is recorded; point the official SDK at ``base_url``. No
key and no network are needed; streaming is refused with a message.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeAlias

from agentprop.errors import InvalidArgument

__all__ = [
    "Handler",
    "MessagesServer",
    "RecordedRequest",
    "Reply",
    "ReplyLike",
    "drop_connection",
    "error_reply",
    "http_date_in",
    "malformed_reply",
    "message_reply",
    "overloaded_reply",
    "rate_limit_reply",
    "respond_reply",
    "slow_reply",
    "text_block",
    "text_reply",
    "tool_use_block",
    "tool_use_reply",
]

_STOP_REASONS = frozenset(
    {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"}
)


# --------------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer.

    Build replies with the helper functions rather than by hand. Exactly one of ``message``
    (a Messages API message, completed with id/model/usage when sent), ``json_body`` (any JSON,
    sent as is, e.g. an error object) or ``raw_body`` (bytes sent verbatim) is used, in that
    order of preference. ``delay`` is slept before answering (on top of the server's latency);
    ``drop`` closes the connection without answering.
    """

    status: int = 200
    message: Mapping[str, Any] | None = None
    json_body: Any = None
    raw_body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    content_type: str = "application/json"


ReplyLike: TypeAlias = Reply | Mapping[str, Any] | str
"""What a script entry or handler may produce: a :class:`Reply`, a message ``dict`` or text."""

Handler: TypeAlias = Callable[[dict[str, Any]], ReplyLike]
"""A callable that answers one request: receives the parsed request JSON."""


def text_block(text: str) -> dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use_block(
    name: str, input: Mapping[str, Any] | None = None, *, id: str | None = None
) -> dict[str, Any]:
    """A ``tool_use`` content block. Without ``id`` the server assigns ``toolu_mock_<n>``."""
    block: dict[str, Any] = {"type": "tool_use", "name": name, "input": dict(input or {})}
    if id is not None:
        block["id"] = id
    return block


def message_reply(
    content: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str = "end_turn",
    stop_sequence: str | None = None,
    model: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    id: str | None = None,
) -> Reply:
    """A 200 reply carrying one assistant message with the given content blocks.

    ``model`` defaults to the request's model, ``id`` to a counter, and the token counts to a
    deterministic estimate (about four characters per token).
    """
    if isinstance(content, str) or not all(isinstance(block, Mapping) for block in content):
        raise InvalidArgument(
            f"message_reply(content={content!r:.60}): content is a list of content blocks, e.g. "
            "[text_block('Hello')] (or use text_reply('Hello') for a reply that is just text)."
        )
    if stop_reason not in _STOP_REASONS:
        raise InvalidArgument(
            f"stop_reason={stop_reason!r} is not one the Messages API returns; use one of "
            f"{sorted(_STOP_REASONS)}."
        )
    message: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": [dict(block) for block in content],
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
    }
    if id is not None:
        message["id"] = id
    if model is not None:
        message["model"] = model
    usage: dict[str, int] = {}
    if input_tokens is not None:
        usage["input_tokens"] = input_tokens
    if output_tokens is not None:
        usage["output_tokens"] = output_tokens
    if usage:
        message["usage"] = usage
    return Reply(message=message)


def text_reply(
    text: str,
    *,
    stop_reason: str = "end_turn",
    model: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> Reply:
    """A reply with one text block; ``stop_reason`` may be ``"max_tokens"`` to mimic truncation."""
    return message_reply(
        [text_block(text)],
        stop_reason=stop_reason,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def tool_use_reply(
    name: str,
    input: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
    text: str | None = None,
    model: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> Reply:
    """A reply in which the model calls tool ``name`` with ``input`` (stop_reason ``tool_use``).

    ``text`` adds a text block before the call, as models often do ("Let me look that up.").
    For several calls in one turn use :func:`message_reply` with :func:`tool_use_block`.
    """
    blocks: list[dict[str, Any]] = []
    if text is not None:
        blocks.append(text_block(text))
    blocks.append(tool_use_block(name, input, id=id))
    return message_reply(
        blocks,
        stop_reason="tool_use",
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def respond_reply(
    output: Mapping[str, Any] | None = None,
    /,
    *,
    tool_name: str = "respond",
    id: str | None = None,
    model: str | None = None,
    **fields: Any,
) -> Reply:
    """A reply in which the model ends its turn by calling the ``respond`` tool.

    agentprop's Anthropic agent gives the model a required ``respond`` tool whose input is the
    structured answer for the turn; this builds that call. Pass the answer as a mapping, as
    keyword fields, or both (keywords win)::

        respond_reply(decision="refund", message="Your refund is on its way.")
    """
    payload = {**dict(output or {}), **fields}
    return tool_use_reply(tool_name, payload, id=id, model=model)


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def rate_limit_reply(
    retry_after: float | str | None = 1,
    *,
    message: str = "Number of request tokens has exceeded your per-minute rate limit.",
    retry_after_ms: float | None = None,
) -> Reply:
    """HTTP 429 ``rate_limit_error``.

    ``retry_after`` is sent as the ``retry-after`` header: a number of seconds, or a string sent
    verbatim (for example an HTTP date from :func:`email.utils.formatdate`); ``None`` omits it.
    ``retry_after_ms`` adds Anthropic's non-standard ``retry-after-ms`` header.
    """
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = retry_after if isinstance(retry_after, str) else _num(retry_after)
    if retry_after_ms is not None:
        headers["retry-after-ms"] = _num(retry_after_ms)
    return Reply(status=429, json_body=_error_body("rate_limit_error", message), headers=headers)


def http_date_in(seconds: float) -> str:
    """An HTTP date ``seconds`` from now, for a ``retry-after`` header given as a date."""
    return formatdate(time.time() + seconds, usegmt=True)


def error_reply(
    status: int = 500,
    *,
    error_type: str | None = None,
    message: str = "Internal server error",
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An API error reply (default HTTP 500 ``api_error``) with the API's error body shape."""
    if not 400 <= status <= 599:
        raise InvalidArgument(f"status={status} is not an HTTP error status (400-599).")
    default_types = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        408: "timeout_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = error_type or default_types.get(status, "api_error")
    return Reply(status=status, json_body=_error_body(kind, message), headers=dict(headers or {}))


def overloaded_reply(*, message: str = "Overloaded") -> Reply:
    """HTTP 529 ``overloaded_error``, what the API returns when it is temporarily overloaded."""
    return error_reply(529, message=message)


def slow_reply(reply: ReplyLike, seconds: float) -> Reply:
    """``reply`` answered after an extra ``seconds`` of delay (to trigger client timeouts)."""
    if seconds < 0:
        raise InvalidArgument(f"seconds={seconds} must be >= 0.")
    base = _coerce_reply(reply)
    return replace(base, delay=base.delay + seconds)


def malformed_reply(
    body: bytes | str = b'{"id": "msg_truncated", "type": "mess',
    *,
    status: int = 200,
    content_type: str = "application/json",
) -> Reply:
    """A reply whose body is not valid JSON (by default a truncated message) with status 200."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    return Reply(status=status, raw_body=raw, content_type=content_type)


def drop_connection() -> Reply:
    """Close the connection without sending any response (a network failure)."""
    return Reply(drop=True)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _coerce_reply(value: object) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return text_reply(value)
    if isinstance(value, Mapping):
        return Reply(message=dict(value))
    raise InvalidArgument(
        "A scripted reply must be a Reply (see text_reply, tool_use_reply, ...), a message dict "
        f"or a str, not {type(value).__name__}: {value!r}."
    )


# --------------------------------------------------------------------------------------------
# Recorded requests
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, in arrival order (``index`` starts at 0).

    ``headers`` has lower-cased names. ``json`` is the parsed body, or ``None`` if the body was
    not valid JSON.
    """

    index: int
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any
    received_at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` list of the request body (empty if absent)."""
        if isinstance(self.json, dict) and isinstance(self.json.get("messages"), list):
            return list(self.json["messages"])
        return []


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, owner: MessagesServer, address: tuple[str, int]) -> None:
        self.owner = owner
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(address, _RequestHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self.sockets_lock:
                self.open_sockets.discard(request)

    def close_open_connections(self) -> None:
        """Hang up on every client still connected (idle keep-alive connections included)."""
        with self.sockets_lock:
            sockets = list(self.open_sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or hang up are normal in fault-injection tests: stay quiet.
        # Anything else is a server bug: keep it where tests can see it (MessagesServer.errors).
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, (ConnectionError, TimeoutError)):
            self.owner._record_error(exc)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in separate writes; with Nagle's algorithm on, the body
    # would wait for the client's delayed ACK (~40 ms on Linux) whenever few requests are in
    # flight. Production HTTP servers answer with TCP_NODELAY too.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_POST(self) -> None:
        self.server.owner._serve(self)

    def do_GET(self) -> None:
        self.server.owner._serve(self)

    def log_message(self, format: str, *args: Any) -> None:
        return


class MessagesServer:
    """A scripted Anthropic Messages API on ``127.0.0.1`` for offline tests.

    Args:
        script: replies to give, in order, one per ``POST /v1/messages`` request. Each entry is
            a :class:`Reply` (see the builder functions), a message ``dict``, a ``str`` (a text
            reply) or a callable taking the request JSON and returning one of those.
        handler: answers requests once ``script`` is used up (for example a function that
            reads the conversation and decides which tool to call). Exceptions it raises are
            returned as HTTP 500 with ``x-should-retry: false`` and kept in :attr:`errors`.
        latency: seconds added before every reply, or a zero-argument callable returning them.
        expected_api_key: if given, requests whose ``x-api-key`` or ``Authorization: Bearer``
            header does not carry this key get HTTP 401 (``authentication_error``).
        host, port: where to listen; the default port 0 picks a free port.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`). :attr:`base_url` is
    what to pass to ``anthropic.Anthropic(base_url=...)``.
    """

    def __init__(
        self,
        script: Iterable[ReplyLike | Handler] = (),
        *,
        handler: Handler | None = None,
        latency: float | Callable[[], float] = 0.0,
        expected_api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if not callable(latency) and latency < 0:
            raise InvalidArgument(f"latency={latency} must be >= 0 seconds.")
        if handler is not None and not callable(handler):
            raise InvalidArgument(f"handler must be callable, not {type(handler).__name__}.")
        self._lock = threading.Lock()
        self._queue: deque[ReplyLike | Handler] = deque()
        for entry in script:
            self._queue.append(entry if callable(entry) else self._coerce(entry))
        self._handler = handler
        self._latency = latency
        self._expected_api_key = expected_api_key
        self._host = host
        self._port = port
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._message_counter = 0
        self._tool_counter = 0
        self._in_flight = 0
        self._peak_in_flight = 0
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> MessagesServer:
        """Bind the socket and start serving in a background thread. Returns ``self``."""
        if self._httpd is not None:
            raise InvalidArgument("This MessagesServer is already running.")
        self._stopping.clear()
        self._httpd = _HTTPServer(self, (self._host, self._port))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"MessagesServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket. Sleeping replies are woken and abandoned."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_open_connections()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> MessagesServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- inspection ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port the server listens on (only while running)."""
        if self._httpd is None:
            raise InvalidArgument("The MessagesServer is not running; call start() or use `with`.")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: pass it as ``base_url`` to the Anthropic client."""
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent request; raises :class:`InvalidArgument` if there was none."""
        with self._lock:
            if not self._requests:
                raise InvalidArgument("The MessagesServer has not received any request yet.")
            return self._requests[-1]

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by scripted callables or the handler, or inside the server (a copy)."""
        with self._lock:
            return list(self._errors)

    @property
    def pending(self) -> int:
        """How many queued replies have not been used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def peak_concurrency(self) -> int:
        """The largest number of requests the server was answering at the same time."""
        with self._lock:
            return self._peak_in_flight

    def _record_error(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)

    def enqueue(self, *replies: ReplyLike | Handler) -> None:
        """Append replies (or per-request callables) to the script."""
        coerced = [entry if callable(entry) else self._coerce(entry) for entry in replies]
        with self._lock:
            self._queue.extend(coerced)

    def set_handler(self, handler: Handler | None) -> None:
        """Replace the handler that answers requests once the queue is empty."""
        with self._lock:
            self._handler = handler

    def reset(self) -> None:
        """Forget recorded requests and errors, and empty the queue."""
        with self._lock:
            self._requests.clear()
            self._errors.clear()
            self._queue.clear()
            self._peak_in_flight = self._in_flight

    # -- serving -------------------------------------------------------------------------------

    def _serve(self, h: _RequestHandler) -> None:
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        try:
            self._serve_one(h)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            h.close_connection = True
        finally:
            with self._lock:
                self._in_flight -= 1

    def _serve_one(self, h: _RequestHandler) -> None:
        length_header = h.headers.get("Content-Length")
        if h.command == "POST" and length_header is None:
            h.close_connection = True  # an unread body would corrupt the next request
            self._send(h, error_reply(411, message="MessagesServer needs a Content-Length header."))
            return
        length = int(length_header or 0)
        body = h.rfile.read(length) if length else b""
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = None
        headers = {name.lower(): value for name, value in h.headers.items()}
        path = h.path.split("?", 1)[0]
        with self._lock:
            record = RecordedRequest(
                index=len(self._requests),
                method=h.command,
                path=h.path,
                headers=headers,
                body=body,
                json=parsed,
                received_at=time.time(),
            )
            self._requests.append(record)

        problem = self._validate(h.command, path, body, parsed, headers)
        if problem is not None:
            self._send(h, problem)
            return

        reply = self._next_reply(record)
        delay = self._current_latency() + reply.delay
        if delay > 0 and self._stopping.wait(delay):
            h.close_connection = True
            return
        if reply.drop:
            self._drop(h)
            return
        self._send(h, reply, request=parsed, path=path)

    def _validate(
        self,
        method: str,
        path: str,
        body: bytes,
        parsed: Any,
        headers: Mapping[str, str],
    ) -> Reply | None:
        if path.rstrip("/") != "/v1/messages":
            return error_reply(
                404, message=f"MessagesServer only serves POST /v1/messages, not {method} {path}."
            )
        if method != "POST":
            return error_reply(
                405,
                error_type="invalid_request_error",
                message=f"Use POST for /v1/messages, not {method}.",
            )
        if self._expected_api_key is not None:
            sent = headers.get("x-api-key")
            auth = headers.get("authorization", "")
            if auth.lower().startswith("bearer "):
                sent = sent or auth[7:]
            if sent != self._expected_api_key:
                return error_reply(401, message="invalid x-api-key")
        if not isinstance(parsed, dict):
            return error_reply(
                400, message=f"The request body is not a JSON object: {body[:200]!r}"
            )
        missing = [k for k in ("model", "max_tokens", "messages") if k not in parsed]
        if missing:
            return error_reply(400, message=f"Missing required field(s): {', '.join(missing)}.")
        if not isinstance(parsed["messages"], list):
            return error_reply(400, message="messages: expected a list of messages.")
        if parsed.get("stream"):
            return error_reply(
                400,
                message="MessagesServer does not stream; call messages.create without stream=True.",
            )
        return None

    def _next_reply(self, record: RecordedRequest) -> Reply:
        with self._lock:
            entry: ReplyLike | Handler | None
            if self._queue:
                entry = self._queue.popleft()
            else:
                entry = self._handler
        if entry is None:
            return error_reply(
                400,
                message=(
                    f"MessagesServer: no scripted reply left for request #{record.index} "
                    f"(the script is used up and there is no handler). Queue more replies "
                    f"with enqueue() or pass handler=."
                ),
            )
        if isinstance(entry, Reply):
            return entry
        if callable(entry):
            try:
                return self._coerce(entry(record.json))
            except Exception as exc:  # the script is user code: report, don't crash the server
                self._record_error(exc)
                return error_reply(
                    500,
                    message=f"MessagesServer: the scripted handler raised {exc!r}",
                    headers={"x-should-retry": "false"},
                )
        return self._coerce(entry)

    def _coerce(self, value: object) -> Reply:
        """A script entry or a handler's answer as a :class:`Reply`."""
        return _coerce_reply(value)

    def _current_latency(self) -> float:
        latency = self._latency() if callable(self._latency) else self._latency
        return max(0.0, float(latency))

    def _drop(self, h: _RequestHandler) -> None:
        h.close_connection = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _body(self, reply: Reply, request: Any, path: str) -> tuple[bytes, str]:
        """The bytes of ``reply`` and their content type (the API's wire format)."""
        if reply.message is not None:
            return json.dumps(
                self._complete_message(reply.message, request)
            ).encode(), reply.content_type
        if reply.json_body is not None:
            return json.dumps(reply.json_body).encode(), reply.content_type
        return reply.raw_body or b"", reply.content_type

    def _send(self, h: _RequestHandler, reply: Reply, request: Any = None, path: str = "") -> None:
        payload, content_type = self._body(reply, request, path)
        with self._lock:
            request_id = f"req_mock_{len(self._requests):06d}"
        h.send_response(reply.status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(payload)))
        h.send_header("request-id", request_id)
        for name, value in reply.headers.items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()

    def _complete_message(self, message: Mapping[str, Any], request: Any) -> dict[str, Any]:
        # deep copy; a Reply may be sent many times
        out: dict[str, Any] = json.loads(json.dumps(message))
        with self._lock:
            if "id" not in out:
                self._message_counter += 1
                out["id"] = f"msg_mock_{self._message_counter:06d}"
            for block in out.get("content", []):
                if (
                    isinstance(block, dict)
                    and block.get("type") == "tool_use"
                    and "id" not in block
                ):
                    self._tool_counter += 1
                    block["id"] = f"toolu_mock_{self._tool_counter:06d}"
        out.setdefault("type", "message")
        out.setdefault("role", "assistant")
        out.setdefault("content", [])
        out.setdefault("stop_reason", "end_turn")
        out.setdefault("stop_sequence", None)
        if "model" not in out:
            out["model"] = (
                request.get("model", "claude-mock") if isinstance(request, dict) else "claude-mock"
            )
        usage = dict(out.get("usage") or {})
        if "input_tokens" not in usage:
            usage["input_tokens"] = _estimate_tokens(
                {k: request.get(k) for k in ("system", "messages", "tools")}
                if isinstance(request, dict)
                else None
            )
        if "output_tokens" not in usage:
            usage["output_tokens"] = _estimate_tokens(out.get("content"))
        out["usage"] = usage
        return out


def _estimate_tokens(value: Any) -> int:
    """About four characters per token of compact JSON, at least 1: deterministic, not exact."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return max(1, len(text) // 4)
