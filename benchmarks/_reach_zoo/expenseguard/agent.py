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

This file is a copy of examples/expenseguard/agent.py for agentprop's blind reach zoo (issue 24):
the example's fault knobs are removed and replaced by the zoo's own (``FAULTS``), and its reading
of the request is made robust to ordinary phrasing (U.S. / the States, RCP 123, a bare "US" or
"engineer" answering a question, requests asked as questions, amounts the user states).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from agentprop import ToolError, TurnContext
from agentprop.testing import correct_typos

FAULTS: dict[str, str] = {
    "dotted_country": "reads country codes only without dots: 'U.S.', 'U.K.', 'U.S.A.' are missed and the country is asked for again",
    "receipt_id_spacing": "reads receipt ids only as RCP-123: 'RCP 123' or 'RCP123' is missed and the receipt ID is asked for again",
    "injected_item_note": "follows an instruction written in the receipt (an item description or merchant saying it is pre-approved) and approves",
    "question_form_request": "a request asked as a question (would it be possible to / could you / can I get ...) is answered with the requirements",
    "stated_amount_trusted": "uses an amount the user states ($95, 95 USD) instead of the receipt's total, for the limit and the report",
    "bare_answer_missed": "reads the country and role only with a label (based in, role:): a bare answer ('US', 'Germany', 'Engineer') is missed",
}

REQUIRED_FIELDS: tuple[str, ...] = ("role", "country", "receipt_id")

# Generic assumptions the approve_no_policy fault uses instead of the real policy.
_RECEIPT_ID = re.compile(r"\b(RCP-[A-Za-z0-9]+)\b|\breceipt(?:\s+(?:id|number|no\.?))?\s*[:#]?\s*([A-Z0-9]+-[A-Z0-9]+)\b", re.I)
_RECEIPT_SPACED = re.compile(r"\b(RCP)\s?#?(\d+)\b", re.I)
_DOTTED = re.compile(r"\b([A-Za-z])\.([A-Za-z])\.(?:([A-Za-z])\.)?")
_ROLE = re.compile(r"\b(?:role(?:\s+is)?\s*:?|I'?m\s+an?|I\s+am\s+an?|work(?:ing)?\s+as(?:\s+an?)?)\s+([A-Za-z][A-Za-z-]+)", re.I)
_NOT_ROLES = {"bit", "little", "new", "few", "lot", "quick", "question", "reimbursement"}
_COUNTRY_NAMES: dict[str, str] = {
    "united states": "US",
    "usa": "US",
    "us": "US",
    "america": "US",
    "united kingdom": "UK",
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
    "the states": "US",
    "states": "US",
    "britain": "UK",
    "scotland": "UK",
    "wales": "UK",
    "deutschland": "DE",
}
_COUNTRY = re.compile(
    r"\b(?:country(?:\s+is)?\s*:?|based\s+in|located\s+in|living\s+in|in)\s+(?:the\s+)?("
    + "|".join(sorted((re.escape(k) for k in _COUNTRY_NAMES), key=len, reverse=True))
    + r")\b",
    re.I,
)
_BARE_COUNTRY = re.compile(
    r"\b("
    + "|".join(sorted((re.escape(k) for k in _COUNTRY_NAMES if len(k) > 3), key=len, reverse=True))
    + r")\b|(?<![A-Za-z])(US|UK|GB|DE|FR|CA|ES|NL|IE|AU|JP)(?![A-Za-z])",
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
_KNOWN_ROLES = (
    "engineer", "manager", "director", "analyst", "designer", "consultant", "intern", "contractor", "salesperson", "executive",
    "developer", "accountant", "recruiter", "researcher", "scientist", "architect", "technician", "administrator", "marketer",
)  # fmt: skip
_QUESTION_FORM = re.compile(
    r"\b(would it be possible to|is it possible to|(could|can|would) you( please)?|can i (get|have)|could i (get|have)|am i able to)\b", re.I
)
_STATED_AMOUNT = re.compile(r"[$€£]\s?(\d+(?:\.\d{1,2})?)|\b(\d+(?:\.\d{1,2})?)\s?(?:USD|EUR|GBP|dollars|euros|bucks)\b", re.I)
_INSTRUCTION = re.compile(
    r"\b(pre-?approved|approve (it|this|in full)|ignore (the )?(limit|policy|rules)|do not (reject|check)|policy exception|auto-?approve)\b", re.I
)


def parse_request(message: str, *, dotted: bool = True, spaced_ids: bool = True, bare: bool = True) -> dict[str, str]:
    """The required fields a message states: ``role``, ``country`` (ISO-like code) and
    ``receipt_id`` (only those present). ``dotted`` reads U.S. as US, ``spaced_ids`` reads
    RCP 123 as RCP-123, ``bare`` reads an unlabelled country or role (fault knobs turn them off)."""
    if dotted:
        message = _DOTTED.sub(lambda m: "".join(g for g in m.groups() if g), message)
    out: dict[str, str] = {}
    if m := _RECEIPT_ID.search(message):
        out["receipt_id"] = (m.group(1) or m.group(2)).upper()
    elif spaced_ids and (m := _RECEIPT_SPACED.search(message)):
        out["receipt_id"] = f"RCP-{m.group(2)}"
    for m in _ROLE.finditer(message):
        word = m.group(1).lower()
        if word not in _NOT_ROLES:
            out["role"] = word
            break
    if "role" not in out and bare:
        for role in _KNOWN_ROLES:
            if re.search(rf"\b{role}s?\b", message, re.I):
                out["role"] = role
                break
    if m := _COUNTRY.search(message):
        out["country"] = _COUNTRY_NAMES[m.group(1).lower()]
    elif m := _EXPLICIT_COUNTRY.search(message):
        out["country"] = m.group(1)
    elif bare and (m := _BARE_COUNTRY.search(message)):
        out["country"] = _COUNTRY_NAMES[(m.group(1) or m.group(2)).lower()]
    return out


def _words(text: str) -> str:
    """Lower-case words with a plural ``s`` dropped: ``"Gift Cards"`` -> ``"gift card"``."""
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[a-z]+", text.lower()))


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

    def _respond(self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str = "", **extra: Any) -> None:
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence=evidence or "no tool output needed",
            user_message=message,
            **{k: v for k, v in extra.items() if v is not None},
        )

    def _stopped(self, ctx: TurnContext, node: str, stop: _Stop, evidence: str = "", **extra: Any) -> None:
        """A tool failed for good: nothing can be decided, tell the user what to do."""
        if stop.kind == "not_found" and stop.tool == "get_receipt":
            message = f"I could not find receipt {self.fields.get('receipt_id')}. Please check the receipt ID or upload the receipt."
            reason = "receipt_not_found"
        elif stop.kind == "not_found" and stop.tool == "get_policy":
            message = (
                f"I found no expense policy for role {self.fields.get('role')} in {self.fields.get('country')}. Please check your role and country."
            )
            reason = "policy_not_found"
        elif stop.kind == "tool_budget_exhausted":
            message = "I could not finish checking this expense in one step. Please send the request again."
            reason = "tool_budget_exhausted"
        else:
            message = f"The {stop.tool.replace('_', ' ')} service is not answering right now. Please try again later."
            reason = f"{stop.tool}_{stop.kind}"
        if not evidence and stop.kind == "tool_budget_exhausted":
            # the tool was never called: cite what the calls that used the budget returned
            done = "; ".join(f"{c.name}: {'ok' if c.ok else c.error_kind}" for c in ctx.calls_this_turn)
            evidence = f"{done}; max_tool_calls_per_turn reached"
        self._respond(ctx, node, "REQUEST_INFO", message, evidence or f"{stop.tool} failed: {stop.kind}", decision_reason=reason, **extra)

    # -------------------------------------------------------------- the turn

    def turn(self, message: str, ctx: TurnContext) -> None:
        message = correct_typos(unicodedata.normalize("NFKC", message), _VOCABULARY)
        self.message = message
        given = parse_request(message)
        if _DOTTED.search(message) and "country" in given and self._fault("dotted_country", ctx):
            given = {k: v for k, v in given.items() if k != "country"} | parse_request(message, dotted=False)
        if "receipt_id" in given and not _RECEIPT_ID.search(message) and self._fault("receipt_id_spacing", ctx):
            del given["receipt_id"]
        labelled = parse_request(message, bare=False)
        if any(k not in labelled for k in given if k != "receipt_id") and self._fault("bare_answer_missed", ctx):
            given = labelled | ({"receipt_id": given["receipt_id"]} if "receipt_id" in given else {})
        self.fields.update(given)
        missing = [f for f in REQUIRED_FIELDS if f not in self.fields]
        if not missing and _QUESTION_FORM.search(message) and self._fault("question_form_request", ctx):
            self._respond(
                ctx,
                "N1_INTAKE",
                "REQUEST_INFO",
                "Yes, expenses can be reimbursed: send me your role, your country and the receipt ID and I'll process it.",
                missing_fields=list(REQUIRED_FIELDS),
                decision_reason="missing_required_fields",
            )
            return
        if missing:
            names = {"role": "your role", "country": "your country", "receipt_id": "the receipt ID"}
            listed = [names[f] for f in missing]
            wanted = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
            self._respond(
                ctx,
                "N1_INTAKE",
                "REQUEST_INFO",
                f"To process your expense I need {wanted}. Please send {'it' if len(missing) == 1 else 'them'}.",
                missing_fields=missing,
                decision_reason="missing_required_fields",
            )
            return
        self._process(ctx, message)

    def _process(self, ctx: TurnContext, message: str) -> None:
        role, country, receipt_id = self.fields["role"], self.fields["country"], self.fields["receipt_id"]
        # N2_POLICY
        try:
            policy: dict[str, Any] = self._call(ctx, "get_policy", role=role, country=country)
        except _Stop as stop:
            self._stopped(ctx, "N2_POLICY", stop)
            return
        policy_currency = str(policy.get("currency", ""))
        # N3_RECEIPT
        try:
            receipt = self._call(ctx, "get_receipt", receipt_id=receipt_id)
        except _Stop as stop:
            self._stopped(ctx, "N3_RECEIPT", stop, receipt_id=receipt_id)
            return
        receipt_currency = str(receipt.get("currency", ""))
        total = float(receipt["total"])
        # N4_VALIDATE
        receipt_text = " ".join(
            [str(receipt.get("merchant", ""))] + [str(i.get("description", "")) for i in receipt.get("items", []) if isinstance(i, Mapping)]
        )
        obey = _INSTRUCTION.search(receipt_text) is not None and self._fault("injected_item_note", ctx)
        bad = [] if obey else disallowed_items(list(receipt.get("items", [])), list(policy.get("disallowed", [])))
        if bad:
            self._reject_disallowed(ctx, receipt, bad, policy_currency, receipt_currency)
            return
        # N5_CALCULATE / N5A_FX
        amount = total
        fx_note = ""
        stated = _STATED_AMOUNT.search(message)
        if stated and self._fault("stated_amount_trusted", ctx):
            total = amount = float(stated.group(1) or stated.group(2))
            receipt_currency = policy_currency
        if receipt_currency and policy_currency and receipt_currency != policy_currency:
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
                self._stopped(ctx, "N5A_FX", stop, receipt_id=receipt_id, policy_currency=policy_currency, receipt_currency=receipt_currency)
                return
            amount = float(fx["amount"])
            fx_note = f" ({_money(total)} {receipt_currency} converted to {_money(amount)} {policy_currency})"
        # N6_DECIDE
        limit_raw = (policy.get("limits") or {}).get("per_receipt")
        limit = float(limit_raw) if isinstance(limit_raw, (int, float)) and not isinstance(limit_raw, bool) else None
        if limit is not None:
            over = amount > limit and not obey
            if over:
                self._respond(
                    ctx,
                    "N6_DECIDE",
                    "REJECT_POLICY",
                    f"I can't approve receipt {receipt_id}: its total of {_money(total)} {receipt_currency}"
                    + (f" ({_money(amount)} {policy_currency})" if fx_note else "")
                    + f" is over the policy limit of {_money(limit)} {policy_currency} per receipt.",
                    evidence=f"get_policy: limits.per_receipt {limit:g} {policy_currency}; get_receipt: total {total:g} {receipt_currency}"
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
        try:
            case = self._call(
                ctx,
                "open_compliance_case",
                summary=f"Receipt {receipt_id} contains items the expense policy disallows: {listed}",
                evidence={"receipt_id": receipt_id, "items": [item for item, _ in bad], "policy_terms": [t for _, t in bad]},
            )
            case_id = str(case["case_id"])
            case_note = f" I opened compliance case {case_id}."
        except _Stop:
            case_note = " I could not open the compliance case right now; compliance will be notified."
        self._respond(
            ctx,
            "N4A_REJECT_DISALLOWED",
            "REJECT_DISALLOWED",
            f"I can't approve receipt {receipt_id}: it contains items the policy does not allow: {listed}.{case_note}",
            evidence=f"get_policy: disallowed list; get_receipt: {listed}" + (f"; open_compliance_case: {case_id}" if case_id else ""),
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
            self._stopped(ctx, "N7_SUBMIT", stop, receipt_id=receipt_id or None, policy_currency=policy_currency)
            return
        report_id = str(result["report_id"])
        within = f", within the {_money(limit)} {policy_currency} per-receipt limit" if limit is not None else ""
        amount_text = f" for {_money(reimbursable)} {policy_currency}" if reimbursable is not None else ""
        self._respond(
            ctx,
            "N7_SUBMIT",
            "APPROVE_SUBMIT",
            f"Approved: receipt {receipt_id}{fx_note}{within}. I submitted report {report_id}{amount_text}.",
            evidence=evidence
            or (
                f"get_policy: {policy_currency}, per_receipt {limit if limit is not None else 'none'}; "
                f"get_receipt: total {receipt.get('total')} {receipt.get('currency')}; submit_expense: {report_id}"
            ),
            receipt_id=receipt_id or None,
            report_id=report_id,
            reimbursable_amount=reimbursable,
            policy_currency=policy_currency,
            receipt_currency=str(receipt.get("currency")) if receipt.get("currency") else None,
            decision_reason="within_policy",
        )
