"""A plain-Python pharmacy refill agent for tests/data/promises/pharmacy/spec.yaml.

It calls each tool once, in the order the spec's anchored node lists give
(verify_patient -> get_prescription -> check_interactions -> submit_refill). Fault knobs:
``skip_interactions`` submits without checking interactions; ``ignore_interactions`` submits
even when a major interaction is found.
"""

from __future__ import annotations

import re
from typing import Any

from agentprop import ToolError, TurnContext

FAULTS: dict[str, str] = {
    "skip_interactions": "submits the refill without calling check_interactions",
    "ignore_interactions": "submits the refill although check_interactions "
    "reports a major interaction",
}

_RX = re.compile(r"\b(RX-\d+)\b", re.I)
_DOB = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


class PharmacyAgent:
    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.slots: dict[str, str] = {}

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
        self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str = ""
    ) -> None:
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence=evidence or "no tool output needed",
            user_message=message,
        )

    def turn(self, message: str, ctx: TurnContext) -> None:
        if m := _RX.search(message):
            self.slots["rx_id"] = m.group(1).upper()
        if m := _DOB.search(message):
            self.slots["dob"] = m.group(1)
        if "dob" not in self.slots:
            self._respond(
                ctx,
                "N1_VERIFY",
                "REQUEST_DOB",
                "To refill a prescription I need your date of birth.",
            )
            return
        patient = ctx.context["patient_id"]
        rx_id = self.slots.get("rx_id", "")
        try:
            verified = self._call(ctx, "verify_patient", patient_id=patient, dob=self.slots["dob"])
            if not verified.get("verified"):
                self._respond(
                    ctx,
                    "END_REFUSE_UNVERIFIED",
                    "REFUSE_UNVERIFIED",
                    "I could not verify your identity, so I cannot refill this prescription.",
                    "verify_patient: not verified",
                )
                return
            rx = self._call(ctx, "get_prescription", patient_id=patient, rx_id=rx_id)
            if rx.get("refills_left", 0) == 0:
                self._respond(
                    ctx,
                    "END_NO_REFILLS_LEFT",
                    "NO_REFILLS_LEFT",
                    f"Prescription {rx_id} has no refills left; please ask your "
                    "doctor for a new one.",
                    "get_prescription: 0 refills left",
                )
                return
            if not self._fault("skip_interactions", ctx):
                check = self._call(ctx, "check_interactions", patient_id=patient, drug=rx["drug"])
                if check.get("major") and not self._fault("ignore_interactions", ctx):
                    self._respond(
                        ctx,
                        "END_PHARMACIST_REVIEW",
                        "PHARMACIST_REVIEW",
                        f"{rx['drug']} may interact with your other medication; a pharmacist will "
                        "review it before the refill.",
                        "check_interactions: major interaction",
                    )
                    return
            result = self._call(ctx, "submit_refill", rx_id=rx_id)
        except ToolError as exc:
            self._respond(
                ctx,
                "END_REFILL_FAILED",
                "REFILL_FAILED",
                f"I could not complete the refill ({exc.kind}); please try again later.",
                f"tool failed: {exc.kind}",
            )
            return
        if result.get("status") == "submitted":
            self._respond(
                ctx,
                "END_REFILL_SUBMITTED",
                "REFILL_SUBMITTED",
                f"Your refill of {rx['drug']} ({rx_id}) has been submitted.",
                "submit_refill: submitted",
            )
        else:
            self._respond(
                ctx,
                "END_REFILL_FAILED",
                "REFILL_FAILED",
                "The refill could not be submitted; please try again later.",
                "submit_refill: failed",
            )
