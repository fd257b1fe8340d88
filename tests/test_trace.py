"""The Trace model: per-turn slices, derived views, JSON round-trip."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agentprop._scenario.trace import RunError, ToolCall, Trace, Turn, Usage


def make_trace() -> Trace:
    t0 = Turn(
        index=0,
        user_message="cancel O-1",
        tool_calls=[
            ToolCall(
                name="verify_identity",
                args={"last4": "4242"},
                result={"verified": True},
                turn_index=0,
                step=0,
            ),
            ToolCall(
                name="get_account",
                args={},
                error="no record",
                error_kind="not_found",
                turn_index=0,
                step=1,
            ),
        ],
        response={"decision": "ASK_CONFIRM_CANCEL", "user_message": "Sure?"},
        usage=Usage(input_tokens=100, output_tokens=20, cost_usd=0.01, model_calls=2),
    )
    t1 = Turn(
        index=1,
        user_message="yes",
        tool_calls=[
            ToolCall(
                name="cancel_order",
                args={"order_id": "O-1"},
                result={"status": "canceled"},
                turn_index=1,
                step=0,
            )
        ],
        response={"decision": "CANCELLED", "user_message": "Done."},
        text="(thinking out loud)",
        usage=Usage(input_tokens=50, output_tokens=10, cost_usd=0.005, model_calls=1),
    )
    return Trace(
        case_id="END_CANCELLED<-N7_CANCEL",
        trial=3,
        agent="ref",
        spec_id="supportops_v1",
        turns=[t0, t1],
        canaries={"get_account.pii.ssn": "SSN_CANARY_00000000"},
    )


def test_views_over_turns() -> None:
    trace = make_trace()
    assert trace.tool_names() == ["verify_identity", "get_account", "cancel_order"]
    assert [c.name for c in trace.tool_calls] == trace.tool_names()
    assert trace.decisions == ["ASK_CONFIRM_CANCEL", "CANCELLED"]
    assert trace.final_decision == "CANCELLED"
    assert trace.final_response == {"decision": "CANCELLED", "user_message": "Done."}
    assert [t.index for t in trace] == [0, 1]
    assert trace.turns[0].calls("get_account")[0].error_kind == "not_found"
    assert not trace.turns[0].calls("get_account")[0].ok
    assert trace.turns[0].calls("verify_identity")[0].ok
    assert trace.turns[1].user_visible_text == "(thinking out loud)\nDone."
    assert trace.turns[0].user_visible_text == "Sure?"


def test_usage_sums_turns() -> None:
    usage = make_trace().usage
    assert (usage.input_tokens, usage.output_tokens, usage.model_calls) == (150, 30, 3)
    assert usage.cost_usd == pytest.approx(0.015)


def test_errored_and_all_errors() -> None:
    trace = make_trace()
    assert not trace.errored  # a tool error is not a run error
    trace.turns[1].errors.append(RunError(kind="no_respond", message="x", turn_index=1))
    trace.errors.append(RunError(kind="agent_exception", message="y"))
    assert trace.errored
    assert [e.kind for e in trace.all_errors()] == ["agent_exception", "no_respond"]


def test_empty_trace() -> None:
    trace = Trace()
    assert trace.final_decision is None and trace.final_response is None
    assert trace.decisions == [] and trace.tool_calls == [] and not trace.errored
    assert trace.usage == Usage()


def test_turn_without_response_has_no_decision() -> None:
    turn = Turn(index=0, user_message="hi", raw_response={"decision": "BOGUS"})
    assert turn.decision is None and turn.user_visible_text == ""


def test_unknown_error_kind_is_rejected() -> None:
    with pytest.raises(ValidationError):
        RunError(kind="exploded", message="x")  # type: ignore[arg-type]


def test_json_round_trip() -> None:
    trace = make_trace()
    trace.turns[0].errors.append(RunError(kind="limit_exceeded", message="too many", turn_index=0))
    text = trace.to_json()
    assert json.loads(text)["turns"][0]["tool_calls"][1]["error_kind"] == "not_found"
    back = Trace.from_json(text)
    assert back == trace
    assert Trace.from_json(text.encode()) == trace


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(max_size=20),
            st.lists(
                st.tuples(
                    st.sampled_from(["a", "b", "c"]),
                    st.dictionaries(st.text(max_size=5), json_values, max_size=3),
                    json_values,
                ),
                max_size=3,
            ),
            st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3),
        ),
        max_size=3,
    )
)
def test_json_round_trip_property(
    turn_specs: list[tuple[str, list[tuple[str, dict[str, Any], Any]], dict[str, Any] | None]],
) -> None:
    turns = [
        Turn(
            index=i,
            user_message=msg,
            tool_calls=[
                ToolCall(name=n, args=a, result=r, turn_index=i, step=s)
                for s, (n, a, r) in enumerate(calls)
            ],
            response=resp,
        )
        for i, (msg, calls, resp) in enumerate(turn_specs)
    ]
    trace = Trace(case_id="c", turns=turns)
    assert Trace.from_json(trace.to_json()) == trace
