"""Issue #23 item 0: no false alarm from reading a path.

A missing-field exit keeps the requirements of the nodes before it on the path: the agent that
verifies the patient (the earlier node requires it) and then asks for the prescription id is
right, not "called verify_patient, which must not be called here".
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import ToolError, Trace, TurnContext
from agentprop._agents.project import load_project
from agentprop.agents import make_factory
from agentprop.contracts import mft_verdicts
from agentprop.scenarios import Scenario

ROOT = Path(__file__).resolve().parents[1]
PHARMACY = ROOT / "tests" / "data" / "promises" / "pharmacy"


def _pharmacy_asking_for_rx(tmp_path: Path) -> agentprop.Project:
    """The pharmacy spec with N2_PRESCRIPTION needing the prescription id (``must_have``)."""
    spec = (PHARMACY / "spec.yaml").read_text(encoding="utf-8")
    spec = spec.replace(
        "  description: Read the prescription, after verification.\n  requirements:\n",
        "  description: Read the prescription, after verification.\n  requirements:\n"
        "    must_have:\n    - rx_id\n    on_missing_rx_id_decision: REQUEST_RX_ID\n",
    )
    spec = spec.replace(
        "        - REQUEST_DOB\n", "        - REQUEST_DOB\n        - REQUEST_RX_ID\n"
    )
    spec = spec.replace(
        "  decision_enum:\n  - REQUEST_DOB\n",
        "  decision_enum:\n  - REQUEST_DOB\n  - REQUEST_RX_ID\n",
    )
    assert spec.count("REQUEST_RX_ID") == 3
    (tmp_path / "spec.yaml").write_text(spec, encoding="utf-8")
    bindings = (PHARMACY / "agentprop.yaml").read_text(encoding="utf-8")
    bindings = bindings.replace(
        '"Please refill my prescription {rx_id}[, date of birth {dob}]"',
        '"Please refill my prescription[ {rx_id}][, date of birth {dob}]"',
    )
    bindings = bindings.replace(
        '"I need a refill of {rx_id}[. My date of birth is {dob}]"',
        '"I need a refill[ of {rx_id}][. My date of birth is {dob}]"',
    )
    (tmp_path / "agentprop.yaml").write_text(bindings, encoding="utf-8")
    return load_project(tmp_path)


class _VerifyThenAsk:
    """Verifies the patient, then asks for the prescription id it was not given."""

    def turn(self, message: str, ctx: TurnContext) -> None:
        tools: list[str] = []
        if "1980-04-02" not in message:
            ctx.respond(
                node_id="N1_VERIFY",
                decision="REQUEST_DOB",
                tool_actions=[],
                evidence="none",
                user_message="Your date of birth, please?",
            )
            return
        try:
            ctx.call("verify_patient", patient_id=ctx.context["patient_id"], dob="1980-04-02")
            tools.append("verify_patient")
        except ToolError:
            pass
        ctx.respond(
            node_id="N2_PRESCRIPTION",
            decision="REQUEST_RX_ID",
            tool_actions=tools,
            evidence="verify_patient: verified",
            user_message="You are verified. Which prescription should I refill?",
        )


def _run(project: agentprop.Project, cls: Any, scenario: Scenario) -> Trace:
    return asyncio.run(project.arun(scenario, make_factory(cls, {}).factory, trial=0))


def test_a_missing_field_exit_keeps_the_earlier_nodes_requirements(tmp_path: Path) -> None:
    project = _pharmacy_asking_for_rx(tmp_path)
    stop = project.scenario("N2_PRESCRIPTION:missing_rx_id")
    assert stop.expect_decision == "REQUEST_RX_ID"
    assert stop.turns[-1].required_tools == ["verify_patient"]
    assert "verify_patient" not in stop.forbidden_tools
    # the stopping node's own work stays forbidden: it cannot read a prescription it has no id of
    assert "get_prescription" in stop.forbidden_tools
    trace = _run(project, _VerifyThenAsk, stop)
    failed = [v for v in mft_verdicts(project.spec, stop, trace) if not v.passed]
    assert failed == [], [v.explanation for v in failed]


# ----------------------------------------------------------------------------- derived numbers


def _reply(
    result: Any,
    text: str,
    *,
    spec_text: tuple[str, ...] = (),
    kinds: tuple[str, ...] = ("numbers",),
) -> agentprop.Verdict:
    from agentprop._judge.grounded import response_grounded
    from agentprop._scenario.trace import ToolCall, Turn

    call = ToolCall(name="get_prescription", result=result)
    trace = Trace(
        turns=[
            Turn(
                index=0,
                user_message="when can I refill?",
                tool_calls=[call],
                response={"user_message": text},
            )
        ]
    )
    return response_grounded(trace, "user_message", list(kinds), spec_text=spec_text)


SUPPLY = {"rx_id": "RX-5521", "days_supply": 30, "filled_on": "2026-11-20T14:30:00Z"}
EIGHTY = ("A refill may be requested once 80% of the supply is used.",)


@pytest.mark.parametrize(
    ("text", "derivation"),
    [
        # 30-day supply and the spec's 80% rule: 24 days
        ("Please try again in 24 days.", "24 = 30% of 80"),
        # a sum of two grounded numbers
        ("That is 110 days in total.", "110 = 30 + 80"),
        # rounding up a ratio: 30 / 80 = 0.375 -> 0.38
        ("The ratio is 0.38.", "0.38 = 30 / 80 = 0.375"),
        # a percentage that is a ratio of two grounded numbers: 24 / 30
        ("You have used 37.5% of it.", "37.5% = 30 / 80 (as a percentage)"),
        # the hour of a grounded timestamp
        ("It was filled at 14 o'clock.", "14 is part of '2026-11-20T14:30:00Z'"),
        # a grounded date plus grounded days
        ("Your next refill is due 2026-12-20.", "2026-12-20 = 2026-11-20 + 30 days"),
    ],
)
def test_one_step_from_grounded_numbers_is_grounded_and_named(text: str, derivation: str) -> None:
    verdict = _reply(SUPPLY, text, spec_text=EIGHTY)
    assert verdict.passed, verdict.explanation
    assert derivation in verdict.explanation


def test_a_number_two_steps_away_is_rejected_with_the_nearest_grounded_values() -> None:
    verdict = _reply(SUPPLY, "Please try again in 17 days.", spec_text=EIGHTY)
    assert not verdict.passed
    assert "'17'" in verdict.explanation
    assert "nearest grounded: 20, 11, 30" in verdict.explanation


def test_off_by_one_is_not_a_derivation() -> None:
    """``n + 1`` is not accepted: 0 and 1 are no operands (else every neighbour is grounded)."""
    verdict = _reply({"refills_left": 2, "count": 1}, "You have 3 refills left.")
    assert not verdict.passed, verdict.explanation


def test_a_list_item_joining_values_of_one_record_is_grounded() -> None:
    loans = {
        "loans": [{"title": "Dune", "due": "2026-12-10"}, {"title": "Emma", "due": "2026-12-14"}]
    }
    ok = _reply(
        loans,
        "Your loans:\n1. Dune: due 2026-12-10\n2. Emma: due 2026-12-14",
        kinds=("list_items", "numbers"),
    )
    assert ok.passed, ok.explanation
    assert "joins '2026-12-10', 'dune' of one tool record" in ok.explanation
    # values of two different records do not compose an item
    mixed = _reply(loans, "Your loans:\n1. Dune: due 2026-12-14", kinds=("list_items",))
    assert not mixed.passed
    assert "nearest grounded:" in mixed.explanation


def test_a_number_the_reply_derived_grounds_the_next_one() -> None:
    """Fare 300, new flight 340: the difference 40 and the 25% fee 75 are one step each, and the
    total 115 is one step from those two."""
    offer = {"fare": 300, "options": [{"flight_no": "TA418", "price": 340}]}
    text = "The fare difference is 40.00, the change fee is 75.00, so the total due is 115.00."
    verdict = _reply(offer, text, spec_text=("The change fee is 25% of the fare.",))
    assert verdict.passed, verdict.explanation
    assert "115 = 40 + 75" in verdict.explanation


def test_a_date_format_placeholder_is_not_an_id() -> None:
    verdict = _reply({}, "Please give your date of birth (YYYY-MM-DD).", kinds=("ids",))
    assert verdict.passed, verdict.explanation


# ------------------------------------------------------------------------ the spec's own arithmetic

FEE_RULE = "The change fee is 25% of the original fare."


def _fee_reply(text: str) -> agentprop.Verdict:
    from agentprop._judge.contracts import states_spec_percentages
    from agentprop._scenario.trace import ToolCall, Turn

    calls = [
        ToolCall(name="get_booking", result={"fare": 300}),
        ToolCall(name="search_flights", result={"options": [{"price": 340}]}),
    ]
    trace = Trace(
        turns=[
            Turn(index=0, user_message="move me", tool_calls=calls, response={"user_message": text})
        ]
    )
    return states_spec_percentages(trace, FEE_RULE, clause="policies.P3_CHANGE_FEE")


def test_an_amount_the_spec_defines_as_a_percentage_must_be_that_percentage() -> None:
    """85.00 is 25% of the grounded new price 340, one arithmetic step, so grounding passes it;
    the spec says the fee is 25% of the fare (300): 75.00. The rule is read from the spec."""
    wrong = _fee_reply("The fare difference is 40.00; the change fee is 85.00, so 125.00 in total.")
    assert not wrong.passed
    assert "the reply states 'fee is 85.00'" in wrong.explanation
    assert "25% of fare 300 = 75.00" in wrong.explanation
    assert wrong.signature == "states_spec_percentages:policies.P3_CHANGE_FEE@turn0:wrong=fee"
    assert _fee_reply(
        "The fare difference is 40.00; the change fee is 75.00, so 115.00 in total."
    ).passed
    assert _fee_reply("Change fee: $75").passed
    assert _fee_reply("No fee today.").passed  # no amount stated: nothing to check


def test_a_percentage_rule_is_read_from_a_spec_sentence() -> None:
    from agentprop._judge.derive import percent_rules

    assert percent_rules(
        "The change fee is 25% of the original fare. The amount due is the difference plus the fee."
    ) == [("change fee", 25.0, "original fare", "The change fee is 25% of the original fare")]
    assert percent_rules("A refill may be requested once 80% of the supply is used.") == []
