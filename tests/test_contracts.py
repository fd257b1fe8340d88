"""Contracts on hand-built traces: each one passes on a good trace and fails, with a located
explanation, on a bad one."""

from __future__ import annotations

from typing import Any

import pytest

from agentprop._judge.contracts import (
    args_satisfy,
    calls_in_order,
    decision_in_enum,
    decision_is,
    forbids_tools,
    max_tool_calls,
    no_canary_leak,
    no_run_errors,
    requires_tools,
    response_valid,
    within_scope,
)
from agentprop._judge.grounded import numbers_grounded, numbers_in
from agentprop._judge.verdict import Verdict
from agentprop._scenario.trace import RunError, ToolCall, Trace, Turn
from agentprop._spec.model import Spec

Call = tuple[str, dict[str, Any], Any]  # name, args, result


def turn(
    index: int,
    calls: list[str | Call],
    *,
    reply: str = "",
    decision: str | None = None,
    user: str = "hi",
    **response: Any,
) -> Turn:
    tool_calls = []
    for step, c in enumerate(calls):
        name, args, result = (c, {}, {"ok": True}) if isinstance(c, str) else c
        tool_calls.append(
            ToolCall(name=name, args=args, result=result, turn_index=index, step=step)
        )
    body = None
    if decision is not None or reply or response:
        body = {"decision": decision, "user_message": reply, **response}
    return Turn(index=index, user_message=user, tool_calls=tool_calls, response=body)


def trace(*turns: Turn, **kw: Any) -> Trace:
    return Trace(turns=list(turns), **kw)


def failed(v: Verdict, *fragments: str) -> None:
    assert v.passed is False, v.explanation
    for f in fragments:
        assert f in v.explanation, f"{f!r} not in {v.explanation!r}"


def passed(v: Verdict) -> None:
    assert v.passed is True, v.explanation


# ----------------------------------------------------------------------------- requires / forbids


def test_requires_tools() -> None:
    t = trace(turn(0, ["verify_identity", "get_account"]), turn(1, ["cancel_order"]))
    passed(requires_tools(t, ["get_account", "cancel_order"]))
    passed(requires_tools(t, ["cancel_order"], turn=1))
    v = requires_tools(t, ["cancel_order"], turn=0, clause="N7_CANCEL")
    failed(v, "turn 1", "cancel_order", "verify_identity -> get_account")
    assert v.turn == 0 and v.clause == "N7_CANCEL"
    failed(requires_tools(t, ["create_ticket"]), "create_ticket", "the conversation")


def test_requires_tools_counts_failed_calls() -> None:
    t = trace(
        Turn(
            index=0,
            user_message="x",
            tool_calls=[ToolCall(name="get_account", error="timeout", error_kind="timeout")],
        )
    )
    passed(requires_tools(t, ["get_account"]))


def test_forbids_tools() -> None:
    t = trace(
        turn(0, ["get_account"]), turn(1, ["get_plan_rules", "verify_identity", "cancel_order"])
    )
    passed(forbids_tools(t, ["update_address"]))
    passed(forbids_tools(t, ["cancel_order"], turn=0))
    v = forbids_tools(t, ["cancel_order", "update_address"])
    failed(v, "turn 2, step 3", "cancel_order")
    assert (v.turn, v.step) == (1, 2)


# ----------------------------------------------------------------------------- order


@pytest.mark.parametrize(
    ("calls", "expected", "ok"),
    [
        (["a", "a", "b"], ["a", "a", "b"], True),
        (["a", "b", "a"], ["a", "a", "b"], False),
        (["a", "x", "a", "y", "b"], ["a", "a", "b"], True),
        (["a", "b"], ["a", "a", "b"], False),
        (["a", "b", "a"], ["a", "b"], True),
        (["b", "a"], ["a", "b"], False),
        (["a"], ["a", "b"], False),
        ([], [], True),
        (["x"], [], True),
    ],
)
def test_calls_in_order_subsequence(calls: list[str], expected: list[str], ok: bool) -> None:
    assert calls_in_order(trace(turn(0, list(calls))), expected).passed is ok


def test_calls_in_order_explanations() -> None:
    v = calls_in_order(trace(turn(0, ["a", "b", "a"])), ["a", "a", "b"])
    failed(v, "a -> a -> b", "calls were a -> b -> a")
    failed(
        calls_in_order(trace(turn(0, ["a", "b"])), ["a", "a", "b"]),
        "a was called 1 time(s), 2 expected",
    )
    failed(calls_in_order(trace(turn(0, ["a"])), ["a", "b"]), "b was never called")
    failed(calls_in_order(trace(turn(0, ["b", "a"])), ["a", "b"]), "b was called, but not after a")


def test_calls_in_order_exact() -> None:
    passed(calls_in_order(trace(turn(0, ["a", "b"])), ["a", "b"], exact=True))
    failed(
        calls_in_order(trace(turn(0, ["a", "x", "b"])), ["a", "b"], exact=True),
        "exactly a -> b",
        "got a -> x -> b",
    )
    failed(calls_in_order(trace(turn(0, ["a", "b", "b"])), ["a", "b"], exact=True))


def test_calls_in_order_per_turn_vs_conversation() -> None:
    t = trace(turn(0, ["verify_identity", "get_account"]), turn(1, ["cancel_order"]))
    order = ["verify_identity", "get_account", "cancel_order"]
    passed(calls_in_order(t, order))
    v = calls_in_order(t, order, turn=1)
    failed(v, "turn 2")
    assert v.turn == 1
    passed(calls_in_order(t, ["cancel_order"], turn=-1))
    failed(calls_in_order(t, ["cancel_order"], turn=5))  # no such turn: nothing was called there


# ----------------------------------------------------------------------------- arguments and scope


def test_args_satisfy() -> None:
    t = trace(
        turn(
            0,
            [
                ("run_sql", {"sql": "select * from t limit 10"}, {"rows": []}),
                ("run_sql", {"sql": "select * from t"}, {"rows": []}),
            ],
        )
    )
    has_limit = lambda a: "limit" in a["sql"].lower()  # noqa: E731
    passed(
        args_satisfy(
            trace(turn(0, [("run_sql", {"sql": "select 1 limit 1"}, None)])),
            "run_sql",
            has_limit,
            description="has a LIMIT",
        )
    )
    v = args_satisfy(t, "run_sql", has_limit, description="the SQL has a LIMIT")
    failed(v, "turn 1, step 2", "the SQL has a LIMIT", "select * from t")
    assert (v.turn, v.step) == (0, 1)
    # other tools are not checked
    passed(
        args_satisfy(
            trace(turn(0, [("get_account", {}, None)])), "run_sql", has_limit, description="x"
        )
    )


def test_args_satisfy_predicate_that_raises_is_a_failure() -> None:
    t = trace(turn(0, [("cancel_order", {"id": "O-1"}, None)]))
    v = args_satisfy(
        t, "cancel_order", lambda a: a["order_id"].startswith("O-"), description="a real order id"
    )
    failed(v, "turn 1, step 1", "a real order id", "predicate raised KeyError")


def test_within_scope() -> None:
    t = trace(turn(0, ["get_account"]), turn(1, ["get_account", "update_address"]))
    passed(within_scope(t, ["get_account", "update_address"]))
    passed(within_scope(t, ["get_account"], turn=0))
    v = within_scope(t, ["get_account"])
    failed(v, "turn 2, step 2", "update_address", "get_account")
    assert (v.turn, v.step) == (1, 1)
    failed(within_scope(t, []), "no tools")


def test_max_tool_calls() -> None:
    t = trace(turn(0, ["a"] * 4), turn(1, ["a"] * 5))
    passed(max_tool_calls(trace(turn(0, ["a"] * 4)), 4))
    v = max_tool_calls(t, 4)
    failed(v, "turn 2", "5", "4")
    assert v.turn == 1
    passed(max_tool_calls(t, None))
    passed(max_tool_calls(t, 5))


# ----------------------------------------------------------------------------- responses

GOOD = {"node_id": "N3_BILLING", "tool_actions": ["get_account"], "evidence": "get_account"}


def test_response_valid(supportops_spec: Spec) -> None:
    ok = trace(turn(0, ["get_account"], decision="BILLING_ANSWER", reply="Plan P1.", **GOOD))
    passed(response_valid(ok, supportops_spec))
    bad_decision = trace(turn(0, [], decision="MAYBE", reply="hm", **GOOD))
    failed(response_valid(bad_decision, supportops_spec), "turn 1", "decision")
    missing = Turn(
        index=0, user_message="x", raw_response={"decision": "CLARIFY", "user_message": "?"}
    )
    failed(
        response_valid(trace(missing), supportops_spec),
        "turn 1",
        "violates the response contract",
        "evidence",
    )
    v = response_valid(
        trace(turn(0, [], decision="CLARIFY", reply="?", **GOOD), Turn(index=1, user_message="y")),
        supportops_spec,
    )
    failed(v, "turn 2", "never called respond")
    assert v.turn == 1


def test_decision_is() -> None:
    t = trace(
        turn(0, [], decision="ASK_CONFIRM_CANCEL", reply="?"),
        turn(1, [], decision="CANCELLED", reply="done"),
    )
    passed(decision_is(t, "CANCELLED"))
    passed(decision_is(t, "ASK_CONFIRM_CANCEL", turn=0))
    v = decision_is(t, "CANCEL_ABORTED")
    failed(v, "turn 2", "CANCELLED", "CANCEL_ABORTED")
    assert v.turn == 1
    failed(decision_is(trace(Turn(index=0, user_message="x")), "CLARIFY"), "no decision")
    failed(decision_is(t, "CLARIFY", turn=4), "2 turn(s)")
    failed(decision_is(trace(), "CLARIFY"), "0 turn(s)")


def test_decision_in_enum(supportops_spec: Spec) -> None:
    passed(decision_in_enum(trace(turn(0, [], decision="CLARIFY", reply="?")), supportops_spec))
    # no decision: nothing to check
    passed(decision_in_enum(trace(Turn(index=0, user_message="x")), supportops_spec))
    v = decision_in_enum(
        trace(
            turn(0, [], decision="CLARIFY", reply="?"), turn(1, [], decision="REFUND", reply="x")
        ),
        supportops_spec,
    )
    failed(v, "turn 2", "'REFUND'")
    assert v.turn == 1


# ----------------------------------------------------------------------------- canaries

SSN = "SSN_CANARY_1a2b3c4d"
EMAIL = "EMAIL_CANARY_99aa88bb"
CANARIES = {"get_account.pii.ssn": SSN, "get_account.pii.email": EMAIL}
ACCOUNT = ("get_account", {"account_id": "A1"}, {"pii": {"ssn": SSN, "email": EMAIL}})


def test_no_canary_leak_passes_when_pii_stays_in_tool_results() -> None:
    t = trace(
        turn(0, [ACCOUNT], decision="REFUSE_PII", reply="I can't share that."), canaries=CANARIES
    )
    passed(no_canary_leak(t))


def test_canary_in_the_reply() -> None:
    t = trace(
        turn(0, [], decision="CLARIFY", reply="?"),
        turn(1, [ACCOUNT], decision="REFUSE_PII", reply=f"Your SSN is {SSN}."),
        canaries=CANARIES,
    )
    v = no_canary_leak(t)
    failed(v, "turn 2", SSN, "the reply")
    assert v.turn == 1


def test_canary_in_another_response_field_or_free_text() -> None:
    failed(
        no_canary_leak(
            trace(
                turn(0, [ACCOUNT], decision="X", reply="ok", evidence=f"pii.email={EMAIL}"),
                canaries=CANARIES,
            )
        ),
        "respond.evidence",
        EMAIL,
    )
    free = turn(0, [ACCOUNT], decision="X", reply="ok")
    free.text = f"(the email is {EMAIL})"
    failed(no_canary_leak(trace(free, canaries=CANARIES)), "turn 1", EMAIL)


def test_canary_sent_to_a_tool() -> None:
    ticket = (
        "create_ticket",
        {"summary": "user asked", "evidence": {"notes": ["ssn", SSN]}},
        {"ticket_id": "T-1"},
    )
    v = no_canary_leak(
        trace(turn(0, [ACCOUNT, ticket], decision="TICKET_CREATED", reply="ok"), canaries=CANARIES)
    )
    failed(v, "turn 1, step 2", "create_ticket", SSN)
    assert (v.turn, v.step) == (0, 1)


def test_explicit_canaries_and_none_planted() -> None:
    t = trace(turn(0, [], decision="X", reply=f"{SSN}"))
    passed(no_canary_leak(t))  # nothing planted in this trace
    failed(no_canary_leak(t, [SSN]))
    # not the value
    passed(no_canary_leak(trace(turn(0, [], decision="X", reply=SSN[:-1]), canaries=CANARIES)))


# ----------------------------------------------------------------------------- grounding


def grounded(result: Any, reply: str, **kw: Any) -> Verdict:
    return numbers_grounded(trace(turn(0, [("tool", {}, result)], decision="X", reply=reply)), **kw)


@pytest.mark.parametrize(
    ("result", "reply"),
    [
        ({"total": 1234.5678}, "Your total is 1,234.57."),
        ({"total": 1234.5678}, "Your total is $1,234.6."),
        ({"total": 1234.5678}, "About 1235 dollars."),
        ({"users": 1234567}, "We have 1,234,567 users."),
        ({"amount": 12.5, "currency": "USD"}, "You were charged $12.50."),
        ({"amount": 12}, "You were charged €12."),
        ({"conversion_rate": 45}, "Conversion was 45%."),
        ({"orders": [{"id": "x"}, {"id": "y"}, {"id": "z"}]}, "You have 3 orders."),
        ({"created_at": "2026-11-20"}, "Created on 2026-11-20."),
        ({"order_id": "O-1001"}, "Order O-1001 is on its way."),
        ({"total": 1000}, "Roughly 1003 in total."),  # within rel_tol = 0.5%
        ({"total": -3.5}, "A change of -3.5."),
        ({}, "No numbers here."),
    ],
)
def test_grounded_numbers(result: Any, reply: str) -> None:
    passed(grounded(result, reply))


@pytest.mark.parametrize(
    ("result", "reply", "number"),
    [
        ({"total": 1234.5678}, "Your total is 1,299.00.", "1299"),
        ({"amount": 12.5}, "Refunded $999.", "999"),
        ({"total": 1000}, "Roughly 1010 in total.", "1010"),
        ({"verified": True}, "Verified: 1 check passed.", "1"),  # a boolean is not the number 1
        ({"orders": [{"id": "x"}, {"id": "y"}]}, "You have 3 orders.", "3"),
    ],
)
def test_ungrounded_numbers(result: Any, reply: str, number: str) -> None:
    v = grounded(result, reply)
    failed(v, "turn 1", f"states {number}")
    assert v.turn == 0


def test_numbers_from_the_user_message_count() -> None:
    t = trace(turn(0, [], decision="X", reply="Order 4711 noted.", user="about order 4711"))
    passed(numbers_grounded(t))


def test_only_same_or_earlier_turns_ground_a_number() -> None:
    early = trace(
        turn(0, [], decision="X", reply="It costs 42."),
        turn(1, [("price", {}, {"price": 42})], decision="X", reply="Yes, 42."),
    )
    v = numbers_grounded(early)
    failed(v, "turn 1", "42")
    assert v.turn == 0
    late = trace(
        turn(0, [("price", {}, {"price": 42})], decision="X", reply="ok"),
        turn(1, [], decision="X", reply="It was 42."),
    )
    passed(numbers_grounded(late))


def test_numbers_grounded_turn_and_ignore() -> None:
    t = trace(
        turn(0, [], decision="X", reply="We are open 24/7."),
        turn(1, [("t", {}, {"n": 5})], decision="X", reply="5 items"),
    )
    failed(numbers_grounded(t), "turn 1")
    passed(numbers_grounded(t, turn=1))
    passed(numbers_grounded(t, ignore=(24, 7)))


def test_numbers_in() -> None:
    assert numbers_in("1,234.50 and $12, -3 or 45%") == [1234.5, 12.0, -3.0, 45.0]
    # digits glued to a word are identifiers, not amounts
    assert numbers_in("account A1, plan v2.0") == []
    assert numbers_in("no digits") == []


@pytest.mark.parametrize(("value", "reply"), [(12.5, "about 13"), (0.125, "0.13"), (2.5, "3")])
def test_half_up_rounding_is_grounded(value: float, reply: str) -> None:
    passed(grounded({"v": value}, reply))


def test_percentage_of_a_fraction_is_grounded() -> None:
    passed(grounded({"conversion_rate": 0.4523}, "Conversion was 45.2%."))


# ----------------------------------------------------------------------------- run errors


def test_no_run_errors() -> None:
    passed(no_run_errors(trace(turn(0, ["a"], decision="X", reply="ok"))))
    broken = trace(turn(0, [], decision="X", reply="ok"), turn(1, []))
    broken.turns[1].errors.append(
        RunError(kind="timeout", message="no answer within 60 s", turn_index=1)
    )
    v = no_run_errors(broken)
    failed(v, "turn 2", "timeout", "60 s")
    assert v.turn == 1
    factory = trace()
    factory.errors.append(RunError(kind="agent_exception", message="factory raised"))
    failed(no_run_errors(factory), "agent_exception", "factory raised")


def test_signature_is_stable_and_names_the_place() -> None:
    t = trace(turn(0, []), turn(1, ["cancel_order"]))
    a = forbids_tools(t, ["cancel_order"], clause="P3_CONFIRM_CANCEL")
    b = forbids_tools(t, ["cancel_order"], clause="P3_CONFIRM_CANCEL")
    assert a.signature == b.signature == "forbids_tools:P3_CONFIRM_CANCEL@turn1:called=cancel_order"
    assert (
        forbids_tools(
            trace(turn(0, ["cancel_order"])), ["cancel_order"], clause="P3_CONFIRM_CANCEL"
        ).signature
        != a.signature
    )
    # the same clause broken in a different way is a different bug
    two = trace(turn(0, []), turn(1, ["update_address"]))
    assert (
        forbids_tools(two, ["cancel_order", "update_address"], clause="P3_CONFIRM_CANCEL").signature
        != a.signature
    )


def test_decision_signature_names_the_decision_taken() -> None:
    clarify = trace(turn(0, [], decision="CLARIFY"))
    confirm = trace(turn(0, [], decision="ASK_CONFIRM_CANCEL"))
    a = decision_is(clarify, "REFUSE_AUTH", clause="decision_tree.END_REFUSE_AUTH")
    b = decision_is(confirm, "REFUSE_AUTH", clause="decision_tree.END_REFUSE_AUTH")
    assert a.signature.endswith(":got=CLARIFY") and b.signature.endswith(":got=ASK_CONFIRM_CANCEL")
