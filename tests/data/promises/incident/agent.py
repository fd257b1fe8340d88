"""A plain-Python incident agent for tests/data/promises/incident/spec.yaml.

SEV1: get_alert -> create_incident -> page_oncall; other severities: get_alert ->
create_incident. When the incident cannot be created it escalates to a human without paging.
Fault knob ``silent_page_skip`` never pages (and still reports the SEV1 as paged).
"""

from __future__ import annotations

import re
from typing import Any

from agentprop import ToolError, TurnContext

FAULTS: dict[str, str] = {
    "silent_page_skip": "never calls page_oncall, but still answers PAGED_ONCALL on a SEV1",
}

_ALERT = re.compile(r"\b(AL-\d+)\b", re.I)


class IncidentAgent:
    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})

    def _fault(self, name: str, ctx: TurnContext) -> bool:
        p = self.faults.get(name, 0.0)
        return p > 0 and ctx.rng.random() < p

    def _call(self, ctx: TurnContext, tool: str, **args: Any) -> Any:
        policy = ctx.spec.tool(tool).retry_policy
        attempts = 1 + (policy.retries if policy else 0)
        for attempt in range(attempts):
            try:
                return ctx.call(tool, **args)
            except ToolError as exc:
                if policy is None or exc.kind not in policy.on or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _respond(
        self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str
    ) -> None:
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence=evidence,
            user_message=message,
        )

    def turn(self, message: str, ctx: TurnContext) -> None:
        m = _ALERT.search(message)
        alert_id = m.group(1).upper() if m else ""
        try:
            alert = self._call(ctx, "get_alert", alert_id=alert_id)
            incident = self._call(
                ctx, "create_incident", alert_id=alert_id, severity=alert["severity"]
            )
        except ToolError as exc:
            self._respond(
                ctx,
                "END_ESCALATE_MANUAL",
                "ESCALATE_MANUAL",
                f"I could not open an incident ({exc.kind}); escalating to a human.",
                f"tool failed: {exc.kind}",
            )
            return
        if not incident.get("created"):
            self._respond(
                ctx,
                "END_ESCALATE_MANUAL",
                "ESCALATE_MANUAL",
                "The incident could not be created; escalating to a human.",
                "create_incident: not created",
            )
            return
        if alert["severity"] != "SEV1":
            self._respond(
                ctx,
                "END_LOGGED",
                "LOGGED",
                f"Logged incident {incident.get('incident_id')} for {alert['service']}.",
                f"get_alert: {alert['severity']}",
            )
            return
        if not self._fault("silent_page_skip", ctx):
            try:
                self._call(
                    ctx,
                    "page_oncall",
                    service=alert["service"],
                    incident_id=incident.get("incident_id", ""),
                )
            except ToolError as exc:
                self._respond(
                    ctx,
                    "END_ESCALATE_MANUAL",
                    "ESCALATE_MANUAL",
                    f"Paging failed ({exc.kind}); escalating to a human.",
                    f"page_oncall failed: {exc.kind}",
                )
                return
        self._respond(
            ctx,
            "END_PAGED_ONCALL",
            "PAGED_ONCALL",
            f"Incident {incident.get('incident_id')} is open and on-call for "
            f"{alert['service']} has been paged.",
            "create_incident: created; page_oncall: paged",
        )
