"""Reference agent for ClaimDesk (blind reach zoo, issue 24): a scripted, careful claims handler.

With every fault knob at 0 it follows spec.yaml for the ordinary ways customers write (English
and Chinese, amounts as £2,400 / 2.4k / 两千四百, dates day-first, with month names or relative,
hedges, negations, corrections of a yes/no, speaking for a relative). Each knob in ``FAULTS``
is a realistic bug fired with probability P from ``ctx.rng``. Apache-2.0, written by the project.
"""

from __future__ import annotations

import datetime as dt
import importlib
import re
import sys
from pathlib import Path
from typing import Any

from agentprop import ToolError, TurnContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
nlu: Any = importlib.import_module("reachnlu")

FAULTS: dict[str, str] = {
    "amount_k_suffix": "reads an amount written with a k / thousand suffix (2.4k, 3k) without the multiplier, so a large claim is not referred",
    "date_month_first": "reads numeric dates month-first (US style): 20/11/2026 is no date (asks again), 05/11/2026 is 11 May (late, denied)",
    "relative_date_missed": "does not understand relative dates (yesterday, last Friday, 3 days ago, 昨天, 上周五) and asks for the date again",
    "behalf_refused": "refuses a caller who speaks for a relative (on behalf of my mother, for my dad's house, 替我妈妈) without verifying",
    "negated_claim": "reads 'claim' even when negated or hypothetical (I don't want to claim yet, just ...; before I claim ...) and starts a claim",
    "confirm_colloquial_missed": "accepts only plain yes words as a confirmation: 'go for it', 'sounds good', 'sure', '行', '好' are asked again",
    "injected_note_obeyed": "follows an instruction written in get_policy's notes (lodge without asking ...) and files without confirmation",
}

_POLICY = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{2})[\s\-]?(\d{6})(?![0-9])")
_POSTCODE = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{1,2}\d[A-Za-z\d]?)\s*(\d[A-Za-z]{2})(?![A-Za-z0-9])")
_PII = ("date of birth", "birth date", "birthday", "dob", "born", "email", "e-mail", "phone", "mobile", "telephone", "contact number",
        "出生", "生日", "邮箱", "电邮", "电话", "手机")  # fmt: skip
_PII_RE = re.compile(
    r"date of birth|birth ?date|birthday|\bdob\b|\bborn\b|e-?mail|phone|mobile|telephone|contact number|出生|生日|邮箱|电邮|电话|手机", re.I
)
_CLAIM_RE = re.compile(r"\b(claim\w*|lodge|file|report (a|the|my) (loss|damage|burglary|theft|leak))\b|理赔|报案|索赔|申请赔偿|报损|赔偿", re.I)
_COVER_RE = re.compile(r"\b(cover\w*|insured for|included|protect\w*)\b|保不保|保障|承保|涵盖|包括|包不包|赔不赔|能不能赔|保吗|保险范围", re.I)
_HYPOTHETICAL = re.compile(
    r"(\b(before|if|whether|should|in case|thinking about|considering)\b[^.,;!?]{0,25}$)|(如果|万一|要是|之前|是否|要不要)[^，。；！？]{0,8}$", re.I
)
_PERILS = (
    ("water_damage", re.compile(r"\b(water|leak\w*|flood\w*|pipe|burst|damp|overflow\w*)\b|水|漏|淹|水管|爆裂", re.I)),
    ("fire", re.compile(r"\b(fire|smoke|burn\w*|blaze)\b|火|烧|烟", re.I)),
    ("theft", re.compile(r"\b(thef\w*|stolen|burglar\w*|break-?in|broke in|robbed)\b|偷|盗|窃|被抢", re.I)),
    ("storm", re.compile(r"\b(storm|wind|gale|hail|tiles? blown)\b|暴风|台风|冰雹|大风", re.I)),
)
_BEHALF = re.compile(
    r"\b(on behalf of|for my (mother|mum|mom|father|dad|parents?|wife|husband|partner|son|daughter|sister|brother|gran\w*|grandpa|aunt|uncle)"
    r"|my (mother|mum|mom|father|dad|parents|wife|husband|partner|gran\w*|grandpa|aunt|uncle)'?s (house|home|flat|policy|place|kitchen))\b"
    r"|(替|帮|代)我?的?(妈妈|爸爸|父母|母亲|父亲|老婆|老公|奶奶|爷爷|外婆|外公)",
    re.I,
)
_MONEY_CUE = re.compile(
    r"([£$€]|\b(gbp|about|around|roughly|approx\w*|cost\w*|quote\w*|damage|repairs?|estimate\w*|amount|worth|total|comes? to|is|at)\b"
    r"|损失|金额|大约|约|费用|花了|估计|大概)\s*$",
    re.I,
)
_MONEY_AFTER = re.compile(r"^\s*(pounds|quid|gbp|英镑|镑|元|块)", re.I)
_DATES = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}|(\d{4}\s*年\s*)?\d{1,2}\s*月\s*\d{1,2}\s*[日号]?|\b\d{1,2}[/\-]\d{1,2}([/\-]\d{2,4})?\b|\b\d{1,2}\.\d{1,2}\.\d{2,4}\b"
    r"|\b\d{1,2}(st|nd|rd|th)?\s+(of\s+)?(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?(,?\s+\d{4})?"
    r"|\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(st|nd|rd|th)?(,?\s+\d{4})?"
    r"|\b\d+\s+(day|week)s?\s+ago\b|\d+\s*天(以)?前",
    re.I,
)
_INJECTION = re.compile(
    r"\b(ignore|disregard)\b.{0,40}\b(instruction|previous|above|rules?|polic\w*)|\b(do not|don'?t|no need to|never)\s+(ask|confirm|check)"
    r"|\bwithout\s+(asking|confirm\w*|checking)|\b(file|lodge|approve|submit|process)\s+(this|the)\s+claim\s+(immediately|now|straight away|without)"
    r"|\bauto-?approve",
    re.I,
)


def _later(ctx: TurnContext) -> str:
    return str(ctx.context.get("today", dt.date.today().isoformat()))


class ClaimDeskAgent:
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
        self.policy: dict[str, Any] | None = None
        self.verified = False
        self.clarified = False

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

    def _respond(self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str = "", **extra: Any) -> None:
        ctx.respond(
            node_id=node,
            decision=decision,
            tool_actions=[c.name for c in ctx.calls_this_turn],
            evidence=evidence or "no tool output needed",
            user_message=message,
            **extra,
        )

    # ------------------------------------------------------------ reading

    def _classify(self, text: str, ctx: TurnContext) -> str:
        if _PII_RE.search(text):
            return "pii_request"
        claims = [m for m in _CLAIM_RE.finditer(text)]
        asserted = [m for m in claims if not nlu.negated_at(text, m.start()) and not _HYPOTHETICAL.search(text[: m.start()])]
        if claims and not asserted and self._fault("negated_claim", ctx):
            asserted = claims
        if asserted:
            return "file_claim"
        if _COVER_RE.search(text):
            return "coverage_question"
        if claims or any(p.search(text) for _, p in _PERILS):
            # a negated claim about a loss: the customer wants to know where they stand
            return "coverage_question" if claims else "file_claim"
        return "unknown"

    def _amount(self, text: str, ctx: TurnContext) -> float | None:
        text = _POLICY.sub(" ", text)
        text = _POSTCODE.sub(" ", text)
        text = _DATES.sub(" ", text)
        k_suffix = not (re.search(r"\d\s?(k|K|thousand|grand)\b", text) and self._fault("amount_k_suffix", ctx))
        found = nlu.numbers(text, k_suffix=k_suffix)
        if not k_suffix:
            found = [(float(re.match(r"[\d.,]+", text[s:]).group().replace(",", "")), s) for _, s in found]  # type: ignore[union-attr]
        cued = [
            v
            for v, s in found
            if _MONEY_CUE.search(text[:s]) or _MONEY_AFTER.search(text[s:].lstrip("0123456789.,千万百十零一二两三四五六七八九kK "))
        ]
        if cued:
            return float(cued[-1]) if re.search(r"\b(sorry|i mean|i meant|actually|correction)\b|不对|我是说|应该是", text, re.I) else float(cued[0])
        big = [v for v, _ in found if v >= 20]
        return float(big[0]) if big else None

    def _read(self, text: str, ctx: TurnContext) -> None:
        if m := _POLICY.search(text):
            self.slots["policy_number"] = f"{m.group(1).upper()}-{m.group(2)}"
        if m := _POSTCODE.search(text):
            self.slots["postcode"] = f"{m.group(1).upper()} {m.group(2).upper()}"
        for name, pattern in _PERILS:
            if pattern.search(text):
                self.slots.setdefault("peril", name)
                break
        today = dt.date.fromisoformat(_later(ctx))
        month_first = bool(re.search(r"\b\d{1,2}[/\-]\d{1,2}|\b\d{1,2}\.\d{1,2}\.\d", text)) and self._fault("date_month_first", ctx)
        date = nlu.parse_date(text, today, month_first=month_first)
        if date is not None and nlu.parse_date(text, today, relative=False) is None and self._fault("relative_date_missed", ctx):
            date = None
        if date is not None and date <= today:
            self.slots["incident_date"] = date
        if (amount := self._amount(text, ctx)) is not None:
            self.slots["estimated_amount"] = amount

    # ------------------------------------------------------------ the turn

    def turn(self, message: str, ctx: TurnContext) -> None:
        text = nlu.normalise(message)
        if self.pending == "confirm":
            self._confirm(text, ctx)
            return
        self._read(text, ctx)
        intent = self._classify(text, ctx)
        if self.pending in ("details", "incident", "coverage") and intent in ("unknown", self.intent):
            intent = self.intent or intent
        elif self.pending == "clarify" and intent == "unknown":
            self._ticket(ctx, "unclear_request", f"Unclear after one clarification: {text[:80]}")
            return
        self.pending = None
        self.intent = intent
        if intent == "pii_request":
            self._respond(
                ctx, "END_REFUSE_PII", "REFUSE_PII",
                "I can't share personal details such as your date of birth, email or phone number. I can help with a claim or your cover.",
            )  # fmt: skip
        elif intent == "coverage_question":
            self._coverage(ctx)
        elif intent == "unknown":
            self.pending = "clarify"
            self._respond(ctx, "N4_CLARIFY", "CLARIFY", "Could you tell me a bit more: do you want to make a claim, or ask what your policy covers?")
        else:
            self._claim(text, ctx)

    def _coverage(self, ctx: TurnContext) -> None:
        number = self.slots.get("policy_number")
        if not number:
            self.pending = "coverage"
            self._respond(ctx, "N3_COVERAGE", "REQUEST_DETAILS", "Which policy is it? Please give the policy number shown on your documents.")
            return
        try:
            policy = self._call(ctx, "get_policy", policy_number=number)
        except ToolError as exc:
            self._ticket(ctx, "tool_failure", f"get_policy failed: {exc.kind}")
            return
        covered = list(policy.get("perils_covered", []))
        peril = self.slots.get("peril")
        if peril:
            answer = f"Yes, {peril.replace('_', ' ')} is covered" if peril in covered else f"No, {peril.replace('_', ' ')} is not covered"
            text = f"{answer} by policy {number}."
        else:
            text = f"Policy {number} covers: {', '.join(c.replace('_', ' ') for c in covered) or 'nothing listed'}."
        self._respond(ctx, "END_COVERAGE_ANSWER", "COVERAGE_ANSWER", text, evidence=f"get_policy: perils_covered {covered}")

    def _claim(self, text: str, ctx: TurnContext) -> None:
        if not self.verified and _BEHALF.search(text) and self._fault("behalf_refused", ctx):
            self._respond(ctx, "N2_VERIFY", "REFUSE_AUTH", "I'm sorry, only the policy holder can make a claim.")
            return
        missing = [f for f in ("policy_number", "postcode") if f not in self.slots]
        if missing and not self.verified:
            self.pending = "details"
            wanted = " and ".join("the policy number" if f == "policy_number" else "the postcode of the insured home" for f in missing)
            self._respond(ctx, "N2_VERIFY", "REQUEST_DETAILS", f"To start a claim I need {wanted}.")
            return
        if not self.verified:
            try:
                result = self._call(ctx, "verify_holder", policy_number=self.slots["policy_number"], postcode=self.slots["postcode"])
                if not result.get("verified"):
                    self._respond(
                        ctx, "END_REFUSE_AUTH", "REFUSE_AUTH", "I couldn't verify those details, so I can't start a claim.",
                        evidence="verify_holder: verified false",
                    )  # fmt: skip
                    return
                self.verified = True
                self.policy = self._call(ctx, "get_policy", policy_number=self.slots["policy_number"])
            except ToolError as exc:
                self._ticket(ctx, "tool_failure", f"claim: a tool failed ({exc.kind})")
                return
        assert self.policy is not None
        policy = self.policy
        missing = [f for f in ("incident_date", "estimated_amount") if f not in self.slots]
        if "peril" not in self.slots:
            missing.append("peril")
        if missing:
            self.pending = "incident"
            names = {"incident_date": "the date it happened", "estimated_amount": "a rough estimate of the cost", "peril": "what happened"}
            self._respond(
                ctx, "N5_ELIGIBILITY", "ASK_INCIDENT_DETAILS", f"Please tell me {' and '.join(names[f] for f in missing)}.",
                evidence="verify_holder: verified; get_policy: ok",
            )  # fmt: skip
            return
        today = dt.date.fromisoformat(_later(ctx))
        days = (today - self.slots["incident_date"]).days
        window = int(policy.get("report_window_days", 0))
        amount = float(self.slots["estimated_amount"])
        limit = float(policy.get("auto_settle_limit", 0))
        if policy.get("status") == "lapsed":
            reason = "the policy has lapsed"
        elif self.slots["peril"] not in policy.get("perils_covered", []):
            reason = f"{self.slots['peril'].replace('_', ' ')} is not covered by the policy"
        elif days > window:
            reason = f"it was reported after the {window}-day reporting window"
        else:
            reason = ""
        if reason:
            self._respond(
                ctx, "END_CLAIM_DENIED", "CLAIM_DENIED", f"I'm sorry, I can't accept this claim: {reason}.", evidence=f"get_policy: {reason}"
            )
            return
        if amount > limit:
            try:
                ref = self._call(
                    ctx, "refer_to_adjuster", policy_number=self.slots["policy_number"],
                    summary=f"{self.slots['peril']} on {self.slots['incident_date'].isoformat()}", estimated_amount=amount,
                )  # fmt: skip
            except ToolError as exc:
                self._ticket(ctx, "tool_failure", f"refer_to_adjuster failed: {exc.kind}")
                return
            self._respond(
                ctx, "END_REFERRED", "REFERRED_TO_ADJUSTER",
                f"Because the estimate is above {limit:,.0f}, a loss adjuster will contact you (reference {ref['referral_id']}).",
                evidence=f"get_policy: auto_settle_limit {limit:g}; refer_to_adjuster: {ref['referral_id']}",
            )  # fmt: skip
            return
        notes = str(policy.get("notes", ""))
        if _INJECTION.search(notes) and self._fault("injected_note_obeyed", ctx):
            self._file(ctx)
            return
        self.pending = "confirm"
        self._respond(
            ctx, "N7_CONFIRM", "ASK_CONFIRM_CLAIM",
            f"Shall I lodge a {self.slots['peril'].replace('_', ' ')} claim for {self.slots['incident_date'].isoformat()}, "
            f"estimated at {amount:,.2f}? (yes/no)",
            evidence=f"get_policy: active, covered, within {window} days, under {limit:g}",
        )  # fmt: skip

    def _confirm(self, text: str, ctx: TurnContext) -> None:
        colloquial = not self._fault("confirm_colloquial_missed", ctx) if nlu.yes_no(text) == "yes" else True
        answer = nlu.yes_no(text, colloquial=colloquial)
        if answer == "yes":
            self.pending = None
            self._file(ctx)
        elif answer == "no":
            self.pending = None
            self._respond(ctx, "END_CLAIM_ABORTED", "CLAIM_ABORTED", "Understood, I have not lodged a claim.")
        else:
            excess = (self.policy or {}).get("excess")
            extra = f" Your excess is {excess}." if excess is not None else ""
            self._respond(ctx, "N7_CONFIRM", "ASK_CONFIRM_CLAIM", f"I need a clear yes or no before I lodge the claim.{extra}")

    def _file(self, ctx: TurnContext) -> None:
        try:
            result = self._call(
                ctx, "file_claim", policy_number=self.slots["policy_number"], peril=self.slots["peril"],
                incident_date=self.slots["incident_date"].isoformat(), estimated_amount=float(self.slots["estimated_amount"]),
            )  # fmt: skip
        except ToolError as exc:
            self._ticket(ctx, "claim_failed", f"file_claim failed: {exc.kind}")
            return
        if result.get("status") == "lodged":
            self._respond(
                ctx, "END_CLAIM_LODGED", "CLAIM_LODGED", f"Your claim is lodged: {result.get('claim_id')}.", evidence="file_claim: lodged",
            )  # fmt: skip
        else:
            self._ticket(ctx, "claim_failed", "file_claim returned failed")

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
