"""Reference agent for the zoo's IT helpdesk spec (written blind for issue 23; Apache-2.0).

With every fault knob at 0 it follows spec.yaml: it asks back when the service OR the symptom
is missing, declares a SEV1 only when the service is down AND 50 or more users are affected
(doing the four SEV1 calls in order; the spec's limit refuses the last one, see the zoo's
README), gives an operational service's self-help steps as a numbered list, otherwise opens a
ticket whose id (never a similar ticket's) it reports, and never recommends a destructive fix.
"""

from __future__ import annotations

import re
from typing import Any

from agentprop import ToolError, TurnContext

FAULTS: dict[str, str] = {
    "asks_only_if_both_missing": "asks back only when both the service and the symptom are missing (the `or` read as `and`)",
    "sev1_on_down_only": "declares a SEV1 whenever the service is down, whatever the number of users affected",
    "sev1_threshold_strict": "declares a SEV1 only above 50 users (> instead of >=): exactly 50 gets an ordinary ticket",
    "sev1_skips_status_page": "on a SEV1, skips check_status_page",
    "similar_ticket_id": "reports the first similar ticket's id as the employee's ticket_id",
    "agrees_to_reinstall": "when the employee proposes a destructive fix (reinstall, factory reset, wipe, delete the profile), agrees to it",
    "frustrated_reset": "when the employee says they already tried everything / it is still broken, suggests a factory reset as a last resort",
}

_SERVICES = ("VPN", "email", "Outlook", "Wi-Fi", "wifi", "Jira", "Slack", "SAP", "printer", "Zoom", "laptop")
_SYMPTOM = re.compile(
    r"\b(disconnect\w*|drops?|dropping|won'?t|can'?t|cannot|not working|doesn'?t work|slow|crash\w*|error\w*|fail\w*|down|freez\w*|hangs?|stuck|timing out|times out|keeps)\b",
    re.I,
)
_DESTRUCTIVE = re.compile(r"\b(reinstall\w*|factory reset|reset (it|my \w+) to factory|wipe|wiping|delete my profile|format (my|the) \w+)\b", re.I)
_FRUSTRATED = re.compile(r"\b(tried everything|still (not working|broken|doesn'?t)|already (restarted|tried)|nothing works)\b", re.I)


class HelpdeskAgent:
    """One instance per conversation."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.service: str | None = None
        self.symptom: str | None = None

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

    def _read(self, message: str) -> None:
        for name in _SERVICES:
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", message, re.I):
                self.service = name
                break
        if m := _SYMPTOM.search(message):
            self.symptom = message[m.start() :].strip(" .!")

    def _unsafe_addition(self, message: str, ctx: TurnContext) -> str:
        if _DESTRUCTIVE.search(message) and self._fault("agrees_to_reinstall", ctx):
            return " And yes, reinstalling or resetting the device as you suggest should clear it up."
        if _FRUSTRATED.search(message) and self._fault("frustrated_reset", ctx):
            return " If nothing else works, do a factory reset of your laptop as a last resort."
        return ""

    def turn(self, message: str, ctx: TurnContext) -> None:
        self._read(message)
        extra = self._unsafe_addition(message, ctx)
        if _DESTRUCTIVE.search(message) and not extra:
            extra = " Please don't reinstall, reset or wipe anything yourself: that can lose data. The steps here, or a ticket, are the safe route."
        missing = [what for what, value in (("which service", self.service), ("what happens", self.symptom)) if value is None]
        ask = (len(missing) == 2) if self._fault("asks_only_if_both_missing", ctx) else bool(missing)
        if ask:
            self._respond(ctx, "END_ASK_DETAILS", "ASK_DETAILS", f"Could you tell me {' and '.join(missing)}?{extra}")
            return
        service = self.service or "unknown"
        try:
            info = ctx.call("lookup_service", service=service)
        except ToolError as exc:
            self._respond(
                ctx,
                "END_UNKNOWN_SERVICE",
                "UNKNOWN_SERVICE",
                f"I don't know a service called {service}. What is its exact name?{extra}",
                f"lookup_service: {exc.kind}",
            )
            return
        users = int(info["users_affected"])
        down = info["status"] == "down"
        if self._fault("sev1_on_down_only", ctx):
            sev1 = down
        elif self._fault("sev1_threshold_strict", ctx):
            sev1 = down and users > 50
        else:
            sev1 = down and users >= 50
        if sev1:
            self._sev1(info, ctx, extra)
        elif info["status"] == "operational":
            steps = list(info.get("self_help") or [])
            if steps:
                listed = "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
                text = f"{service} is up for everyone else, so let's try these steps:\n{listed}\nIf it still fails, tell me and I'll open a ticket."
            else:
                text = f"{service} is up for everyone else; I have no self-help steps for it, but I can open a ticket."
            self._respond(ctx, "END_SELF_HELP", "SELF_HELP", text + extra, f"lookup_service: status operational, {len(steps)} self_help steps")
        else:
            self._ticket(info, ctx, extra, "P2" if down else "P3")

    def _create(self, ctx: TurnContext, info: dict[str, Any], priority: str) -> dict[str, Any]:
        summary = f"{self.service}: {self.symptom}"[:120]
        try:
            return dict(ctx.call("create_ticket", service_id=info["service_id"], summary=summary, priority=priority))
        except ToolError as exc:
            if exc.kind != "timeout":
                raise
            return dict(ctx.call("create_ticket", service_id=info["service_id"], summary=summary, priority=priority))

    def _ticket(self, info: dict[str, Any], ctx: TurnContext, extra: str, priority: str) -> None:
        similar = list(ctx.call("find_similar_tickets", service_id=info["service_id"], symptom=self.symptom or "")["tickets"])
        try:
            ticket = self._create(ctx, info, priority)
        except ToolError as exc:
            self._respond(
                ctx,
                "END_TICKET_CREATED",
                "TICKET_CREATED",
                f"I couldn't open a ticket just now ({exc.kind}); please try again shortly.{extra}",
                f"create_ticket: {exc.kind}",
            )
            return
        ticket_id = ticket["ticket_id"]
        reported = similar[0]["ticket_id"] if similar and self._fault("similar_ticket_id", ctx) else ticket_id
        related = ", ".join(f"{t['ticket_id']} ({t['state']})" for t in similar)
        text = f"I've opened ticket {reported} ({priority}) for {self.service}." + (f" Related tickets: {related}." if related else "")
        self._respond(
            ctx,
            "END_TICKET_CREATED",
            "TICKET_CREATED",
            text + extra,
            f"lookup_service: {info['status']}; create_ticket: {ticket_id}",
            ticket_id=reported,
        )

    def _sev1(self, info: dict[str, Any], ctx: TurnContext, extra: str) -> None:
        notes: list[str] = []
        try:
            if not self._fault("sev1_skips_status_page", ctx):
                ctx.call("check_status_page", service_id=info["service_id"])
            ticket = self._create(ctx, info, "P1")
            ctx.call("page_oncall", team=info["owner_team"], ticket_id=ticket["ticket_id"])
        except ToolError as exc:
            self._respond(
                ctx,
                "END_SEV1_DECLARED",
                "SEV1_DECLARED",
                f"This is a major outage, but I couldn't complete the escalation ({exc.kind}).{extra}",
                f"SEV1 step failed: {exc.kind}",
            )
            return
        try:
            ctx.call("notify_stakeholders", ticket_id=ticket["ticket_id"])
        except ToolError as exc:  # the spec's 4-call limit refuses this fifth call
            notes.append(f"stakeholders were not notified automatically ({exc.kind})")
        text = f"{self.service} is down for {info['users_affected']} users: I've declared a SEV1, ticket {ticket['ticket_id']}, and paged {info['owner_team']} on-call."
        if notes:
            text += " Note: " + "; ".join(notes) + "."
        self._respond(
            ctx,
            "END_SEV1_DECLARED",
            "SEV1_DECLARED",
            text + extra,
            f"create_ticket: {ticket['ticket_id']}; page_oncall done",
            ticket_id=ticket["ticket_id"],
        )
