"""Test MCP agents: a case's world as an MCP server, and agents that are MCP clients.

Needs the official MCP SDK, 1.24+ below 2 or 2.3+ (``pip install "agentprop[mcp]"``); see
docs/bring-your-own-agent.md. :class:`CaseServer` / :class:`HttpCaseServer` serve one case, each
session one trial, and :class:`RunServer` every case of a run; :class:`McpAgent` and
:class:`McpServedAgent` (HTTP, or a stdio process per session: :class:`StdioCommand`) are base
classes of agents that are MCP clients; :class:`McpConversation` is the client side of the turn
protocol; :func:`Client` connects to a server with whichever SDK is installed.
"""

from __future__ import annotations

from agentprop._util.mcp_sdk import mcp_sdk_problem

_sdk = mcp_sdk_problem("agentprop.mcp")
if _sdk is not None:  # pragma: no cover - depends on the environment
    raise ImportError(f"{_sdk.problem}; fix: {_sdk.fix}")

from agentprop._agents.mcp import (  # noqa: E402 (after the SDK check, so an unusable SDK is explained)
    CONTEXT_URI,
    USER_MESSAGE_PROMPT,
    McpAgent,
    McpConversation,
    McpServedAgent,
    McpSessionEnded,
    StdioCommand,
    TrialBridge,
    build_server,
    trial_server,
)
from agentprop._agents.mcp_compat import SDK_VERSION, Client  # noqa: E402
from agentprop._pipeline.serve import (  # noqa: E402
    CaseServer,
    HttpCaseServer,
    RunServer,
    ServedTrial,
    default_record_path,
    log_trial,
)

__all__ = [
    "CONTEXT_URI",
    "USER_MESSAGE_PROMPT",
    "SDK_VERSION",
    "CaseServer",
    "Client",
    "HttpCaseServer",
    "McpAgent",
    "McpConversation",
    "McpServedAgent",
    "McpSessionEnded",
    "RunServer",
    "ServedTrial",
    "StdioCommand",
    "TrialBridge",
    "build_server",
    "default_record_path",
    "log_trial",
    "trial_server",
]
