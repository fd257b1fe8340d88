"""Reproducers stay instances of their scenario (issue #23 item 7): the injected failure that
defines a retry scenario is never shrunk away (its expected calls were compiled with it), and
the world values the scenario sets are printed with the reproducer."""

from __future__ import annotations

from pathlib import Path

import agentprop
from agentprop._decide.contracts import Verdict
from agentprop._decide.shrink import shrink
from agentprop._scenario.trace import Trace

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
RETRY = "END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry"


def always_fails(trace: Trace) -> list[Verdict]:
    """A failure that does not need the timeout: the shrinker would drop it on main."""
    return [
        Verdict(
            passed=False, contract="calls_in_order", explanation="always", clause="tools.cancel_order.retry_policy", detail="missing=cancel_order"
        )
    ]


def test_the_injected_failure_of_a_retry_scenario_is_kept() -> None:
    project = agentprop.load_project(EXAMPLE)
    scenario = project.scenario(RETRY)
    assert scenario.world.failures and [t.required_tools for t in scenario.turns][-1] == ["cancel_order", "cancel_order"]
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)
    report = shrink(project, scenario, agent, prop=always_fails, budget=40, verify_runs=3, shrink_words=False)
    assert report.reproducer.world.failures == scenario.world.failures
    assert "cancel_order fails with timeout" in report.world_scenario
    assert "world the scenario sets: cancel_order fails with timeout" in report.summary()
    # the reproducer, judged by the spec, passes on the correct agent: it is still the retry scenario
    assert agentprop.check(project, report.reproducer, agent, raise_on_failure=False).verdict == "PASS"
