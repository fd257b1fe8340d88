"""A scripted, offline stand-in for the OpenAI API: Chat Completions and Responses.

:class:`OpenAIServer` is :class:`~agentprop.testing.MessagesServer`'s twin: a real HTTP server on
``127.0.0.1`` that answers ``/v1/chat/completions`` and ``/v1/responses`` from a script, streamed
or not, with no key and no network. The script uses the same reply and fault builders as the
Messages server, rendered in the format of the endpoint called; :func:`raw_arguments_reply`
adds OpenAI's own fault, tool-call arguments that are not valid JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from agentprop.errors import InvalidArgument
from agentprop.testing.messages_server import (
    MessagesServer,
    Reply,
    error_reply,
    message_reply,
)

__all__ = ["OpenAIServer", "raw_arguments_block", "raw_arguments_reply"]

_PATHS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}
_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop",
    "refusal": "content_filter",
    "pause_turn": "stop",
}
_CHUNK = 12
"""Characters per streamed text or arguments delta (so streams really come in pieces)."""


def raw_arguments_block(name: str, arguments: str, *, id: str | None = None) -> dict[str, Any]:
    """A tool call whose arguments are sent as this exact text (for instance JSON that does not
    parse): a ``tool_use`` block for :func:`~agentprop.testing.message_reply`."""
    if not isinstance(arguments, str):
        raise InvalidArgument(
            f"arguments must be the raw text to send, not {type(arguments).__name__}."
        )
    block: dict[str, Any] = {
        "type": "tool_use",
        "name": name,
        "input": {},
        "raw_arguments": arguments,
    }
    if id is not None:
        block["id"] = id
    return block


def raw_arguments_reply(name: str, arguments: str, *, text: str | None = None) -> Reply:
    """A reply calling ``name`` with ``arguments`` sent verbatim (malformed arguments)."""
    blocks = [{"type": "text", "text": text}] if text is not None else []
    return message_reply([*blocks, raw_arguments_block(name, arguments)], stop_reason="tool_use")


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out: list[str] = []
    for name, data in events:
        if name is not None:
            out.append(f"event: {name}\n")
        out.append(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


class OpenAIServer(MessagesServer):
    """A scripted OpenAI API (Chat Completions and Responses) on ``127.0.0.1`` for offline tests.

    Takes the same arguments as :class:`~agentprop.testing.MessagesServer` (``script``,
    ``handler``, ``latency``, ``expected_api_key`` ...) and the same replies; see the module
    docstring. A handler receives the request JSON of either endpoint (:attr:`api_of` tells
    which). :attr:`base_url` ends in ``/v1``, as the ``openai`` SDK expects.
    """

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: pass it as ``base_url`` to the OpenAI client."""
        return f"http://{self._host}:{self.port}/v1"

    @staticmethod
    def api_of(request: Any) -> str:
        """``"chat"`` or ``"responses"``: which endpoint a recorded request body was sent to
        (told by its fields: Responses requests carry ``input``)."""
        return (
            "responses"
            if isinstance(request, dict) and "input" in request and "messages" not in request
            else "chat"
        )

    # -- validation ------------------------------------------------------------------------------

    def _validate(
        self, method: str, path: str, body: bytes, parsed: Any, headers: Mapping[str, str]
    ) -> Reply | None:
        api = _PATHS.get(path.rstrip("/"))
        if api is None:
            return error_reply(
                404,
                message="OpenAIServer serves POST /v1/chat/completions and /v1/responses, "
                f"not {method} {path}.",
            )
        if method != "POST":
            return error_reply(405, message=f"Use POST for {path}, not {method}.")
        if self._expected_api_key is not None:
            auth = headers.get("authorization", "")
            if not auth.lower().startswith("bearer ") or auth[7:] != self._expected_api_key:
                return error_reply(
                    401, error_type="invalid_api_key", message="Incorrect API key provided."
                )
        if not isinstance(parsed, dict):
            return error_reply(
                400, message=f"The request body is not a JSON object: {body[:200]!r}"
            )
        field = "messages" if api == "chat" else "input"
        missing = [k for k in ("model", field) if k not in parsed]
        if missing:
            return error_reply(400, message=f"Missing required parameter(s): {', '.join(missing)}.")
        if api == "chat" and not isinstance(parsed["messages"], list):
            return error_reply(400, message="messages: expected an array of messages.")
        if api == "responses" and not isinstance(parsed["input"], (list, str)):
            return error_reply(400, message="input: expected a string or an array of input items.")
        return None

    # -- rendering -------------------------------------------------------------------------------

    def _body(self, reply: Reply, request: Any, path: str) -> tuple[bytes, str]:
        if reply.message is None:
            body = reply.json_body
            if (
                isinstance(body, dict)
                and body.get("type") == "error"
                and isinstance(body.get("error"), dict)
            ):
                inner = body["error"]  # the Messages API's error shape, in OpenAI's
                body = {
                    "error": {
                        "message": inner.get("message"),
                        "type": inner.get("type"),
                        "param": None,
                        "code": inner.get("type"),
                    }
                }
                return json.dumps(body).encode(), reply.content_type
            return super()._body(reply, request, path)
        message = self._complete_message(reply.message, request)
        api = _PATHS.get(path.rstrip("/"), "chat")
        stream = isinstance(request, dict) and bool(request.get("stream"))
        if api == "chat":
            completion = self._chat_completion(message, request)
            if not stream:
                return json.dumps(completion).encode(), "application/json"
            include_usage = bool(
                isinstance(request.get("stream_options"), dict)
                and request["stream_options"].get("include_usage")
            )
            return self._chat_stream(completion, include_usage), "text/event-stream"
        response = self._response(message, request)
        if not stream:
            return json.dumps(response).encode(), "application/json"
        return self._responses_stream(response), "text/event-stream"

    def _calls(self, message: Mapping[str, Any]) -> list[dict[str, Any]]:
        calls = []
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                raw = block.get("raw_arguments")
                arguments = raw if isinstance(raw, str) else json.dumps(block.get("input") or {})
                suffix = str(block.get("id", "")).replace("toolu_mock_", "")
                calls.append(
                    {"id": f"call_mock_{suffix}", "name": block.get("name"), "arguments": arguments}
                )
        return calls

    @staticmethod
    def _text(message: Mapping[str, Any]) -> str | None:
        texts = [
            str(b.get("text", ""))
            for b in message.get("content") or []
            if isinstance(b, dict) and b.get("type") == "text"
        ]
        return "".join(texts) if texts else None

    @staticmethod
    def _usage_numbers(message: Mapping[str, Any]) -> tuple[int, int, int]:
        usage = message.get("usage") or {}
        cached = int(usage.get("cache_read_input_tokens") or 0)
        prompt = (
            int(usage.get("input_tokens") or 0)
            + cached
            + int(usage.get("cache_creation_input_tokens") or 0)
        )
        return prompt, int(usage.get("output_tokens") or 0), cached

    def _chat_completion(self, message: Mapping[str, Any], request: Any) -> dict[str, Any]:
        calls = self._calls(message)
        text = self._text(message)
        refusal = text if message.get("stop_reason") == "refusal" else None
        out: dict[str, Any] = {
            "role": "assistant",
            "content": None if refusal else text,
            "refusal": refusal,
        }
        if calls:
            out["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        finish = "tool_calls" if calls else _FINISH.get(str(message.get("stop_reason")), "stop")
        prompt, completion, cached = self._usage_numbers(message)
        return {
            "id": str(message["id"]).replace("msg_mock_", "chatcmpl-mock-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": message["model"],
            "choices": [{"index": 0, "message": out, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }

    def _chat_stream(self, completion: dict[str, Any], include_usage: bool) -> bytes:
        head = {k: completion[k] for k in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"
        choice = completion["choices"][0]
        message = choice["message"]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                **head,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            }

        events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
        if message.get("refusal"):
            events.extend(
                (None, chunk({"refusal": piece})) for piece in _pieces(message["refusal"])
            )
        if message.get("content"):
            events.extend(
                (None, chunk({"content": piece})) for piece in _pieces(message["content"])
            )
        for index, call in enumerate(message.get("tool_calls") or []):
            first = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            events.append((None, chunk({"tool_calls": [first]})))
            for piece in _pieces(call["function"]["arguments"]):
                events.append(
                    (
                        None,
                        chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    )
                )
        events.append((None, chunk({}, choice["finish_reason"])))
        if include_usage:
            events.append((None, {**head, "choices": [], "usage": completion["usage"]}))
        events.append((None, "[DONE]"))
        return _sse(events)

    def _response(self, message: Mapping[str, Any], request: Any) -> dict[str, Any]:
        number = str(message["id"]).replace("msg_mock_", "")
        output: list[dict[str, Any]] = []
        text = self._text(message)
        if text is not None:
            kind = "refusal" if message.get("stop_reason") == "refusal" else "output_text"
            part: dict[str, Any] = (
                {"type": kind, "refusal": text}
                if kind == "refusal"
                else {"type": kind, "text": text, "annotations": []}
            )
            output.append(
                {
                    "type": "message",
                    "id": f"msg_mock_{number}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [part],
                }
            )
        for call in self._calls(message):
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_mock_{call['id'][10:]}",
                    "call_id": call["id"],
                    "name": call["name"],
                    "arguments": call["arguments"],
                    "status": "completed",
                }
            )
        prompt, completion, cached = self._usage_numbers(message)
        incomplete = message.get("stop_reason") == "max_tokens"
        return {
            "id": f"resp_mock_{number}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if incomplete else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "model": message["model"],
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": request.get("tool_choice", "auto")
            if isinstance(request, dict)
            else "auto",
            "tools": request.get("tools", []) if isinstance(request, dict) else [],
            "usage": {
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }

    def _responses_stream(self, response: dict[str, Any]) -> bytes:
        events: list[tuple[str | None, Any]] = []
        sequence = 0

        def emit(kind: str, **fields: Any) -> None:
            nonlocal sequence
            events.append((kind, {"type": kind, "sequence_number": sequence, **fields}))
            sequence += 1

        emit(
            "response.created",
            response={**response, "status": "in_progress", "output": [], "usage": None},
        )
        for index, item in enumerate(response["output"]):
            if item["type"] == "message":
                emit(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                for part in item["content"]:
                    if part["type"] == "output_text":
                        for piece in _pieces(part["text"]):
                            emit(
                                "response.output_text.delta",
                                item_id=item["id"],
                                output_index=index,
                                content_index=0,
                                delta=piece,
                                logprobs=[],
                            )
            else:
                emit(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                for piece in _pieces(item["arguments"]):
                    emit(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=index,
                        delta=piece,
                    )
                emit(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=item["arguments"],
                    name=item["name"],
                )
            emit("response.output_item.done", output_index=index, item=item)
        emit(
            "response.incomplete" if response["status"] == "incomplete" else "response.completed",
            response=response,
        )
        return _sse(events)

    def _complete_message(self, message: Mapping[str, Any], request: Any) -> dict[str, Any]:
        """The Messages server's completion (ids, model, usage), with the usage estimated from
        what an OpenAI request carries."""
        if isinstance(request, dict) and "messages" not in request:
            request = {
                **request,
                "messages": request.get("input"),
                "system": request.get("instructions"),
            }
        out = super()._complete_message(message, request)
        for block in out.get("content", []):
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and "raw_arguments" in block
            ):
                block.setdefault("input", {})
        return out
