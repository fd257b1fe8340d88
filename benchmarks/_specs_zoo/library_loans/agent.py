"""Reference agent for the zoo's library loans spec (written blind for issue 23; Apache-2.0).

With every fault knob at 0 it follows spec.yaml: card first, a member blocked or owing more
than 10.00 is refused (decision ACCOUNT_BLOCKED), a loan renewed twice is not renewed
(RENEWAL_DENIED), a refused hold is HOLD_DENIED, and loans are listed one per line as
"TITLE: due DATE". Each knob injects a bug with probability P drawn from ``ctx.rng``.
"""

from __future__ import annotations

import re
from typing import Any

from agentprop import ToolError, TurnContext

FAULTS: dict[str, str] = {
    "or_as_and": "refuses only a member who is blocked AND owes more than 10.00: an active member owing 12.50 is served",
    "fines_inclusive": "refuses a member owing exactly 10.00 (>= instead of >)",
    "renews_past_limit": "renews a loan already renewed twice",
    "denied_as_blocked": "reports every refusal at END_DENIED as ACCOUNT_BLOCKED, also a refused renewal or hold",
    "list_due_shifted": "in the loan list, pairs each title with the next loan's due date",
    "title_exact_match": "finds the loan only when the title is spelt as the catalogue spells it (case, leading 'The')",
}

_CARD = re.compile(r"\b(\d{8})\b")
_LIST = re.compile(r"\b(what books|my loans|books do i have|have out|when are my|due)\b", re.I)
_RENEW = re.compile(r"\b(renew\w*|keep .+ longer|extend)\b", re.I)
_HOLD = re.compile(r"\b(hold|reserve|reservation)\b", re.I)
_TITLE_PATTERNS = (
    re.compile(r"\brenew (.+?)(?:\?|\.|,| -|$)", re.I),
    re.compile(r"\bkeep (.+?) a bit longer", re.I),
    re.compile(r"\bhold on (.+?) for me", re.I),
    re.compile(r"\breserve (.+?)(?:\?|\.|,| -|$)", re.I),
)
_PRONOUNS = {"it", "this", "that", "them", "one", "this one"}


def _norm(title: str) -> str:
    t = re.sub(r"[^\w\s]", "", title).strip().lower()
    return re.sub(r"^(the|a|an)\s+", "", t)


class LibraryAgent:
    """One instance per conversation."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.card: str | None = None
        self.title: str | None = None
        self.intent: str | None = None
        self.member: dict[str, Any] | None = None

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

    def _read(self, message: str) -> None:
        if m := _CARD.search(message):
            self.card = m.group(1)
        for pattern in _TITLE_PATTERNS:
            if (m := pattern.search(message)) and m.group(1).strip().lower() not in _PRONOUNS:
                self.title = m.group(1).strip()
                break

    def turn(self, message: str, ctx: TurnContext) -> None:
        asked_title = self.member is not None and self.intent in ("renew", "hold") and self.title is None
        self._read(message)
        if asked_title and self.title is None and message.strip(" .!?"):
            self.title = message.strip(" .!?")  # the answer to "Which title ...?" is the title itself
        if self.intent is None:
            if _HOLD.search(message):
                self.intent = "hold"
            elif _RENEW.search(message):
                self.intent = "renew"
            elif _LIST.search(message):
                self.intent = "list_loans"
            else:
                self._respond(ctx, "END_CLARIFY", "CLARIFY", "I can list your loans, renew a book or place a hold. What would you like?")
                return
        if self.card is None:
            self._respond(ctx, "N2_MEMBER", "REQUEST_CARD", "Please give me your library card number (the 8 digits on your card).")
            return
        if self.member is None:
            try:
                self.member = ctx.call("lookup_member", card_number=self.card)
            except ToolError as exc:
                self._respond(
                    ctx, "N2_MEMBER", "REQUEST_CARD", "I couldn't find that card. Could you check the number?", f"lookup_member failed: {exc.kind}"
                )
                return
            if self._refused_standing(self.member, ctx):
                return
        if self.intent == "list_loans":
            self._list(ctx)
        elif self.title is None:
            what = "renew" if self.intent == "renew" else "put on hold"
            node = "N4_RENEW" if self.intent == "renew" else "N5_HOLD"
            self._respond(
                ctx, node, "ASK_TITLE", f"Which title would you like to {what}?", f"lookup_member: {self.member['member_id']} {self.member['status']}"
            )
        elif self.intent == "renew":
            self._renew(ctx)
        else:
            self._hold(ctx)

    def _refused_standing(self, member: dict[str, Any], ctx: TurnContext) -> bool:
        blocked = member["status"] == "blocked"
        fines = float(member["fines_due"])
        over = fines >= 10 if self._fault("fines_inclusive", ctx) else fines > 10
        refuse = (blocked and over) if self._fault("or_as_and", ctx) else (blocked or over)
        if not refuse:
            return False
        reason = "your account is blocked" if blocked else f"your account owes {fines:.2f} in fines, over the 10.00 limit"
        self._respond(
            ctx,
            "END_DENIED",
            "ACCOUNT_BLOCKED",
            f"Sorry, {reason}, so I can't renew books or place holds right now. Please speak to the library staff.",
            f"lookup_member: status {member['status']}, fines_due {fines:.2f}",
        )
        return True

    def _loans(self, ctx: TurnContext) -> list[dict[str, Any]] | None:
        try:
            return list(ctx.call("get_loans", member_id=self.member["member_id"] if self.member else "")["loans"])
        except ToolError as exc:
            self._respond(
                ctx, "END_CLARIFY", "CLARIFY", "I couldn't read your loans just now; please try again shortly.", f"get_loans failed: {exc.kind}"
            )
            return None

    def _list(self, ctx: TurnContext) -> None:
        loans = self._loans(ctx)
        if loans is None:
            return
        if not loans:
            self._respond(ctx, "END_LOANS_LISTED", "LOANS_LISTED", "You have no books out right now.", "get_loans: 0 loans")
            return
        dues = [loan["due_date"] for loan in loans]
        if len(loans) > 1 and self._fault("list_due_shifted", ctx):
            dues = dues[1:] + dues[:1]
        lines = [f"- {loan['title']}: due {due}" for loan, due in zip(loans, dues)]
        self._respond(ctx, "END_LOANS_LISTED", "LOANS_LISTED", "Your loans:\n" + "\n".join(lines), f"get_loans: {len(loans)} loans")

    def _renew(self, ctx: TurnContext) -> None:
        loans = self._loans(ctx)
        if loans is None:
            return
        assert self.title is not None
        if self._fault("title_exact_match", ctx):
            loan = next((x for x in loans if x["title"] == self.title), None)
        else:
            loan = next((x for x in loans if _norm(x["title"]) == _norm(self.title)), None)
        if loan is None:
            self._denied(
                ctx,
                "N4_RENEW",
                "RENEWAL_DENIED",
                f"I can't find {self.title} among your current loans, so there is nothing to renew.",
                "get_loans: title not on loan",
            )
            return
        if loan["renewals_used"] >= 2 and not self._fault("renews_past_limit", ctx):
            self._denied(
                ctx,
                "N4_RENEW",
                "RENEWAL_DENIED",
                f"{loan['title']} has already been renewed twice, which is the limit. It is due {loan['due_date']}.",
                f"get_loans: {loan['loan_id']} renewals_used {loan['renewals_used']}",
            )
            return
        try:
            result = ctx.call("renew_loan", member_id=self.member["member_id"] if self.member else "", loan_id=loan["loan_id"])
        except ToolError as exc:
            self._denied(
                ctx,
                "N4B_DO_RENEW",
                "RENEWAL_DENIED",
                f"I couldn't renew {loan['title']} just now; it is still due {loan['due_date']}.",
                f"renew_loan failed: {exc.kind}",
            )
            return
        if result["status"] != "renewed":
            self._denied(
                ctx,
                "N4B_DO_RENEW",
                "RENEWAL_DENIED",
                f"The library system refused to renew {loan['title']}; it is still due {loan['due_date']}.",
                "renew_loan: refused",
            )
            return
        self._respond(
            ctx,
            "END_RENEWED",
            "RENEWED",
            f"Done: {loan['title']} is renewed and now due {result.get('new_due_date')}.",
            f"renew_loan: renewed, new_due_date {result.get('new_due_date')}",
            loan_id=loan["loan_id"],
        )

    def _hold(self, ctx: TurnContext) -> None:
        assert self.title is not None
        try:
            result = ctx.call("place_hold", member_id=self.member["member_id"] if self.member else "", title=self.title)
        except ToolError as exc:
            self._denied(ctx, "N5_HOLD", "HOLD_DENIED", f"I couldn't place the hold on {self.title} just now.", f"place_hold failed: {exc.kind}")
            return
        if result["status"] != "placed":
            self._denied(ctx, "N5_HOLD", "HOLD_DENIED", f"The library system refused a hold on {self.title}.", "place_hold: refused")
            return
        self._respond(
            ctx,
            "END_HOLD_PLACED",
            "HOLD_PLACED",
            f"Your hold on {self.title} is placed (hold {result.get('hold_id')}); you are number {result.get('queue_position')} in the queue.",
            f"place_hold: {result.get('hold_id')}, queue_position {result.get('queue_position')}",
            hold_id=result.get("hold_id"),
        )

    def _denied(self, ctx: TurnContext, node: str, decision: str, message: str, evidence: str) -> None:
        if self._fault("denied_as_blocked", ctx):
            decision = "ACCOUNT_BLOCKED"
        self._respond(ctx, "END_DENIED", decision, message, evidence)
