"""More trace formats for ``agentprop import``, each read into Chat Completions messages.

OpenAI Responses calls, LangSmith runs, Phoenix / OpenInference spans and OTel GenAI events are
converted to the messages :func:`agentprop._pipeline.importing.trace_of` reads; a format adds a
conversion and no judging of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentprop.errors import InputError, SourceLocation

__all__ = [
    "event_messages",
    "json_items",
    "langsmith_conversations",
    "phoenix_conversations",
    "responses_messages",
]


def json_lines(
    lines: Iterable[str], path: Path, *, expected: str, fix: str
) -> Iterator[tuple[int, Any]]:
    """The JSON value of each line that is not blank, with its number (from 1); a line that is
    not JSON raises :class:`InputError` naming it, ``expected`` and ``fix``."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"line {number} is not JSON ({exc.msg})",
                location=SourceLocation(path, number, exc.colno),
                expected=expected,
                fix=fix,
            ) from None
        yield number, value


def json_items(path: Path, *, shape: str, fix: str) -> Iterator[tuple[int, Any]]:
    """The JSON values of a file: the items of one JSON array (or of a ``data`` / ``runs`` /
    ``spans`` list of one object), else one value a line (JSONL), each with its line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror or exc}", fix="give the path of the export"
        ) from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, list):
            yield from ((1, item) for item in whole)
            return
    for number, value in json_lines(text.splitlines(), path, expected=shape, fix=fix):
        listed = next(
            (
                value[k]
                for k in ("data", "runs", "spans")
                if isinstance(value, dict) and isinstance(value.get(k), list)
            ),
            None,
        )
        if listed is not None:
            yield from ((number, item) for item in listed)
        else:
            yield number, value


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "id": str(call_id or ""),
        "type": "function",
        "function": {
            "name": str(name or ""),
            "arguments": _json_text(arguments if arguments is not None else {}),
        },
    }


def _add_call(out: list[dict[str, Any]], call: dict[str, Any]) -> None:
    """Append a tool call to the assistant message it belongs to (the last one, when nothing
    came after it), else to a new one."""
    if out and out[-1].get("role") == "assistant":
        out[-1].setdefault("tool_calls", []).append(call)
    else:
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})


# ----------------------------------------------------------------------------- Responses API


def responses_messages(items: Any) -> list[dict[str, Any]]:
    """Responses API ``input`` (a string or items) or ``output`` items as Chat messages:
    ``message`` items (``input_text`` / ``output_text`` parts), ``function_call`` (its
    ``call_id``, ``name``, JSON-text ``arguments``) and ``function_call_output``."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            _add_call(
                out,
                _call(
                    item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments")
                ),
            )
        elif kind == "function_call_output":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id", "")),
                    "content": _json_text(item.get("output", "")),
                }
            )
        elif kind == "message" and item.get("role") in ("user", "assistant", "system", "developer"):
            text = _text(item.get("content"))
            if item["role"] == "assistant":
                out.append({"role": "assistant", "content": text or None})
            elif text:
                out.append({"role": item["role"], "content": text})
    return out


# ----------------------------------------------------------------------------- LangSmith

_LC_ROLES = {
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "system": "system",
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "ToolMessage": "tool",
    "SystemMessage": "system",
}


def _langchain_message(message: Any) -> dict[str, Any] | None:
    """One message as LangSmith stores it: OpenAI shaped (``role``), LangChain serialised
    (``{lc, id: [..., "AIMessage"], kwargs}``) or a message dict (``{type: "ai", data}`` or
    ``{type: "ai", content, tool_calls}``), as a Chat message."""
    if not isinstance(message, dict):
        return None
    if "role" in message:
        return message
    if "kwargs" in message and isinstance(message.get("id"), list):
        role, body = _LC_ROLES.get(str(message["id"][-1])), message["kwargs"]
    else:
        role = _LC_ROLES.get(str(message.get("type", "")))
        body = message.get("data") if isinstance(message.get("data"), dict) else message
    if role is None or not isinstance(body, dict):
        return None
    out: dict[str, Any] = {
        "role": role,
        "content": _text(body.get("content")) or (None if role == "assistant" else ""),
    }
    if role == "assistant":
        calls = [
            _call(c.get("id"), c.get("name"), c.get("args"))
            for c in body.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        if calls:
            out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = str(body.get("tool_call_id", ""))
    return out


def _langsmith_output(outputs: Any) -> list[dict[str, Any]]:
    if not isinstance(outputs, dict):
        return []
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return [choices[0].get("message") or {}]
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = (
            generations[0][0]
            if isinstance(generations[0], list) and generations[0]
            else generations[0]
        )
        message = _langchain_message(first.get("message")) if isinstance(first, dict) else None
        if message is None and isinstance(first, dict) and first.get("text"):
            message = {"role": "assistant", "content": str(first["text"])}
        return [message] if message is not None else []
    message = _langchain_message(outputs.get("message") if "message" in outputs else outputs)
    return [message] if message is not None else []


def langsmith_conversations(runs: list[tuple[int, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """One conversation per ``trace_id``: the messages of its last ``llm`` run (by
    ``dotted_order``, then ``start_time``) followed by that run's output message."""
    last: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for _, run in runs:
        if (
            not isinstance(run, dict)
            or run.get("run_type") != "llm"
            or not isinstance(run.get("inputs"), dict)
        ):
            continue
        messages = run["inputs"].get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[0], list):
            messages = messages[0]  # LangChain chat models: a batch of one
        if not isinstance(messages, list):
            continue
        chat = [m for m in (_langchain_message(x) for x in messages) if m is not None]
        order = str(run.get("dotted_order") or run.get("start_time") or "")
        trace_id = str(run.get("trace_id") or run.get("id") or "")
        if trace_id not in last or order >= last[trace_id][0]:
            last[trace_id] = (order, [*chat, *_langsmith_output(run.get("outputs"))])
    return [(trace_id, messages) for trace_id, (_, messages) in last.items()]


# ----------------------------------------------------------------------------- Phoenix


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}.{index}", out)
    else:
        out[prefix] = value


def _indexed(flat: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.0.rest``, ``prefix.1.rest`` ... as ``[{rest: value}, ...]`` in index order."""
    groups: dict[int, dict[str, Any]] = {}
    for key, value in flat.items():
        if not key.startswith(prefix + "."):
            continue
        index, _, rest = key[len(prefix) + 1 :].partition(".")
        if index.isdigit():
            groups.setdefault(int(index), {})[rest] = value
    return [groups[i] for i in sorted(groups)]


def _openinference_messages(flat: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for fields in _indexed(flat, prefix):
        role = str(fields.get("message.role", ""))
        text = fields.get("message.content")
        if not isinstance(text, str):
            text = "".join(
                str(p.get("message_content.text", "")) for p in _indexed(fields, "message.contents")
            )
        message: dict[str, Any] = {
            "role": role,
            "content": text or (None if role == "assistant" else ""),
        }
        calls = [
            _call(
                c.get("tool_call.id"),
                c.get("tool_call.function.name"),
                c.get("tool_call.function.arguments"),
            )
            for c in _indexed(fields, "message.tool_calls")
        ]
        if calls:
            message["tool_calls"] = calls
        if role == "tool":
            message["tool_call_id"] = str(fields.get("message.tool_call_id", ""))
        out.append(message)
    return out


def phoenix_conversations(spans: list[tuple[int, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """One conversation per trace (``context.trace_id``): the ``llm.input_messages`` then
    ``llm.output_messages`` of its last ``LLM`` span (``openinference.span.kind``), attributes
    flat (``llm.input_messages.0.message.role``) or nested as the span dataframe has them."""
    last: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for _, span in spans:
        if not isinstance(span, dict):
            continue
        flat: dict[str, Any] = {}
        _flatten(span.get("attributes") or {}, "", flat)
        kind = flat.get("openinference.span.kind") or span.get("span_kind")
        if str(kind).upper() != "LLM":
            continue
        context = span.get("context")
        context = context if isinstance(context, dict) else {}
        trace_id = str(context.get("trace_id") or span.get("trace_id") or "")
        started = str(span.get("start_time") or "")
        if trace_id not in last or started >= last[trace_id][0]:
            last[trace_id] = (
                started,
                [
                    *_openinference_messages(flat, "llm.input_messages"),
                    *_openinference_messages(flat, "llm.output_messages"),
                ],
            )
    return [(trace_id, messages) for trace_id, (_, messages) in last.items()]


# ----------------------------------------------------------------------------- OTel events

_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.choice": "assistant",
}


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def event_messages(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The Chat messages of one inference call recorded as per-message events
    (``gen_ai.user.message``, ``gen_ai.assistant.message`` with ``tool_calls``,
    ``gen_ai.tool.message`` with ``id``, ``gen_ai.choice`` with ``message``), each event's
    fields (its body or attributes) given as a dict, in order."""
    out: list[dict[str, Any]] = []
    for name, fields in events:
        role = _EVENT_ROLES.get(name)
        if role is None:
            continue
        body = {k: _decoded(v) if k in ("tool_calls", "message") else v for k, v in fields.items()}
        if name == "gen_ai.choice" and isinstance(body.get("message"), dict):
            body = body["message"]
        message: dict[str, Any] = {
            "role": role,
            "content": _text(body.get("content")) or (None if role == "assistant" else ""),
        }
        if role == "assistant":
            calls = [
                _call(
                    c.get("id"),
                    (c.get("function") or {}).get("name"),
                    (c.get("function") or {}).get("arguments"),
                )
                for c in body.get("tool_calls") or []
                if isinstance(c, dict)
            ]
            if calls:
                message["tool_calls"] = calls
        if role == "tool":
            message["tool_call_id"] = str(body.get("id") or body.get("tool_call_id") or "")
        out.append(message)
    return out
