"""SupportOps as a PydanticAI agent, tested with the SupportOps spec and bindings.

The agent is an ordinary ``pydantic_ai.Agent``: the spec's tools as typed functions and the
response contract as its output type (:func:`agentprop.adapters.pydantic_ai.pydantic_ai_agent`).
Offline, its model is a ``FunctionModel`` played by the SupportOps reference agent
(``examples/supportops/agent.py``): the same decisions and fault knobs, but every tool call goes
through PydanticAI (its argument validation, its tool execution, its retries). Run it with

    agentprop run examples/supportops --agent examples.supportops_pydanticai.agent:SupportOpsPydanticAI --fault skip_auth=0.5

With a real model, give ``pydantic_ai_agent`` the model's name instead (e.g.
``"openai:gpt-4o"``) and drop the played model: the test is the same.
"""

from __future__ import annotations

from pathlib import Path

from agentprop import load_agent
from agentprop.adapters.pydantic_ai import PlayedModel, PydanticAIAgent, pydantic_ai_agent
from agentprop.spec import load_spec

SUPPORTOPS = Path(__file__).resolve().parent.parent / "supportops"
SPEC = load_spec(SUPPORTOPS / "spec.yaml")
Reference = load_agent("agent:SupportOpsAgent", SUPPORTOPS).target

# built once; each conversation runs it with its own model
AGENT = pydantic_ai_agent(SPEC, None, instructions=(SUPPORTOPS / "seed_prompt.txt").read_text(encoding="utf-8"), defer_model_check=True)


class SupportOpsPydanticAI(PydanticAIAgent):
    """One conversation of the PydanticAI agent, its model played by the reference agent."""

    FAULTS = Reference.FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        super().__init__(AGENT, model=PlayedModel(Reference(faults), spec=SPEC).model)
