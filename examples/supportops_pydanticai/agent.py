"""SupportOps as a PydanticAI agent, tested with the SupportOps spec and bindings.

The agent is an ordinary ``pydantic_ai.Agent``: the spec's tools as typed functions and the
response contract as its output type (:func:`agentprop.adapters.pydantic_ai.pydantic_ai_agent`).
Offline, its model is a ``FunctionModel`` played by the SupportOps reference agent
(``examples/supportops/agent.py``): the same decisions and fault knobs, but every tool call goes
through PydanticAI (its argument validation, its tool execution, its retries). Run it with

    agentprop run examples/supportops --agent
    examples.supportops_pydanticai.agent:SupportOpsPydanticAI --fault skip_auth=0.5

With a real model, give ``pydantic_ai_agent`` the model's name instead (e.g.
``"openai:gpt-4o"``) and drop the played model: the test is the same.

:class:`SupportOpsPydanticAIOverOpenAI` is the same agent with PydanticAI's own OpenAI model
class and client: its requests go over HTTP to a loopback OpenAI-compatible server
(:class:`agentprop.testing.played.PlayedOpenAI`) that plays the reference agent, and PydanticAI's
output tool carries the response.
"""

from __future__ import annotations

from pathlib import Path

from openai import AsyncOpenAI
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agentprop import TurnContext, load_agent
from agentprop.adapters.pydantic_ai import PlayedModel, PydanticAIAgent, pydantic_ai_agent
from agentprop.spec import load_spec
from agentprop.testing.played import PlayedOpenAI

SUPPORTOPS = Path(__file__).resolve().parent.parent / "supportops"
SPEC = load_spec(SUPPORTOPS / "spec.yaml")
Reference = load_agent("agent:SupportOpsAgent", SUPPORTOPS).target
PLAYED = PlayedOpenAI()

# built once; each conversation runs it with its own model
AGENT = pydantic_ai_agent(
    SPEC,
    None,
    instructions=(SUPPORTOPS / "seed_prompt.txt").read_text(encoding="utf-8"),
    defer_model_check=True,
)


class SupportOpsPydanticAI(PydanticAIAgent):
    """One conversation of the PydanticAI agent, its model played by the reference agent."""

    FAULTS = Reference.FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        super().__init__(AGENT, model=PlayedModel(Reference(faults), spec=SPEC).model)


class SupportOpsPydanticAIOverOpenAI(PydanticAIAgent):
    """The same agent with PydanticAI's OpenAI model over HTTP, the model played on loopback."""

    FAULTS = Reference.FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.player = PLAYED.player(Reference(faults), spec=SPEC)
        client = AsyncOpenAI(
            base_url=PLAYED.base_url,
            api_key="played",
            max_retries=0,
            http_client=PLAYED.http_client(),
        )
        model = OpenAIChatModel(self.player.model, provider=OpenAIProvider(openai_client=client))
        super().__init__(AGENT, model=model)

    async def turn(self, message: str, ctx: TurnContext) -> None:
        self.player.begin(ctx)
        await super().turn(message, ctx)
