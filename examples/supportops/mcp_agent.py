"""The SupportOps reference agent as an MCP client.

It makes exactly the decisions of ``agent.py`` (same code, same fault knobs, same random
source), but reaches the world only through MCP: it reads each user message from the server's
``user_message`` prompt and calls tools and ``respond`` with ``tools/call``. Run it with

    agentprop run examples/supportops --agent mcp_agent:SupportOpsMcpAgent --fault skip_auth=0.5

and agentprop serves every trial's world to it over an in-process MCP connection.
:class:`SupportOpsServedMcpAgent` is the same agent reaching a real MCP server agentprop starts
for each trial (streamable HTTP on loopback), through the SDK's own ``Client(url)``, one session
a turn, as a framework's MCP client would (``--agent mcp_agent:SupportOpsServedMcpAgent``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentprop import load_agent
from agentprop.mcp import Client, McpAgent, McpConversation, McpServedAgent
from agentprop.spec import load_spec

HERE = Path(__file__).parent
SupportOpsAgent = load_agent("agent:SupportOpsAgent", HERE).target  # agent.py beside this file
FAULTS = SupportOpsAgent.FAULTS
# the agent knows its own tools' retry policies, as a real one would
SPEC = load_spec(HERE / "spec.yaml")


class SupportOpsMcpAgent(McpAgent):
    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        super().__init__()
        self.agent = SupportOpsAgent(faults)

    async def converse(self, client: Any, conversation: McpConversation) -> None:
        async for message in conversation:
            await conversation.play(self.agent.turn, message, spec=SPEC)


class SupportOpsServedMcpAgent(McpServedAgent):
    """The reference agent as a client of a real server: each turn opens a session to the
    trial's server at ``url`` and plays the turn there (tool calls and ``respond`` over MCP)."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.agent = SupportOpsAgent(faults)
        self.memory: dict[str, Any] = {}  # what the agent remembers from turn to turn

    async def mcp_turn(self, message: str, url: str) -> None:
        async with Client(url) as session:
            conversation = McpConversation(session, rng=self.ctx.rng)
            conversation.turn_index, conversation.memory = self.ctx.turn_index, self.memory
            await conversation.play(self.agent.turn, message, spec=SPEC)
