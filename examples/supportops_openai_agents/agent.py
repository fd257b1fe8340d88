"""SupportOps as an OpenAI Agents SDK agent, tested with the SupportOps spec and bindings.

The agent is an ordinary ``agents.Agent`` with the SDK's defaults (strict function tools, the
Responses API, the default tool-use behaviour); its tools are the spec's, from
:func:`agentprop.adapters.openai_agents.function_tools`. Offline, its model talks to a loopback
OpenAI-compatible server (:class:`agentprop.testing.played.PlayedOpenAI`) whose replies are
the SupportOps reference agent's decisions (``examples/supportops/agent.py``, with its fault
knobs), so every tool call goes through the Responses API and the SDK's tool execution. Run it
with

    agentprop run examples/supportops --agent
    examples.supportops_openai_agents.agent:SupportOpsAgentsSDK --fault skip_auth=0.5

:class:`SupportOpsAgentsSDKOverMcp` is the same agent taking its tools from MCP instead: the
SDK's own MCP client connects to a real server agentprop starts for each trial
(:class:`agentprop.mcp.McpServedAgent`); :class:`SupportOpsAgentsSDKOverMcpStdio` has the SDK
start that server as a stdio process (``MCPServerStdio``). With a real model, drop ``model=`` (the
SDK's default model and client) and the player: the test is the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from openai import AsyncOpenAI

from agentprop import TurnContext, load_agent
from agentprop.adapters.openai_agents import DEFAULT_MAX_TURNS, OpenAIAgentsAgent, function_tools
from agentprop.mcp import McpServedAgent
from agentprop.spec import load_spec
from agentprop.testing.played import PlayedOpenAI

SUPPORTOPS = Path(__file__).resolve().parent.parent / "supportops"
SPEC = load_spec(SUPPORTOPS / "spec.yaml")
PROMPT = (SUPPORTOPS / "seed_prompt.txt").read_text(encoding="utf-8")
TOOLS = function_tools(SPEC)
Reference = load_agent("agent:SupportOpsAgent", SUPPORTOPS).target
PLAYED = PlayedOpenAI()
set_tracing_disabled(True)  # the played model's runs are not worth exporting


class SupportOpsAgentsSDK(OpenAIAgentsAgent):
    """One conversation of the Agents SDK agent, its model played by the reference agent."""

    FAULTS = Reference.FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.player = PLAYED.player(Reference(faults), spec=SPEC)
        client = AsyncOpenAI(
            base_url=PLAYED.base_url,
            api_key="played",
            max_retries=0,
            http_client=PLAYED.http_client(),
        )
        model = OpenAIResponsesModel(model=self.player.model, openai_client=client)
        super().__init__(
            Agent(name="supportops", instructions=PROMPT, tools=list(TOOLS), model=model)
        )

    async def turn(self, message: str, ctx: TurnContext) -> None:
        self.player.begin(ctx)
        await super().turn(message, ctx)


class SupportOpsAgentsSDKOverMcp(McpServedAgent):
    """The same agent with its tools from MCP: the SDK's own MCP client
    (``MCPServerStreamableHttp``) connects each turn to the server agentprop starts for the
    trial, and the SDK lists and calls the spec's tools (and ``respond``) there."""

    FAULTS = Reference.FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.player = PLAYED.player(Reference(faults), spec=SPEC)
        client = AsyncOpenAI(
            base_url=PLAYED.base_url,
            api_key="played",
            max_retries=0,
            http_client=PLAYED.http_client(),
        )
        self.model = OpenAIResponsesModel(model=self.player.model, openai_client=client)
        self.items: list[Any] = []

    async def mcp_turn(self, message: str, url: str) -> None:
        self.player.begin(self.ctx)
        async with MCPServerStreamableHttp(params={"url": url}, cache_tools_list=True) as server:
            agent = Agent(
                name="supportops", instructions=PROMPT, model=self.model, mcp_servers=[server]
            )
            result = await Runner.run(
                agent,
                [*self.items, {"role": "user", "content": message}],
                max_turns=DEFAULT_MAX_TURNS,
            )
        self.items = result.to_input_list()
        usage = result.context_wrapper.usage
        self.ctx.add_usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            model_calls=usage.requests,
        )


class SupportOpsAgentsSDKOverMcpStdio(SupportOpsAgentsSDKOverMcp):
    """The same agent whose MCP client starts the server itself, over stdio: the SDK's
    ``MCPServerStdio`` runs the command agentprop gives for the trial (``self.stdio``), once per
    conversation (``keep_open``: one server process, one session, for the whole trial)."""

    async def mcp_turn(self, message: str, url: str) -> None:
        self.player.begin(self.ctx)
        server = await self.keep_open(
            "mcp", lambda: MCPServerStdio(params=self.stdio.params(), cache_tools_list=True)
        )  # type: ignore[arg-type]
        agent = Agent(
            name="supportops", instructions=PROMPT, model=self.model, mcp_servers=[server]
        )
        result = await Runner.run(
            agent, [*self.items, {"role": "user", "content": message}], max_turns=DEFAULT_MAX_TURNS
        )
        self.items = result.to_input_list()
        usage = result.context_wrapper.usage
        self.ctx.add_usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            model_calls=usage.requests,
        )
