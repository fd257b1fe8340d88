"""A plain-Python ExpenseGuard agent that follows the spec's decision tree.

It is agentprop's sparring partner for ``spec.yaml``: with every fault knob at 0 it passes the
spec's leaf cases; each knob injects a realistic, stochastic bug with probability P (drawn from
``ctx.rng``, so a run is reproducible for a given case and trial). The knobs mirror the spec's
mutation pack (``tests.mutation_pack`` and ``mutations.yaml``). Select knobs on the command line
with ``--fault NAME=P``.

The decision rules it implements (the bindings file documents the same choices):

- N1: role, country and receipt_id are required; anything missing -> REQUEST_INFO.
- N2/N3: ``get_policy`` then ``get_receipt`` (retried once on timeout, as each tool's
  ``retry_policy`` says); an unknown receipt -> REQUEST_INFO.
- N4: an item whose category or description names an entry of the policy's ``disallowed`` list
  -> ``open_compliance_case`` and REJECT_DISALLOWED.
- N5: receipt currency != policy currency -> ``fx_convert`` and use the converted amount.
- N6: the amount in the policy currency EXCEEDS ``limits.per_receipt`` (strictly greater)
  -> REJECT_POLICY; otherwise N7 ``submit_expense`` -> APPROVE_SUBMIT.

Every number the agent tells the user is copied from a tool result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentprop import ToolError, TurnContext
from agentprop.testing import as_corrected, as_simplified, correct_typos

FAULTS: dict[str, str] = {
    "approve_no_policy": "never calls get_policy; decides on generic assumptions (USD, a 500 "
    "limit, alcohol/tobacco disallowed)",
    "skip_receipt_lookup": "never calls get_receipt; trusts the user's claimed amount "
    "(if any) and submits",
    "ignore_disallowed": "does not check the receipt's items against the policy's disallowed list",
    "skip_compliance_case": "rejects a disallowed item without opening a compliance case",
    "submit_no_receipt": "submits the expense when the receipt id is missing or the "
    "receipt is not found",
    "skip_fx": "treats a foreign-currency total as if it were in the policy "
    "currency (no fx_convert)",
    "hallucinate_amount": "states and submits a reimbursable amount with an "
    "invented 15% allowance added",
    "threshold_off_by_one": "rejects an amount exactly at limits.per_receipt (>= instead of >)",
}

ZOO_FAULTS: dict[str, str] = {
    "polite_over_limit": "approves a politely asked expense (kindly, could you please, would you "
    "mind, I'd appreciate) without holding it to the per-receipt limit",
    "formal_opens_case": "a formally worded request (I would be grateful, I am writing to, Dear, "
    "kind regards, at your earliest convenience) is handled as a complaint: it opens a "
    "compliance case first",
    "receipt_id_case": "reads receipt ids only in capitals: a lower-case id (rcp-123) is missed "
    "and it asks for the receipt ID",
    "unknown_role": "accepts only the roles it knows, spelt exactly: another (or a misspelt) "
    "role is asked for again",
    "manager_gate": "applies v2's manager-approval gate: an amount over get_policy's "
    "manager_approval_over is rejected instead of submitted",
    "client_visit_entertainment": "reads a client visit (client, customer dinner) in the request "
    "as entertainment and rejects it as disallowed",
    "reimbursement_skips_items": "a request for a reimbursement (not an expense report) is paid "
    "out without checking the receipt's items against the disallowed list",
    "hedge_asks_again": "a hedged request (if possible, maybe, I think, perhaps) is taken as "
    "incomplete: it asks for the details again",
    "urgent_skips_receipt": "in a hurry (asap, urgent, right away, quickly) it trusts the claim "
    "and never calls get_receipt",
}
"""Faults triggered by how a user writes or what a tool answers, each with a known minimal trigger:
the fault zoo of ``benchmarks/find.py`` (kept apart from the mutation knobs above)."""
FAULTS.update(ZOO_FAULTS)

REQUIRED_FIELDS: tuple[str, ...] = ("role", "country", "receipt_id")

# Generic assumptions the approve_no_policy fault uses instead of the real policy.
_ASSUMED_POLICY: dict[str, Any] = {
    "currency": "USD",
    "receipt_required_over": 75.0,
    "limits": {"per_receipt": 500.0},
    "disallowed": ["alcohol", "tobacco"],
}

# users type an id's separator as a space or leave it out (RCP 123, RCP123): read as RCP-123
_RECEIPT_ID = re.compile(
    r"\b(RCP)(?:-([A-Za-z0-9]+)|\s?(\d[A-Za-z0-9]*))\b"
    r"|\breceipt(?:\s+(?:id|number|no\.?))?\s*[:#]?\s*"
    r"(?:([A-Z0-9]+)-([A-Z0-9]+)|([A-Z]+)\s?(\d[A-Z0-9]*))\b",
    re.I,
)
_ROLE = re.compile(
    r"\b(?:role(?:\s+is)?\s*:?|I'?m\s+an?|I\s+am\s+an?|work(?:ing)?\s+as(?:\s+an?)?)\s+([A-Za-z][A-Za-z-]+)",
    re.I,
)
_NOT_ROLES = {"bit", "little", "new", "few", "lot", "quick", "question", "reimbursement"}
_COUNTRY_NAMES: dict[str, str] = {
    "united states": "US",
    "usa": "US",
    "u.s.a.": "US",
    "u.s.": "US",
    "us": "US",
    "america": "US",
    "united kingdom": "UK",
    "u.k.": "UK",
    "uk": "UK",
    "gb": "UK",
    "great britain": "UK",
    "england": "UK",
    "germany": "DE",
    "de": "DE",
    "france": "FR",
    "fr": "FR",
    "canada": "CA",
    "ca": "CA",
    "india": "IN",
    "japan": "JP",
    "jp": "JP",
    "spain": "ES",
    "es": "ES",
    "italy": "IT",
    "it": "IT",
    "netherlands": "NL",
    "nl": "NL",
    "ireland": "IE",
    "ie": "IE",
    "australia": "AU",
    "au": "AU",
}
_COUNTRY = re.compile(
    r"\b(?:country(?:\s+is)?\s*:?|based\s+in|located\s+in|living\s+in|in)\s+(?:the\s+)?("
    + "|".join(sorted((re.escape(k) for k in _COUNTRY_NAMES), key=len, reverse=True))
    + r")(?![A-Za-z])",
    re.I,
)
# words the agent reads by: a one-letter slip in one of them is still that word
_VOCABULARY = (
    "receipt",
    "number",
    "role",
    "work",
    "working",
    "based",
    "located",
    "living",
    "country",
    "expense",
    "report",
    "reimbursement",
    "claim",
    "submit",
    "process",
    *(k for k in _COUNTRY_NAMES if len(k) > 3),
)
_EXPLICIT_COUNTRY = re.compile(r"\bcountry(?:\s+is)?\s*:?\s+([A-Z]{2})\b")
# what the zoo's faults read (see FAULTS)
_POLITE = re.compile(
    r"\b(kindly|(could|can|would) you please|would you (mind|be so kind)|i'?d (really "
    r")?appreciate|i would (really )?appreciate|if you don'?t mind|pretty please)\b",
    re.I,
)
_FORMAL = re.compile(
    r"\b(i would be (most )?grateful|i am writing to|dear\b|kind regards|best regards|yours "
    r"sincerely|at your earliest convenience|i would like to request)",
    re.I,
)
_KNOWN_ROLES = frozenset(
    {
        "engineer",
        "manager",
        "director",
        "analyst",
        "designer",
        "consultant",
        "intern",
        "contractor",
        "sales",
    }
)
_CLIENT = re.compile(r"\b(client|customer (dinner|visit|meeting|lunch))\b", re.I)
_REIMBURSEMENT = re.compile(r"\breimburs\w*", re.I)
_HEDGE = re.compile(
    r"\b(if (at all )?possible|if you can|maybe|perhaps|possibly|i think|i guess|when you "
    r"(get|have) a (chance|moment|minute))\b",
    re.I,
)
_URGENT = re.compile(r"\b(asap|urgent(ly)?|right away|immediately|quick(ly)?|hurry|rush)\b", re.I)
_CLAIMED_AMOUNT = re.compile(
    r"[$€£]\s?(\d+(?:\.\d{1,2})?)|\b(\d+(?:\.\d{1,2})?)\s?(?:USD|EUR|GBP|dollars|euros)\b", re.I
)


def parse_request(message: str) -> dict[str, str]:
    """The required fields a message states: ``role``, ``country`` (ISO-like code) and
    ``receipt_id`` (only those present)."""
    out: dict[str, str] = {}
    if m := _RECEIPT_ID.search(message):
        if m.group(1):
            prefix, number = m.group(1), m.group(2) or m.group(3)
        else:
            prefix, number = m.group(4) or m.group(6), m.group(5) or m.group(7)
        out["receipt_id"] = f"{prefix}-{number}".upper()
    for m in _ROLE.finditer(message):
        word = m.group(1).lower()
        if word not in _NOT_ROLES:
            out["role"] = word
            break
    if m := _COUNTRY.search(message):
        out["country"] = _COUNTRY_NAMES[m.group(1).lower()]
    elif m := _EXPLICIT_COUNTRY.search(message):
        out["country"] = m.group(1)
    return out


_BARE_COUNTRY = re.compile(
    r"(?<![A-Za-z.])("
    + "|".join(sorted((re.escape(k) for k in _COUNTRY_NAMES), key=len, reverse=True))
    + r")(?![A-Za-z])",
    re.I,
)
"""A country alone, as an answer to "your country?" gives it ("US", "u.s.", "Germany")."""
_BARE_ROLE = re.compile(r"\b(" + "|".join(sorted(_KNOWN_ROLES)) + r")\b", re.I)


def _answered(message: str, asked: list[str]) -> dict[str, str]:
    """What an answer to the agent's request for ``asked`` fields gives when written bare, with
    no lead word ("RCP-123, US", "engineer"): a country by its code (in capitals) or name, a
    known role."""
    out: dict[str, str] = {}
    if "country" in asked and (m := _BARE_COUNTRY.search(message)):
        out["country"] = _COUNTRY_NAMES[m.group(1).lower()]
    if "role" in asked and (m := _BARE_ROLE.search(message)):
        out["role"] = m.group(1).lower()
    return out


def _words(text: str) -> str:
    """Lower-case words with a plural ``s`` dropped: ``"Gift Cards"`` -> ``"gift card"``."""
    return " ".join(
        w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[a-z]+", text.lower())
    )


def disallowed_items(items: list[Any], disallowed: list[str]) -> list[tuple[dict[str, Any], str]]:
    """``(item, matched policy term)`` for each receipt item the policy disallows: the item's
    category is the term, or its description names it."""
    out: list[tuple[dict[str, Any], str]] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        category = _words(str(item.get("category", "")))
        description = f" {_words(str(item.get('description', '')))} "
        for term in disallowed:
            t = _words(term)
            if t and (category == t or f" {t} " in description):
                out.append((dict(item), term))
                break
    return out


def _money(x: float) -> str:
    return f"{x:.2f}"


class _Stop(Exception):
    """A tool failed for good (after the retry) or the turn's tool budget ran out."""

    def __init__(self, tool: str, kind: str) -> None:
        super().__init__(f"{tool}: {kind}")
        self.tool = tool
        self.kind = kind


class ExpenseGuardAgent:
    """One instance per conversation; fields the user gave are remembered across turns."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.fields: dict[str, str] = {}
        self.asked: list[str] = []
        """The required fields the last turn asked for (read bare in the answer)."""
        self.message = ""
        """The message of the turn being handled."""

    # -------------------------------------------------------------- helpers

    def _fault(self, name: str, ctx: TurnContext) -> bool:
        p = self.faults.get(name, 0.0)
        return p > 0 and ctx.rng.random() < p

    def _budget_left(self, ctx: TurnContext) -> int | None:
        limit = ctx.spec.max_tool_calls_per_turn
        return None if limit is None else limit - len(ctx.calls_this_turn)

    def _call(self, ctx: TurnContext, tool: str, **args: Any) -> Any:
        """Call a tool, retrying on the failure modes its retry_policy names, never beyond the
        turn's tool-call limit. Raises :class:`_Stop` when the tool fails for good."""
        policy = ctx.spec.tool(tool).retry_policy
        attempts = 1 + (policy.retries if policy else 0)
        for attempt in range(attempts):
            left = self._budget_left(ctx)
            if left is not None and left <= 0:
                raise _Stop(tool, "tool_budget_exhausted")
            try:
                return ctx.call(tool, **args)
            except ToolError as exc:
                retryable = policy is not None and exc.kind in policy.on
                if not retryable or attempt == attempts - 1:
                    raise _Stop(tool, exc.kind) from None
        raise AssertionError("unreachable")

    def _respond(
        self,
        ctx: TurnContext,
        node: str,
        decision: str,
        message: str,
        evidence: str = "",
        **extra: Any,
    ) -> None:
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence=evidence or "no tool output needed",
            user_message=message,
            **{k: v for k, v in extra.items() if v is not None},
        )

    def _stopped(
        self, ctx: TurnContext, node: str, stop: _Stop, evidence: str = "", **extra: Any
    ) -> None:
        """A tool failed for good: nothing can be decided, tell the user what to do."""
        if stop.kind == "not_found" and stop.tool == "get_receipt":
            message = (
                f"I could not find receipt {self.fields.get('receipt_id')}. Please check the "
                "receipt ID or upload the receipt."
            )
            reason = "receipt_not_found"
        elif stop.kind == "not_found" and stop.tool == "get_policy":
            message = (
                f"I found no expense policy for role {self.fields.get('role')} in "
                f"{self.fields.get('country')}. Please check your role and country."
            )
            reason = "policy_not_found"
        elif stop.kind == "tool_budget_exhausted":
            message = (
                "I could not finish checking this expense in one step. Please "
                "send the request again."
            )
            reason = "tool_budget_exhausted"
        else:
            message = (
                f"The {stop.tool.replace('_', ' ')} service is not answering right now. "
                "Please try again later."
            )
            reason = f"{stop.tool}_{stop.kind}"
        if not evidence and stop.kind == "tool_budget_exhausted":
            # the tool was never called: cite what the calls that used the budget returned
            done = "; ".join(
                f"{c.name}: {'ok' if c.ok else c.error_kind}" for c in ctx.calls_this_turn
            )
            evidence = f"{done}; max_tool_calls_per_turn reached"
        self._respond(
            ctx,
            node,
            "REQUEST_INFO",
            message,
            evidence or f"{stop.tool} failed: {stop.kind}",
            decision_reason=reason,
            **extra,
        )

    # -------------------------------------------------------------- the turn

    def turn(self, message: str, ctx: TurnContext) -> None:
        message = correct_typos(as_corrected(as_simplified(message)), _VOCABULARY)
        self.message = message
        given = parse_request(message)
        if (
            "receipt_id" in given
            and given["receipt_id"].split("-")[0] not in message  # the prefix not in capitals
            and self._fault("receipt_id_case", ctx)
        ):
            del given["receipt_id"]  # written in lower case
        if (
            "role" in given
            and given["role"] not in _KNOWN_ROLES
            and self._fault("unknown_role", ctx)
        ):
            del given["role"]
        self.fields.update({**_answered(message, self.asked), **given})
        missing = [f for f in REQUIRED_FIELDS if f not in self.fields]
        self.asked = list(missing)
        if not missing and _HEDGE.search(message) and self._fault("hedge_asks_again", ctx):
            missing = list(REQUIRED_FIELDS)
        if "receipt_id" in missing and self._fault("submit_no_receipt", ctx):
            self._submit_without_receipt(ctx, message)
            return
        if missing:
            names = {"role": "your role", "country": "your country", "receipt_id": "the receipt ID"}
            listed = [names[f] for f in missing]
            wanted = (
                listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
            )
            self._respond(
                ctx,
                "N1_INTAKE",
                "REQUEST_INFO",
                f"To process your expense I need {wanted}. Please send "
                f"{'it' if len(missing) == 1 else 'them'}.",
                missing_fields=missing,
                decision_reason="missing_required_fields",
            )
            return
        self._process(ctx, message)

    def _process(self, ctx: TurnContext, message: str) -> None:
        role, country, receipt_id = (
            self.fields["role"],
            self.fields["country"],
            self.fields["receipt_id"],
        )
        # N2_POLICY
        if self._fault("approve_no_policy", ctx):
            policy: dict[str, Any] = dict(_ASSUMED_POLICY)
        else:
            try:
                policy = self._call(ctx, "get_policy", role=role, country=country)
            except _Stop as stop:
                self._stopped(ctx, "N2_POLICY", stop)
                return
        policy_currency = str(policy.get("currency", ""))
        if _FORMAL.search(message) and self._fault("formal_opens_case", ctx):
            try:
                self._call(
                    ctx,
                    "open_compliance_case",
                    summary=f"Formal request from {ctx.context.get('employee_id')}: {message[:80]}",
                    evidence={"message": message},
                )
            except _Stop:
                pass
        # N3_RECEIPT
        if self._fault("skip_receipt_lookup", ctx) or (
            _URGENT.search(message) is not None and self._fault("urgent_skips_receipt", ctx)
        ):
            claimed = _CLAIMED_AMOUNT.search(message)
            amount = float(claimed.group(1) or claimed.group(2)) if claimed else None
            self._submit(
                ctx,
                policy,
                {"receipt_id": receipt_id, "items": [], "currency": policy_currency},
                amount,
                evidence="user's claim (receipt not looked up)",
            )
            return
        try:
            receipt = self._call(ctx, "get_receipt", receipt_id=receipt_id)
        except _Stop as stop:
            if stop.kind == "not_found" and self._fault("submit_no_receipt", ctx):
                self._submit(
                    ctx,
                    policy,
                    {"receipt_id": receipt_id, "items": [], "currency": policy_currency},
                    None,
                    evidence="receipt not found",
                )
                return
            self._stopped(ctx, "N3_RECEIPT", stop, receipt_id=receipt_id)
            return
        receipt_currency = str(receipt.get("currency", ""))
        total = float(receipt["total"])
        # N4_VALIDATE
        ignore = self._fault("ignore_disallowed", ctx) or (
            _REIMBURSEMENT.search(message) is not None
            and self._fault("reimbursement_skips_items", ctx)
        )
        bad = (
            []
            if ignore
            else disallowed_items(
                list(receipt.get("items", [])), list(policy.get("disallowed", []))
            )
        )
        if not bad and _CLIENT.search(message) and self._fault("client_visit_entertainment", ctx):
            bad = [({"description": "client visit", "category": "entertainment"}, "entertainment")]
        if bad:
            self._reject_disallowed(ctx, receipt, bad, policy_currency, receipt_currency)
            return
        # N5_CALCULATE / N5A_FX
        amount = total
        fx_note = ""
        if (
            receipt_currency
            and policy_currency
            and receipt_currency != policy_currency
            and not self._fault("skip_fx", ctx)
        ):
            try:
                fx = self._call(
                    ctx,
                    "fx_convert",
                    amount=total,
                    from_currency=receipt_currency,
                    to_currency=policy_currency,
                    date=str(receipt.get("date", "")),
                )
            except _Stop as stop:
                self._stopped(
                    ctx,
                    "N5A_FX",
                    stop,
                    receipt_id=receipt_id,
                    policy_currency=policy_currency,
                    receipt_currency=receipt_currency,
                )
                return
            amount = float(fx["amount"])
            fx_note = (
                f" ({_money(total)} {receipt_currency} converted to "
                f"{_money(amount)} {policy_currency})"
            )
        # N6_DECIDE
        limit_raw = (policy.get("limits") or {}).get("per_receipt")
        limit = (
            float(limit_raw)
            if isinstance(limit_raw, (int, float)) and not isinstance(limit_raw, bool)
            else None
        )
        manager_over = policy.get("manager_approval_over")
        if (
            isinstance(manager_over, (int, float))
            and amount > manager_over
            and self._fault("manager_gate", ctx)
        ):
            limit = float(manager_over)
        if limit is not None:
            over = amount >= limit if self._fault("threshold_off_by_one", ctx) else amount > limit
            if over and _POLITE.search(message) and self._fault("polite_over_limit", ctx):
                over = False
            if over:
                self._respond(
                    ctx,
                    "N6_DECIDE",
                    "REJECT_POLICY",
                    f"I can't approve receipt {receipt_id}: its total of "
                    f"{_money(total)} {receipt_currency}"
                    + (f" ({_money(amount)} {policy_currency})" if fx_note else "")
                    + f" is over the policy limit of {_money(limit)} "
                    f"{policy_currency} per receipt.",
                    evidence=f"get_policy: limits.per_receipt {limit:g} {policy_currency}; "
                    f"get_receipt: total {total:g} {receipt_currency}"
                    + (f"; fx_convert: {amount:g} {policy_currency}" if fx_note else ""),
                    receipt_id=receipt_id,
                    policy_currency=policy_currency,
                    receipt_currency=receipt_currency,
                    decision_reason="exceeds_per_receipt_limit",
                )
                return
        self._submit(ctx, policy, receipt, amount, fx_note=fx_note, limit=limit)

    def _reject_disallowed(
        self,
        ctx: TurnContext,
        receipt: dict[str, Any],
        bad: list[tuple[dict[str, Any], str]],
        policy_currency: str,
        receipt_currency: str,
    ) -> None:
        receipt_id = str(receipt.get("receipt_id", self.fields["receipt_id"]))
        listed = ", ".join(f"{item.get('description', 'an item')} ({term})" for item, term in bad)
        case_id: str | None = None
        case_note = ""
        if not self._fault("skip_compliance_case", ctx):
            try:
                case = self._call(
                    ctx,
                    "open_compliance_case",
                    summary=f"Receipt {receipt_id} contains items the expense "
                    f"policy disallows: {listed}",
                    evidence={
                        "receipt_id": receipt_id,
                        "items": [item for item, _ in bad],
                        "policy_terms": [t for _, t in bad],
                    },
                )
                case_id = str(case["case_id"])
                case_note = f" I opened compliance case {case_id}."
            except _Stop:
                case_note = (
                    " I could not open the compliance case right now; compliance will be notified."
                )
        self._respond(
            ctx,
            "N4A_REJECT_DISALLOWED",
            "REJECT_DISALLOWED",
            f"I can't approve receipt {receipt_id}: it contains items the policy does not allow: "
            f"{listed}.{case_note}",
            evidence=f"get_policy: disallowed list; get_receipt: {listed}"
            + (f"; open_compliance_case: {case_id}" if case_id else ""),
            receipt_id=receipt_id,
            case_id=case_id,
            policy_currency=policy_currency,
            receipt_currency=receipt_currency,
            decision_reason="disallowed_items",
        )

    def _submit(
        self,
        ctx: TurnContext,
        policy: dict[str, Any],
        receipt: dict[str, Any],
        amount: float | None,
        *,
        fx_note: str = "",
        limit: float | None = None,
        evidence: str = "",
    ) -> None:
        policy_currency = str(policy.get("currency", ""))
        receipt_id = str(receipt.get("receipt_id", self.fields.get("receipt_id", "")))
        reimbursable = amount
        if amount is not None and self._fault("hallucinate_amount", ctx):
            reimbursable = round(amount * 1.15, 2)  # an "allowance" no tool output supports
        report = {
            "employee_id": ctx.context.get("employee_id"),
            "role": self.fields.get("role"),
            "country": self.fields.get("country"),
            "receipt_id": receipt_id or None,
            "merchant": receipt.get("merchant"),
            "date": receipt.get("date"),
            "amount": reimbursable,
            "currency": policy_currency,
            "original_amount": receipt.get("total"),
            "original_currency": receipt.get("currency"),
        }
        try:
            result = self._call(ctx, "submit_expense", report=report)
        except _Stop as stop:
            self._stopped(
                ctx,
                "N7_SUBMIT",
                stop,
                receipt_id=receipt_id or None,
                policy_currency=policy_currency,
            )
            return
        report_id = str(result["report_id"])
        within = (
            f", within the {_money(limit)} {policy_currency} per-receipt limit"
            if limit is not None
            else ""
        )
        amount_text = (
            f" for {_money(reimbursable)} {policy_currency}" if reimbursable is not None else ""
        )
        self._respond(
            ctx,
            "N7_SUBMIT",
            "APPROVE_SUBMIT",
            f"Approved: receipt {receipt_id}{fx_note}{within}. I submitted report "
            f"{report_id}{amount_text}.",
            evidence=evidence
            or (
                f"get_policy: {policy_currency}, per_receipt "
                f"{limit if limit is not None else 'none'}; get_receipt: total "
                f"{receipt.get('total')} {receipt.get('currency')}; submit_expense: {report_id}"
            ),
            receipt_id=receipt_id or None,
            report_id=report_id,
            reimbursable_amount=reimbursable,
            policy_currency=policy_currency,
            receipt_currency=str(receipt.get("currency")) if receipt.get("currency") else None,
            decision_reason="within_policy",
        )

    def _submit_without_receipt(self, ctx: TurnContext, message: str) -> None:
        """The submit_no_receipt fault at intake: file the claim although no receipt was given."""
        policy: dict[str, Any] = {"currency": "USD"}
        if "role" in self.fields and "country" in self.fields:
            try:
                policy = self._call(
                    ctx, "get_policy", role=self.fields["role"], country=self.fields["country"]
                )
            except _Stop:
                policy = {"currency": "USD"}
        claimed = _CLAIMED_AMOUNT.search(message)
        amount = float(claimed.group(1) or claimed.group(2)) if claimed else None
        self._submit(
            ctx,
            policy,
            {"receipt_id": "", "items": [], "currency": policy.get("currency")},
            amount,
            evidence="no receipt given",
        )
