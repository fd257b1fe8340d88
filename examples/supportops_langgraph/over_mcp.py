"""SupportOps as a LangGraph agent whose tools come from MCP through langchain-mcp-adapters.

The prebuilt ``create_react_agent`` of ``agent.py``, with the adapter's defaults: a
``MultiServerMCPClient`` pointed at the streamable HTTP server agentprop starts for each trial
(:class:`agentprop.mcp.McpServedAgent`), and its ``get_tools()``, which opens a new MCP session
for every tool call. All sessions of a trial's server act on that trial's open turn, so the
conversation is one trial however many sessions the client opens. The model is played by the
SupportOps reference agent, as in ``agent.py``. Run it with

    agentprop run examples/supportops --agent
    examples.supportops_langgraph.over_mcp:SupportOpsReactOverMcp --fault skip_auth=0.5

langchain-mcp-adapters 0.3 needs mcp<2: ``pip install 'agentprop[langchain-mcp]'``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI

from agentprop.adapters.langgraph import DEFAULT_RECURSION_LIMIT
from agentprop.mcp import McpServedAgent
from examples.supportops_langgraph.agent import PLAYED, SPEC, Reference, react_graph


class SupportOpsReactOverMcp(McpServedAgent):
    """One conversation: the ReAct graph over the trial's MCP server, its model played."""

    FAULTS = Reference.FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.player = PLAYED.player(Reference(faults), spec=SPEC)
        client = PLAYED.http_client()
        self.model = ChatOpenAI(
            model=self.player.model,
            base_url=PLAYED.base_url,
            api_key="played",
            max_retries=0,
            http_async_client=client,
        )
        self.graph: Any = None
        self.messages: list[BaseMessage] = []

    async def mcp_turn(self, message: str, url: str) -> str:
        self.player.begin(self.ctx)
        if self.graph is None:  # the trial's server: the same URL for every turn
            client = MultiServerMCPClient(
                {"supportops": {"transport": "streamable_http", "url": url}}
            )
            self.graph = react_graph(self.model, await client.get_tools())
        before = len(self.messages) + 1
        state = await self.graph.ainvoke(
            {"messages": [*self.messages, HumanMessage(message)]},
            {"recursion_limit": DEFAULT_RECURSION_LIMIT},
        )
        self.messages = list(state["messages"])
        new = [m for m in self.messages[before:] if isinstance(m, AIMessage)]
        self.ctx.add_usage(
            input_tokens=sum(m.usage_metadata["input_tokens"] for m in new if m.usage_metadata),
            output_tokens=sum(m.usage_metadata["output_tokens"] for m in new if m.usage_metadata),
            model_calls=len(new),
        )
        return new[-1].text if new else ""
