"""SupportOps as an OpenAI Agents SDK agent, tested with the SupportOps spec and bindings.

The agent is an ordinary ``agents.Agent`` with the SDK's defaults (strict function tools, the
Responses API, the default tool-use behaviour); its tools are the spec's, from
:func:`agentprop.adapters.openai_agents.function_tools`. Offline, its model talks to a loopback
OpenAI-compatible server (:class:`agentprop.testing.played.PlayedOpenAI`) whose replies are
the SupportOps reference agent's decisions (``examples/supportops/agent.py``, with its fault
knobs), so every tool call goes through the Responses API and the SDK's tool execution. Run it
with

    agentprop run examples/supportops --agent examples.supportops_openai_agents.agent:SupportOpsAgentsSDK --fault skip_auth=0.5

With a real model, drop ``model=`` (the SDK's default model and client) and the player: the
test is the same.
"""

from __future__ import annotations

from pathlib import Path

from agents import Agent, OpenAIResponsesModel, set_tracing_disabled
from openai import AsyncOpenAI

from agentprop import TurnContext, load_agent
from agentprop.adapters.openai_agents import OpenAIAgentsAgent, function_tools
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
        client = AsyncOpenAI(base_url=PLAYED.base_url, api_key="played", max_retries=0, http_client=PLAYED.http_client())
        model = OpenAIResponsesModel(model=self.player.model, openai_client=client)
        super().__init__(Agent(name="supportops", instructions=PROMPT, tools=list(TOOLS), model=model))

    async def turn(self, message: str, ctx: TurnContext) -> None:
        self.player.begin(ctx)
        await super().turn(message, ctx)
