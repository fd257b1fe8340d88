"""The grounding oracle passes no wrong number by tolerance: an integer written whole (a year, a
day, a count) must equal what grounds it; only an amount (decimals, a percentage, a currency,
"about") may be ``rel_tol`` off a source value."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from agentprop import Trace, Verdict
from agentprop._judge.grounded import evidence_grounded, response_grounded, stated_quantities
from agentprop._scenario.trace import ToolCall, Turn


def _reply(
    result: Any, text: str, *, user: str = "How did we do?", today: dt.date | None = None
) -> Verdict:
    call = ToolCall(name="query", result=result)
    turn = Turn(index=0, user_message=user, tool_calls=[call], response={"user_message": text})
    return response_grounded(Trace(turns=[turn]), "user_message", ["numbers"], today=today)


@pytest.mark.parametrize(
    ("result", "user", "text"),
    [
        # a tool's year grounds that year only, not one within 0.5% of it
        ({"year": 2025, "revenue": 100}, "How did we do?", "Revenue in 2024 was 100."),
        ({"year": 2025, "revenue": 100}, "How did we do?", "Revenue in 2026 was 100."),
        # "last year" is 2025 on 2026-12-03; 2024 is not it
        ({"revenue": 100}, "What was revenue last year?", "Revenue in 2024 was 100."),
        # a count is a count: 401 or 398 orders are not 400
        ({"orders_shipped": 400}, "How did we do?", "We shipped 401 orders."),
        ({"orders_shipped": 400}, "How did we do?", "We shipped 398 orders."),
    ],
)
def test_an_integer_written_whole_must_equal_its_source(result: Any, user: str, text: str) -> None:
    verdict = _reply(result, text, user=user, today=dt.date(2026, 12, 3))
    assert not verdict.passed, verdict.explanation


@pytest.mark.parametrize(
    "text",
    [
        "Revenue in 2025 was 1,247.60.",
        # an amount rounded a little: money, a percentage, an approximation
        "Revenue in 2025 was $1,250.",
        "Revenue in 2025 was 1,250 USD.",
        "Revenue in 2025 was about 1,250.",
        "Revenue in 2025 was 1.25k.",
        # an integer rounded to its own precision still is that value
        "Revenue in 2025 was 1,248.",
    ],
)
def test_an_amount_keeps_the_relative_tolerance(text: str) -> None:
    verdict = _reply({"year": 2025, "revenue": 1247.6}, text)
    assert verdict.passed, verdict.explanation


def test_a_structured_integer_must_equal_its_source() -> None:
    call = ToolCall(name="query", result={"year": 2025})
    turn = Turn(index=0, user_message="which year?", tool_calls=[call], response={"year": 2024})
    verdict = response_grounded(Trace(turns=[turn]), "year", ["numbers"])
    assert not verdict.passed, verdict.explanation
    turn = Turn(index=0, user_message="which year?", tool_calls=[call], response={"year": 2025})
    assert response_grounded(Trace(turns=[turn]), "year", ["numbers"]).passed


def test_evidence_citing_a_neighbouring_year_is_not_grounded() -> None:
    call = ToolCall(name="query", result={"year": 2025})
    turn = Turn(
        index=0,
        user_message="which year?",
        tool_calls=[call],
        response={"evidence": "query returned year 2024"},
    )
    assert not evidence_grounded(Trace(turns=[turn])).passed


def test_what_reads_as_an_amount() -> None:
    text = "In 2025: $1,250, 12 EUR, 3.5, 40%, about 900, 2k, 120元 and 7 orders"
    assert [(v, a) for v, _, _, a in stated_quantities(text)] == [
        (2025.0, False),
        (1250.0, True),
        (12.0, True),
        (3.5, True),
        (40.0, True),
        (900.0, True),
        (2000.0, True),
        (120.0, True),
        (7.0, False),
    ]


# ----------------------------------------------------------------------------- one step, exactly

INVOICE = {"amount": 77, "tax_rate_pct": 12, "total": 100, "items": 11}


@pytest.mark.parametrize(
    "text",
    [
        # 12% of 77 is 9.24: rounded to a whole number it is 9, never 10
        "The tax is 10.",
        "The tax is $10.",
        # an integer written whole is the step's exact result: 100 / 11 is 9.09, not 9
        "That is 9 per item.",
        # rounded to the stated digit, not up or down: 9.24 is not 9.3
        "The tax is 9.3.",
    ],
)
def test_a_derived_number_must_be_the_steps_result_at_its_precision(text: str) -> None:
    verdict = _reply(INVOICE, text)
    assert not verdict.passed, verdict.explanation


@pytest.mark.parametrize(
    ("text", "derivation"),
    [
        ("The tax is 9.24.", "9.24 = 12% of 77"),
        ("The tax is $9.", "9 = 12% of 77 = 9.24"),
        ("The tax is 9.2.", "9.2 = 12% of 77 = 9.24"),
        ("That is 9.09 per item.", "9.09 = 100 / 11 = 9.09091"),
        ("That is about 9 per item.", "derived in one step: 9 = "),
        # an exact whole result stays grounded
        ("That is 89 in all.", "89 = 12 + 77"),
    ],
)
def test_a_derived_number_at_its_precision_is_grounded(text: str, derivation: str) -> None:
    verdict = _reply(INVOICE, text)
    assert verdict.passed, verdict.explanation
    assert derivation in verdict.explanation


def test_a_term_the_reply_writes_grounds_the_count_from_it() -> None:
    """The pharmacy zoo's clean reply: 80% of a 30-day supply is 24 days, 1 day has passed, so
    23 days remain. The reply writes the term it counts from; 23 is grounded by it, a count
    the reply does not derive (22) is not, and without the term 23 is not either."""
    rx = {"rx_number": "RX-48213", "days_supply": 30, "days_since_fill": 1}
    spec = ("A refill may be submitted once at least 80% of the days supply has elapsed.",)
    term = "Refills open once 80% of your 30-day supply is used. Please try again in {} days."

    def reply(text: str) -> Verdict:
        call = ToolCall(name="get_prescription", result=rx)
        turn = Turn(index=0, user_message="refill RX-48213", tool_calls=[call])
        turn.response = {"user_message": text}
        trace = Trace(turns=[turn])
        return response_grounded(trace, "user_message", ["numbers"], spec_text=spec)

    ok = reply(term.format(23))
    assert ok.passed, ok.explanation
    assert "23 = '80% of your 30' - 1 = 24 - 1" in ok.explanation
    assert not reply(term.format(22)).passed
    assert not reply("Please try again in 23 days.").passed
