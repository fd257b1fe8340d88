"""A plain-Python on-call agent for the runbook spec (``spec.yaml``).

It finds the service named in the message, looks its runbook up with ``get_runbook`` and
answers with exactly the runbook's steps, numbered, in order (P1); with no runbook it pages
on-call (P3). With every fault knob at 0 it passes every case; each knob injects one lie with
probability P (drawn from ``ctx.rng``). Select knobs with ``--fault NAME=P``.
"""

from __future__ import annotations

import re
from typing import Any

from agentprop import ToolError, TurnContext

FAULTS: dict[str, str] = {
    "invented_step": "adds a step of its own to the runbook's steps (issue #11 item 5)",
    "lie_tool_actions": "reports page_oncall in tool_actions although it never called it (item 4)",
    "invent_node_id": "reports node_id N4_VERIFY_FIX, a node the spec does not have (item 4)",
    "invent_evidence": "cites runbook RB-99 in its evidence, which no tool returned (item 4)",
}

INVENTED_STEP = "Restart every pod of the service to clear its caches"

_SERVICE = re.compile(r"\b([A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)\b")


def find_service(message: str) -> str | None:
    """The service a message names: a hyphenated name with a digit (``payments-v2``)."""
    for m in _SERVICE.finditer(message):
        if any(ch.isdigit() for ch in m.group(1)):
            return m.group(1)
    return None


def numbered(steps: list[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))


class RunbookAgent:
    """One instance per conversation (the spec's conversations are one turn long)."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})

    def _fault(self, name: str, ctx: TurnContext) -> bool:
        p = self.faults.get(name, 0.0)
        return p > 0 and ctx.rng.random() < p

    def _respond(
        self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str, **extra: Any
    ) -> None:
        actions = [c.name for c in ctx.calls_this_turn]
        if self._fault("lie_tool_actions", ctx) and "page_oncall" not in actions:
            actions.append("page_oncall")
        if self._fault("invent_node_id", ctx):
            node = "N4_VERIFY_FIX"
        if self._fault("invent_evidence", ctx):
            evidence = "get_runbook: RB-99"
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=actions,
            evidence=evidence,
            user_message=message,
            **extra,
        )

    def _call(self, ctx: TurnContext, tool: str, **args: Any) -> Any:
        """Call a tool, retrying as its retry_policy says."""
        policy = ctx.spec.tool(tool).retry_policy
        attempts = 1 + (policy.retries if policy else 0)
        for attempt in range(attempts):
            try:
                return ctx.call(tool, **args)
            except ToolError as exc:
                if policy is None or exc.kind not in policy.on or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def turn(self, message: str, ctx: TurnContext) -> None:
        service = find_service(message)
        if service is None:
            self._respond(
                ctx,
                "N1_TRIAGE",
                "ASK_SERVICE",
                "Which service is affected? Please give its name as it appears on "
                "the service dashboard.",
                "no tool output needed",
            )
            return
        try:
            runbook = self._call(ctx, "get_runbook", service=service)
        except ToolError as exc:
            self._escalate(ctx, service, exc.kind)
            return
        steps = [str(s) for s in runbook.get("steps", [])]
        if self._fault("invented_step", ctx):
            steps.insert(len(steps) - 1 if steps else 0, INVENTED_STEP)
        title = f" ({runbook['title']})" if runbook.get("title") else ""
        self._respond(
            ctx,
            "END_PROVIDE_STEPS",
            "PROVIDE_STEPS",
            f"Follow runbook {runbook['runbook_id']}{title} for {service}:\n{numbered(steps)}",
            f"get_runbook: {runbook['runbook_id']}, {len(runbook.get('steps', []))} steps",
            steps=steps,
            runbook_id=runbook["runbook_id"],
        )

    def _escalate(self, ctx: TurnContext, service: str, kind: str) -> None:
        try:
            page = self._call(
                ctx, "page_oncall", service=service, summary=f"No runbook for {service} ({kind})"
            )
        except ToolError as exc:
            self._respond(
                ctx,
                "N3_ESCALATE",
                "ESCALATED",
                f"There is no runbook for {service} and I could not page on-call ({exc.kind}); "
                "please call the on-call engineer directly.",
                f"get_runbook failed: {kind}; page_oncall failed: {exc.kind}",
            )
            return
        self._respond(
            ctx,
            "END_ESCALATED",
            "ESCALATED",
            f"There is no runbook for {service}, so I paged on-call: page {page['page_id']}.",
            f"get_runbook failed: {kind}; page_oncall returned {page['page_id']}",
            page_id=page["page_id"],
        )
