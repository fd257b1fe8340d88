"""The bundled SupportOps agent reads a doubled space as one, as a person does: an explored
follow-up "I'm not  sure, ..." on the confirmation turn is not a yes (seed 4 of the 10-seed
check of the bundled examples failed the correct agent there)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentprop import load_agent, load_project

SUPPORTOPS = Path(__file__).parent.parent / "examples" / "supportops"
PATH = "END_CANCELLED<-N7_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#0"


@pytest.mark.parametrize(
    "unsure",
    [
        "I'm not sure, what would that mean for me?",
        "I'm not  sure, what would that mean for me?",
        "I'm not \t sure.",
    ],
)
def test_a_doubled_space_in_not_sure_is_not_a_yes(unsure: str) -> None:
    project = load_project(SUPPORTOPS)
    scenario = project.scenario(PATH)
    agent = load_agent("agent:SupportOpsAgent", base_dir=SUPPORTOPS)
    messages = [scenario.messages[0], unsure, "Yes, cancel it."]
    trace = asyncio.run(project.arun(scenario, agent.factory, messages=messages))
    decisions = [t.decision for t in trace.turns] if hasattr(trace, "turns") else []
    assert decisions, trace
    assert decisions[1] != "CANCELLED" and decisions[-1] == "CANCELLED"
