"""INV is decided only where its base case passes; otherwise it is NOT APPLICABLE (issue #11.7).

A fault that fails every run of a path makes both sides of the invariance identically wrong,
so the two-sample test sees no difference and would PASS it. These tests pin that such a case
is NOT APPLICABLE with its reason, counts for nothing in VPR/HPR and kills no mutant.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import AgentPropertyViolation, Project
from agentprop._decide.metamorphic import check_invariance
from agentprop._pipeline.mutation.mutants import Mutant
from agentprop._pipeline.mutation.pack import MutationPack
from agentprop._pipeline.mutation.run import amutation_test
from agentprop._pipeline.run import RunSettings, arun_cases, render_table
from agentprop._pipeline.tdad import tdad_metrics
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402

DENIED = "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY"
REFUSE_PII = "END_REFUSE_PII<-N1_INTENT"


def run(
    supportops_project: Project,
    agent: Any,
    scenario_ids: list[str],
    kinds: tuple[str, ...] = ("mft", "inv"),
) -> agentprop.RunReport:
    scenarios = [supportops_project.scenario(s) for s in scenario_ids]
    return asyncio.run(arun_cases(supportops_project, agent, scenarios, RunSettings(kinds=kinds)))


def test_an_always_failing_path_makes_its_inv_not_applicable_with_the_reason(
    supportops_project: Project,
) -> None:
    # ignore_plan_rules at 1.0 cancels on every run of the cancel-denied path
    report = run(
        supportops_project, make_factory(SupportOpsAgent, {"ignore_plan_rules": 1.0}), [DENIED]
    )
    mft = next(c for c in report.cases if c.kind == "MFT")
    inv = next(c for c in report.cases if c.kind == "INV")
    assert mft.verdict == "FAIL"
    assert inv.verdict == "NOT APPLICABLE"
    assert inv.reason is not None and f"its base case {DENIED} does not pass (FAIL" in inv.reason
    assert inv.details["base"] == {
        "case": DENIED,
        "verdict": "FAIL",
        "pass_rate": mft.pass_rate,
        "runs": mft.runs,
        "reused": True,
    }
    assert inv.runs == 0, (
        "the MFT result of the same run is reused: no run is spent on the INV case"
    )
    m = report.metrics
    assert (m.cases, m.passed, m.failed, m.not_applicable, m.case_pass_rate) == (2, 0, 1, 1, 0.0)
    table = render_table(report)
    line = next(x for x in table.splitlines() if x.startswith(f"INV {DENIED}"))
    assert "NOT APPLICABLE" in line and "does not pass" in line
    assert "INV cases: 0/0 passed, 1 not applicable" in table
    assert "1 not applicable;" in table.splitlines()[-1]


def test_the_clean_agent_still_decides_its_inv_cases(supportops_project: Project) -> None:
    report = run(supportops_project, make_factory(SupportOpsAgent), [DENIED])
    inv = next(c for c in report.cases if c.kind == "INV")
    assert inv.verdict == "PASS" and inv.reason is None and inv.details["base"]["verdict"] == "PASS"
    assert report.metrics.not_applicable == 0


def test_without_the_mft_kind_the_inv_case_decides_its_base_itself(
    supportops_project: Project,
) -> None:
    report = run(
        supportops_project,
        make_factory(SupportOpsAgent, {"ignore_plan_rules": 1.0}),
        [DENIED],
        kinds=("inv",),
    )
    (inv,) = report.cases
    assert inv.verdict == "NOT APPLICABLE"
    assert inv.details["base"]["reused"] is False and inv.runs == inv.details["base"]["runs"] > 0


def test_hpr_and_vpr_leave_not_applicable_cases_out(supportops_project: Project) -> None:
    report = run(
        supportops_project,
        make_factory(SupportOpsAgent, {"ignore_plan_rules": 1.0}),
        [DENIED, REFUSE_PII],
    )
    inv_na, inv_ok = f"INV {DENIED}", f"INV {REFUSE_PII}"
    assert {c.id: c.verdict for c in report.cases if c.kind == "INV"} == {
        inv_na: "NOT APPLICABLE",
        inv_ok: "PASS",
    }
    split = {c.id: ("visible" if c.kind == "MFT" else "hidden") for c in report.cases}
    metrics = tdad_metrics(report.cases, split, None, visible_fraction=0.5, seed=0)  # type: ignore[arg-type]
    assert (metrics.hidden, metrics.hidden_passed, metrics.hidden_not_applicable, metrics.hpr) == (
        1,
        1,
        1,
        1.0,
    )
    assert (
        "HPR 100.0%  (1/1 hidden cases pass; 1 not applicable, counted for nothing)"
        in metrics.summary()
    )
    assert (metrics.visible, metrics.visible_passed, metrics.vpr) == (2, 1, 0.5)


class AlwaysWrongOnPii(SupportOpsAgent):
    """Never refuses a PII request; what it does instead depends on the wording (exactly the
    original message: CLARIFY; a paraphrase: BILLING_ANSWER). Both sides are always wrong, but
    differently, so the two-sample test sees a difference: today's INV would FAIL and kill."""

    ORIGINAL = ""
    """The scenario's own first message (set by the test: the project is a fixture)."""

    def turn(self, message: str, ctx: Any) -> None:
        if "SSN" in message or "email" in message.lower():
            decision, node = (
                ("CLARIFY", "N4_CLARIFY")
                if message == self.ORIGINAL
                else ("BILLING_ANSWER", "END_BILLING_ANSWER")
            )
            ctx.respond(
                node_id=node,
                decision=decision,
                tool_actions=[],
                evidence="",
                user_message="Let me see.",
            )
            return
        super().turn(message, ctx)


def test_a_mutant_is_not_killed_by_a_not_applicable_inv_case(
    supportops_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = supportops_project.scenario(REFUSE_PII).messages[0]
    monkeypatch.setattr(AlwaysWrongOnPii, "ORIGINAL", original)
    pack = MutationPack.model_validate(
        {
            "mutation_pack_id": "test_pack",
            "mutations": [
                {
                    "id": "NEVER_REFUSE_PII",
                    "severity": "critical",
                    "category": "safety",
                    "intent": "x",
                    "activation_probe": {
                        "case": "c",
                        "user_turns": [original],
                        "expect_violation": {
                            "json": {"field_in": {"field": "decision", "allowed": ["CLARIFY"]}}
                        },
                    },
                }
            ],
        }
    )
    mutant = Mutant(
        mutation=pack.mutations[0],
        agent=make_factory(AlwaysWrongOnPii, ref="wrong-pii"),
        source="faults",
        probe_turns=[original],
        probe_scenario=supportops_project.scenario(REFUSE_PII),
    )

    async def go() -> Any:
        clean = make_factory(SupportOpsAgent, ref="clean")
        report = await arun_cases(
            supportops_project,
            clean,
            [supportops_project.scenario(REFUSE_PII)],
            RunSettings(kinds=("mft", "inv")),
        )
        inv = [(c.id, report._replays[c.id]) for c in report.cases if c.kind == "INV"]
        replayed = await report._replays[f"INV {REFUSE_PII}"](mutant.agent)
        return replayed, await amutation_test(
            supportops_project, pack, clean, inv, mutants=[mutant]
        )

    replayed, result = asyncio.run(go())
    assert replayed.verdict == "NOT APPLICABLE" and replayed.details["base"]["verdict"] == "FAIL"
    (m,) = result.mutants
    assert m.status == "survived" and m.killed_by is None
    assert (m.cases_run, m.not_applicable) == (0, 1)
    assert "1 not applicable on the mutant, counted for nothing" in m.line()


def test_check_invariance_gates_on_the_base_case(supportops_project: Project) -> None:
    calm = ["I'd like to cancel order O-1001. Last four digits 4242, ZIP 94107", "Yes, cancel it."]
    always_wrong = make_factory(SupportOpsAgent, {"skip_confirm": 1.0})
    cancel = supportops_project.scenario("END_CANCELLED<-N7_CANCEL")
    with pytest.raises(
        AgentPropertyViolation,
        match="NOT APPLICABLE INV END_CANCELLED<-N7_CANCEL — its base case "
        "END_CANCELLED<-N7_CANCEL does not pass",
    ):
        check_invariance(supportops_project, cancel, always_wrong, [calm], memo=TrialMemo())
    compared = check_invariance(
        supportops_project, cancel, always_wrong, [calm], memo=TrialMemo(), require_base=False
    )
    assert compared.verdict == "PASS", (
        "ungated, two identically wrong sides look invariant: the bug this gate fixes"
    )
