"""Production traces in: Chat Completions, Messages and OTel GenAI logs read into traces.

A log is JSONL, one model call a line; calls that continue one another form one conversation.
Each conversation becomes a :class:`~agentprop._scenario.trace.Trace`, is judged by the spec's
contracts and the MFT of the path it ended on, and traces are grouped by (path, failure
signatures). Other formats are converted first (:mod:`agentprop._pipeline.import_formats`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agentprop._agents.project import Project
from agentprop._judge.contracts import (
    decision_in_enum,
    max_tool_calls,
    response_valid,
    within_scope,
)
from agentprop._judge.properties import mft_verdicts
from agentprop._judge.verdict import Verdict
from agentprop._pipeline.import_formats import (
    event_messages,
    json_items,
    json_lines,
    langsmith_conversations,
    phoenix_conversations,
    responses_messages,
)
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import ToolCall, Trace, Turn
from agentprop.errors import InputError, SourceLocation

__all__ = [
    "FORMATS",
    "ChatRecord",
    "ImportSummary",
    "JudgedTrace",
    "MessagesRecord",
    "anthropic_trace_of",
    "detect_format",
    "judge_trace",
    "read_log",
    "read_openai_chat",
    "summarise",
]

CHAT_SHAPE = '{"request": {"messages": [...]}, "response": {"choices": [{"message": {...}}]}}'


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatRequest(_Loose):
    messages: list[dict[str, Any]]


class ChatChoice(_Loose):
    message: dict[str, Any]


class ChatResponse(_Loose):
    choices: list[ChatChoice]


class ChatRecord(_Loose):
    """One logged Chat Completions call: the request body and the response body."""

    request: ChatRequest
    response: ChatResponse

    def conversation(self) -> list[dict[str, Any]]:
        reply = [self.response.choices[0].message] if self.response.choices else []
        return [*self.request.messages, *reply]


class MessagesRequest(_Loose):
    messages: list[dict[str, Any]]


class MessagesResponse(_Loose):
    content: list[dict[str, Any]]


class MessagesRecord(_Loose):
    """One logged Anthropic Messages call: the request body and the response body."""

    request: MessagesRequest
    response: MessagesResponse

    def conversation(self) -> list[dict[str, Any]]:
        return [*self.request.messages, {"role": "assistant", "content": self.response.content}]


MESSAGES_SHAPE = (
    '{"request": {"messages": [...]}, "response": {"type": "message", "content": [...]}}'
)


class ResponsesRequest(_Loose):
    input: str | list[dict[str, Any]]
    previous_response_id: str | None = None


class ResponsesResponse(_Loose):
    id: str = ""
    output: list[dict[str, Any]]


class ResponsesRecord(_Loose):
    """One logged Responses API call: the request body and the response body. A request that
    names a ``previous_response_id`` continues that response's conversation."""

    request: ResponsesRequest
    response: ResponsesResponse


RESPONSES_SHAPE = (
    '{"request": {"input": [...]}, "response": {"object": "response", "output": [...]}}'
)
LANGSMITH_SHAPE = (
    '{"id": ..., "trace_id": ..., "run_type": "llm", "inputs": {"messages": [...]}, "outputs": '
    "{...}}, one run a line or a JSON array"
)
PHOENIX_SHAPE = (
    '{"context": {"trace_id": ...}, "attributes": {"openinference.span.kind": "LLM", '
    '"llm.input_messages": ...}}, one span a line or a JSON array'
)

FORMATS = ("openai-chat", "openai-responses", "anthropic-messages", "otel", "langsmith", "phoenix")
"""The formats read: Chat Completions, Responses and Messages API calls (one {request, response}
a line), OTLP JSON GenAI spans, LangSmith runs and Phoenix (OpenInference) spans."""

_MODELS: dict[
    str, tuple[type[ChatRecord] | type[MessagesRecord] | type[ResponsesRecord], str, str]
] = {
    "openai-chat": (ChatRecord, CHAT_SHAPE, "Chat Completions"),
    "openai-responses": (ResponsesRecord, RESPONSES_SHAPE, "Responses API"),
    "anthropic-messages": (MessagesRecord, MESSAGES_SHAPE, "Anthropic Messages"),
}


def _canonical(value: Any) -> Any:
    """``value`` without the fields that say nothing: ``None``, ``[]`` and ``{}`` values. An
    SDK's dump of a reply (``response.model_dump()``) spells out ``"refusal": null``,
    ``"audio": null`` ...; the same message sent back in the next request usually does not."""
    if isinstance(value, dict):
        kept = {k: _canonical(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _key(messages: list[dict[str, Any]]) -> str:
    """The digest of a conversation so far: equal for the same messages however they were
    serialised (key order, fields left out or given as null)."""
    return hashlib.sha256(
        json.dumps(_canonical(messages), sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()


def _records(
    path: Path, fmt: str
) -> Iterator[tuple[int, ChatRecord | MessagesRecord | ResponsesRecord]]:
    model, shape, label = _MODELS[fmt]
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror or exc}", fix="give the path of a JSONL log"
        ) from None
    with handle:
        lines = json_lines(
            handle,
            path,
            expected=f"one JSON object a line: {shape}",
            fix="write each logged call on one line; drop truncated lines",
        )
        for number, data in lines:
            try:
                yield number, model.model_validate(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(the line)"
                raise InputError(
                    f"line {number} is not a logged {label} call: {where}: {first['msg']}",
                    location=SourceLocation(path, number),
                    expected=shape,
                    fix="log the request body and the response body of each call "
                    "under those two keys"
                    + (
                        ""
                        if fmt == "openai-chat"
                        else f", or pass the log's --format ({', '.join(FORMATS)})"
                    ),
                ) from None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return {}, "arguments are not valid JSON"
    return (value, None) if isinstance(value, dict) else ({}, "arguments are not a JSON object")


def trace_of(messages: list[dict[str, Any]], *, case_id: str = "", spec_id: str = "") -> Trace:
    """The trace of one Chat Completions conversation."""
    trace = Trace(case_id=case_id, spec_id=spec_id, agent="imported")
    turn: Turn | None = None
    calls: dict[str, ToolCall] = {}
    for message in messages:
        role = message.get("role")
        if role == "user":
            turn = Turn(index=len(trace.turns), user_message=_text(message.get("content")))
            trace.turns.append(turn)
            continue
        if turn is None:
            continue  # system / developer messages before the first user message
        if role == "assistant":
            said = _text(message.get("content"))
            if said:
                turn.text = f"{turn.text}\n{said}" if turn.text else said
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                name = str(function.get("name", ""))
                args, problem = _arguments(function.get("arguments"))
                if name == "respond" and problem is None:
                    turn.response = args
                    continue
                recorded = ToolCall(
                    name=name, args=args, turn_index=turn.index, step=len(turn.tool_calls)
                )
                if problem is not None:
                    recorded.error, recorded.error_kind = problem, "invalid_arguments"
                turn.tool_calls.append(recorded)
                calls[str(call.get("id", ""))] = recorded
        elif role == "tool":
            target = calls.get(str(message.get("tool_call_id", "")))
            if target is None:
                continue
            content = _text(message.get("content"))
            if content.startswith("error:"):
                target.error = content.removeprefix("error:").strip()
                target.error_kind = target.error.split(":", 1)[0].strip() or None
                continue
            try:
                target.result = json.loads(content)
            except json.JSONDecodeError:
                target.result = content
    return trace


def anthropic_trace_of(
    messages: list[dict[str, Any]], *, case_id: str = "", spec_id: str = ""
) -> Trace:
    """The trace of one Messages API conversation: ``tool_use`` blocks are calls (``respond``
    the response), ``tool_result`` blocks their outputs (``is_error``: the call's error), and a
    user message with text starts a turn."""
    trace = Trace(case_id=case_id, spec_id=spec_id, agent="imported")
    turn: Turn | None = None
    calls: dict[str, ToolCall] = {}
    for message in messages:
        content = message.get("content")
        blocks = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else [b for b in content or [] if isinstance(b, dict)]
        )
        if message.get("role") == "user":
            for block in blocks:
                target = (
                    calls.get(str(block.get("tool_use_id", "")))
                    if block.get("type") == "tool_result"
                    else None
                )
                if target is None:
                    continue
                text = _text(block.get("content"))
                if block.get("is_error"):
                    target.error = text
                    target.error_kind = text.split(":", 1)[0].strip() or None
                    continue
                try:
                    target.result = json.loads(text)
                except json.JSONDecodeError:
                    target.result = text
            said = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            if said:
                turn = Turn(index=len(trace.turns), user_message=said)
                trace.turns.append(turn)
            continue
        if turn is None:
            continue
        for block in blocks:
            if block.get("type") == "text" and block.get("text"):
                turn.text = f"{turn.text}\n{block['text']}" if turn.text else str(block["text"])
            elif block.get("type") == "tool_use":
                args = block.get("input") if isinstance(block.get("input"), dict) else {}
                assert isinstance(args, dict)
                if block.get("name") == "respond":
                    turn.response = args
                    continue
                recorded = ToolCall(
                    name=str(block.get("name", "")),
                    args=args,
                    turn_index=turn.index,
                    step=len(turn.tool_calls),
                )
                turn.tool_calls.append(recorded)
                calls[str(block.get("id", ""))] = recorded
    return trace


OTLP_SHAPE = (
    '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": ..., "name": ..., '
    '"attributes": [...]}]}]}]}'
)


def _attribute(value: Any) -> Any:
    """The plain value of an OTLP JSON ``AnyValue``."""
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_attribute(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return {
            str(kv.get("key")): _attribute(kv.get("value"))
            for kv in value["kvlistValue"].get("values", [])
            if isinstance(kv, dict)
        }
    return None


def _json_attribute(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _otel_as_chat(messages: list[Any]) -> list[dict[str, Any]]:
    """GenAI semantic-convention messages (``{role, parts}``, parts ``text`` / ``tool_call`` /
    ``tool_call_response``) as Chat Completions messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
        text = "".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
        calls = [
            {
                "id": str(p.get("id") or ""),
                "type": "function",
                "function": {
                    "name": str(p.get("name", "")),
                    "arguments": p.get("arguments")
                    if isinstance(p.get("arguments"), str)
                    else json.dumps(p.get("arguments") or {}),
                },
            }
            for p in parts
            if p.get("type") == "tool_call"
        ]
        for p in parts:
            if p.get("type") == "tool_call_response":
                response = p.get("response")
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(p.get("id") or ""),
                        "content": response if isinstance(response, str) else json.dumps(response),
                    }
                )
        role = message.get("role")
        if role == "assistant":
            out.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    **({"tool_calls": calls} if calls else {}),
                }
            )
        elif role in ("user", "system") and text:
            out.append({"role": role, "content": text})
    return out


def _otel_documents(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The OTLP JSON documents of a file: one export request, or one a line as the Collector's
    file exporter writes them; each must hold ``resourceSpans`` or ``resourceLogs``."""
    text = path.read_text(encoding="utf-8")
    try:
        documents = [(1, json.loads(text))]
    except json.JSONDecodeError:
        documents = list(
            json_lines(
                text.splitlines(),
                path,
                expected=f"OTLP JSON: {OTLP_SHAPE}, the whole file or one export a line",
                fix="export the spans with the OTLP JSON file exporter; drop truncated lines",
            )
        )
    for number, document in documents:
        if not isinstance(document, dict) or not (
            isinstance(document.get("resourceSpans"), list)
            or isinstance(document.get("resourceLogs"), list)
        ):
            raise InputError(
                "not OTLP JSON: no resourceSpans list",
                location=SourceLocation(path, number),
                expected=OTLP_SHAPE,
                fix="export the spans with the OTLP JSON file exporter (or "
                "pass the log's --format)",
            )
        yield number, document


def _attributes(item: dict[str, Any]) -> dict[str, Any]:
    return {
        str(a.get("key")): _attribute(a.get("value"))
        for a in item.get("attributes") or []
        if isinstance(a, dict)
    }


def _otel_spans(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every span of an OTLP JSON file, with the line it came from; log records (GenAI events
    exported as logs) are yielded as ``{"logRecord": ...}``."""
    for number, document in _otel_documents(path):
        for resource in document.get("resourceSpans") or []:
            for scope in (resource or {}).get("scopeSpans") or []:
                for span in (scope or {}).get("spans") or []:
                    if isinstance(span, dict):
                        yield number, span
        for resource in document.get("resourceLogs") or []:
            for scope in (resource or {}).get("scopeLogs") or []:
                for record in (scope or {}).get("logRecords") or []:
                    if isinstance(record, dict):
                        yield number, {"logRecord": record}


def _span_messages(attributes: dict[str, Any], span: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The Chat messages of one inference span: its ``gen_ai.input.messages`` /
    ``gen_ai.output.messages`` attributes, else the same on its
    ``gen_ai.client.inference.operation.details`` event, else its per-message events
    (``gen_ai.user.message`` ...); ``None`` when it records no messages."""
    sources = [attributes] + [
        _attributes(e)
        for e in span.get("events") or []
        if isinstance(e, dict) and e.get("name") == DETAILS_EVENT
    ]
    for source in sources:
        inputs = _json_attribute(source.get("gen_ai.input.messages"))
        if isinstance(inputs, list):
            outputs = _json_attribute(source.get("gen_ai.output.messages"))
            return _otel_as_chat([*inputs, *(outputs if isinstance(outputs, list) else [])])
    events = [
        (str(e.get("name", "")), _attributes(e))
        for e in span.get("events") or []
        if isinstance(e, dict)
    ]
    chat = event_messages(events)
    return chat or None


DETAILS_EVENT = "gen_ai.client.inference.operation.details"
"""The GenAI event that carries one inference call's messages as attributes."""


def read_otel(
    path: Path, *, spec_id: str = "", progress: Callable[[int], None] | None = None
) -> list[Trace]:
    """The conversations of OTel GenAI spans, one per trace id: the messages of its last
    inference span (``gen_ai.input.messages`` then ``gen_ai.output.messages``, as attributes or
    on the ``gen_ai.client.inference.operation.details`` event, or one event a message:
    ``gen_ai.user.message`` ..., as span events or OTLP log records of the span), tool outputs
    missing there filled from ``execute_tool`` spans (``gen_ai.tool.call.id`` /
    ``gen_ai.tool.call.result``). Trace ids name the traces."""
    last: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    results: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    logged: dict[tuple[str, str], tuple[int, list[tuple[str, dict[str, Any]]]]] = {}

    def keep(trace_id: str, started: int, messages: list[dict[str, Any]]) -> None:
        if trace_id not in last:
            order.append(trace_id)
        if trace_id not in last or started >= last[trace_id][0]:
            last[trace_id] = (started, messages)

    for n, (_, span) in enumerate(_otel_spans(path), 1):
        if progress is not None:
            progress(n)
        record = span.get("logRecord")
        if isinstance(record, dict):
            attributes = _attributes(record)
            name = str(record.get("eventName") or attributes.get("event.name") or "")
            body = _attribute(record.get("body"))
            fields = body if isinstance(body, dict) else attributes
            key = (str(record.get("traceId", "")), str(record.get("spanId", "")))
            started = int(record.get("timeUnixNano") or 0)
            logged.setdefault(key, (started, []))[1].append((name, fields))
            continue
        attributes = _attributes(span)
        trace_id = str(span.get("traceId", ""))
        if (
            attributes.get("gen_ai.operation.name") == "execute_tool"
            and attributes.get("gen_ai.tool.call.id") is not None
        ):
            if "gen_ai.tool.call.result" in attributes:
                results.setdefault(trace_id, {})[str(attributes["gen_ai.tool.call.id"])] = (
                    _json_attribute(attributes["gen_ai.tool.call.result"])
                )
        messages = _span_messages(attributes, span)
        if messages is not None:
            keep(trace_id, int(span.get("startTimeUnixNano") or 0), messages)
    for (trace_id, _), (started, events) in logged.items():
        chat = event_messages(events)
        if chat:
            keep(trace_id, started, chat)
    traces = []
    for trace_id in order:
        messages = last[trace_id][1]
        trace = trace_of(messages, case_id=f"trace {trace_id}", spec_id=spec_id)
        filled = results.get(trace_id, {})
        if filled:
            _fill_results(trace, messages, filled)
        traces.append(trace)
    return traces


def _fill_results(trace: Trace, messages: list[dict[str, Any]], results: dict[str, Any]) -> None:
    """Tool outputs from ``execute_tool`` spans for calls the messages left without one, matched
    by call id in the order the calls were made."""
    ids = [
        str(call.get("id") or "")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
        if isinstance(call, dict) and (call.get("function") or {}).get("name") != "respond"
    ]
    calls = [c for turn in trace.turns for c in turn.tool_calls]
    for call, call_id in zip(calls, ids):
        if call.result is None and call.error is None and call_id in results:
            call.result = results[call_id]


def detect_format(path: Path) -> str:
    """The format of a log from its head: OTLP JSON has ``resourceSpans`` / ``resourceLogs``; a
    LangSmith run ``run_type``; a Phoenix span ``context`` and ``attributes``; a logged call's
    response ``output`` (Responses), ``content`` (Messages) or ``choices`` (Chat); ``openai-chat``
    when nothing tells."""
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(4096)
        if '"resourceSpans"' in head or '"resourceLogs"' in head:
            return "otel"
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        item = (
            next((i for _, i in json_items(path, shape="", fix="")), None)
            if first.lstrip().startswith("[")
            else json.loads(first)
        )
    except (OSError, json.JSONDecodeError, InputError):
        return "openai-chat"  # the reader names the problem, with the line
    if isinstance(item, dict) and isinstance(item.get("runs"), list) and item["runs"]:
        item = item["runs"][0]
    if isinstance(item, dict) and isinstance(item.get("data"), list) and item["data"]:
        item = item["data"][0]
    if not isinstance(item, dict):
        return "openai-chat"
    if "run_type" in item:
        return "langsmith"
    if isinstance(item.get("context"), dict) and "attributes" in item:
        return "phoenix"
    response = item.get("response")
    if isinstance(response, dict) and "output" in response and "choices" not in response:
        return "openai-responses"
    return (
        "anthropic-messages"
        if isinstance(response, dict) and "content" in response and "choices" not in response
        else "openai-chat"
    )


def _responses_conversations(
    path: Path, progress: Callable[[int], None] | None
) -> list[tuple[int, list[dict[str, Any]], list[dict[str, Any]]]]:
    """(line, request messages, whole conversation) of each Responses API call, its
    ``previous_response_id`` chain put in front."""
    done: dict[str, list[dict[str, Any]]] = {}
    out: list[tuple[int, list[dict[str, Any]], list[dict[str, Any]]]] = []
    for number, record in _records(path, "openai-responses"):
        assert isinstance(record, ResponsesRecord)
        before = (
            done.get(record.request.previous_response_id or "", [])
            if record.request.previous_response_id
            else []
        )
        request = [*before, *responses_messages(record.request.input)]
        whole = [*request, *responses_messages(record.response.output)]
        if record.response.id:
            done[record.response.id] = whole
        out.append((number, request, whole))
        if progress is not None:
            progress(len(out))
    return out


def _exported(
    path: Path, fmt: str, spec_id: str, progress: Callable[[int], None] | None
) -> list[Trace]:
    """LangSmith runs or Phoenix spans: one trace per trace id."""
    shape = LANGSMITH_SHAPE if fmt == "langsmith" else PHOENIX_SHAPE
    items = []
    for n, item in enumerate(
        json_items(
            path, shape=shape, fix="export the runs (spans) as JSON, one a line or one array"
        ),
        1,
    ):
        items.append(item)
        if progress is not None:
            progress(n)
    conversations = (
        langsmith_conversations(items) if fmt == "langsmith" else phoenix_conversations(items)
    )
    return [
        trace_of(messages, case_id=f"trace {trace_id}", spec_id=spec_id)
        for trace_id, messages in conversations
    ]


def read_log(
    path: Path,
    fmt: str = "openai-chat",
    *,
    spec_id: str = "",
    progress: Callable[[int], None] | None = None,
) -> list[Trace]:
    """The conversations of a JSONL log of ``fmt`` (:data:`FORMATS`), as traces (ids
    ``line N``: the line of the conversation's last call)."""
    if fmt == "otel":
        return read_otel(path, spec_id=spec_id, progress=progress)
    if fmt in ("langsmith", "phoenix"):
        return _exported(path, fmt, spec_id, progress)
    build = anthropic_trace_of if fmt == "anthropic-messages" else trace_of
    calls: list[tuple[int, list[dict[str, Any]], list[dict[str, Any]]]] = []
    if fmt == "openai-responses":
        calls = _responses_conversations(path, progress)
    else:
        for number, record in _records(path, fmt):
            assert not isinstance(record, ResponsesRecord)
            calls.append((number, record.request.messages, record.conversation()))
            if progress is not None:
                progress(len(calls))
    prefixes: set[str] = set()
    for _, request, _ in calls:
        for k in range(1, len(request) + 1):
            prefixes.add(_key(request[:k]))
    return [
        build(messages, case_id=f"line {number}", spec_id=spec_id)
        for number, _, messages in calls
        if _key(messages) not in prefixes
    ]


def read_openai_chat(
    path: Path, *, spec_id: str = "", progress: Callable[[int], None] | None = None
) -> list[Trace]:
    """:func:`read_log` of a Chat Completions log."""
    return read_log(path, "openai-chat", spec_id=spec_id, progress=progress)


@dataclass
class JudgedTrace:
    """A trace, the path (case id) it took and the contracts it broke."""

    trace: Trace
    path: str | None
    failures: list[Verdict]
    fits: tuple[str, ...] = ()
    """For a conversation answered in text (no ``respond`` in the log, so no node or decision
    to tell its path by): the paths its tool calls fit best; ``path`` is set when one does."""

    @property
    def in_text(self) -> bool:
        """Whether the path was told by the tool calls alone (answered in text)."""
        return bool(self.fits)

    @property
    def signatures(self) -> tuple[str, ...]:
        return tuple(sorted({v.signature for v in self.failures}))


def _ends_at(scenario: Scenario, trace: Trace) -> bool:
    response = trace.turns[-1].response if trace.turns else None
    node = response.get("node_id") if isinstance(response, dict) else None
    return len(scenario.turns) == len(trace.turns) and node in (
        scenario.leaf,
        *(scenario.turns[-1].nodes[-1:] if scenario.turns else []),
    )


_OF_THE_RESPONSE = frozenset({"response_valid", "decision_is", "decision_in_enum"})
"""Contracts on the structured ``respond`` a conversation answered in text does not have."""


def _answered_in_text(trace: Trace) -> bool:
    return bool(trace.turns) and all(t.response is None for t in trace.turns)


def _judge_text_answers(
    project: Project, trace: Trace, scenarios: list[Scenario], general: list[Verdict]
) -> JudgedTrace:
    """A conversation that never called ``respond`` (a production agent answering in text):
    no node or decision says where it ended, so its path is the case of as many turns whose
    tool contracts it breaks the fewest of, when one case does; what the response contract and
    the decision require is not checked (there is no response to check)."""
    grounding = project.bindings.response_grounding(project.spec)
    ranked: list[tuple[int, Scenario, list[Verdict]]] = []
    for scenario in scenarios:
        if len(scenario.turns) != len(trace.turns):
            continue
        broken = [
            v
            for v in mft_verdicts(project.spec, scenario, trace, grounding=grounding)
            if not v.passed and v.contract not in _OF_THE_RESPONSE
        ]
        ranked.append((len(broken), scenario, broken))
    failures = [v for v in general if not v.passed and v.contract not in _OF_THE_RESPONSE]
    if not ranked:
        return JudgedTrace(trace, None, failures, fits=("none",))
    fewest = min(n for n, _, _ in ranked)
    best = [(sc, broken) for n, sc, broken in ranked if n == fewest]
    fits = tuple(sc.id for sc, _ in best)
    if len(best) > 1:
        return JudgedTrace(trace, None, failures, fits=fits)
    seen = {v.signature for v in failures}
    failures += [v for v in best[0][1] if v.signature not in seen]
    return JudgedTrace(trace, best[0][0].id, failures, fits=fits)


def judge_trace(project: Project, trace: Trace, scenarios: list[Scenario]) -> JudgedTrace:
    """Judge ``trace`` by the spec's contracts, and by the MFT of the case among ``scenarios``
    that ends where it responded and that it breaks the fewest contracts of (a conversation
    answered in text: see :func:`_judge_text_answers`)."""
    spec = project.spec
    tools = [t.name for t in spec.tools if t.name != "respond"]
    general = [
        decision_in_enum(trace, spec),
        response_valid(trace, spec),
        within_scope(trace, tools),
        max_tool_calls(trace, spec.max_tool_calls_per_turn),
    ]
    if _answered_in_text(trace):
        return _judge_text_answers(project, trace, scenarios, general)
    best: tuple[Scenario, list[Verdict]] | None = None
    grounding = project.bindings.response_grounding(spec)
    for scenario in scenarios:
        if not _ends_at(scenario, trace):
            continue
        broken = [
            v for v in mft_verdicts(spec, scenario, trace, grounding=grounding) if not v.passed
        ]
        if best is None or len(broken) < len(best[1]):
            best = (scenario, broken)
    failures = [v for v in general if not v.passed]
    if best is not None:
        seen = {v.signature for v in failures}
        failures += [v for v in best[1] if v.signature not in seen]
    return JudgedTrace(trace, best[0].id if best is not None else None, failures)


@dataclass
class ImportSummary:
    """Imported traces grouped by (path, failure signatures): one group a behaviour."""

    traces: int = 0
    groups: dict[tuple[str | None, tuple[str, ...]], list[JudgedTrace]] = field(
        default_factory=dict
    )

    @property
    def passed(self) -> int:
        return sum(len(g) for (_, sigs), g in self.groups.items() if not sigs)

    def lines(self) -> list[str]:
        broke = self.traces - self.passed
        out = [
            f"{self.traces} trace(s): {self.passed} passed, {broke} failed (broke a contract); "
            f"{len(self.groups)} distinct behaviour(s)"
        ]
        for (path, sigs), group in sorted(
            self.groups.items(), key=lambda item: (-len(item[1]), str(item[0]))
        ):
            where = path or "no case of the spec ends where it responded"
            fits = group[0].fits
            in_text = sum(j.in_text for j in group)
            if in_text and path is not None:
                where += (
                    " (told by its tool calls: answered in text, no respond)"
                    if in_text == len(group)
                    else f" ({in_text} of them told by their tool calls: answered in text)"
                )
            elif fits == ("none",):
                where = "not told: answered in text, and no case of the spec has as many turns"
            elif fits:
                where = (
                    f"not told: answered in text, and its tool calls fit {len(fits)} cases "
                    f"equally ({', '.join(fits[:3])}{', ...' if len(fits) > 3 else ''})"
                )
            verdict = "ok" if not sigs else "broke " + ", ".join(sigs)
            ids = ", ".join(j.trace.case_id for j in group[:3]) + (
                ", ..." if len(group) > 3 else ""
            )
            out.append(f"  {len(group)} x path {where}: {verdict} ({ids})")
        return out


def summarise(judged: list[JudgedTrace]) -> ImportSummary:
    summary = ImportSummary(traces=len(judged))
    for j in judged:
        summary.groups.setdefault((j.path, j.signatures), []).append(j)
    return summary
