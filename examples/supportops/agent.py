"""A plain-Python SupportOps agent that follows the spec's decision tree.

It is agentprop's sparring partner: with every fault knob at 0 it passes its spec's leaf cases;
each knob injects a realistic, stochastic bug with probability P (drawn from ``ctx.rng``, so a
run is reproducible for a given case and trial). Select knobs on the command line with
``--fault NAME=P``.
"""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz.distance import DamerauLevenshtein

from agentprop import ToolError, TurnContext
from agentprop.testing import as_corrected, as_simplified, correct_typos

FAULTS: dict[str, str] = {
    "skip_auth": "skips verify_identity before account changes",
    "skip_auth_impatient": "skips verify_identity when the request sounds impatient "
    "(now, asap, hurry, !)",
    "leak_pii": "answers a direct PII request with the value from get_account",
    "leak_pii_indirect": "reveals a PII value from get_account when asked without the field's "
    "name (date of birth, mobile number)",
    "skip_confirm": "cancels without asking for confirmation",
    "ignore_plan_rules": "cancels or updates even when the plan rules forbid it",
    "wrong_order": "calls get_account before verify_identity",
    "window_off_by_one": "treats an order exactly at the cancel window as too "
    "old (>= instead of >)",
    "never_retry": "gives up on the first tool failure instead of retrying as the "
    "tool's retry_policy says",
}

ZOO_FAULTS: dict[str, str] = {
    "hedge_asks_again": "a hedged account change (if possible, maybe, I think, perhaps, when you "
    "get a chance) is taken as tentative: it asks what the user wants instead of acting",
    "filler_unclear": "a first message that opens with a filler (um, uh, er, so, well, like, hmm, "
    "oh, okay so) is read as unclear",
    "casual_skips_confirm": "with a casual user (hey, yo, thx, pls, gonna, wanna, lol) it cancels "
    "without asking for confirmation",
    "question_explains": "an address change asked as a question (can you / could you / would you "
    "..., I was wondering if you could) is explained, not done: it asks for the new address again",
    "auth_first_missed": "reads the card digits and ZIP only after the request: given before it, "
    "they are asked for again",
    "typo_unrecognised": "reads request words by their exact spelling: a misspelt one (cancle, "
    "adress) makes the request unclear",
    "moving_skips_auth": "a user who is moving (moving, relocating, new place) gets the address "
    "changed without verify_identity",
    "not_sure_is_yes": "on the confirmation turn, reads the 'sure' in 'not sure' "
    "as a yes and cancels",
    "order_id_case": "reads order ids only in capitals: a lower-case id (o-1001) is missed "
    "and it asks which order",
    "zh_trouble_ticket": "reads 麻烦 ('trouble', as in 麻烦您 / 麻烦了: 'sorry to trouble you') "
    "as a complaint and opens a ticket",
    "thanks_as_no": "on the confirmation turn, reads a thanks (thanks, thank you, thx) as 'no "
    "thanks' and keeps the order",
    "leak_dob": "answers a question about the date of birth on file (birthday, date of birth, "
    "DOB) with the value from get_account",
    "skip_auth_on_request": "skips verify_identity when the user asks it to (no need to verify "
    "me, skip the verification, don't check)",
}
"""Faults triggered by how a user writes or what a tool answers, each with a known minimal trigger:
the fault zoo of ``benchmarks/find.py`` (kept apart from the mutation knobs above)."""
FAULTS.update(ZOO_FAULTS)

_PII_WORDS = ("ssn", "social", "birth", "dob", "birthday", "email", "e-mail", "phone")
_CANCEL_WORDS = ("cancel", "cancelling", "canceling")
# a PII field asked for by what it means, not by its name (what leak_pii_indirect reacts to)
_PII_MEANINGS = {
    "ssn": re.compile(r"\bsocial security\b|\btax number\b", re.I),
    "dob": re.compile(r"\bdate of birth\b|\bbirthday\b|\bborn\b", re.I),
    "email": re.compile(r"\b(contact|receipt) address\b", re.I),
    "phone": re.compile(r"\bmobile\b|\bcontact number\b", re.I),
}
_PII_NAMES = re.compile(r"\b(ssn|dob|email|phone)\b", re.I)
_ADDRESS_WORDS = ("address", "moving", "move")
_BILLING_WORDS = (
    "bill",
    "billing",
    "plan",
    "charge",
    "invoice",
    "order",
    "orders",
    "balance",
    "subscription",
)
_IMPATIENT = re.compile(r"\b(now|asap|immediately|right away|hurry|quick(ly)?)\b|!", re.I)
# numbers end where the digits end: Chinese text runs on without a space ("邮编 94107哈")
# an id's separator may be typed as a space or left out (O 1001, O1001): read as O-1001
_ORDER_ID = re.compile(
    r"(?<![A-Za-z0-9])(?!zip\b)([A-Za-z]{1,3})(?:-| ?)(\d{3,})(?!\d)|#(\d+)", re.I
)
# the last four digits, also as copied from a receipt or an app: **** 4242, XXXX-XXXX-XXXX-4242
_LAST4 = re.compile(
    r"(?:last\s*(?:4|four)(?:\s*digits)?|ends? in|card|后四位|尾号)\D{0,24}(\d{4})(?!\d)", re.I
)
_ZIP = re.compile(r"(?:\bzip(?:\s*code)?|邮编|邮政编码)\D{0,6}(\d{5})(?!\d)", re.I)
_ADDRESS_VALUE = re.compile(r"\bto\s+(\d+[^.\-]*?,[^-]*?)(?:\s+-\s+|\.\s|$)", re.I)
_ADDRESS_VALUE_ZH = re.compile(r"新地址(?:是|为)?[:：]?\s*(\d+[^，。；]*)")
_YES = re.compile(
    r"\b(yes|yeah|yep|sure|ok(ay)?|alright|absolutely|confirm(ed)?|go ahead|go for it|do it|"
    r"proceed|definitely|sounds good|that'?s (fine|right)|fine by me|works for me|that works|"
    r"please do|looks (right|good)|perfect)\b"
    r"|是的|好的|好嘞|确认|可以|行|没问题|嗯嗯|就这样|没错",
    re.I,
)
_NO = re.compile(
    r"\b(no|nope|don'?t|stop|wait|never ?mind|changed my mind|keep (the|my) "
    r"order|rather not|let'?s not|better not|i'?ll pass|not right now|decided against|"
    r"leave it|another time|maybe later)\b|不用|不要|不需要|别取消|先别|先不|算了|不取消|不了",
    re.I,
)
_UNSURE = re.compile(
    r"\b(not (so |too |really |quite )?sure|unsure)\b|不确定|不太确定|不知道", re.I
)
_CJK_GAP = re.compile(r"(?<=[\u3400-\u9fff])\s+(?=[\u3400-\u9fff])")
"""A space typed between two Chinese characters (取 消): read through, as a person does."""
_SPACES = re.compile(r"[^\S\n]{2,}")
"""Spaces typed twice ("not  sure"): read as one, as a person does."""
# Chinese request words (the bindings declare `languages: [en, zh]`)
_ZH_INTENTS = (
    ("pii_request", ("社保", "身份证", "生日", "出生", "邮箱", "电话", "手机号")),
    ("cancel_order", ("取消", "撤销", "退订")),
    ("change_address", ("地址", "搬家")),
    ("billing_question", ("套餐", "账单", "订单", "扣费")),
)
# what the zoo's faults read (see FAULTS)
_HEDGE = re.compile(
    r"\b(if (at all )?possible|if you can|maybe|perhaps|possibly|i think|i guess|when you "
    r"(get|have) a (chance|moment|minute|sec(ond)?)|no rush)\b",
    re.I,
)
_FILLER_OPENING = re.compile(
    r"^\W*(u+m+|u+h+|e+r+m*|so|well|like|h+m+|oh|ok(ay)?,? so|anyway)\b", re.I
)
_CASUAL = re.compile(r"\b(hey|hiya|yo|thx|pls|plz|gonna|wanna|lol|btw)\b", re.I)
_QUESTION_REQUEST = re.compile(r"\b(can|could|would|will) you\b|\bwonder(ing)? if you\b", re.I)
_INTENT_WORD = re.compile(r"\b(cancel\w*|address|moving|move)\b|取消|撤销|地址|搬家", re.I)
_MOVING = re.compile(r"\b(moving|relocat\w+|new place)\b", re.I)
_THANKS = re.compile(r"\b(thanks|thank you|thx|cheers)\b|谢谢", re.I)
_BIRTH = re.compile(r"\b(birth\w*|dob)\b|生日|出生", re.I)
_SKIP_CHECK = re.compile(
    r"\b(no need to|don'?t|do not|skip|without|no) (verify\w*|check\w*|the verification|the "
    r"check|verification)\b",
    re.I,
)
# words the agent reads by: a one-letter slip in one of them is still that word
_AS_WRITTEN = frozenset({"for", "fur", "far", "now", "not", "off", "her", "him", "one"})
"""Short words a slip-reader would take for a longer word of the vocabulary ("go for it" is
not "go four it"): read as written."""


def _read_slips(text: str) -> str:
    """``text`` with each slipped word read as the vocabulary word it is one slip from, except
    the ordinary words of :data:`_AS_WRITTEN`."""
    return re.sub(
        r"[A-Za-z]+",
        lambda m: (
            m.group() if m.group().lower() in _AS_WRITTEN else correct_typos(m.group(), _VOCABULARY)
        ),
        text,
    )


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
    # the words people say yes and no with, read as they are
    "sure",
    "fine",
    "works",
    "sounds",
    "good",
    "okay",
    "alright",
    "perfect",
    "rather",
    "pass",
    "leave",
    "better",
    "decided",
    "against",
    "another",
    "time",
    "later",
    "right",
)


def _has_word(words: list[str], targets: tuple[str, ...]) -> bool:
    """Whether a word of the message is one of ``targets``, allowing one typo (a keyboard
    slip or a transposition) in words of five letters or more, as a person reading would."""
    for w in words:
        for t in targets:
            if w == t or (len(t) >= 5 and len(w) >= 4 and DamerauLevenshtein.distance(w, t) <= 1):
                return True
    return False


_NEGATED = re.compile(
    r"(?:\b(?:i\s+)?(?:don'?t|do not)\s+want\s+to|\b(?:i'?m\s+|i am\s+)?not\s+(?:trying|looking|"
    r"asking|here)\s+to)(?:(?!\s[-\u2013\u2014]\s|\s(?:please|kindly|but|just|can\s+you|could\s+you|"
    r"i\s+(?:want|need|would)|i'd)\b)[^.,;:!?\u3002\uff0c\uff1b\uff1a\uff01\uff1f])*"
    r"|(?:不是要|不想|不打算|不是)[^，。；！？,.;!?]{0,10}?(?:[啊呀的]|[，。；！？,.;!?]|(?=请|我要|我想|帮我)|$)",
    re.I,
)
"""A clause that says what the user does NOT want ("I don't want to change my address", 我不是要
取消订单): not the request (the spec's N1_INTENT reads a negated request as not that request). It
ends at a mark, where the request starts, a comma left out ("I'm not trying to change my
address please cancel my order"), or where the message ends without its mark
(...我不打算取消订单)."""


_NEGATION_WORDS = ("don't", "want", "trying", "looking", "asking")


def _read_negation_words(message: str) -> str:
    """``message`` with a one-letter slip in a word of a negation ("I don't wantt to ...") read
    through, as a person does."""

    def fix(m: re.Match[str]) -> str:
        w = m.group()
        for t in _NEGATION_WORDS:
            if w.lower() != t and len(w) >= 4 and DamerauLevenshtein.distance(w.lower(), t) <= 1:
                return t
        return w

    return re.sub(r"[A-Za-z']+", fix, message)


_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s*")


def asks_pii(sentence: str) -> bool:
    """Whether ``sentence`` asks about the user's personal data, by a field's name or meaning."""
    return _classify(sentence) == "pii_request" or any(
        p.search(sentence) for p in _PII_MEANINGS.values()
    )


def side_pii(message: str) -> bool:
    """Whether ``message`` asks about personal data beside a request of another kind ("Cancel
    order O-1001. And what phone number do you have for me?"): the request is served, the side
    question refused."""
    sentences = [s for s in _SENTENCE_END.split(message) if s.strip()]
    main = [s for s in sentences if not asks_pii(s)]
    return len(main) < len(sentences) and bool(main) and _classify(" ".join(main)) != "unknown"


def classify(message: str, *, exact: bool = False) -> str:
    """The request's intent, read past what the user says they do not want and past a side
    question about personal data (:func:`side_pii`); ``exact`` reads words only by their exact
    spelling (the ``typo_unrecognised`` fault)."""
    if side_pii(message):
        sentences = [s for s in _SENTENCE_END.split(message) if s.strip()]
        return _classify(" ".join(s for s in sentences if not asks_pii(s)), exact=exact)
    return _classify(message, exact=exact)


def _classify(message: str, *, exact: bool = False) -> str:
    message = _NEGATED.sub(" ", _read_negation_words(message))
    words = re.findall(r"[a-z][a-z-]*", message.lower())

    def has(targets: tuple[str, ...]) -> bool:
        return any(w in targets for w in words) if exact else _has_word(words, targets)

    for intent, targets in (
        ("pii_request", _PII_WORDS),
        ("cancel_order", _CANCEL_WORDS),
        ("change_address", _ADDRESS_WORDS),
        ("billing_question", _BILLING_WORDS),
    ):
        if has(targets) or any(w in message for w in dict(_ZH_INTENTS)[intent]):
            return intent
    return "unknown"


def _parse_address(text: str) -> dict[str, str]:
    parts = [p.strip() for p in text.split(",")]
    while len(parts) < 4:
        parts.append("")
    return {
        "line1": parts[0],
        "city": parts[1],
        "postal_code": parts[2],
        "country": parts[3] or "US",
    }


class SupportOpsAgent:
    """One instance per conversation; state carried between turns lives on the instance."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.pending: str | None = None
        """What the agent asked for: "confirm_cancel", "clarify", "auth", "order_id" or
        "new_address" (a detail the request left out)."""
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
        if attempts > 1 and self._fault("never_retry", ctx):
            attempts = 1
        for attempt in range(attempts):
            try:
                return ctx.call(tool, **args)
            except ToolError as exc:
                retryable = policy is not None and exc.kind in policy.on
                if not retryable or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _respond(
        self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str = ""
    ) -> None:
        if decision != "REFUSE_PII" and side_pii(self.message):
            message += (
                " As for your personal details: I can't share SSN, date of birth, email or "
                "phone here."
            )
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
            order_id = f"{m.group(1)}-{m.group(2)}" if m.group(1) else m.group(3)
            if not (order_id != order_id.upper() and self._fault("order_id_case", ctx)):
                self.slots["order_id"] = order_id.upper()
        last4, zip_code = _LAST4.search(message), _ZIP.search(message)
        intent_word = _INTENT_WORD.search(message)
        auth_first = intent_word is not None and any(
            m is not None and m.start() < intent_word.start() for m in (last4, zip_code)
        )
        if not (auth_first and self.pending is None and self._fault("auth_first_missed", ctx)):
            if last4:
                self.slots["last4"] = last4.group(1)
            if zip_code:
                self.slots["zip"] = zip_code.group(1)
        if m := (_ADDRESS_VALUE.search(message) or _ADDRESS_VALUE_ZH.search(message)):
            self.slots["new_address"] = m.group(1).strip()
        if self.pending == "auth":
            # the answer to "the last 4 digits of your card and your ZIP code", bare: "94107, 4242"
            for digits in re.findall(r"(?<!\d)(\d{4}|\d{5})(?!\d)", message):
                self.slots.setdefault("last4" if len(digits) == 4 else "zip", digits)
        elif self.pending == "new_address" and "new_address" not in self.slots:
            # the answer to "tell me the new address", bare: "12 Oak St, Springfield, 62704, US"
            answer = re.sub(r"^\s*(?:to|it's|it is)\s+", "", message.strip(), flags=re.I)
            if re.match(r"\d+\s+\S", answer) and "," in answer:
                self.slots["new_address"] = answer.rstrip(" .")

    # -------------------------------------------------------------- the turn

    def turn(self, message: str, ctx: TurnContext) -> None:
        as_typed = message
        message = _CJK_GAP.sub(
            "", _read_slips(_SPACES.sub(" ", as_corrected(as_simplified(message))))
        )
        self.message = message
        self._remember_slots(message, ctx)
        asked = [f for f, pattern in _PII_MEANINGS.items() if pattern.search(message)]
        if asked and not _PII_NAMES.search(message) and self._fault("leak_pii_indirect", ctx):
            account = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
            value = account.get("pii", {}).get(asked[0])
            self._respond(
                ctx,
                "END_REFUSE_PII",
                "REFUSE_PII",
                f"Sure, what we have on file is {value}.",
                evidence="get_account: pii",
            )
            return
        if self.pending == "confirm_cancel":
            self._confirm(message, ctx)
            return
        if self.pending is None and "麻烦" in message and self._fault("zh_trouble_ticket", ctx):
            self._ticket(ctx, "complaint", f"Customer complaint: {message[:80]}")
            return
        if self.pending == "clarify":
            self.pending = None
            intent = classify(message)
            if intent == "unknown":
                self._ticket(
                    ctx,
                    "unclear_request",
                    f"User request unclear after one clarification: {message[:80]}",
                )
                return
        elif self.pending in ("auth", "order_id", "new_address") and self.intent is not None:
            # the answer to what the agent asked for: the request it completes goes on
            intent = self.intent
            self.pending = None
        else:
            intent = classify(message)
            if (
                intent != "unknown"
                and _FILLER_OPENING.search(message)
                and self._fault("filler_unclear", ctx)
            ):
                intent = "unknown"
            elif classify(as_typed, exact=True) != intent and self._fault("typo_unrecognised", ctx):
                intent = classify(as_typed, exact=True)
        self.intent = intent
        if intent == "pii_request":
            self._pii(message, ctx)
        elif intent == "billing_question":
            self._billing(ctx)
        elif intent == "unknown":
            self.pending = "clarify"
            self._respond(
                ctx,
                "N4_CLARIFY",
                "CLARIFY",
                "Could you tell me a bit more about what you need: an order, your "
                "address, or billing?",
            )
        else:
            self._account_change(intent, message, ctx)

    def _pii(self, message: str, ctx: TurnContext) -> None:
        if _BIRTH.search(message) and self._fault("leak_dob", ctx):
            account = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
            self._respond(
                ctx,
                "END_REFUSE_PII",
                "REFUSE_PII",
                f"The date of birth on file is {account.get('pii', {}).get('dob')}.",
            )
            return
        if self._fault("leak_pii", ctx):
            account = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
            pii = account.get("pii", {})
            self._respond(
                ctx,
                "END_REFUSE_PII",
                "REFUSE_PII",
                f"Here is what we have on file: SSN {pii.get('ssn')}, email {pii.get('email')}.",
            )
            return
        self._respond(
            ctx,
            "END_REFUSE_PII",
            "REFUSE_PII",
            "I can't share personal identifying information such as SSN, date of birth, email or "
            "phone. I can help with orders, billing or your address instead.",
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
            evidence=f"get_account: plan {account['plan_id']}, "
            f"{len(account.get('orders', []))} order(s)",
        )

    def _account_change(self, intent: str, message: str, ctx: TurnContext) -> None:
        if _HEDGE.search(message) and self._fault("hedge_asks_again", ctx):
            self.pending = "clarify"
            self._respond(
                ctx, "N4_CLARIFY", "CLARIFY", "Just to be sure: what would you like me to do?"
            )
            return
        if "last4" not in self.slots or "zip" not in self.slots:
            self.pending = "auth"
            self._respond(
                ctx,
                "N2_AUTH",
                "REQUEST_AUTH_INFO",
                "To make changes I need to verify you: please give the last 4 digits of your card "
                "and your billing ZIP code.",
            )
            return
        account_id = ctx.context["account_id"]
        skip_auth = (
            self._fault("skip_auth", ctx)
            or (_IMPATIENT.search(message) is not None and self._fault("skip_auth_impatient", ctx))
            or (
                intent == "change_address"
                and _MOVING.search(message) is not None
                and self._fault("moving_skips_auth", ctx)
            )
            or (
                _SKIP_CHECK.search(message) is not None and self._fault("skip_auth_on_request", ctx)
            )
        )
        try:
            if self._fault("wrong_order", ctx):
                account = self._call(ctx, "get_account", account_id=account_id)
                if not skip_auth:
                    verified = self._call(
                        ctx,
                        "verify_identity",
                        account_id=account_id,
                        last4=self.slots["last4"],
                        zip=self.slots["zip"],
                    )
                    if not verified.get("verified"):
                        self._refuse_auth(ctx)
                        return
            else:
                if not skip_auth:
                    verified = self._call(
                        ctx,
                        "verify_identity",
                        account_id=account_id,
                        last4=self.slots["last4"],
                        zip=self.slots["zip"],
                    )
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
            "I couldn't verify your identity, so I can't make changes. I can open "
            "a ticket if you like.",
            evidence="verify_identity: verified false",
        )

    @staticmethod
    def _checked(ctx: TurnContext) -> str:
        """Evidence for a turn that ran its checks (every one succeeded, or it would have
        opened a ticket) and then stops to ask for what the user left out."""
        names = list(dict.fromkeys(c.name for c in ctx.calls_this_turn))
        return f"{', '.join(names)}: ok" if names else "no tool output needed"

    def _cancel_eligibility(
        self, account: dict[str, Any], rules: dict[str, Any], ctx: TurnContext
    ) -> None:
        order_id = self.slots.get("order_id")
        if not order_id:
            self.pending = "order_id"
            self._respond(
                ctx,
                "N5_CANCEL_ELIGIBILITY",
                "CLARIFY",
                "Which order would you like to cancel? Please give the order number.",
                evidence=self._checked(ctx),
            )
            return
        order = next((o for o in account.get("orders", []) if o.get("order_id") == order_id), None)
        ignore = self._fault("ignore_plan_rules", ctx)
        if not ignore:
            if not rules.get("can_cancel"):
                self._respond(
                    ctx,
                    "END_CANCEL_DENIED",
                    "CANCEL_DENIED",
                    "Your plan does not allow cancelling orders. I can open a ticket "
                    "if you need more help.",
                    evidence="get_plan_rules: can_cancel false",
                )
                return
            days = (order or {}).get("days_since_created")
            window = rules.get("cancel_window_days")
            if days is not None and window is not None:
                too_old = days >= window if self._fault("window_off_by_one", ctx) else days > window
                if too_old:
                    self._respond(
                        ctx,
                        "END_CANCEL_DENIED",
                        "CANCEL_DENIED",
                        f"Order {order_id} is {days} days old, past the {window}-day "
                        "cancellation window.",
                        evidence=f"get_account: {days} days; get_plan_rules: window {window}",
                    )
                    return
        self.slots["order_id"] = order_id
        if self._fault("skip_confirm", ctx) or (
            _CASUAL.search(self.message) is not None and self._fault("casual_skips_confirm", ctx)
        ):
            self._do_cancel(ctx)
            return
        self.pending = "confirm_cancel"
        self._respond(
            ctx,
            "N6_CONFIRM_CANCEL",
            "ASK_CONFIRM_CANCEL",
            f"Please confirm: do you want me to cancel order {order_id}? (yes/no)",
            evidence="plan allows cancellation; order within window",
        )

    def _confirm(self, message: str, ctx: TurnContext) -> None:
        # a "no" anywhere wins: "yes... actually no" must not cancel; "not sure" is neither
        unsure = _UNSURE.search(message) is not None
        if unsure and self._fault("not_sure_is_yes", ctx):
            self.pending = None
            self._do_cancel(ctx)
        elif (
            _THANKS.search(message) and not _NO.search(message) and self._fault("thanks_as_no", ctx)
        ):
            self.pending = None
            self._respond(
                ctx,
                "END_CANCEL_ABORTED",
                "CANCEL_ABORTED",
                f"No problem, I have not cancelled order {self.slots.get('order_id')}.",
            )
        elif unsure:
            self._respond(
                ctx,
                "N6_CONFIRM_CANCEL",
                "ASK_CONFIRM_CANCEL",
                "I need a clear yes or no to proceed with the cancellation.",
            )
        elif _NO.search(message):
            self.pending = None
            self._respond(
                ctx,
                "END_CANCEL_ABORTED",
                "CANCEL_ABORTED",
                f"Okay, I have not cancelled order {self.slots.get('order_id')}.",
            )
        elif _YES.search(message):
            self.pending = None
            self._do_cancel(ctx)
        else:
            self._respond(
                ctx,
                "N6_CONFIRM_CANCEL",
                "ASK_CONFIRM_CANCEL",
                "I need a clear yes or no to proceed with the cancellation.",
            )

    def _do_cancel(self, ctx: TurnContext) -> None:
        order_id = self.slots["order_id"]
        try:
            result = self._call(ctx, "cancel_order", order_id=order_id)
        except ToolError as exc:
            self._ticket(ctx, "cancel_failed", f"cancel_order {order_id} failed: {exc.kind}")
            return
        if result.get("status") == "canceled":
            self._respond(
                ctx,
                "END_CANCELLED",
                "CANCELLED",
                f"Order {order_id} has been cancelled.",
                evidence="cancel_order: canceled",
            )
        else:
            self._ticket(
                ctx, "cancel_failed", f"cancel_order {order_id} returned {result.get('status')}"
            )

    def _address(self, account_id: str, rules: dict[str, Any], ctx: TurnContext) -> None:
        if (
            "new_address" in self.slots
            and _QUESTION_REQUEST.search(self.message)
            and self._fault("question_explains", ctx)
        ):
            self._respond(
                ctx,
                "N8_ADDRESS_ELIGIBILITY",
                "ADDRESS_REQUEST_DETAILS",
                "Yes, you can change it: tell me the new address (street, city, postal code, "
                "country) and I'll update it.",
                evidence=self._checked(ctx),
            )
            return
        if "new_address" not in self.slots:
            self.pending = "new_address"
            self._respond(
                ctx,
                "N8_ADDRESS_ELIGIBILITY",
                "ADDRESS_REQUEST_DETAILS",
                "What is the new address (street, city, postal code, country)?",
                evidence=self._checked(ctx),
            )
            return
        if not rules.get("address_change_allowed") and not self._fault("ignore_plan_rules", ctx):
            self._respond(
                ctx,
                "END_ADDRESS_DENIED",
                "ADDRESS_DENIED",
                "Your plan does not allow address changes. I can open a ticket if you need help.",
                evidence="get_plan_rules: address_change_allowed false",
            )
            return
        try:
            result = self._call(
                ctx,
                "update_address",
                account_id=account_id,
                new_address=_parse_address(self.slots["new_address"]),
            )
        except ToolError as exc:
            self._ticket(ctx, "address_failed", f"update_address failed: {exc.kind}")
            return
        if result.get("status") == "updated":
            self._respond(
                ctx,
                "END_ADDRESS_UPDATED",
                "ADDRESS_UPDATED",
                "Your shipping address has been updated.",
                evidence="update_address: updated",
            )
        else:
            self._ticket(ctx, "address_failed", f"update_address returned {result.get('status')}")
