"""Test MCP agents: a case's world as an MCP server, and agents that are MCP clients.

Needs the official MCP SDK, 2.3 or later: ``pip install "agentprop[mcp]"``. See docs/bring-your-own-agent.md.

- :class:`CaseServer`: one case served over MCP (stdio, streamable HTTP on loopback, or
  in-process with :meth:`CaseServer.connect`); each session is one trial, recorded into a
  trace like every other run and decided by the case's sequential test. ``agentprop serve``
  runs it from the command line; :class:`HttpCaseServer` runs it on a thread for tests.
- :class:`McpAgent`: base class of an agent that is an MCP client; agentprop runs each trial
  and serves that trial's world to it in-process (``agentprop run --agent module:MyMcpAgent``).
- :class:`McpServedAgent`: base class of an agent whose own MCP client (a framework's, any
  transport it opens) reaches a real MCP server agentprop starts for each trial (streamable
  HTTP on loopback); every case kind, exploration, probes and shrinking apply.
- :class:`McpConversation`: the client side of the turn protocol (the ``user_message`` prompt,
  ``respond``, tool errors as :class:`~agentprop.ToolError`).
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
    TrialBridge,
    build_server,
    trial_server,
)
from agentprop._pipeline.serve import CaseServer, HttpCaseServer, ServedTrial, default_record_path, log_trial  # noqa: E402

__all__ = [
    "CONTEXT_URI",
    "USER_MESSAGE_PROMPT",
    "CaseServer",
    "HttpCaseServer",
    "McpAgent",
    "McpConversation",
    "McpServedAgent",
    "McpSessionEnded",
    "ServedTrial",
    "TrialBridge",
    "build_server",
    "default_record_path",
    "log_trial",
    "trial_server",
]
