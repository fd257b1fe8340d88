"""Run an OpenAI Agents SDK agent under agentprop (``pip install "agentprop[openai-agents]"``).

:func:`function_tools` gives a spec's tools (and ``respond``) as the SDK's function tools, with
schemas made strict-compatible when they can be; a tool error reaches the model as
``KIND: message`` and an output as JSON text. :class:`OpenAIAgentsAgent` wraps an
``agents.Agent``: one instance per conversation, one ``Runner.run`` per turn.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from agents import Agent, FunctionTool, Runner, RunResult

from agentprop._spec.model import Spec
from agentprop._spec.response import respond_tool_schema
from agentprop.adapters import (
    RESPOND_DESCRIPTION,
    bind,
    current_turn,
    tool_error_text,
    tool_output_text,
)
from agentprop.errors import ToolError

DEFAULT_MAX_TURNS = 50
"""Model calls per ``Runner.run`` (the SDK's default, 10, is too few for a turn whose tool calls
fail and are retried)."""


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """``schema`` made strict-compatible (every object closed, every property required, the
    optional ones nullable), or ``None`` when it cannot be without changing what it accepts
    (an object open to any key)."""
    out = copy.deepcopy(dict(schema))
    return out if _make_strict(out) else None


def _make_strict(node: dict[str, Any]) -> bool:
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key) or []:
            if isinstance(sub, dict) and not _make_strict(sub):
                return False
    items = node.get("items")
    if isinstance(items, dict) and not _make_strict(items):
        return False
    kind = node.get("type")
    is_object = (
        kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node
    )
    if not is_object:
        return True
    props: dict[str, Any] = node.get("properties") or {}
    extra = node.get("additionalProperties")
    if not props or (extra is not None and extra is not False):
        return False  # a map from any key: strict mode cannot say it
    required = set(node.get("required") or [])
    for name, sub in props.items():
        if not isinstance(sub, dict) or not _make_strict(sub):
            return False
        if name not in required:
            props[name] = _nullable(sub)
    node["required"] = list(props)
    node["additionalProperties"] = False
    return True


def _drop_nulls(value: Any, schema: Mapping[str, Any]) -> Any:
    """Arguments with the ``null`` of each optional property left out (recursively)."""
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        required = set(schema.get("required") or [])
        props: Mapping[str, Any] = schema["properties"]
        return {
            k: _drop_nulls(v, props.get(k) or {})
            for k, v in value.items()
            if not (v is None and k not in required and k in props)
        }
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_drop_nulls(v, schema["items"]) for v in value]
    return value


def function_tool(name: str, description: str, schema: Mapping[str, Any]) -> FunctionTool:
    """One tool of the spec as a ``FunctionTool`` acting on the bound turn (see the module)."""
    strict = strict_schema(schema)
    original = dict(schema)

    async def invoke(_context: Any, arguments: str) -> str:
        try:
            args = json.loads(arguments or "{}")
        except ValueError as exc:
            return tool_error_text(
                ToolError("invalid_arguments", f"the arguments are not JSON: {exc}")
            )
        if not isinstance(args, dict):
            return tool_error_text(
                ToolError("invalid_arguments", "the arguments must be a JSON object")
            )
        if strict is not None:
            args = _drop_nulls(args, original)
        try:
            return tool_output_text(current_turn().call(name, **args))
        except ToolError as exc:
            return tool_error_text(exc)

    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=strict if strict is not None else original,
        on_invoke_tool=invoke,
        strict_json_schema=strict is not None,
    )


def function_tools(spec: Spec, *, include_respond: bool = True) -> list[FunctionTool]:
    """The spec's tools as ``FunctionTool``\\ s acting on the turn bound with
    :func:`~agentprop.adapters.bind` (and ``respond``, whose parameters are the response
    contract, unless ``include_respond=False``)."""
    tools = [
        function_tool(t.name, t.description or t.name, t.input_schema) for t in spec.action_tools
    ]
    if include_respond:
        respond = spec.tools_by_name.get("respond")
        description = (
            respond.description + " " if respond is not None and respond.description else ""
        ) + RESPOND_DESCRIPTION
        tools.append(function_tool("respond", description, respond_tool_schema(spec)))
    return tools


class OpenAIAgentsAgent:
    """An agentprop agent running an ``agents.Agent``: one instance per conversation.

    ``run_options`` go to every ``Runner.run`` (``max_turns`` defaults to
    :data:`DEFAULT_MAX_TURNS`; ``run_config``, ``context`` ...).
    """

    def __init__(self, agent: Agent[Any], *, run_options: Mapping[str, Any] | None = None) -> None:
        self.agent = agent
        self.run_options: dict[str, Any] = {"max_turns": DEFAULT_MAX_TURNS, **(run_options or {})}
        self.items: list[Any] = []

    async def turn(self, message: str, ctx: Any) -> None:
        with bind(ctx):
            result: RunResult = await Runner.run(
                self.agent, [*self.items, {"role": "user", "content": message}], **self.run_options
            )
        self.items = result.to_input_list()
        usage = result.context_wrapper.usage
        ctx.add_usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            model_calls=usage.requests,
        )
        output = result.final_output
        if isinstance(output, str):
            if output.strip() and not ctx.responded:
                ctx.say(output)
        elif output is not None and not ctx.responded:
            ctx.say(
                tool_output_text(output.model_dump() if hasattr(output, "model_dump") else output)
            )


__all__ = [
    "DEFAULT_MAX_TURNS",
    "OpenAIAgentsAgent",
    "function_tool",
    "function_tools",
    "strict_schema",
]
