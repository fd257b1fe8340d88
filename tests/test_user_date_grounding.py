"""Issue #23 item 0: a day count computed from a date the user gave and the run's date context
is grounded, and the verdict names the derivation; one that no two grounded dates give is not.
A date the user gave relative to the bindings' reference date ("a week ago", 上个月20号)
grounds the date it resolves to, written in any notation."""

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


TODAY = dt.date(2026, 12, 3)


def _relative(user: str, text: str, today: dt.date | None = TODAY) -> Verdict:
    # no number in the tool output: a wrong date's parts derive from nothing
    call = ToolCall(name="open_incident", result={"status": "open"})
    turn = Turn(index=0, user_message=user, tool_calls=[call], response={"user_message": text})
    return response_grounded(
        Trace(turns=[turn]), "user_message", ["numbers"], extra_sources=CONTEXT, today=today
    )


@pytest.mark.parametrize(
    ("user", "reply"),
    [
        ("The VPN went down a week ago.", "Logged for 2026-11-26."),
        ("The VPN went down two weeks ago.", "Logged for 2026-11-19."),
        ("The VPN went down 11 days ago.", "Logged for 2026-11-22."),
        ("The VPN went down on the 20th of last month.", "Logged for 2026-11-20."),
        ("The VPN went down on 20 November.", "Logged for 2026-11-20."),
        ("The VPN went down yesterday.", "Logged for December 2, 2026."),
        ("The VPN went down a week ago.", "Logged for 26 November."),
        ("VPN上个月20号断了。", "已登记：2026-11-20。"),
        ("VPN上個月20號斷了。", "已登记：2026年11月20日。"),
        ("VPN两周前断了。", "已登记：2026-11-19。"),
        ("VPN 11月20日断了。", "已登记：11月20日。"),
    ],
)
def test_a_date_the_user_gave_relative_to_today_grounds_the_resolved_date(
    user: str, reply: str
) -> None:
    verdict = _relative(user, reply)
    assert verdict.passed, verdict.explanation


@pytest.mark.parametrize(
    ("user", "reply"),
    [
        ("The VPN went down a week ago.", "Logged for 2026-11-25."),
        ("The VPN went down on the 20th of last month.", "Logged for 2026-10-20."),
        ("VPN两周前断了。", "已登记：2026-11-18。"),
    ],
)
def test_a_date_the_relative_one_does_not_resolve_to_is_rejected(user: str, reply: str) -> None:
    assert not _relative(user, reply).passed


def test_without_a_reference_date_a_relative_date_grounds_nothing() -> None:
    assert not _relative("The VPN went down a week ago.", "Logged for 2026-11-26.", None).passed


def test_the_bindings_reference_date_reaches_the_grounding_check() -> None:
    from pathlib import Path

    import agentprop

    root = Path(__file__).resolve().parents[1]
    claimdesk = agentprop.load_project(root / "benchmarks" / "_reach_zoo" / "claimdesk")
    assert claimdesk.bindings.response_grounding(claimdesk.spec).today == dt.date(2026, 12, 1)
    supportops = agentprop.load_project(root / "examples" / "supportops")
    assert supportops.bindings.response_grounding(supportops.spec).today is None


@pytest.mark.parametrize(
    ("user", "reply", "grounded"),
    [
        ("What was revenue last year?", "Revenue in 2025 was 100.", True),
        ("去年的收入是多少？", "2025年收入为100。", True),
        ("What was revenue last month?", "Revenue for 2026-11 was 100.", True),
        ("What was revenue last month?", "Revenue for 2026-09 is not in yet.", False),
    ],
)
def test_a_period_named_relative_to_today_grounds_its_year_and_month(
    user: str, reply: str, grounded: bool
) -> None:
    # a tool output of no numbers unless the reply states one: nothing to derive a month from
    call = ToolCall(name="query", result={"revenue": 100} if "100" in reply else {"status": "ok"})
    turn = Turn(index=0, user_message=user, tool_calls=[call], response={"user_message": reply})
    verdict = response_grounded(Trace(turns=[turn]), "user_message", ["numbers"], today=TODAY)
    assert verdict.passed is grounded, verdict.explanation
