"""Issue #23 item 0: a day count computed from a date the user gave and the run's date context
is grounded, and the verdict names the derivation; one that no two grounded dates give is not."""

from __future__ import annotations

import datetime as dt

import pytest

from agentprop import Trace, Verdict
from agentprop._judge.derive import grounded_dates
from agentprop._judge.grounded import response_grounded
from agentprop._scenario.trace import ToolCall, Turn

# an incident desk of our own: the bindings' context gives today's date, the user the incident's
CONTEXT = ("2026-12-03",)


def _reply(user: str, text: str, context: tuple[str, ...] = CONTEXT) -> Verdict:
    call = ToolCall(name="open_incident", result={"incident_id": "IR-77", "status": "open"})
    turn = Turn(index=0, user_message=user, tool_calls=[call], response={"user_message": text})
    return response_grounded(
        Trace(turns=[turn]), "user_message", ["numbers"], extra_sources=context
    )


@pytest.mark.parametrize(
    "user",
    [
        "Our VPN went down on 2026-11-08 and nobody fixed it.",
        "Our VPN went down on 8 November and nobody fixed it.",
        "Our VPN went down on Nov 8th, 2026 and nobody fixed it.",
    ],
)
def test_days_since_a_date_the_user_gave_is_grounded_and_named(user: str) -> None:
    verdict = _reply(user, "Logged IR-77: it has been 25 days since the incident.")
    assert verdict.passed, verdict.explanation
    assert "25 = days from 2026-11-08 to 2026-12-03" in verdict.explanation


def test_a_day_count_no_two_grounded_dates_give_is_rejected() -> None:
    verdict = _reply(
        "Our VPN went down on 2026-11-08.", "Logged IR-77: it has been 28 days since the incident."
    )
    assert not verdict.passed
    assert "'28'" in verdict.explanation


def test_without_the_date_context_the_day_count_is_not_grounded() -> None:
    verdict = _reply(
        "Our VPN went down on 2026-11-08.",
        "Logged IR-77: it has been 25 days since the incident.",
        context=(),
    )
    assert not verdict.passed


def test_a_date_the_user_gave_plus_days_is_grounded() -> None:
    verdict = _reply(
        "It broke on 8 November; you promised a fix within 14 days.",
        "The fix is due by 2026-11-22.",
    )
    assert verdict.passed, verdict.explanation
    assert "2026-11-22 = 2026-11-08 + 14 days" in verdict.explanation


def test_a_yearless_date_reads_in_the_context_year_or_the_one_before() -> None:
    dates = grounded_dates(["2027-01-05", "It started on December 28."])
    assert dt.date(2026, 12, 28) in dates
    # a later date the same year is a reading too; no count reaches it from today
    assert dt.date(2027, 12, 28) in dates
    assert dt.date(2025, 12, 28) not in dates
