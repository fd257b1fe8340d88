"""Run a LangGraph agent under agentprop (``pip install "agentprop[langgraph]"``).

:func:`langchain_tools` gives a spec's tools (and ``respond``) as LangChain tools acting on the
bound turn; they work with LangGraph's defaults (a tool error reaches the model as an error tool
message ``KIND: message``, an output as JSON text). :class:`LangGraphAgent` wraps a compiled
graph with a ``messages`` state: one instance per conversation, one ``ainvoke`` per turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException

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

DEFAULT_RECURSION_LIMIT = 100
"""LangGraph's steps per ``ainvoke`` (its default, 25, is about 12 tool calls: too few for a
turn whose calls fail and are retried)."""


def _tool(name: str, description: str, schema: Mapping[str, Any]) -> StructuredTool:
    async def run(**args: Any) -> str:
        try:
            return tool_output_text(current_turn().call(name, **args))
        except ToolError as exc:
            raise ToolException(tool_error_text(exc)) from None

    return StructuredTool(
        name=name,
        description=description,
        args_schema=dict(schema),
        coroutine=run,
        handle_tool_error=True,
    )


def langchain_tools(spec: Spec, *, include_respond: bool = True) -> list[BaseTool]:
    """The spec's tools as LangChain tools acting on the turn bound with
    :func:`~agentprop.adapters.bind` (and ``respond``, whose parameters are the response
    contract, unless ``include_respond=False``)."""
    tools: list[BaseTool] = [
        _tool(t.name, t.description or t.name, t.input_schema) for t in spec.action_tools
    ]
    if include_respond:
        respond = spec.tools_by_name.get("respond")
        description = (
            respond.description + " " if respond is not None and respond.description else ""
        ) + RESPOND_DESCRIPTION
        tools.append(_tool("respond", description, respond_tool_schema(spec)))
    return tools


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        p if isinstance(p, str) else str(p.get("text", ""))
        for p in content
        if isinstance(p, (str, dict))
    )


class LangGraphAgent:
    """An agentprop agent running a compiled LangGraph graph: one instance per conversation.

    ``config`` goes to every ``ainvoke`` (``recursion_limit`` defaults to
    :data:`DEFAULT_RECURSION_LIMIT`); ``input_key`` is the state's list of messages.
    """

    def __init__(
        self, graph: Any, *, config: Mapping[str, Any] | None = None, input_key: str = "messages"
    ) -> None:
        self.graph = graph
        self.config: dict[str, Any] = {"recursion_limit": DEFAULT_RECURSION_LIMIT, **(config or {})}
        self.input_key = input_key
        self.messages: list[BaseMessage] = []

    async def turn(self, message: str, ctx: Any) -> None:
        before = len(self.messages) + 1
        with bind(ctx):
            state = await self.graph.ainvoke(
                {self.input_key: [*self.messages, HumanMessage(message)]}, self.config
            )
        self.messages = list(state[self.input_key])
        new = [m for m in self.messages[before:] if isinstance(m, AIMessage)]
        tokens_in = sum(m.usage_metadata["input_tokens"] for m in new if m.usage_metadata)
        tokens_out = sum(m.usage_metadata["output_tokens"] for m in new if m.usage_metadata)
        ctx.add_usage(input_tokens=tokens_in, output_tokens=tokens_out, model_calls=len(new))
        text = _text(new[-1]) if new else ""
        if text.strip() and not ctx.responded:
            ctx.say(text)


__all__ = ["DEFAULT_RECURSION_LIMIT", "LangGraphAgent", "langchain_tools"]
