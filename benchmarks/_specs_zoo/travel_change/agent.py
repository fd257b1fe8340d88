"""Reference agent for the zoo's flight change spec (written blind for issue 23; Apache-2.0).

With every fault knob at 0 it follows spec.yaml: booking reference first (read in any case),
basic fares are not changed, one retry of a timed-out search (the tool's retry_policy), the
cheapest option offered with the fare difference (never below 0), the 25% change fee on the
original fare and the total, and change_booking only after an explicit yes. It cannot know a
loyalty tier (nothing in the spec gives one), so it never transfers to the gold desk; a
sold_out change is reported as CHANGE_FAILED. Each knob injects a bug with probability P.
"""

from __future__ import annotations

import re
from typing import Any

from agentprop import ToolError, TurnContext

FAULTS: dict[str, str] = {
    "changes_basic_fare": "ignores fare_class basic and searches flights for a basic fare",
    "skip_confirm_when_cheaper": "changes without asking when the cheapest option costs no more than the fare paid",
    "never_retry_search": "gives up on the first search_flights timeout and says there are no flights",
    "ok_not_confirm": "only the word 'yes' confirms: 'Sounds good, go ahead' or 'OK, do it' is asked again",
    "maybe_is_yes": "a hedged answer ('maybe', 'I guess', 'probably') is read as a yes and the booking is changed",
    "booking_ref_case": "reads booking references only in capitals: 'qx7k2p' is missed and the reference asked for again",
    "fee_on_new_price": "computes the 25% change fee on the new flight's price instead of the original fare",
}

_REF = re.compile(r"(?<![A-Za-z0-9])([A-Za-z0-9]{6})(?![A-Za-z0-9])")
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_YES = re.compile(r"\b(yes|yeah|yep|ok(ay)?|sure|sounds good|go ahead|do it|confirm\w*|book it|change it)\b", re.I)
_NO = re.compile(r"\b(no|nope|don'?t|keep (my|the) (original|old|current)|cancel that|never ?mind)\b", re.I)
_HEDGE = re.compile(r"\b(maybe|i guess|probably|perhaps|let me think|not sure)\b", re.I)


def _money(x: float) -> str:
    return f"{x:.2f}"


class TravelAgent:
    """One instance per conversation."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.ref: str | None = None
        self.date: str | None = None
        self.booking: dict[str, Any] | None = None
        self.offer: dict[str, Any] | None = None

    def _fault(self, name: str, ctx: TurnContext) -> bool:
        p = self.faults.get(name, 0.0)
        return p > 0 and ctx.rng.random() < p

    def _respond(self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str = "", **extra: Any) -> None:
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence=evidence or "no tool output needed",
            user_message=message,
            **extra,
        )

    def _read(self, message: str, ctx: TurnContext) -> None:
        if m := _DATE.search(message):
            self.date = m.group(1)
        for m in _REF.finditer(message):
            token = m.group(1)
            if not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
                continue
            if token != token.upper() and self._fault("booking_ref_case", ctx):
                continue
            self.ref = token.upper()
            break

    def turn(self, message: str, ctx: TurnContext) -> None:
        if self.offer is not None:
            self._confirm(message, ctx)
            return
        self._read(message, ctx)
        if self.ref is None:
            self._respond(ctx, "N1_LOOKUP", "ASK_BOOKING_REF", "Sure. What is your 6-character booking reference?")
            return
        if self.booking is None:
            try:
                self.booking = dict(ctx.call("get_booking", booking_ref=self.ref))
            except ToolError as exc:
                self.ref = None
                self._respond(
                    ctx,
                    "END_BOOKING_NOT_FOUND",
                    "BOOKING_NOT_FOUND",
                    "I can't find a booking with that reference. Could you check it?",
                    f"get_booking: {exc.kind}",
                )
                return
            if self.booking["fare_class"] == "basic" and not self._fault("changes_basic_fare", ctx):
                self._respond(
                    ctx,
                    "END_BASIC_NO_CHANGES",
                    "BASIC_NO_CHANGES",
                    f"Your booking {self.ref} is a basic fare, and basic fares can't be changed.",
                    "get_booking: fare_class basic",
                )
                return
        if self.date is None:
            self._respond(
                ctx,
                "N2_SEARCH",
                "ASK_NEW_DATE",
                "Which date would you like to fly instead?",
                f"get_booking: {self.booking['flight_no']} on {self.booking['date']}",
            )
            return
        self._search(ctx)

    def _search(self, ctx: TurnContext) -> None:
        assert self.booking is not None and self.ref is not None and self.date is not None
        attempts = 1 if self._fault("never_retry_search", ctx) else 2
        options: list[dict[str, Any]] | None = None
        for attempt in range(attempts):
            try:
                options = list(ctx.call("search_flights", booking_ref=self.ref, date=self.date)["options"])
                break
            except ToolError as exc:
                if exc.kind != "timeout" or attempt == attempts - 1:
                    break
        if not options:
            self._respond(
                ctx, "END_NO_FLIGHTS", "NO_FLIGHTS", f"I found no flights on {self.date}. Would another date work?", "search_flights: no options"
            )
            return
        best = min(options, key=lambda o: o["price"])
        fare = float(self.booking["fare"])
        price = float(best["price"])
        difference = max(0.0, price - fare)
        fee = 0.25 * (price if self._fault("fee_on_new_price", ctx) else fare)
        total = difference + fee
        self.offer = best
        if price <= fare and self._fault("skip_confirm_when_cheaper", ctx):
            self._change(ctx)
            return
        self._respond(
            ctx,
            "N3_CONFIRM_CHANGE",
            "ASK_CONFIRM_CHANGE",
            f"The cheapest option is {best['flight_no']}, departing {best['departs']}, at {_money(price)}. "
            f"Your fare was {_money(fare)}, so the fare difference is {_money(difference)}; the change fee is {_money(fee)} "
            f"(25% of your fare), {_money(total)} in total. Shall I change your booking?",
            f"get_booking: fare {_money(fare)}; search_flights: {best['flight_no']} at {_money(price)}",
        )

    def _confirm(self, message: str, ctx: TurnContext) -> None:
        assert self.offer is not None
        hedged = _HEDGE.search(message) is not None
        if hedged and self._fault("maybe_is_yes", ctx):
            self._change(ctx)
        elif _NO.search(message) and not hedged:
            self.offer = None
            self._respond(ctx, "END_CHANGE_ABORTED", "CHANGE_ABORTED", "Okay, I've kept your original flight.")
        elif not hedged and (re.search(r"\byes\b", message, re.I) if self._fault("ok_not_confirm", ctx) else _YES.search(message)):
            self._change(ctx)
        else:
            self._respond(
                ctx,
                "N3_CONFIRM_CHANGE",
                "ASK_CONFIRM_CHANGE",
                f"I can only change it with a clear yes or no: shall I move you to {self.offer['flight_no']}?",
            )

    def _change(self, ctx: TurnContext) -> None:
        assert self.offer is not None and self.ref is not None
        flight = self.offer["flight_no"]
        self.offer = None
        try:
            result = ctx.call("change_booking", booking_ref=self.ref, flight_no=flight)
        except ToolError as exc:
            self._respond(
                ctx,
                "END_CHANGE_FAILED",
                "CHANGE_FAILED",
                f"The change to {flight} didn't go through ({exc.kind}); your original booking stands.",
                f"change_booking: {exc.kind}",
            )
            return
        if result["status"] != "changed":
            self._respond(
                ctx,
                "END_CHANGE_FAILED",
                "CHANGE_FAILED",
                f"The change to {flight} didn't go through; your original booking stands.",
                "change_booking: failed",
            )
            return
        new_ref = result.get("new_booking_ref")
        extra = {"new_booking_ref": new_ref} if new_ref else {}
        self._respond(
            ctx,
            "END_CHANGED",
            "CHANGED",
            f"Done: you're on {flight}." + (f" Your new booking reference is {new_ref}." if new_ref else ""),
            f"change_booking: changed{', ' + new_ref if new_ref else ''}",
            **extra,
        )
