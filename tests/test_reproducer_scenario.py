"""Reproducers stay instances of their scenario (issue #23 item 7): the injected failure that
defines a retry scenario is never shrunk away (its expected calls were compiled with it), and
the world values the scenario sets are printed with the reproducer."""

from __future__ import annotations

from pathlib import Path

import agentprop
from agentprop._decide.shrink import shrink
from agentprop._judge.verdict import Verdict
from agentprop._scenario.trace import Trace

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
RETRY = "END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry"


def always_fails(trace: Trace) -> list[Verdict]:
    """A failure that does not need the timeout: the shrinker would drop it on main."""
    return [
        Verdict(
            passed=False,
            contract="calls_in_order",
            explanation="always",
            clause="tools.cancel_order.retry_policy",
            detail="missing=cancel_order",
        )
    ]


def test_the_injected_failure_of_a_retry_scenario_is_kept() -> None:
    project = agentprop.load_project(EXAMPLE)
    scenario = project.scenario(RETRY)
    assert scenario.world.failures and [t.required_tools for t in scenario.turns][-1] == [
        "cancel_order",
        "cancel_order",
    ]
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)
    report = shrink(
        project, scenario, agent, prop=always_fails, budget=40, verify_runs=3, shrink_words=False
    )
    assert report.reproducer.world.failures == scenario.world.failures
    assert "cancel_order fails with timeout" in report.world_scenario
    assert "world the scenario sets: cancel_order fails with timeout" in report.summary()
    # the reproducer, judged by the spec, passes on the correct agent: it is
    # still the retry scenario
    assert (
        agentprop.check(project, report.reproducer, agent, raise_on_failure=False).verdict == "PASS"
    )


def _typo_word(before: str, after: str) -> str:
    """The word of ``before`` that the typo changed (words compared in order)."""
    changed = [a for a, b in zip(before.split(), after.split()) if a != b]
    return changed[0] if changed else ""


def test_a_typo_is_anchored_to_a_word_not_an_offset() -> None:
    # dropping another transform (here: words added in front) must not move the typo to
    # another word; on main the site was an index into the transformed text
    from agentprop.strategies._internal.paraphrase import apply_transforms

    base = "please cancel order number immediately thanks"
    longer = "honestly really " + base
    moved = 0
    for site in range(60):
        step = [("typo", {"kind": 2, "site": site, "key": 0})]
        a = _typo_word(base, str(apply_transforms(base, step)))
        b = _typo_word(longer, str(apply_transforms(longer, step)))
        if b not in ("honestly", "really") and a != b:
            moved += 1
    assert moved == 0


def test_minimal_is_not_claimed_for_a_reproducer_that_did_not_fail_again() -> None:
    from agentprop._decide.oracle import CheckResult, FailureSeen

    project = agentprop.load_project(EXAMPLE)
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)
    sig = (
        "calls_in_order:decision_tree.N2_AUTH.requirements.must_call_tools_in_order@turn0:"
        "missing=verify_identity"
    )
    seen = CheckResult(
        verdict="FAIL",
        decided_by="sprt",
        runs=5,
        passes=0,
        pass_rate=0.0,
        interval=(0.0, 0.4),
        interval_exact=(0.0, 0.5),
        failures=[FailureSeen(signature=sig, explanation="x", count=5, first_trial=0)],
    )
    # the correct agent never fails again: on main this said "minimal" (nothing to remove)
    report = shrink(
        project, scenario, agent, failing=seen, budget=20, verify_runs=10, shrink_words=False
    )
    assert report.reproducer_rate is not None and report.reproducer_rate.failures == 0
    assert not report.minimal and "not reconfirmed" in report.stop_reason
