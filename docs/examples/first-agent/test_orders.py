"""The agent you have: a plain Python function that answers order questions with one tool."""

import random
import re

from hypothesis import given
from pydantic import BaseModel

import agentprop
from agentprop import strategies as aps

ORDERS = {"O-1234": "shipped", "O-5678": "paid"}


def query_order(order_id: str) -> dict[str, str]:
    """The tool: a real function (here, a dict lookup)."""
    return {"order_id": order_id, "status": ORDERS.get(order_id, "not_found")}


def order_agent(messages: list[str], tools: agentprop.Tools, rng: random.Random) -> dict[str, str]:
    """Stands in for a model: it reads the order id and looks the order up. Its bug: a request
    that does not open with a question word is misread half of the time, and answered
    without looking."""
    text = messages[-1]
    found = re.search(r"O-\d{4}", text)
    if found is None:
        return {"status": "unknown"}
    if not text.lower().startswith(("what", "where", "can", "could")) and rng.random() < 0.5:
        return {"status": "unknown"}
    return {"status": tools.query_order(order_id=found.group())["status"]}


class OrderStatus(BaseModel):
    status: str


case = agentprop.Case(
    expected_tools=["query_order"],  # must look the order up
    forbidden_tools=["cancel_order"],  # must never cancel it
    scope={"query_order"},  # may touch nothing else
    schema=OrderStatus,  # answers {"status": ...}
)


def right_status(case: agentprop.Case, result: agentprop.Result) -> bool:
    return bool(result.output.status == "shipped")


@agentprop.agent_settings()  # Hypothesis settings for agents: no deadline, few examples
@given(msg=aps.paraphrases("What is the status of order O-1234?"))
def test_status(msg: str) -> None:
    agentprop.check(order_agent, [msg], case, tools=[query_order], judge=right_status)
