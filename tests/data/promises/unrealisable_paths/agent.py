"""A lookups agent: quick lookups summarize, thorough ones would need four calls in one turn
(more than max_tool_calls_per_turn), so it answers from the summary alone."""

from __future__ import annotations

from agentprop import TurnContext

FAULTS: dict[str, str] = {"skip_summary": "answers without calling summarize"}


class LookupsAgent:
    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.faults = dict(faults or {})

    def turn(self, message: str, ctx: TurnContext) -> None:
        skip = (
            self.faults.get("skip_summary", 0.0) > 0
            and ctx.rng.random() < self.faults["skip_summary"]
        )
        if not skip:
            ctx.call("summarize", q="R-1")
        ctx.respond(
            node_id="END_DONE",
            decision="DONE",
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence="summarize",
            user_message="Done.",
        )
