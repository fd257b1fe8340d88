"""A plain Python agent, no spec: an async support agent with two tools.

``support_agent(messages, tools)`` reads the order id, looks the order up and answers with an
``OrderAnswer``; it cancels only when asked to and only an order that has not shipped. The
tools are ordinary functions over an in-memory table.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

import agentprop


class OrderAnswer(BaseModel):
    order_id: str
    status: str
    cancelled: bool = False


ORDERS = {"O-1001": "paid", "O-1002": "shipped"}


def query_order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": ORDERS.get(order_id, "not_found")}


def cancel_order(order_id: str) -> dict[str, str]:
    if ORDERS.get(order_id) != "paid":
        raise ValueError(f"{order_id} cannot be cancelled")
    return {"order_id": order_id, "status": "cancelled"}


async def support_agent(messages: list[str], tools: agentprop.Tools) -> OrderAnswer:
    text = " ".join(messages).lower()
    found = re.search(r"o-\d{4}", text)
    if found is None:
        return OrderAnswer(order_id="", status="unknown")
    order_id = found.group().upper()
    status = (await tools.acall("query_order", order_id=order_id))["status"]
    if "cancel" in text and status == "paid":
        await tools.acall("cancel_order", order_id=order_id)
        return OrderAnswer(order_id=order_id, status="cancelled", cancelled=True)
    return OrderAnswer(order_id=order_id, status=status)
