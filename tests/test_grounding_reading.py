"""How the grounding oracle reads its sources: a number written in words grounds the whole
numeral, not a part of it, and a Chinese numeral grounds its value before any measure word; an id
is grounded by its own split, or by one a user typed without separators; a value the user took
back is named as withdrawn, in whatever notation the user wrote it."""

from __future__ import annotations

import pytest

from agentprop import Trace, Verdict
from agentprop._judge.grounded import _number_set, response_grounded
from agentprop._scenario.trace import ToolCall, Turn


def _reply(user: str, output: object, text: str, kinds: tuple[str, ...] = ("numbers",)) -> Verdict:
    call = ToolCall(name="lookup", result=output)
    turn = Turn(index=0, user_message=user, tool_calls=[call], response={"user_message": text})
    return response_grounded(Trace(turns=[turn]), "user_message", list(kinds))


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("Refunds within twenty-five days", 25),
        ("twenty five days", 25),
        ("one hundred and five nights", 105),
        ("two thousand four hundred", 2400),
        ("a fourteen-day window", 14),
        ("三十天", 30),
        ("二十五天", 25),
        ("一百零五天", 105),
        ("两万五千个", 25000),
    ],
)
def test_a_numeral_in_words_grounds_its_whole_value(written: str, value: int) -> None:
    assert float(value) in _number_set(written)


@pytest.mark.parametrize(
    ("written", "part"),
    [
        ("Refunds within twenty-five days", 20),
        ("Refunds within twenty-five days", 5),
        ("one hundred and five nights", 5),
        ("Turn on two-factor login", 2),
        ("a one-time code", 1),
        ("the twenty-fifth", 20),
        ("三十天", 10),
        ("二十五天", 15),
    ],
)
def test_a_part_of_a_numeral_or_of_a_word_grounds_nothing(written: str, part: int) -> None:
    assert float(part) not in _number_set(written)


def test_a_reply_stating_part_of_a_spelled_number_is_ungrounded() -> None:
    output = {"policy": "Refunds within twenty-five days"}
    assert _reply("Can I return it?", output, "You have 25 days.").passed
    verdict = _reply("Can I return it?", output, "You have 20 days.")
    assert not verdict.passed and "'20'" in verdict.explanation
    zh = {"policy": "三十天内可退款"}
    assert _reply("可以退吗？", zh, "您有30天。").passed
    assert not _reply("可以退吗？", zh, "您有10天。").passed


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("我要订房，三人入住。", 3),
        ("大概三小时", 3),
        ("订两间房", 2),
        ("一共五件", 5),
        ("住兩晚", 2),
        ("分 六 个月", 6),
        ("人数：三", 3),
    ],
)
def test_a_chinese_numeral_before_any_measure_word_grounds_its_value(
    written: str, value: int
) -> None:
    assert float(value) in _number_set(written)


def test_a_chinese_count_grounds_the_reply_as_an_english_one_does() -> None:
    assert _reply("I'd like a room, three guests.", {"ok": True}, "Booked for 3 guests.").passed
    assert _reply("我要订房，三人入住。", {"ok": True}, "已为3位客人预订。").passed
    assert not _reply("我要订房，三人入住。", {"ok": True}, "已为4位客人预订。").passed


def test_an_id_is_not_grounded_by_another_split_of_its_characters() -> None:
    output = {"order_id": "A-123"}
    assert _reply("Where is it?", output, "Order A-123 shipped.", ("ids",)).passed
    verdict = _reply("Where is it?", output, "Order A-12-3 shipped.", ("ids",))
    assert not verdict.passed and "'A-12-3'" in verdict.explanation
    assert not _reply("Where is it?", {"ref": "AB-1-23"}, "Ref AB-12-3.", ("ids",)).passed


@pytest.mark.parametrize("typed", ["O 1001", "O1001", "o-1001", "O_1001"])
def test_an_id_the_user_typed_with_a_space_or_none_still_grounds(typed: str) -> None:
    assert _reply(f"Cancel order {typed}", {"ok": True}, "Order O-1001 canceled.", ("ids",)).passed


@pytest.mark.parametrize(
    ("user", "reply"),
    [
        ("O1011 - no wait, that's wrong. It should be: O-1001", "Order O-1011 canceled."),
        ("Cancel O 1011. Sorry, I mean: cancel O-1001", "Order O-1011 canceled."),
        ("It came to £2,500. Sorry, I mean: it came to £2,400", "Your claim is for £2500."),
    ],
)
def test_a_value_the_user_withdrew_in_another_notation_is_named_as_withdrawn(
    user: str, reply: str
) -> None:
    verdict = _reply(user, {"ok": True}, reply, ("ids", "numbers"))
    assert not verdict.passed
    assert "withdrew in a correction" in verdict.explanation, verdict.explanation
    assert "no tool output or user turn supports" not in verdict.explanation
