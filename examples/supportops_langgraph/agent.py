"""SupportOps as LangGraph agents, tested with the SupportOps spec and bindings.

Two graphs, both built with LangGraph's defaults: the prebuilt ``create_react_agent``
(:class:`SupportOpsReact`) and a custom ``StateGraph`` of a model node and a ``ToolNode``
(:class:`SupportOpsGraph`). Their tools are the spec's, from
:func:`agentprop.adapters.langgraph.langchain_tools`. The model is LangChain's ``ChatOpenAI``;
offline it talks to a loopback OpenAI-compatible server
(:class:`agentprop.testing.played.PlayedOpenAI`) whose replies are the SupportOps reference agent's
decisions (``examples/supportops/agent.py``, with its fault knobs), so every tool call goes through
the model API, LangGraph's tool execution and its error handling. Run it with

    agentprop run examples/supportops --agent examples.supportops_langgraph.agent:SupportOpsReact
    --fault skip_auth=0.5

With a real model, give ``ChatOpenAI`` the model's name instead and drop the player: the test
is the same.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition

from agentprop import TurnContext, load_agent
from agentprop.adapters.langgraph import LangGraphAgent, langchain_tools
from agentprop.spec import load_spec
from agentprop.testing.played import PlayedOpenAI

SUPPORTOPS = Path(__file__).resolve().parent.parent / "supportops"
SPEC = load_spec(SUPPORTOPS / "spec.yaml")
PROMPT = (SUPPORTOPS / "seed_prompt.txt").read_text(encoding="utf-8")
TOOLS = langchain_tools(SPEC)
Reference = load_agent("agent:SupportOpsAgent", SUPPORTOPS).target
PLAYED = PlayedOpenAI()


def react_graph(model: ChatOpenAI, tools: list[Any] = TOOLS) -> Any:
    """The prebuilt ReAct agent, as LangGraph builds it."""
    # LangGraph 1.x points to langchain.agents.create_agent; the prebuilt one still ships
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(model, tools, prompt=PROMPT)


def custom_graph(model: ChatOpenAI) -> Any:
    """A hand-written graph: the model node, then the tools while it calls any."""
    bound = model.bind_tools(TOOLS)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([SystemMessage(PROMPT), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile()


class _Played(LangGraphAgent):
    """One conversation: a graph whose model is played by the reference agent."""

    FAULTS = Reference.FAULTS
    build = staticmethod(react_graph)

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.player = PLAYED.player(Reference(faults), spec=SPEC)
        # an HTTP client of this event loop: langchain-openai shares one per base_url across
        # loops, and a process that runs agentprop twice (pytest) would reuse a closed loop's
        client = PLAYED.http_client()
        model = ChatOpenAI(
            model=self.player.model,
            base_url=PLAYED.base_url,
            api_key="played",
            max_retries=0,
            http_async_client=client,
        )
        super().__init__(self.build(model))

    async def turn(self, message: str, ctx: TurnContext) -> None:
        self.player.begin(ctx)
        await super().turn(message, ctx)


class SupportOpsReact(_Played):
    """The prebuilt ``create_react_agent``."""


class SupportOpsGraph(_Played):
    """A custom ``StateGraph`` with a ``ToolNode``."""

    build = staticmethod(custom_graph)
