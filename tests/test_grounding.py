"""Issue #11 item 5: what a response states is grounded, not only its numbers.

Numbers, ids, quoted values and list items / steps must come from tool outputs or the user's
turns; the bindings' ``response:`` section says which grounding applies to which field. The
bug is first reproduced on the runbook spec (tests/data/promises/runbook): an agent that adds
a step of its own to the runbook passed everything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import Scenario, Trace, mft_verdicts
from agentprop._agents import load_agent
from agentprop._properties import first_failure

ROOT = Path(__file__).resolve().parents[1]
RUNBOOK_DIR = ROOT / "tests" / "data" / "promises" / "runbook"
RUNBOOK = agentprop.load_project(RUNBOOK_DIR)
STEPS = RUNBOOK.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")


def run(project: agentprop.Project, scenario: Scenario, faults: dict[str, float] | None = None, trial: int = 0) -> Trace:
    agent = load_agent(project.bindings.agent or "", project.base_dir, faults or {}).factory
    return asyncio.run(project.arun(scenario, agent, trial=trial))


def failures(project: agentprop.Project, scenario: Scenario, trace: Trace) -> list[agentprop.Verdict]:
    return [v for v in mft_verdicts(project.spec, scenario, trace, grounding=project.bindings.response_grounding(project.spec)) if not v.passed]


# ----------------------------------------------------------------------------- the bug, reproduced


def test_an_invented_runbook_step_fails_the_mft() -> None:
    trace = run(RUNBOOK, STEPS, {"invented_step": 1.0})
    steps = trace.final_response["steps"] if trace.final_response else []
    assert "Restart every pod of the service to clear its caches" in steps
    first = first_failure(failures(RUNBOOK, STEPS, trace))
    assert first is not None, "an agent that adds a step of its own to the runbook passed the MFT"
    assert first.contract == "response_grounded"
    assert first.detail == "user_message:list_items"
    assert "Restart every pod" in first.explanation
    # the structured steps field is checked too, as the bindings' response: section says
    steps_verdict = next(v for v in mft_verdicts(RUNBOOK.spec, STEPS, trace, grounding=RUNBOOK.bindings.response_grounding(RUNBOOK.spec)) if v.detail == "steps:list_items")
    assert not steps_verdict.passed and "Restart every pod" in steps_verdict.explanation


def test_the_clean_runbook_agent_states_only_grounded_steps() -> None:
    for trial in range(5):
        assert failures(RUNBOOK, STEPS, run(RUNBOOK, STEPS, trial=trial)) == []
