"""The SupportOps reference agent as an MCP client.

It makes exactly the decisions of ``agent.py`` (same code, same fault knobs, same random
source), but reaches the world only through MCP: it reads each user message from the server's
``user_message`` prompt and calls tools and ``respond`` with ``tools/call``. Run it with

    agentprop run examples/supportops --agent mcp_agent:SupportOpsMcpAgent --fault skip_auth=0.5

and agentprop serves every trial's world to it over an in-process MCP connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentprop import load_agent
from agentprop.mcp import McpAgent, McpConversation
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
