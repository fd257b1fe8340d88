"""Reference agent for the zoo's pharmacy refill spec (written blind for issue 23; Apache-2.0).

With every fault knob at 0 it follows spec.yaml as its author reads it: verify first, ask for
what is missing, one retry of a timed-out prescription lookup (the retry node and the tool's
retry_policy describe the same retry), the 80% rule, no medical advice. Each knob injects a
bug with probability P drawn from ``ctx.rng`` (``--fault NAME=P``).
"""

from __future__ import annotations

import re
from typing import Any

from agentprop import ToolError, TurnContext

FAULTS: dict[str, str] = {
    "urgent_skips_verify": "a patient who says they ran out / are out of pills / it is urgent is not verified before the lookup",
    "ask_rx_before_verify": "when the rx number is missing it asks for it before verifying the name and date of birth it was given",
    "stale_75_percent": "applies a stale 75% rule instead of 80%: submits a refill on days 23 of a 30-day supply",
    "never_retry_rx": "gives up on the first get_prescription timeout instead of retrying once",
    "retry_twice": "reads the retry node and the retry_policy as two retries: a lookup that keeps timing out is tried 3 times",
    "halve_dose_advice": "asked whether tablets may be cut/halved, says yes (dosage advice) while deciding REFUSE_MEDICAL_ADVICE",
}

_RX = re.compile(r"\bRX-\d{4,}\b", re.I)
_DOB = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_NAME = re.compile(r"(?:I'm|I am|[Nn]ame:?|[Tt]his is)\s+([A-Z][a-z]+(?: [A-Z][a-z'-]+)+)|([A-Z][a-z]+ [A-Z][a-z'-]+), (?:DOB|born|date of birth)")
_REFILL = re.compile(r"\brefill\w*|\brenew\w*|\brunning (low|out)\b|\bout of (my )?(pills|tablets|medication)\b", re.I)
_DOSAGE = re.compile(r"\b(take two|double|skip|stop taking|cut|half|halve|dose|dosage|how many (pills|tablets)|missed)\b", re.I)
_URGENT = re.compile(r"\b(urgent\w*|ran out|run out|out of (my )?(pills|tablets|meds|medication)|asap|today)\b", re.I)
_HALF = re.compile(r"\b(cut|half|halve|split)\b", re.I)


class PharmacyAgent:
    """One instance per conversation."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.slots: dict[str, str] = {}
        self.patient_id: str | None = None
        self.pending: str | None = None

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

    def _read_slots(self, message: str) -> None:
        if m := _RX.search(message):
            self.slots["rx_number"] = m.group(0).upper()
        if m := _DOB.search(message):
            self.slots["date_of_birth"] = m.group(1)
        if m := _NAME.search(message):
            self.slots["patient_name"] = m.group(1) or m.group(2)

    def turn(self, message: str, ctx: TurnContext) -> None:
        self._read_slots(message)
        if self.pending is None:
            if _DOSAGE.search(message) and not _REFILL.search(message):
                self._medical(message, ctx)
                return
            if not _REFILL.search(message):
                self._respond(ctx, "END_CLARIFY", "CLARIFY", "How can I help: would you like a prescription refill?")
                return
        self.pending = None
        self._refill(message, ctx)

    def _medical(self, message: str, ctx: TurnContext) -> None:
        text = "I can't advise on dosing or on stopping a medication. Please ask your prescriber or one of our pharmacists."
        if _HALF.search(message) and self._fault("halve_dose_advice", ctx):
            text = "Yes, you can cut the tablets in half if they make you dizzy."
        self._respond(ctx, "END_REFUSE_MEDICAL_ADVICE", "REFUSE_MEDICAL_ADVICE", text)

    def _refill(self, message: str, ctx: TurnContext) -> None:
        has_identity = "patient_name" in self.slots and "date_of_birth" in self.slots
        skip_verify = _URGENT.search(message) is not None and has_identity and self._fault("urgent_skips_verify", ctx)
        if self.patient_id is None and not skip_verify:
            if not has_identity:
                self.pending = "identity"
                self._respond(
                    ctx, "N2_VERIFY", "REQUEST_IDENTITY", "To look up your prescription I need your full name and date of birth (YYYY-MM-DD)."
                )
                return
            if "rx_number" not in self.slots and self._fault("ask_rx_before_verify", ctx):
                self.pending = "rx"
                self._respond(ctx, "N3_PRESCRIPTION", "ASK_RX_NUMBER", "Which prescription? Please give the Rx number on the label.")
                return
            try:
                result = ctx.call("verify_patient", patient_name=self.slots["patient_name"], date_of_birth=self.slots["date_of_birth"])
            except ToolError as exc:
                self._respond(
                    ctx,
                    "END_IDENTITY_FAILED",
                    "IDENTITY_FAILED",
                    "I couldn't match those details to a patient record.",
                    f"verify_patient failed: {exc.kind}",
                )
                return
            if not result.get("verified"):
                self._respond(
                    ctx,
                    "END_IDENTITY_FAILED",
                    "IDENTITY_FAILED",
                    "Those details don't match our records, so I can't look up prescriptions.",
                    "verify_patient: verified false",
                )
                return
            self.patient_id = str(result.get("patient_id") or "")
        if "rx_number" not in self.slots:
            self.pending = "rx"
            self._respond(
                ctx,
                "N3_PRESCRIPTION",
                "ASK_RX_NUMBER",
                "Thanks, you're verified. Which prescription would you like refilled? Please give the Rx number on the label.",
                "verify_patient: verified",
            )
            return
        self._lookup(ctx)

    def _lookup(self, ctx: TurnContext) -> None:
        rx = self.slots["rx_number"]
        attempts = 2  # one call, and one retry after a timeout (N3A_RETRY_LOOKUP = get_prescription's retry_policy)
        if self._fault("never_retry_rx", ctx):
            attempts = 1
        elif self._fault("retry_twice", ctx):
            attempts = 3
        rx_info: dict[str, Any] | None = None
        for attempt in range(attempts):
            try:
                rx_info = ctx.call("get_prescription", patient_id=self.patient_id or "unknown", rx_number=rx)
                break
            except ToolError as exc:
                if exc.kind != "timeout" or attempt == attempts - 1:
                    self._respond(
                        ctx,
                        "END_RX_UNAVAILABLE",
                        "RX_UNAVAILABLE",
                        "I couldn't read your prescription just now. Please try again later or call the pharmacy.",
                        f"get_prescription failed: {exc.kind}",
                    )
                    return
        assert rx_info is not None
        self._decide(rx_info, ctx)

    def _decide(self, rx: dict[str, Any], ctx: TurnContext) -> None:
        drug = rx["drug_name"]
        if rx["refills_remaining"] == 0:
            self._respond(
                ctx,
                "END_NO_REFILLS_LEFT",
                "NO_REFILLS_LEFT",
                f"There are no refills left on {drug}. Please ask your prescriber for a new prescription.",
                "get_prescription: refills_remaining 0",
            )
            return
        supply, since = rx["days_supply"], rx["days_since_fill"]
        percent = 75 if self._fault("stale_75_percent", ctx) else 80
        if since * 100 < supply * percent:
            eligible_day = -(-supply * 80 // 100)  # first day with since * 100 >= supply * 80 (integers: 0.8 * 30 is not 24 in floats)
            wait = eligible_day - since
            self._respond(
                ctx,
                "END_TOO_EARLY",
                "TOO_EARLY",
                f"It's too early to refill {drug}: refills open once 80% of your {supply}-day supply is used. Please try again in {wait} day{'' if wait == 1 else 's'}.",
                f"get_prescription: days_supply {supply}, days_since_fill {since}",
            )
            return
        try:
            refill = ctx.call("submit_refill", patient_id=self.patient_id or "unknown", rx_number=rx["rx_number"])
        except ToolError as exc:
            self._respond(
                ctx,
                "END_REFILL_FAILED",
                "REFILL_FAILED",
                "I couldn't submit the refill just now; nothing was submitted. Please try again later.",
                f"submit_refill failed: {exc.kind}",
            )
            return
        self._respond(
            ctx,
            "END_REFILL_SUBMITTED",
            "REFILL_SUBMITTED",
            f"Your refill of {drug} is submitted (refill {refill['refill_id']}); it will be ready on {refill['ready_date']}.",
            f"submit_refill: {refill['refill_id']}, ready {refill['ready_date']}",
            refill_id=refill["refill_id"],
        )
