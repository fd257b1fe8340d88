"""Production traces in: Chat Completions, Messages and OTel GenAI logs read into traces.

A log is JSONL, one model call a line: ``{"request": {...}, "response": {...}}``, the request
and response bodies as the APIs document them: ``POST /v1/chat/completions`` (the request's
``messages``; the response's ``choices[0].message`` with ``content`` and ``tool_calls``; tool
results as ``role: "tool"`` messages with ``tool_call_id``) or ``POST /v1/messages`` (the
request's ``messages``; the response's ``content`` blocks, ``tool_use`` calls answered by
``tool_result`` blocks, ``is_error`` for a failure). A conversation is the messages of its
last call plus that call's reply: a call whose messages and reply are the start of a later
call's messages is part of that later conversation. OTel GenAI spans: see :func:`read_otel`.

Each conversation becomes a :class:`~agentprop._scenario.trace.Trace` (one turn per user
message; ``respond`` calls are its responses) and is judged by the spec's contracts: the
spec-wide ones (decision in the enum, response contract, tools in scope, call limit) and the
MFT of the spec's case that ends where the trace responded (its path), the case it breaks the
fewest contracts of. Traces are grouped by (path, failure signatures). Not read here: the
Responses API, LangSmith / Phoenix exports; no case or corpus entry is written.
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
from agentprop._decide.contracts import Verdict, decision_in_enum, max_tool_calls, response_valid, within_scope
from agentprop._decide.properties import mft_verdicts
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


MESSAGES_SHAPE = '{"request": {"messages": [...]}, "response": {"type": "message", "content": [...]}}'

FORMATS = ("openai-chat", "anthropic-messages", "otel")
"""The log formats read: Chat Completions and Messages API calls, one {request, response} a line."""

_MODELS: dict[str, tuple[type[ChatRecord] | type[MessagesRecord], str, str]] = {
    "openai-chat": (ChatRecord, CHAT_SHAPE, "Chat Completions"),
    "anthropic-messages": (MessagesRecord, MESSAGES_SHAPE, "Anthropic Messages"),
}


def _key(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _records(path: Path, fmt: str) -> Iterator[tuple[int, ChatRecord | MessagesRecord]]:
    model, shape, label = _MODELS[fmt]
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}", fix="give the path of a JSONL log") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"line {number} is not JSON ({exc.msg})",
                    location=SourceLocation(path, number, exc.colno),
                    expected=f"one JSON object a line: {shape}",
                    fix="write each logged call on one line; drop truncated lines",
                ) from None
            try:
                yield number, model.model_validate(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(the line)"
                raise InputError(
                    f"line {number} is not a logged {label} call: {where}: {first['msg']}",
                    location=SourceLocation(path, number),
                    expected=shape,
                    fix="log the request body and the response body of each call under those two keys"
                    + ("" if fmt == "openai-chat" else f", or pass the log's --format ({', '.join(FORMATS)})"),
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
                recorded = ToolCall(name=name, args=args, turn_index=turn.index, step=len(turn.tool_calls))
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


def anthropic_trace_of(messages: list[dict[str, Any]], *, case_id: str = "", spec_id: str = "") -> Trace:
    """The trace of one Messages API conversation: ``tool_use`` blocks are calls (``respond``
    the response), ``tool_result`` blocks their outputs (``is_error``: the call's error), and a
    user message with text starts a turn."""
    trace = Trace(case_id=case_id, spec_id=spec_id, agent="imported")
    turn: Turn | None = None
    calls: dict[str, ToolCall] = {}
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [b for b in content or [] if isinstance(b, dict)]
        if message.get("role") == "user":
            for block in blocks:
                target = calls.get(str(block.get("tool_use_id", ""))) if block.get("type") == "tool_result" else None
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
                recorded = ToolCall(name=str(block.get("name", "")), args=args, turn_index=turn.index, step=len(turn.tool_calls))
                turn.tool_calls.append(recorded)
                calls[str(block.get("id", ""))] = recorded
    return trace


OTLP_SHAPE = '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": ..., "name": ..., "attributes": [...]}]}]}]}'


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
                    "arguments": p.get("arguments") if isinstance(p.get("arguments"), str) else json.dumps(p.get("arguments") or {}),
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
            out.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
        elif role in ("user", "system") and text:
            out.append({"role": role, "content": text})
    return out


def _otel_spans(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every span of an OTLP JSON file (one export request, or one a line as the Collector's
    file exporter writes), with the line it came from."""
    text = path.read_text(encoding="utf-8")
    try:
        documents = [(1, json.loads(text))]
    except json.JSONDecodeError:
        documents = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                documents.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"line {number} is not JSON ({exc.msg})",
                    location=SourceLocation(path, number, exc.colno),
                    expected=f"OTLP JSON: {OTLP_SHAPE}, the whole file or one export a line",
                    fix="export the spans with the OTLP JSON file exporter; drop truncated lines",
                ) from None
    for number, document in documents:
        resource_spans = document.get("resourceSpans") if isinstance(document, dict) else None
        if not isinstance(resource_spans, list):
            raise InputError(
                "not OTLP JSON: no resourceSpans list",
                location=SourceLocation(path, number),
                expected=OTLP_SHAPE,
                fix="export the spans with the OTLP JSON file exporter (or pass the log's --format)",
            )
        for resource in resource_spans:
            for scope in (resource or {}).get("scopeSpans") or []:
                for span in (scope or {}).get("spans") or []:
                    if isinstance(span, dict):
                        yield number, span


def read_otel(path: Path, *, spec_id: str = "", progress: Callable[[int], None] | None = None) -> list[Trace]:
    """The conversations of OTel GenAI spans, one per trace id: the messages of its last
    inference span (``gen_ai.input.messages`` then ``gen_ai.output.messages``), tool outputs
    missing there filled from ``execute_tool`` spans (``gen_ai.tool.call.id`` /
    ``gen_ai.tool.call.result``). Trace ids name the traces."""
    last: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    results: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for n, (_, span) in enumerate(_otel_spans(path), 1):
        attributes = {a.get("key"): _attribute(a.get("value")) for a in span.get("attributes") or [] if isinstance(a, dict)}
        trace_id = str(span.get("traceId", ""))
        if attributes.get("gen_ai.operation.name") == "execute_tool" and attributes.get("gen_ai.tool.call.id") is not None:
            if "gen_ai.tool.call.result" in attributes:
                results.setdefault(trace_id, {})[str(attributes["gen_ai.tool.call.id"])] = _json_attribute(attributes["gen_ai.tool.call.result"])
        inputs = _json_attribute(attributes.get("gen_ai.input.messages"))
        if isinstance(inputs, list):
            outputs = _json_attribute(attributes.get("gen_ai.output.messages"))
            messages = [*inputs, *(outputs if isinstance(outputs, list) else [])]
            started = int(span.get("startTimeUnixNano") or 0)
            if trace_id not in last:
                order.append(trace_id)
            if trace_id not in last or started >= last[trace_id][0]:
                last[trace_id] = (started, messages)
        if progress is not None:
            progress(n)
    traces = []
    for trace_id in order:
        trace = trace_of(_otel_as_chat(last[trace_id][1]), case_id=f"trace {trace_id}", spec_id=spec_id)
        filled = results.get(trace_id, {})
        if filled:
            _fill_results(trace, last[trace_id][1], filled)
        traces.append(trace)
    return traces


def _fill_results(trace: Trace, messages: list[Any], results: dict[str, Any]) -> None:
    """Tool outputs from ``execute_tool`` spans for calls the messages left without one, matched
    by call id in the order the calls were made."""
    ids = [
        str(p.get("id") or "")
        for m in messages
        if isinstance(m, dict) and m.get("role") == "assistant"
        for p in m.get("parts") or []
        if isinstance(p, dict) and p.get("type") == "tool_call" and p.get("name") != "respond"
    ]
    calls = [c for turn in trace.turns for c in turn.tool_calls]
    for call, call_id in zip(calls, ids):
        if call.result is None and call.error is None and call_id in results:
            call.result = results[call_id]


def detect_format(path: Path) -> str:
    """The format of a log from its first line: a Chat Completions response has ``choices``,
    a Messages response ``content``; ``openai-chat`` when neither tells."""
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(4096)
        if '"resourceSpans"' in head:
            return "otel"
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        response = json.loads(first).get("response") if first else None
    except (OSError, json.JSONDecodeError, AttributeError):
        return "openai-chat"  # the reader names the problem, with the line
    return "anthropic-messages" if isinstance(response, dict) and "content" in response and "choices" not in response else "openai-chat"


def read_log(path: Path, fmt: str = "openai-chat", *, spec_id: str = "", progress: Callable[[int], None] | None = None) -> list[Trace]:
    """The conversations of a JSONL log of ``fmt`` (:data:`FORMATS`), as traces (ids
    ``line N``: the line of the conversation's last call)."""
    if fmt == "otel":
        return read_otel(path, spec_id=spec_id, progress=progress)
    build = trace_of if fmt == "openai-chat" else anthropic_trace_of
    conversations: list[tuple[int, list[dict[str, Any]]]] = []
    prefixes: set[str] = set()
    for number, record in _records(path, fmt):
        messages = record.request.messages
        for k in range(1, len(messages) + 1):
            prefixes.add(_key(messages[:k]))
        conversations.append((number, record.conversation()))
        if progress is not None:
            progress(len(conversations))
    return [build(messages, case_id=f"line {number}", spec_id=spec_id) for number, messages in conversations if _key(messages) not in prefixes]


def read_openai_chat(path: Path, *, spec_id: str = "", progress: Callable[[int], None] | None = None) -> list[Trace]:
    """:func:`read_log` of a Chat Completions log."""
    return read_log(path, "openai-chat", spec_id=spec_id, progress=progress)


@dataclass
class JudgedTrace:
    """A trace, the path (case id) it took and the contracts it broke."""

    trace: Trace
    path: str | None
    failures: list[Verdict]

    @property
    def signatures(self) -> tuple[str, ...]:
        return tuple(sorted({v.signature for v in self.failures}))


def _ends_at(scenario: Scenario, trace: Trace) -> bool:
    response = trace.turns[-1].response if trace.turns else None
    node = response.get("node_id") if isinstance(response, dict) else None
    return len(scenario.turns) == len(trace.turns) and node in (scenario.leaf, *(scenario.turns[-1].nodes[-1:] if scenario.turns else []))


def judge_trace(project: Project, trace: Trace, scenarios: list[Scenario]) -> JudgedTrace:
    """Judge ``trace`` by the spec's contracts, and by the MFT of the case among ``scenarios``
    that ends where it responded and that it breaks the fewest contracts of."""
    spec = project.spec
    tools = [t.name for t in spec.tools if t.name != "respond"]
    general = [
        decision_in_enum(trace, spec),
        response_valid(trace, spec),
        within_scope(trace, tools),
        max_tool_calls(trace, spec.max_tool_calls_per_turn),
    ]
    best: tuple[Scenario, list[Verdict]] | None = None
    grounding = project.bindings.response_grounding(spec)
    for scenario in scenarios:
        if not _ends_at(scenario, trace):
            continue
        broken = [v for v in mft_verdicts(spec, scenario, trace, grounding=grounding) if not v.passed]
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
    groups: dict[tuple[str | None, tuple[str, ...]], list[JudgedTrace]] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        return sum(len(g) for (_, sigs), g in self.groups.items() if not sigs)

    def lines(self) -> list[str]:
        broke = self.traces - self.passed
        out = [f"{self.traces} trace(s): {self.passed} passed, {broke} failed (broke a contract); {len(self.groups)} distinct behaviour(s)"]
        for (path, sigs), group in sorted(self.groups.items(), key=lambda item: (-len(item[1]), str(item[0]))):
            where = path or "no case of the spec ends where it responded"
            verdict = "ok" if not sigs else "broke " + ", ".join(sigs)
            ids = ", ".join(j.trace.case_id for j in group[:3]) + (", ..." if len(group) > 3 else "")
            out.append(f"  {len(group)} x path {where}: {verdict} ({ids})")
        return out


def summarise(judged: list[JudgedTrace]) -> ImportSummary:
    summary = ImportSummary(traces=len(judged))
    for j in judged:
        summary.groups.setdefault((j.path, j.signatures), []).append(j)
    return summary
