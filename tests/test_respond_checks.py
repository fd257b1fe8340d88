"""Issue #11 item 4: ``respond`` is checked against the trace, not trusted.

``node_id`` must be the node the scenario is at, ``tool_actions`` the tools the turn really
called (in order), ``evidence`` what tool outputs said. Each bug is first reproduced on the
runbook spec (tests/data/promises/runbook) and on the SupportOps example with an agent that
lies, then each contract is pinned on hand-built traces.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import Scenario, Trace, TurnContext, mft_verdicts
from agentprop._agents import load_agent
from agentprop._properties import first_failure

ROOT = Path(__file__).resolve().parents[1]
RUNBOOK = agentprop.load_project(ROOT / "tests" / "data" / "promises" / "runbook")
SUPPORTOPS = agentprop.load_project(ROOT / "examples" / "supportops")


def run(project: agentprop.Project, scenario: Scenario, agent: Any, trial: int = 0) -> Trace:
    return asyncio.run(project.arun(scenario, agent, trial=trial))


def runbook_agent(faults: dict[str, float] | None = None) -> Any:
    return load_agent("agent:RunbookAgent", RUNBOOK.base_dir, faults or {}).factory


def failures(project: agentprop.Project, scenario: Scenario, trace: Trace) -> list[agentprop.Verdict]:
    return [v for v in mft_verdicts(project.spec, scenario, trace, grounding=project.bindings.response_grounding(project.spec)) if not v.passed]


# ----------------------------------------------------------------------------- the bug, reproduced


@pytest.mark.parametrize("scenario", RUNBOOK.scenarios(), ids=lambda s: s.id)
def test_the_clean_runbook_agent_passes_the_mft(scenario: Scenario) -> None:
    for trial in range(3):
        assert failures(RUNBOOK, scenario, run(RUNBOOK, scenario, runbook_agent(), trial)) == []


def test_tool_actions_that_list_an_uncalled_tool_fail_the_mft() -> None:
    s = RUNBOOK.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    trace = run(RUNBOOK, s, runbook_agent({"lie_tool_actions": 1.0}))
    assert trace.final_response is not None and trace.final_response["tool_actions"] == ["get_runbook", "page_oncall"]
    first = first_failure(failures(RUNBOOK, s, trace))
    assert first is not None, "an agent that reports page_oncall without calling it passed the MFT"
    assert first.contract == "tool_actions_match"
    assert first.detail == "uncalled=page_oncall"
    assert "page_oncall" in first.explanation and "never called" in first.explanation


def test_an_invented_node_id_fails_the_mft() -> None:
    s = RUNBOOK.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    first = first_failure(failures(RUNBOOK, s, run(RUNBOOK, s, runbook_agent({"invent_node_id": 1.0}))))
    assert first is not None, "an agent that reports a node the spec does not have passed the MFT"
    assert first.contract == "node_id_matches"
    assert first.detail == "got=unknown-node"
    assert "N4_VERIFY_FIX" in first.explanation and "END_PROVIDE_STEPS" in first.explanation


def test_evidence_citing_an_id_no_tool_returned_fails_the_mft() -> None:
    s = RUNBOOK.scenario("END_PROVIDE_STEPS<-N2_LOOKUP")
    first = first_failure(failures(RUNBOOK, s, run(RUNBOOK, s, runbook_agent({"invent_evidence": 1.0}))))
    assert first is not None, "evidence citing RB-99 (no tool returned it) passed the MFT"
    assert first.contract == "evidence_grounded"
    assert first.detail == "ids"
    assert "RB-99" in first.explanation


class LyingSupportOps:
    """The clean SupportOps agent, but its respond claims a tool it never called and a node
    that does not exist: the issue's "passes 20/20" agent."""

    def __init__(self) -> None:
        self.inner = load_agent("agent:SupportOpsAgent", SUPPORTOPS.base_dir).factory()

    def turn(self, message: str, ctx: TurnContext) -> None:
        real = ctx.respond

        def lying_respond(**fields: Any) -> Any:
            fields["tool_actions"] = [*fields["tool_actions"], "verify_identity"]
            fields["node_id"] = "N0_LOOKUP"
            return real(**fields)

        ctx.respond = lying_respond  # type: ignore[method-assign]
        self.inner.turn(message, ctx)


def test_a_lying_supportops_agent_fails_every_case() -> None:
    for s in SUPPORTOPS.scenarios():
        first = first_failure(failures(SUPPORTOPS, s, run(SUPPORTOPS, s, LyingSupportOps)))
        assert first is not None, f"{s.id}: the lying agent passed"
        assert first.contract in {"node_id_matches", "tool_actions_match"}, f"{s.id}: {first.explanation}"
