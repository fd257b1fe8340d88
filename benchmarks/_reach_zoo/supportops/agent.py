"""A plain-Python SupportOps agent that follows the spec's decision tree.

A copy of examples/supportops/agent.py for agentprop's blind reach zoo (issue 24): the example's
fault knobs are removed and replaced by the zoo's own (``FAULTS``), and its reading is made
robust to ordinary phrasing (negated requests, polite refusals, masked card numbers,
traditional Chinese, full-width digits) with the zoo's ``reachnlu`` helpers.

It is agentprop's sparring partner: with every fault knob at 0 it passes its spec's leaf cases;
each knob injects a realistic, stochastic bug with probability P (drawn from ``ctx.rng``, so a
run is reproducible for a given case and trial). Select knobs on the command line with
``--fault NAME=P``.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

from rapidfuzz.distance import DamerauLevenshtein

from agentprop import ToolError, TurnContext
from agentprop.testing import correct_typos

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
nlu: Any = importlib.import_module("reachnlu")

FAULTS: dict[str, str] = {
    "masked_card": "reads the card's last 4 digits only when written plainly: a masked number (****4242, xxxx-xxxx-4242) is asked for again",
    "negated_intent": "routes by the first request word even when it is negated (I don't want to cancel, just change my address)",
    "story_first_sentence": "reads the request from the first sentence only: a message that opens with an unrelated story is unclear",
    "polite_refusal_cancels": "on the confirmation turn, reads a refusal without a 'no' word (I'd rather not, I'll pass, let's leave it, 算了) as consent",
    "contact_question_leak": "asked where updates or confirmations are sent (which email will the confirmation go to?) reads out the email/phone",
    "shouting_to_ticket": "a message written in capitals (PLEASE CANCEL MY ORDER) is taken as a complaint and handed to a ticket",
}

_PII_WORDS = ("ssn", "social", "birth", "dob", "birthday", "email", "e-mail", "phone")
_CANCEL_WORDS = ("cancel", "cancelling", "canceling")
_ADDRESS_WORDS = ("address", "moving", "move")
_BILLING_WORDS = ("bill", "billing", "plan", "charge", "invoice", "order", "orders", "balance", "subscription")
# numbers end where the digits end: Chinese text runs on without a space ("邮编 94107哈")
_ORDER_ID = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{1,3}-\d{3,})(?!\d)|#(\d+)")
_LAST4 = re.compile(r"(?:last\s*(?:4|four)(?:\s*digits)?|ends? in|ending(?: in)?|card|后四位|尾号)(\D{0,24}?)(\d{4})(?!\d)", re.I)
_ZIP = re.compile(r"(?:\bzip(?:\s*code)?|postcode|postal code|邮编|邮政编码)\D{0,6}(\d{5})(?![0-9])", re.I)
_ADDRESS_VALUE = re.compile(r"\bto\s+(\d+[^.\-]*?,[^-]*?)(?:\s+-\s+|\.\s|$)", re.I)
_ADDRESS_VALUE_ZH = re.compile(r"新地址(?:是|为)?[:：]?\s*(\d+[^，。；]*)")
_CJK_GAP = re.compile(r"(?<=[\u3400-\u9fff])\s+(?=[\u3400-\u9fff])")
"""A space typed between two Chinese characters (取 消): read through, as a person does."""
# Chinese request words (the bindings declare `languages: [en, zh]`)
_ZH_INTENTS = (
    ("pii_request", ("社保", "身份证", "生日", "出生", "邮箱", "电话", "手机号")),
    ("cancel_order", ("取消", "撤销", "退订")),
    ("change_address", ("地址", "搬家")),
    ("billing_question", ("套餐", "账单", "订单", "扣费")),
)
_MASK = re.compile(r"[*xX•#]{2,}")
_PLAIN_NO = re.compile(r"\b(no|nope|nah|don'?t|do not)\b|不要|不用|别|不取消", re.I)
_SENT_TO = re.compile(r"\b(send|sent|go(es)? to|goes|receive|get|notif\w*|updates?|confirmation|reach)\b|发到|发送|收到|通知|联系", re.I)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
# words the agent reads by: a one-letter slip in one of them is still that word
_VOCABULARY = (
    *_PII_WORDS,
    *_CANCEL_WORDS,
    *_ADDRESS_WORDS,
    *_BILLING_WORDS,
    "last",
    "four",
    "digits",
    "card",
    "please",
    "order",
    "update",
    "change",
    "shipping",
    "mind",
    "changed",
    "keep",
    "ahead",
    "confirm",
)


def _has_word(words: list[str], targets: tuple[str, ...]) -> bool:
    """Whether a word of the message is one of ``targets``, allowing one typo (a keyboard
    slip or a transposition) in words of five letters or more, as a person reading would."""
    for w in words:
        for t in targets:
            if w == t or (len(t) >= 5 and len(w) >= 4 and DamerauLevenshtein.distance(w, t) <= 1):
                return True
    return False


def classify(message: str, *, negation: bool = True) -> str:
    """The request's intent: the first of pii_request, cancel_order, change_address,
    billing_question whose word appears, not negated ("I don't want to cancel, just ..."),
    allowing one typo in longer words. ``negation`` False reads negated words too (a fault)."""
    low = message.lower()
    for intent, targets in (
        ("pii_request", _PII_WORDS),
        ("cancel_order", _CANCEL_WORDS),
        ("change_address", _ADDRESS_WORDS),
        ("billing_question", _BILLING_WORDS),
    ):
        for m in re.finditer(r"[a-z][a-z-]*", low):
            if _has_word([m.group()], targets) and not (negation and nlu.negated_at(low, m.start())):
                return intent
        for word in dict(_ZH_INTENTS)[intent]:
            for m in re.finditer(re.escape(word), message):
                if not (negation and nlu.negated_at(message, m.start())):
                    return intent
    return "unknown"


def _parse_address(text: str) -> dict[str, str]:
    parts = [p.strip() for p in text.split(",")]
    while len(parts) < 4:
        parts.append("")
    return {"line1": parts[0], "city": parts[1], "postal_code": parts[2], "country": parts[3] or "US"}


class SupportOpsAgent:
    """One instance per conversation; state carried between turns lives on the instance."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.pending: str | None = None  # "confirm_cancel", "clarify" or "auth"
        self.slots: dict[str, str] = {}
        self.intent: str | None = None
        self.message = ""
        """The message of the turn being handled."""

    # -------------------------------------------------------------- helpers

    def _fault(self, name: str, ctx: TurnContext) -> bool:
        p = self.faults.get(name, 0.0)
        return p > 0 and ctx.rng.random() < p

    def _call(self, ctx: TurnContext, tool: str, **args: Any) -> Any:
        """Call a tool, retrying once on timeout or rate limit as the spec's retry_policy says."""
        policy = ctx.spec.tool(tool).retry_policy
        attempts = 1 + (policy.retries if policy else 0)
        for attempt in range(attempts):
            try:
                return ctx.call(tool, **args)
            except ToolError as exc:
                retryable = policy is not None and exc.kind in policy.on
                if not retryable or attempt == attempts - 1:
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

    def _ticket(self, ctx: TurnContext, category: str, summary: str) -> None:
        try:
            ticket = self._call(ctx, "create_ticket", category=category, summary=summary)
        except ToolError as exc:
            self._respond(
                ctx,
                "END_TICKET",
                "TICKET_CREATED",
                "I could not complete this and could not open a ticket; please contact support.",
                evidence=f"create_ticket failed: {exc.kind}",
            )
            return
        self._respond(
            ctx,
            "END_TICKET",
            "TICKET_CREATED",
            f"I've opened ticket {ticket['ticket_id']} so a colleague can help you.",
            evidence=f"create_ticket returned {ticket['ticket_id']}",
        )

    def _remember_slots(self, message: str, ctx: TurnContext) -> None:
        if m := _ORDER_ID.search(message):
            self.slots["order_id"] = (m.group(1) or m.group(2)).upper()
        elif m := re.search(r"(?<![A-Za-z0-9])(O)\s?(\d{3,})(?![0-9])", message, re.I):
            self.slots["order_id"] = f"O-{m.group(2)}"  # O1001, o 1001
        last4, zip_code = _LAST4.search(message), _ZIP.search(message)
        if last4 and not (_MASK.search(last4.group(1)) and self._fault("masked_card", ctx)):
            self.slots["last4"] = last4.group(2)
        if zip_code:
            self.slots["zip"] = zip_code.group(1)
        if m := (_ADDRESS_VALUE.search(message) or _ADDRESS_VALUE_ZH.search(message)):
            self.slots["new_address"] = m.group(1).strip()

    # -------------------------------------------------------------- the turn

    def turn(self, message: str, ctx: TurnContext) -> None:
        as_typed = nlu.normalise(message)
        message = _CJK_GAP.sub("", correct_typos(as_typed, _VOCABULARY))
        self.message = message
        self._remember_slots(message, ctx)
        if self.pending == "confirm_cancel":
            self._confirm(as_typed, ctx)  # a yes/no is read as typed ("go for it" is no typo of "four")
            return
        letters = [c for c in message if c.isascii() and c.isalpha()]
        shouting = len(letters) >= 12 and sum(c.isupper() for c in letters) >= 0.8 * len(letters)
        if self.pending is None and shouting and self._fault("shouting_to_ticket", ctx):
            self._ticket(ctx, "complaint", f"Angry customer: {message[:80]}")
            return
        if self.pending == "clarify":
            self.pending = None
            intent = classify(message)
            if intent == "unknown":
                self._ticket(ctx, "unclear_request", f"User request unclear after one clarification: {message[:80]}")
                return
        elif self.pending == "auth" and self.intent is not None and classify(message) in ("unknown", self.intent):
            intent = self.intent
            self.pending = None
        else:
            self.pending = None
            intent = classify(message)
            negation_blind = classify(message, negation=False)
            if negation_blind != intent and self._fault("negated_intent", ctx):
                intent = negation_blind
            sentences = [p for p in _SENTENCE.split(message) if p.strip()]
            if len(sentences) > 1 and classify(sentences[0]) == "unknown" and intent != "unknown" and self._fault("story_first_sentence", ctx):
                intent = "unknown"
        self.intent = intent
        if intent == "pii_request":
            self._pii(message, ctx)
        elif intent == "billing_question":
            self._billing(ctx)
        elif intent == "unknown":
            self.pending = "clarify"
            self._respond(ctx, "N4_CLARIFY", "CLARIFY", "Could you tell me a bit more about what you need: an order, your address, or billing?")
        else:
            self._account_change(intent, message, ctx)

    def _pii(self, message: str, ctx: TurnContext) -> None:
        if _SENT_TO.search(message) and self._fault("contact_question_leak", ctx):
            account = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
            pii = account.get("pii", {})
            self._respond(ctx, "END_REFUSE_PII", "REFUSE_PII", f"Updates go to {pii.get('email')} and texts to {pii.get('phone')}.")
            return
        self._respond(
            ctx,
            "END_REFUSE_PII",
            "REFUSE_PII",
            "I can't share personal identifying information such as SSN, date of birth, email or phone. "
            "I can help with orders, billing or your address instead.",
        )

    def _billing(self, ctx: TurnContext) -> None:
        try:
            account = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
        except ToolError as exc:
            self._ticket(ctx, "tool_failure", f"get_account failed: {exc.kind}")
            return
        orders = ", ".join(f"{o['order_id']} is {o['status']}" for o in account.get("orders", []))
        self._respond(
            ctx,
            "END_BILLING_ANSWER",
            "BILLING_ANSWER",
            f"You are on plan {account['plan_id']}. Your orders: {orders or 'none'}.",
            evidence=f"get_account: plan {account['plan_id']}, {len(account.get('orders', []))} order(s)",
        )

    def _account_change(self, intent: str, message: str, ctx: TurnContext) -> None:
        if "last4" not in self.slots or "zip" not in self.slots:
            self.pending = "auth"
            self._respond(
                ctx,
                "N2_AUTH",
                "REQUEST_AUTH_INFO",
                "To make changes I need to verify you: please give the last 4 digits of your card and your billing ZIP code.",
            )
            return
        account_id = ctx.context["account_id"]
        try:
            verified = self._call(ctx, "verify_identity", account_id=account_id, last4=self.slots["last4"], zip=self.slots["zip"])
            if not verified.get("verified"):
                self._refuse_auth(ctx)
                return
            account = self._call(ctx, "get_account", account_id=account_id)
            rules = self._call(ctx, "get_plan_rules", plan_id=account["plan_id"])
        except ToolError as exc:
            self._ticket(ctx, "tool_failure", f"{intent}: a tool failed ({exc.kind})")
            return
        if intent == "cancel_order":
            self._cancel_eligibility(account, rules, ctx)
        else:
            self._address(account_id, rules, ctx)

    def _refuse_auth(self, ctx: TurnContext) -> None:
        self._respond(
            ctx,
            "END_REFUSE_AUTH",
            "REFUSE_AUTH",
            "I couldn't verify your identity, so I can't make changes. I can open a ticket if you like.",
            evidence="verify_identity: verified false",
        )

    @staticmethod
    def _checked(ctx: TurnContext) -> str:
        """Evidence for a turn that ran its checks (every one succeeded, or it would have
        opened a ticket) and then stops to ask for what the user left out."""
        names = list(dict.fromkeys(c.name for c in ctx.calls_this_turn))
        return f"{', '.join(names)}: ok" if names else "no tool output needed"

    def _cancel_eligibility(self, account: dict[str, Any], rules: dict[str, Any], ctx: TurnContext) -> None:
        order_id = self.slots.get("order_id")
        if not order_id:
            self._respond(
                ctx,
                "N5_CANCEL_ELIGIBILITY",
                "CLARIFY",
                "Which order would you like to cancel? Please give the order number.",
                evidence=self._checked(ctx),
            )
            return
        order = next((o for o in account.get("orders", []) if o.get("order_id") == order_id), None)
        if not rules.get("can_cancel"):
            self._respond(
                ctx,
                "END_CANCEL_DENIED",
                "CANCEL_DENIED",
                "Your plan does not allow cancelling orders. I can open a ticket if you need more help.",
                evidence="get_plan_rules: can_cancel false",
            )
            return
        days = (order or {}).get("days_since_created")
        window = rules.get("cancel_window_days")
        if days is not None and window is not None:
            too_old = days > window
            if too_old:
                self._respond(
                    ctx,
                    "END_CANCEL_DENIED",
                    "CANCEL_DENIED",
                    f"Order {order_id} is {days} days old, past the {window}-day cancellation window.",
                    evidence=f"get_account: {days} days; get_plan_rules: window {window}",
                )
                return
        self.slots["order_id"] = order_id
        self.pending = "confirm_cancel"
        self._respond(
            ctx,
            "N6_CONFIRM_CANCEL",
            "ASK_CONFIRM_CANCEL",
            f"Please confirm: do you want me to cancel order {order_id}? (yes/no)",
            evidence="plan allows cancellation; order within window",
        )

    def _confirm(self, message: str, ctx: TurnContext) -> None:
        # a no anywhere wins ("yes... actually no"); "not sure" and questions are neither
        answer = nlu.yes_no(message)
        if answer == "no" and not _PLAIN_NO.search(message) and self._fault("polite_refusal_cancels", ctx):
            answer = "yes"
        if answer == "no":
            self.pending = None
            self._respond(ctx, "END_CANCEL_ABORTED", "CANCEL_ABORTED", f"Okay, I have not cancelled order {self.slots.get('order_id')}.")
        elif answer == "yes":
            self.pending = None
            self._do_cancel(ctx)
        else:
            self._respond(ctx, "N6_CONFIRM_CANCEL", "ASK_CONFIRM_CANCEL", "I need a clear yes or no to proceed with the cancellation.")

    def _do_cancel(self, ctx: TurnContext) -> None:
        order_id = self.slots["order_id"]
        try:
            result = self._call(ctx, "cancel_order", order_id=order_id)
        except ToolError as exc:
            self._ticket(ctx, "cancel_failed", f"cancel_order {order_id} failed: {exc.kind}")
            return
        if result.get("status") == "canceled":
            self._respond(ctx, "END_CANCELLED", "CANCELLED", f"Order {order_id} has been cancelled.", evidence="cancel_order: canceled")
        else:
            self._ticket(ctx, "cancel_failed", f"cancel_order {order_id} returned {result.get('status')}")

    def _address(self, account_id: str, rules: dict[str, Any], ctx: TurnContext) -> None:
        if "new_address" not in self.slots:
            self._respond(
                ctx,
                "N8_ADDRESS_ELIGIBILITY",
                "ADDRESS_REQUEST_DETAILS",
                "What is the new address (street, city, postal code, country)?",
                evidence=self._checked(ctx),
            )
            return
        if not rules.get("address_change_allowed"):
            self._respond(
                ctx,
                "END_ADDRESS_DENIED",
                "ADDRESS_DENIED",
                "Your plan does not allow address changes. I can open a ticket if you need help.",
                evidence="get_plan_rules: address_change_allowed false",
            )
            return
        try:
            result = self._call(ctx, "update_address", account_id=account_id, new_address=_parse_address(self.slots["new_address"]))
        except ToolError as exc:
            self._ticket(ctx, "address_failed", f"update_address failed: {exc.kind}")
            return
        if result.get("status") == "updated":
            self._respond(
                ctx, "END_ADDRESS_UPDATED", "ADDRESS_UPDATED", "Your shipping address has been updated.", evidence="update_address: updated"
            )
        else:
            self._ticket(ctx, "address_failed", f"update_address returned {result.get('status')}")
