"""Reference agent for GridBill (blind reach zoo, issue 24): a scripted energy-billing agent.

With every fault knob at 0 it follows spec.yaml for the ordinary ways customers write (English
and Chinese, simplified or traditional; readings as 12480, 12,480, １２４８０ or 一万二千四百八十;
months as 6, six, half a year, 半年; corrections; several requests in one message). Each knob in
``FAULTS`` is a realistic bug fired with probability P from ``ctx.rng``. Apache-2.0, written by
the project.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

from agentprop import ToolError, TurnContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
nlu: Any = importlib.import_module("reachnlu")

FAULTS: dict[str, str] = {
    "reading_thousands_sep": "reads a meter reading with a thousands separator (12,480 or 12 480) as its first group (12): implausible",
    "fullwidth_digits": "reads only ASCII digits: a reading typed with full-width digits (１２４８０, Chinese IMEs) is missed and asked again",
    "months_in_words": "reads plan months only as digits: 'six months', 'half a year', '六个月', '半年' are missed and asked again",
    "correction_keeps_first": "on a correction in the message (12400, sorry, I meant 12480 / 不对，应该是) keeps the first number",
    "two_requests_last_wins": "with two requests in one message, handles the one written last instead of the first by the spec's order",
    "traditional_chars": "reads Chinese only in simplified characters: a request in traditional characters (電錶讀數, 餘額) is not understood",
    "pii_update_leak": "asked for a contact detail in order to update it (I want to update my email, which one do you have?) reads it out",
}

_POSTCODE = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{1,2}\d[A-Za-z\d]?)\s*(\d[A-Za-z]{2})(?![A-Za-z0-9])")
_LAST4 = re.compile(
    r"(?:ending(?:\s+in)?|ends?\s+(?:in|with)|last\s*(?:4|four)(?:\s*digits)?|account\s+number|尾号|后四位|末四位)\D{0,14}?[*x•X\s\-]*(\d{4})(?!\d)",
    re.I,
)
_IDS = re.compile(r"[A-Za-z]{1,4}-\d+")
_DATES = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\b\d{1,2}/\d{1,2}(/\d{2,4})?\b|\d{1,2}\s*月\s*\d{1,2}\s*[日号]?")
_CORRECTION = re.compile(
    r"\b(sorry|i mean|i meant|correction|actually|no wait|typo|my bad|make that|rather)\b|不对|我是说|更正|应该是|说错了|打错了", re.I
)
_INTENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pii_request", re.compile(r"e-?mail|phone|mobile|date of birth|birthday|\bdob\b|邮箱|电话|手机|生日|出生", re.I)),
    (
        "payment_plan",
        re.compile(
            r"payment plan|instal+ments?|\bspread\b|\bsplit\b|pay (it |this )?(off )?(in|by) (parts|chunks|monthly|instal\w*)|monthly payments|分期|还款计划|付款计划|分.{0,3}个?月还",
            re.I,
        ),
    ),
    ("submit_reading", re.compile(r"\breadings?\b|\bmeter\b|读数|抄表|电表|气表|水表", re.I)),
    ("balance_question", re.compile(r"\bbalance\b|\bowe\b|how much (do|will|is)|outstanding|\bdue\b|\bbill\b|余额|欠|账单|多少钱", re.I)),
)
_UPDATE = re.compile(r"\b(update|change|new|correct|wrong|old|still|changed|moved)\b|更新|修改|换了|改|新的", re.I)
_MONTH_WORDS = (
    (re.compile(r"\b(a|one) year and a half\b|一年半|十八个月", re.I), 18),
    (re.compile(r"\bhalf a year\b|\bsix months\b|半年", re.I), 6),
    (re.compile(r"\b(a|one) (full )?year\b|\btwelve months\b|一年", re.I), 12),
)
_MONTHS_AFTER = re.compile(r"^\s*(months?|mths?|mos?|monthly instal\w*|instal+ments|payments|个月|期|月)", re.I)


class GridBillAgent:
    """One instance per conversation."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.pending: str | None = None
        self.intent: str | None = None
        self.slots: dict[str, Any] = {}
        self.verified = False
        self.options: dict[str, Any] | None = None
        self.account: dict[str, Any] | None = None

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

    def _respond(self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str = "") -> None:
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence=evidence or "no tool output needed",
            user_message=message,
        )

    # ------------------------------------------------------------ reading

    def _classify(self, text: str, ctx: TurnContext) -> str:
        found: list[tuple[int, int, str]] = []  # (priority, position, intent), every request word not negated
        for priority, (intent, pattern) in enumerate(_INTENTS):
            found += [(priority, m.start(), intent) for m in pattern.finditer(text) if not nlu.negated_at(text, m.start())]
        if not found:
            return "unknown"
        if len({i for _, _, i in found}) > 1 and self._fault("two_requests_last_wins", ctx):
            return max(found, key=lambda f: f[1])[2]
        return min(found)[2]

    def _numbers(self, text: str, ctx: TurnContext) -> list[float]:
        text = _POSTCODE.sub(" ", _IDS.sub(" ", _DATES.sub(" ", text)))
        text = _LAST4.sub(" ", text)
        thousands = not (re.search(r"\d[, ]\d{3}(?!\d)", text) and self._fault("reading_thousands_sep", ctx))
        return [v for v, _ in nlu.numbers(text, thousands=thousands)]

    def _reading(self, raw: str, text: str, ctx: TurnContext) -> int | None:
        if re.search(r"[０-９]", raw) and self._fault("fullwidth_digits", ctx):
            text = re.sub(r"[0-9]", " ", nlu.normalise(re.sub(r"[０-９]", "?", raw)))
        values = [v for v in self._numbers(text, ctx) if v >= 10]
        if not values:
            return None
        cue = _CORRECTION.search(text)
        if cue and len(values) > 1 and not self._fault("correction_keeps_first", ctx):
            after = [v for v in self._numbers(text[cue.end() :], ctx) if v >= 10]
            return int(after[0] if after else values[-1])
        return int(values[0])

    def _months(self, text: str, ctx: TurnContext) -> int | None:
        clean = _POSTCODE.sub(" ", _LAST4.sub(" ", text))
        digits = [(int(v), s) for v, s in nlu.numbers(clean, zh=False) if _MONTHS_AFTER.search(clean[s:].lstrip("0123456789"))]
        words: list[tuple[int, int]] = []
        for pattern, value in _MONTH_WORDS:
            if m := pattern.search(clean):
                words.append((value, m.start()))
        for v, s in nlu.numbers(clean):
            if not clean[s].isdigit() and _MONTHS_AFTER.search(clean[s:].lstrip("零一二两三四五六七八九十")):
                words.append((int(v), s))
        if m := re.search(r"\b(two|three|four|five|seven|eight|nine|ten|eleven|twelve|eighteen|twenty-four)\s+(months|monthly)", clean, re.I):
            words.append((int(nlu.word_number(m.group(1)) or 0), m.start()))
        if words and self._fault("months_in_words", ctx):
            words = []
        found = sorted(digits + words, key=lambda vs: vs[1])
        if not found:
            return None
        cue = _CORRECTION.search(clean)
        if cue and len(found) > 1 and not self._fault("correction_keeps_first", ctx):
            later = [v for v, s in found if s > cue.start()]
            return later[0] if later else found[-1][0]
        return found[0][0]

    def _read_auth(self, text: str) -> None:
        if m := _POSTCODE.search(text):
            self.slots["postcode"] = f"{m.group(1).upper()} {m.group(2).upper()}"
        if m := _LAST4.search(text):
            self.slots["bank_last4"] = m.group(1)

    # ------------------------------------------------------------ the turn

    def turn(self, message: str, ctx: TurnContext) -> None:
        text = nlu.normalise(message, traditional=not (re.search(r"[電錶讀數餘額還請辦個碼]", message) and self._fault("traditional_chars", ctx)))
        if self.pending == "confirm":
            self._confirm(text, ctx)
            return
        intent = self._classify(text, ctx)
        if self.pending in ("reading", "auth", "months") and intent in ("unknown", self.intent):
            intent = self.intent or intent
        elif self.pending == "clarify" and intent == "unknown":
            self._ticket(ctx, "unclear_request", f"Unclear after one clarification: {text[:80]}")
            return
        self.pending = None
        self.intent = intent
        if intent == "pii_request":
            if _UPDATE.search(text) and self._fault("pii_update_leak", ctx):
                account = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
                pii = account.get("pii", {})
                self._respond(
                    ctx,
                    "END_REFUSE_PII",
                    "REFUSE_PII",
                    f"The details we hold are {pii.get('email')} and {pii.get('phone')}; you can update them online.",
                )
                return
            self._respond(
                ctx, "END_REFUSE_PII", "REFUSE_PII",
                "I can't read out personal details such as your email, phone or date of birth. You can see and change them in your account settings.",
            )  # fmt: skip
        elif intent == "submit_reading":
            self._submit_reading(message, text, ctx)
        elif intent == "balance_question":
            self._balance(ctx)
        elif intent == "payment_plan":
            self._plan(text, ctx)
        else:
            self.pending = "clarify"
            self._respond(ctx, "N9_CLARIFY", "CLARIFY", "Could you tell me more: is it about a meter reading, a payment plan or your balance?")

    def _account(self, ctx: TurnContext) -> dict[str, Any]:
        result: dict[str, Any] = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
        return result

    def _submit_reading(self, raw: str, text: str, ctx: TurnContext) -> None:
        reading = self._reading(raw, text, ctx)
        if reading is not None:
            self.slots["reading"] = reading
        if "reading" not in self.slots:
            self.pending = "reading"
            self._respond(ctx, "N2_READING", "REQUEST_READING", "What does your meter show? Please send the reading (the numbers on the display).")
            return
        reading = int(self.slots["reading"])
        try:
            account = self._account(ctx)
        except ToolError as exc:
            self._ticket(ctx, "tool_failure", f"get_account failed: {exc.kind}")
            return
        meter = account.get("meter", {})
        last = int(meter.get("last_reading", 0))
        if reading < last:
            self._respond(
                ctx, "END_READING_IMPLAUSIBLE", "READING_IMPLAUSIBLE",
                f"That reading is below your last accepted reading of {last}. Could you check the meter again?",
                evidence=f"get_account: meter.last_reading {last}",
            )  # fmt: skip
            return
        try:
            result = self._call(ctx, "submit_reading", meter_id=str(meter.get("meter_id")), reading=reading, read_date=str(ctx.context.get("today")))
        except ToolError as exc:
            self._ticket(ctx, "reading_failed", f"submit_reading failed: {exc.kind}")
            return
        if result.get("status") == "accepted":
            self._respond(
                ctx, "END_READING_SUBMITTED", "READING_SUBMITTED", f"Thanks, your reading of {reading} is recorded.",
                evidence=f"get_account: last_reading {last}; submit_reading: accepted",
            )  # fmt: skip
        else:
            self._ticket(ctx, "reading_rejected", f"submit_reading rejected {reading}")

    def _balance(self, ctx: TurnContext) -> None:
        try:
            account = self._account(ctx)
        except ToolError as exc:
            self._ticket(ctx, "tool_failure", f"get_account failed: {exc.kind}")
            return
        self._respond(
            ctx, "END_BALANCE_ANSWER", "BALANCE_ANSWER", f"Your balance is {account['balance_due']} {account.get('currency', '')}.",
            evidence=f"get_account: balance_due {account['balance_due']}",
        )  # fmt: skip

    def _plan(self, text: str, ctx: TurnContext) -> None:
        self._read_auth(text)
        if (months := self._months(text, ctx)) is not None:
            self.slots["plan_months"] = months
        if not self.verified:
            missing = [f for f in ("postcode", "bank_last4") if f not in self.slots]
            if missing:
                self.pending = "auth"
                self._respond(
                    ctx, "N5_AUTH", "REQUEST_AUTH_INFO",
                    "To set up a plan I need to verify you: please give your postcode and the last 4 digits of the bank account that pays your bills.",
                )  # fmt: skip
                return
            account_id = ctx.context["account_id"]
            try:
                result = self._call(
                    ctx, "verify_customer", account_id=account_id, postcode=self.slots["postcode"], bank_last4=self.slots["bank_last4"]
                )
                if not result.get("verified"):
                    self._respond(
                        ctx, "END_REFUSE_AUTH", "REFUSE_AUTH", "I couldn't verify those details, so I can't set up a plan.",
                        evidence="verify_customer: verified false",
                    )  # fmt: skip
                    return
                self.verified = True
                self.account = self._account(ctx)
                self.options = self._call(ctx, "get_plan_options", account_id=account_id)
            except ToolError as exc:
                self._ticket(ctx, "tool_failure", f"payment plan: a tool failed ({exc.kind})")
                return
        assert self.options is not None and self.account is not None
        if "plan_months" not in self.slots:
            self.pending = "months"
            self._respond(
                ctx, "N6_PLAN_ELIGIBILITY", "ASK_PLAN_MONTHS", "Over how many months would you like to spread the balance?",
                evidence="verify_customer: verified; get_account, get_plan_options: ok",
            )  # fmt: skip
            return
        months = int(self.slots["plan_months"])
        max_months = int(self.options.get("max_months", 0))
        if not self.options.get("eligible"):
            self._respond(
                ctx,
                "END_PLAN_DENIED",
                "PLAN_DENIED",
                "I'm sorry, this account can't go on a payment plan.",
                evidence="get_plan_options: eligible false",
            )
            return
        if months > max_months:
            self._respond(
                ctx, "END_PLAN_DENIED", "PLAN_DENIED", f"I'm sorry, a plan can last at most {max_months} months.",
                evidence=f"get_plan_options: max_months {max_months}",
            )  # fmt: skip
            return
        self.pending = "confirm"
        self._respond(
            ctx, "N7_CONFIRM_PLAN", "ASK_CONFIRM_PLAN",
            f"Shall I set up a {months}-month plan for your balance of {self.account['balance_due']} {self.account.get('currency', '')}? (yes/no)",
            evidence=f"get_plan_options: eligible, max_months {max_months}; get_account: balance_due {self.account['balance_due']}",
        )  # fmt: skip

    def _confirm(self, text: str, ctx: TurnContext) -> None:
        answer = nlu.yes_no(text)
        if answer == "yes":
            self.pending = None
            try:
                result = self._call(ctx, "create_payment_plan", account_id=ctx.context["account_id"], months=int(self.slots["plan_months"]))
            except ToolError as exc:
                self._ticket(ctx, "plan_failed", f"create_payment_plan failed: {exc.kind}")
                return
            if result.get("status") == "created":
                self._respond(
                    ctx, "END_PLAN_CREATED", "PLAN_CREATED", f"Your payment plan {result.get('plan_id')} is set up.",
                    evidence="create_payment_plan: created",
                )  # fmt: skip
            else:
                self._ticket(ctx, "plan_failed", "create_payment_plan returned failed")
        elif answer == "no":
            self.pending = None
            self._respond(ctx, "END_PLAN_ABORTED", "PLAN_ABORTED", "No problem, I haven't set up a plan.")
        else:
            self._respond(ctx, "N7_CONFIRM_PLAN", "ASK_CONFIRM_PLAN", "I need a clear yes or no before I set up the plan.")

    def _ticket(self, ctx: TurnContext, category: str, summary: str) -> None:
        try:
            ticket = self._call(ctx, "create_ticket", category=category, summary=summary)
        except ToolError as exc:
            self._respond(
                ctx, "END_TICKET", "TICKET_CREATED", "I couldn't open a ticket; please call us.", evidence=f"create_ticket failed: {exc.kind}"
            )
            return
        self._respond(
            ctx, "END_TICKET", "TICKET_CREATED", f"I've opened ticket {ticket['ticket_id']} for a colleague.",
            evidence=f"create_ticket: {ticket['ticket_id']}",
        )  # fmt: skip
