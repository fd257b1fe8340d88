"""The clause an ungrounded statement is cited under: the grounding policy for the kinds it
promises, ``response_contract.<field>`` for the rest (agentprop/_spec/grounding_clause.py)."""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import Project, Trace
from agentprop._judge.case import response_expectations
from agentprop._judge.verdict import Verdict
from agentprop._scenario.trace import ToolCall, Turn

ROOT = Path(__file__).resolve().parent.parent
EXPENSEGUARD = ROOT / "examples" / "expenseguard"
SUPPORTOPS = ROOT / "examples" / "supportops"
LIBRARY = ROOT / "benchmarks" / "_specs_zoo" / "library_loans"
PHARMACY = ROOT / "benchmarks" / "_specs_zoo" / "pharmacy_refill"
HELPDESK = ROOT / "benchmarks" / "_specs_zoo" / "it_helpdesk"

NOTE = "agentprop's default grounding of user_message: no policy of the spec promises"


@functools.cache
def _project(directory: Path) -> Project:
    return agentprop.load_project(directory)


def _failures(directory: Path, user: str, result: Any, response: dict[str, Any]) -> list[Verdict]:
    """The failed ``response_grounded`` verdicts of a one-turn trace of the project's spec."""
    project = _project(directory)
    trace = Trace(
        turns=[
            Turn(
                index=0,
                user_message=user,
                tool_calls=[ToolCall(name="lookup", result=result)],
                response={"decision": "X", **response},
            )
        ]
    )
    expectations = response_expectations(
        project.spec, project.scenarios()[0], project.bindings.response_grounding(project.spec)
    )
    return [
        v
        for e in expectations
        if e.contract == "response_grounded"
        for v in e.verdicts(trace)
        if not v.passed
    ]


RECEIPT = {"receipt_id": "RCP-123", "total": 84.5, "category": "meals"}
WITHDRAWN = "Please check receipt RCP-223. Sorry, I mean: RCP-123"


def test_a_withdrawn_receipt_id_is_not_cited_under_expenseguards_amount_policy() -> None:
    # a blind adjudicator judged `policies.P4_GROUNDED_MATH: ... states 'RCP-223' (an id)` a
    # tester error: "Reimbursable amount must be computed from policy limits and receipt
    # totals" speaks of amounts, not ids
    (failed,) = _failures(
        EXPENSEGUARD, WITHDRAWN, RECEIPT, {"user_message": "Receipt RCP-223 is approved."}
    )
    assert failed.clause == "response_contract.user_message", failed
    assert failed.detail == "user_message:ids"
    assert "states 'RCP-223' (an id), which the user stated in turn 1 but withdrew" in (
        failed.explanation
    )
    assert f"{NOTE} ids, quoted values, list items; P4_GROUNDED_MATH speaks of amount" in (
        failed.explanation
    ), failed.explanation


def test_a_wrong_amount_still_cites_expenseguards_amount_policy_in_todays_words() -> None:
    (failed,) = _failures(
        EXPENSEGUARD,
        WITHDRAWN,
        RECEIPT,
        {"user_message": "Receipt RCP-123: $91.20 is reimbursable."},
    )
    assert failed.clause == "policies.P4_GROUNDED_MATH"
    assert failed.detail == "user_message:numbers"
    assert failed.explanation.startswith(
        "turn 1: respond.user_message states '91.2' (a number), which no tool output or user "
        "turn supports"
    ), failed.explanation
    assert "default grounding" not in failed.explanation


def test_an_id_and_an_amount_wrong_in_one_reply_are_each_cited_under_their_own_clause() -> None:
    failed = _failures(
        EXPENSEGUARD,
        WITHDRAWN,
        RECEIPT,
        {"user_message": "Receipt RCP-223: $91.20 is reimbursable."},
    )
    # the policy's kinds first: where it was the right clause, the signature does not move
    assert [(v.clause, v.detail) for v in failed] == [
        ("policies.P4_GROUNDED_MATH", "user_message:numbers"),
        ("response_contract.user_message", "user_message:ids"),
    ]


def test_an_id_fields_value_is_not_an_amount() -> None:
    (failed,) = _failures(
        EXPENSEGUARD, "check RCP-123", RECEIPT, {"user_message": "Done.", "receipt_id": "RCP-999"}
    )
    assert failed.clause == "response_contract.receipt_id"
    assert "no policy of the spec promises the value of receipt_id" in failed.explanation


@pytest.mark.parametrize(
    ("directory", "result", "reply", "detail", "cited"),
    [
        # "ground statements in tool output": every kind
        (SUPPORTOPS, {"order_id": "O-1001"}, "Order O-1009 is on its way.", "ids", "P4"),
        (SUPPORTOPS, {"total": 12.5}, "You owe $19.99.", "numbers", "P4"),
        # "Titles, due dates, amounts and queue positions must be grounded": not ids
        (LIBRARY, {"loan_id": "LN-4410"}, "Loan LN-4417 is renewed.", "ids", None),
        (LIBRARY, {"fine": 2.5}, "Your fine is $7.25.", "numbers", "P4"),
        (LIBRARY, {"title": "Dune"}, 'You borrowed "Emma".', "quoted", "P4"),
        # "Drug names, dates, counts and ids ... must be grounded": every kind
        (PHARMACY, {"refill_id": "RF-2201"}, "Refill RF-2209 is placed.", "ids", "P4"),
        (PHARMACY, {"refills_left": 2}, "You have 37 refills left.", "numbers", "P4"),
        # no grounding policy: the contract's field, as ever, and nothing to explain
        (HELPDESK, {"ticket_id": "INC-3301"}, "Ticket INC-3309 is open.", "ids", None),
    ],
)
def test_each_kind_is_cited_under_the_clause_that_promises_it(
    directory: Path, result: Any, reply: str, detail: str, cited: str | None
) -> None:
    (failed,) = _failures(directory, "hi", result, {"user_message": reply})
    assert failed.detail == f"user_message:{detail}"
    if cited is not None:
        policy = next(
            p.id for p in _project(directory).spec.policies if p.id.startswith(f"{cited}_")
        )
        assert failed.clause == f"policies.{policy}"
        assert "default grounding" not in failed.explanation
    else:
        assert failed.clause == "response_contract.user_message"
        # a spec with a grounding policy says why it is not cited; one without has none
        assert (NOTE in failed.explanation) is (directory != HELPDESK), failed.explanation


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Ground statements in tool output.", "ids list_items numbers quoted value"),
        ("Coverage answers and eligibility decisions come from get_policy's output.", None),
        ("Balances and meter facts come from get_account.", None),
        ("Everything it says must be grounded in tool output.", None),
        ("Balances are grounded in get_account.", "numbers"),
        ("Order numbers must be grounded in tool output.", "ids"),
        ("The number of items must be grounded in tool output.", "list_items numbers quoted value"),
        ("Product names must be grounded in tool output.", "list_items quoted value"),
        # nothing named: every kind (when in doubt, the policy is cited)
        ("Must be grounded in tool output.", None),
    ],
)
def test_the_kinds_a_grounding_policy_promises_are_read_from_its_subject(
    text: str, kinds: str | None
) -> None:
    from agentprop._spec.grounding_clause import grounding_scope
    from agentprop._spec.model import Spec

    data = _project(SUPPORTOPS).spec.model_dump(by_alias=True)
    data["policies"] = [{"id": "P9_GROUNDED", "text": text}]
    scope = grounding_scope(Spec.model_validate(data))
    assert scope.clause == "policies.P9_GROUNDED"
    every = "ids list_items numbers quoted value"
    assert " ".join(sorted(scope.kinds)) == (kinds or every)


def _lint(directory: Path) -> tuple[int, str]:
    from agentprop._cli import main

    out = io.StringIO()
    code = main(["lint", str(directory)], out=out)
    return code, out.getvalue()


def test_lint_says_which_kinds_are_cited_under_which_clause() -> None:
    code, text = _lint(EXPENSEGUARD)
    (line,) = [line for line in text.splitlines() if "L023" in line]
    assert "info L023: policy P4_GROUNDED_MATH speaks of amount, limits, totals" in line, line
    assert "cited under it only for user_message's numbers" in line, line
    assert "user_message's ids, quoted values, list items" in line, line
    assert "receipt_id's value" in line, line
    assert "under response_contract.<field>" in line, line
    assert code == 0  # a notice: the exit code is the errors'
    assert text.rstrip().endswith("0 error(s), 5 warning(s), 2 info"), text
    # a generic promise, or every kind named: nothing to say
    for generic in (SUPPORTOPS, PHARMACY):
        assert "L023" not in _lint(generic)[1]
