"""Run a LangGraph agent under agentprop (``pip install "agentprop[langgraph]"``).

:func:`langchain_tools` gives a spec's tools (and ``respond``) as LangChain tools that act on the
bound turn; any graph that runs them -- the prebuilt ``create_react_agent`` or a custom
``StateGraph`` with a ``ToolNode`` -- works with LangGraph's defaults:

- a tool error (:class:`~agentprop.ToolError`, such as an injected timeout) reaches the model
  as a tool message with ``status="error"`` and the text ``KIND: message``: the tools raise
  LangChain's ``ToolException`` and handle it themselves, so ``ToolNode`` (which re-raises
  other exceptions by default) never sees it and ``handle_tool_errors`` need not be set;
- an output reaches the model as JSON text, never Python ``str()`` of a dict;
- the parameters are the spec's JSON Schema as written (nested objects included).

:class:`LangGraphAgent` is the agentprop agent around a compiled graph whose state has a
``messages`` list: one instance per conversation, the messages carried from turn to turn, each
turn one ``ainvoke``; text the graph ends with is said to the user when the turn did not
``respond``. Token usage is read from the AI messages' ``usage_metadata``::

    from langgraph.prebuilt import create_react_agent
    from agentprop.adapters.langgraph import LangGraphAgent, langchain_tools

    class MyAgent(LangGraphAgent):
        def __init__(self) -> None:
            super().__init__(create_react_agent(ChatOpenAI(model="gpt-4o"), langchain_tools(SPEC), prompt=PROMPT))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from agentprop._spec.model import Spec
from agentprop._spec.response import respond_tool_schema
from agentprop.adapters import RESPOND_DESCRIPTION, bind, current_turn, tool_error_text, tool_output_text
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

    return StructuredTool(name=name, description=description, args_schema=dict(schema), coroutine=run, handle_tool_error=True)


def langchain_tools(spec: Spec, *, include_respond: bool = True) -> list[BaseTool]:
    """The spec's tools as LangChain tools acting on the turn bound with
    :func:`~agentprop.adapters.bind` (and ``respond``, whose parameters are the response
    contract, unless ``include_respond=False``)."""
    tools: list[BaseTool] = [_tool(t.name, t.description or t.name, t.input_schema) for t in spec.action_tools]
    if include_respond:
        respond = spec.tools_by_name.get("respond")
        description = (respond.description + " " if respond is not None and respond.description else "") + RESPOND_DESCRIPTION
        tools.append(_tool("respond", description, respond_tool_schema(spec)))
    return tools


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, (str, dict)))


class LangGraphAgent:
    """An agentprop agent running a compiled LangGraph graph: one instance per conversation.

    ``config`` goes to every ``ainvoke`` (``recursion_limit`` defaults to
    :data:`DEFAULT_RECURSION_LIMIT`); ``input_key`` is the state's list of messages.
    """

    def __init__(self, graph: Any, *, config: Mapping[str, Any] | None = None, input_key: str = "messages") -> None:
        self.graph = graph
        self.config: dict[str, Any] = {"recursion_limit": DEFAULT_RECURSION_LIMIT, **(config or {})}
        self.input_key = input_key
        self.messages: list[BaseMessage] = []

    async def turn(self, message: str, ctx: Any) -> None:
        before = len(self.messages) + 1
        with bind(ctx):
            state = await self.graph.ainvoke({self.input_key: [*self.messages, HumanMessage(message)]}, self.config)
        self.messages = list(state[self.input_key])
        new = [m for m in self.messages[before:] if isinstance(m, AIMessage)]
        tokens_in = sum(m.usage_metadata["input_tokens"] for m in new if m.usage_metadata)
        tokens_out = sum(m.usage_metadata["output_tokens"] for m in new if m.usage_metadata)
        ctx.add_usage(input_tokens=tokens_in, output_tokens=tokens_out, model_calls=len(new))
        text = _text(new[-1]) if new else ""
        if text.strip() and not ctx.responded:
            ctx.say(text)


__all__ = ["DEFAULT_RECURSION_LIMIT", "LangGraphAgent", "langchain_tools"]
