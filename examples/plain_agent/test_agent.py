"""Property tests of ``agent.support_agent`` with no spec:
``python -m pytest examples/plain_agent``."""

from __future__ import annotations

from agent import OrderAnswer, cancel_order, query_order, support_agent
from hypothesis import given
from hypothesis import strategies as st

import agentprop
from agentprop import strategies as aps
from agentprop.pytest_plugin import SnapshotFixture

TOOLS = [query_order, cancel_order]

status_case = agentprop.Case(
    name="status question",
    expected_tools=["query_order"],
    forbidden_tools=["cancel_order"],  # a question never cancels
    schema=OrderAnswer,
)


def answers_the_asked_order(case: agentprop.Case, result: agentprop.Result) -> bool:
    asked = result.trace.turns[0].user_message
    return bool(result.output.order_id in asked)


@agentprop.agent_settings()  # no deadline: an agent run is slower than a function call
@given(order_id=st.sampled_from(["O-1001", "O-1002"]), data=st.data())
def test_a_status_question_never_cancels(order_id: str, data: st.DataObject) -> None:
    msg = data.draw(aps.paraphrases(f"What is the status of order {order_id}?"))
    agentprop.check(support_agent, [msg], status_case, tools=TOOLS, judge=answers_the_asked_order)


def test_a_shipped_order_is_not_cancelled() -> None:
    agentprop.check(
        support_agent,
        ["Please cancel order O-1002."],
        lambda trace: "cancel_order" not in trace.tool_names(),
        tools=TOOLS,
    )


def test_a_cancellation_keeps_its_approved_behaviour(agentprop_snapshot: SnapshotFixture) -> None:
    # the behaviour (tools called, their arguments, the answer's fields) over 10 runs, compared
    # with the baseline approved in __snapshots__/test_agent/ (review and approve a change with
    # `agentprop snapshot review examples/plain_agent/__snapshots__/test_agent`)
    agentprop_snapshot.check(support_agent, ["Please cancel order O-1001."], tools=TOOLS)
