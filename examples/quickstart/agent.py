"""The quickstart agent: a plain-Python agent for the spec that `agentprop init` started.

A question naming an order is answered from ``get_order``; anything else gets a clarifying
question. ``ctx.call`` calls a tool of the test's world; ``ctx.respond`` ends the turn with the
structured response the spec's response contract describes.
"""

from __future__ import annotations

import re

from agentprop import TurnContext
from agentprop.testing import as_corrected

# users type o-1001 as often as O-1001, and O 1001 or O1001 too
ORDER_ID = re.compile(r"\b([A-Z])[- ]?(\d{3,})\b", re.IGNORECASE)


class OrderAgent:
    def turn(self, message: str, ctx: TurnContext) -> None:
        found = ORDER_ID.search(as_corrected(message))  # "O-2001. Sorry, I mean: O-1001" is O-1001
        if found is None:
            ctx.respond(
                node_id="END_CLARIFY",
                decision="CLARIFY",
                tool_actions=[],
                evidence="no order id in the message",
                user_message="Which order do you mean? Please give its id.",
            )
            return
        order = ctx.call("get_order", order_id=found.group(1).upper() + "-" + found.group(2))
        ctx.respond(
            node_id="END_ANSWERED",
            decision="ANSWERED",
            tool_actions=["get_order"],
            evidence=f"get_order: {order['order_id']} is {order['status']}",
            user_message=f"Order {order['order_id']} is {order['status']}.",
        )
