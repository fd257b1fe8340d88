"""A plain-Python DataInsights agent that follows the spec's decision tree over a real database.

It reads a business question, asks exactly one clarifying question when the request does not say
WHAT to retrieve (policy P3), otherwise loads the schema with ``describe_schema``, writes explicit
SQL for one of a handful of question shapes (total revenue, order count, a summary, top-k
customers or products, revenue by region, refunds, customer count and list) with ``LIMIT`` for
top-k and never ``SELECT *`` (P2), runs it with ``run_sql``, rewrites a failing query once and
reports ``SQL_ERROR`` after a second failure (P4), answers ``NO_RESULTS`` for an empty result and
otherwise ``ANSWER`` with numbers copied from the rows (P1, ``must_be_grounded``).

With every fault knob at 0 it passes the spec's leaf scenarios; each knob injects a realistic,
stochastic bug with probability P (drawn from ``ctx.rng``, so a run is reproducible for a given
case and trial), mirroring the spec's mutation pack. Select knobs with ``--fault NAME=P``.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

from agentprop import ToolError, TurnContext
from agentprop.testing import as_corrected, as_simplified, correct_typos

FAULTS: dict[str, str] = {
    "no_tool": "answers a numeric question with made-up numbers, without "
    "calling run_sql (M_NO_TOOL)",
    "select_star": "generates SQL with SELECT * (M_SELECT_STAR)",
    "no_limit": "omits LIMIT in top-k queries and cuts the rows in Python instead (M_NO_LIMIT)",
    "no_clarify": "runs SQL on an ambiguous request instead of asking what to "
    "retrieve (M_NO_CLARIFY)",
    "hallucinate_numbers": "states an inflated number that the rows do not contain "
    "(M_HALLUCINATE_NUMBERS)",
}

ZOO_FAULTS: dict[str, str] = {
    "followup_filler_asks_again": "an answer to its clarifying question that opens with a filler "
    "or a hedge (um, well, so, I think, maybe) is not taken as an answer: it asks again",
    "report_select_star": "a request for a report dumps whole tables: its SQL selects * (P2)",
    "hurried_guess": "in a hurry (asap, urgent, quick, right now) it gives a ballpark "
    "figure without running SQL",
    "can_you_answered_yes": "a request asked as a yes/no question (can you / could you / would "
    "you ...?) is answered 'yes, I can' without running the query",
    "mixed_language_clarify": "a message that mixes English with Chinese (..., 谢谢) is taken as "
    "unclear: it asks a clarifying question",
    "month_case": "reads month names only capitalised: 'march 2024' is not read as a timeframe "
    "(all time is queried)",
    "casual_rounds_figures": "with a casual user (hey, pls, thx, wanna) it rounds the figure it "
    "states to two significant digits (about $820,000): a number the rows do not hold",
}
"""Faults triggered by how a user writes or what a tool answers, each with a known minimal trigger:
the fault zoo of ``benchmarks/find.py`` (kept apart from the mutation knobs above)."""
FAULTS.update(ZOO_FAULTS)

DEFAULT_TOP_K = 10
"""P3 guidance: "top customers" without a count is clear and defaults to 10."""

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))

_GUESS = re.compile(
    r"\b(guess|ballpark|rough(ly)?|off the top of your head|make (it|something) up)\b", re.I
)
_SCHEMA_Q = re.compile(r"\b(what|which) tables\b|\bschema\b|\bwhat columns\b", re.I)
_TOP = re.compile(
    r"\b(?:top|best|biggest|largest)\s+(?:(\d+)\s+)?(customers?|clients?|accounts?|products?)\b",
    re.I,
)
_REVENUE = re.compile(r"\b(revenue|sales|turnover|income)\b", re.I)
_ORDERS = re.compile(
    r"\b(how many orders|number of orders|order count|count of orders|orders count)\b", re.I
)
_REFUNDS = re.compile(r"\brefund(s|ed)?\b", re.I)
_BY_REGION = re.compile(r"\b(by|per) region\b", re.I)
_CUSTOMER_COUNT = re.compile(r"\b(how many customers|number of customers|customer count)\b", re.I)
_CUSTOMER_DATA = re.compile(
    r"\bcustomer (data|list|records|details)\b|\blist (of )?(our )?customers\b", re.I
)
_QUARTER = re.compile(r"\bQ([1-4])(?:\s+(?:of\s+)?(\d{4}))?\b", re.I)
# a month with its year ("March 2024"), or after a preposition ("in May"): "May I ask" is no date
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{4}})\b", re.I)
_MONTH_ALONE = re.compile(rf"\b(?:in|for|during|of|since|from)\s+({_MONTH_RE})\b\.?", re.I)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
_RELATIVE = re.compile(r"\b(yesterday|today|last month|this month|last year|this year)\b", re.I)
# words the agent reads by: a one-letter slip in one of them is still that word
_VOCABULARY = (
    "guess",
    "ballpark",
    "roughly",
    "tables",
    "schema",
    "columns",
    "customers",
    "customer",
    "clients",
    "accounts",
    "products",
    "revenue",
    "sales",
    "turnover",
    "income",
    "orders",
    "order",
    "number",
    "count",
    "refunds",
    "refund",
    "region",
    "data",
    "list",
    "records",
    "details",
    "yesterday",
    "today",
    "month",
    "year",
    "last",
    "this",
    "best",
    "biggest",
    "largest",
    "total",
    "report",
    "numbers",
    *(name for name in _MONTHS if len(name) > 3),
)
# what the zoo's faults read (see FAULTS)
_FILLER_OR_HEDGE_OPENING = re.compile(
    r"^\W*(u+m+|u+h+|e+r+m*|so|well|like|h+m+|oh|ok(ay)?,? so|i think|i guess|maybe|perhaps)\b",
    re.I,
)
_REPORT = re.compile(r"\breports?\b", re.I)
_HURRIED = re.compile(
    r"\b(asap|urgent(ly)?|right (now|away)|immediately|quick(ly)?|hurry|rush)\b", re.I
)
_YES_NO_REQUEST = re.compile(r"\b(can|could|would|will) you\b|\bwonder(ing)? if you\b", re.I)
_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN_WORDS = re.compile(r"[A-Za-z]{3,}")
_LOWER_MONTH = re.compile(
    rf"(?<![A-Za-z])({'|'.join(sorted((m for m in _MONTHS if len(m) > 3), key=len, reverse=True))}"
    r")(?![A-Za-z])"
)
_CASUAL = re.compile(r"\b(hey|hiya|yo|thx|pls|plz|gonna|wanna|lol|btw)\b", re.I)
_REGION = re.compile(r"\bin ((?:[A-Z][A-Za-z]+)(?:\s+[A-Z][A-Za-z]+)?)\b")


@dataclass(frozen=True)
class Period:
    """Orders dated ``start <= d < end``; ``label`` is the user's own wording of it."""

    start: date
    end: date
    label: str


@dataclass(frozen=True)
class Question:
    shape: str
    """``revenue``, ``order_count``, ``summary``, ``top_customers``, ``top_products``,
    ``revenue_by_region``, ``refunds``, ``customer_count`` or ``customer_data``."""
    period: Period | None = None
    k: int | None = None
    region: str | None = None


# ----------------------------------------------------------------------------- understanding


def parse_period(message: str, today: date) -> Period | None:
    """The timeframe a message names, relative to ``today`` where it is relative."""
    if m := _RELATIVE.search(message):
        word = m.group(1).lower()
        if word == "today":
            return Period(today, today + timedelta(days=1), m.group(1))
        if word == "yesterday":
            return Period(today - timedelta(days=1), today, m.group(1))
        first = today.replace(day=1)
        if word == "this month":
            return Period(first, _add_months(first, 1), m.group(1))
        if word == "last month":
            return Period(_add_months(first, -1), first, m.group(1))
        year = today.year - (1 if word == "last year" else 0)
        return Period(date(year, 1, 1), date(year + 1, 1, 1), m.group(1))
    if m := _QUARTER.search(message):
        q = int(m.group(1))
        if m.group(2):
            year = int(m.group(2))
        else:  # the latest such quarter that has ended
            year = (
                today.year
                if _add_months(date(today.year, 3 * q - 2, 1), 3) <= today
                else today.year - 1
            )
        start = date(year, 3 * q - 2, 1)
        return Period(start, _add_months(start, 3), m.group(0))
    if m := (_MONTH_YEAR.search(message) or _MONTH_ALONE.search(message)):
        month = _MONTHS[m.group(1).lower()]
        if m.re is _MONTH_YEAR:
            year = int(m.group(2))
        else:  # the latest such month that has started
            year = today.year if month <= today.month else today.year - 1
        start = date(year, month, 1)
        return Period(start, _add_months(start, 1), m.group(0))
    if m := _YEAR.search(message):
        year = int(m.group(1))
        return Period(date(year, 1, 1), date(year + 1, 1, 1), m.group(1))
    return None


def _add_months(d: date, n: int) -> date:
    index = d.year * 12 + d.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


def parse_region(message: str) -> str | None:
    for m in _REGION.finditer(message):
        words = m.group(1).split()
        if words[0].lower() in _MONTHS:
            continue
        return m.group(1)
    return None


def classify(message: str) -> str | None:
    """The question shape, or ``None`` when the message does not say WHAT to retrieve (P3:
    ambiguity is about what data, not how much; a missing timeframe means all time)."""
    if m := _TOP.search(message):
        return "top_products" if m.group(2).lower().startswith("product") else "top_customers"
    revenue = _REVENUE.search(message) is not None
    orders = _ORDERS.search(message) is not None
    if _REFUNDS.search(message):
        return "refunds"
    if revenue and orders:
        return "summary"
    if revenue and _BY_REGION.search(message):
        return "revenue_by_region"
    if revenue:
        return "revenue"
    if orders:
        return "order_count"
    if _CUSTOMER_COUNT.search(message):
        return "customer_count"
    if _CUSTOMER_DATA.search(message):
        return "customer_data"
    return None


def is_ambiguous(message: str) -> bool:
    """P3: ambiguous when no metric, table or record type can be read from the request."""
    return classify(message) is None and _SCHEMA_Q.search(message) is None


def parse_question(message: str, today: date) -> Question | None:
    shape = classify(message)
    if shape is None:
        return None
    k = None
    if shape.startswith("top_"):
        m = _TOP.search(message)
        k = int(m.group(1)) if m and m.group(1) else DEFAULT_TOP_K
    return Question(shape, parse_period(message, today), k, parse_region(message))


# ----------------------------------------------------------------------------- SQL

# The tables and columns each shape reads; checked against describe_schema's output.
_NEEDS: dict[str, dict[str, set[str]]] = {
    "revenue": {"orders": {"order_id", "amount", "order_date", "status", "customer_id"}},
    "order_count": {"orders": {"order_id", "order_date", "customer_id"}},
    "summary": {"orders": {"order_id", "amount", "order_date", "status", "customer_id"}},
    "refunds": {"orders": {"order_id", "amount", "order_date", "status", "customer_id"}},
    "top_customers": {
        "orders": {"amount", "order_date", "status", "customer_id"},
        "customers": {"customer_id", "name"},
    },
    "top_products": {
        "orders": {"order_id", "order_date", "status"},
        "order_items": {"order_id", "product_id", "quantity", "unit_price"},
        "products": {"product_id", "name"},
    },
    "revenue_by_region": {
        "orders": {"amount", "order_date", "status", "customer_id"},
        "customers": {"customer_id", "region"},
    },
    "customer_count": {"customers": {"customer_id", "region"}},
    "customer_data": {"customers": {"name", "region", "signup_date"}},
}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def build_sql(q: Question, *, rewrite: bool = False, limit: bool = True) -> str:
    """Explicit-column SQL for ``q``. ``rewrite=True`` is the revised form used after an error
    (full table names, ``BETWEEN`` on the raw date text instead of ``date()`` calls).
    Aggregates are wrapped so an empty period yields no rows rather than one row of NULLs."""
    o, c, i, p = (
        ("orders", "customers", "order_items", "products") if rewrite else ("o", "c", "i", "p")
    )

    def table(name: str, alias: str) -> str:
        return name if rewrite else f"{name} AS {alias}"

    conds: list[str] = []
    if q.period is not None:
        if rewrite:
            last = q.period.end - timedelta(days=1)
            conds.append(
                f"{o}.order_date BETWEEN '{q.period.start.isoformat()}' AND '{last.isoformat()}'"
            )
        else:
            conds.append(f"date({o}.order_date) >= date('{q.period.start.isoformat()}')")
            conds.append(f"date({o}.order_date) < date('{q.period.end.isoformat()}')")
    join_customers = f" JOIN {table('customers', 'c')} ON {c}.customer_id = {o}.customer_id"
    region = f"{c}.region = {_quote(q.region)}" if q.region else None

    def where(*extra: str | None) -> str:
        parts = [e for e in extra if e] + conds
        return (" WHERE " + " AND ".join(parts)) if parts else ""

    def nonempty(inner: str, columns: str, count: str) -> str:
        return f"SELECT {columns} FROM ({inner}) WHERE {count} > 0"

    orders_from = table("orders", "o") + (join_customers if q.region else "")
    completed = f"{o}.status = 'completed'"
    refunded = f"{o}.status = 'refunded'"
    if q.shape == "revenue":
        inner = (
            f"SELECT ROUND(SUM({o}.amount), 2) AS total_revenue, COUNT({o}.order_id) AS "
            f"completed_orders FROM {orders_from}{where(completed, region)}"
        )
        return nonempty(inner, "total_revenue, completed_orders", "completed_orders")
    if q.shape == "summary":
        inner = (
            f"SELECT COUNT({o}.order_id) AS completed_orders, ROUND(SUM({o}.amount), 2) AS "
            f"total_revenue FROM {orders_from}{where(completed, region)}"
        )
        return nonempty(inner, "completed_orders, total_revenue", "completed_orders")
    if q.shape == "order_count":
        inner = f"SELECT COUNT({o}.order_id) AS order_count FROM {orders_from}{where(region)}"
        return nonempty(inner, "order_count", "order_count")
    if q.shape == "refunds":
        inner = (
            f"SELECT COUNT({o}.order_id) AS refunded_orders, ROUND(SUM({o}.amount), 2) AS "
            f"refunded_amount FROM {orders_from}{where(refunded, region)}"
        )
        return nonempty(inner, "refunded_orders, refunded_amount", "refunded_orders")
    if q.shape == "top_customers":
        sql = (
            f"SELECT {c}.name AS customer, ROUND(SUM({o}.amount), 2) AS revenue "
            f"FROM {table('orders', 'o')}{join_customers}{where(completed, region)} "
            f"GROUP BY {c}.customer_id, {c}.name ORDER BY revenue DESC"
        )
        return sql + (f" LIMIT {q.k}" if limit else "")
    if q.shape == "top_products":
        sql = (
            f"SELECT {p}.name AS product, ROUND(SUM({i}.quantity * {i}.unit_price), 2) AS revenue "
            f"FROM {table('order_items', 'i')} JOIN {table('orders', 'o')} ON {o}.order_id = "
            f"{i}.order_id JOIN {table('products', 'p')} ON {p}.product_id = {i}.product_id"
            + (join_customers if q.region else "")
            + f"{where(completed, region)} "
            f"GROUP BY {p}.product_id, {p}.name ORDER BY revenue DESC"
        )
        return sql + (f" LIMIT {q.k}" if limit else "")
    if q.shape == "revenue_by_region":
        return (
            f"SELECT {c}.region AS region, ROUND(SUM({o}.amount), 2) AS revenue "
            f"FROM {table('orders', 'o')}{join_customers}{where(completed, region)} "
            f"GROUP BY {c}.region ORDER BY {c}.region"
        )
    customers = table("customers", "c")
    region_only = f" WHERE {region}" if region else ""
    if q.shape == "customer_count":
        return nonempty(
            f"SELECT COUNT({c}.customer_id) AS customers FROM {customers}{region_only}",
            "customers",
            "customers",
        )
    if q.shape == "customer_data":
        return (
            f"SELECT {c}.name AS name, {c}.region AS region, {c}.signup_date AS signup_date FROM "
            f"{customers}{region_only} ORDER BY {c}.name LIMIT 20"
        )
    raise ValueError(f"unknown question shape {q.shape!r}")


def tables_in(sql: str) -> list[str]:
    return list(
        dict.fromkeys(
            m.group(1) for m in re.finditer(r"\b(?:FROM|JOIN)\s+([A-Za-z_]\w*)", sql, re.I)
        )
    )


def _money(x: float) -> str:
    return f"${x:,.2f}"


# ----------------------------------------------------------------------------- the agent


class DataInsightsAgent:
    """One instance per conversation; state carried between turns lives on the instance."""

    FAULTS = FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault knob(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = dict(faults or {})
        self.pending_period: Period | None = None
        """Set while waiting for the answer to a clarifying question (the first message's
        timeframe, kept for the follow-up)."""
        self.awaiting_clarification = False
        self.schema: dict[str, dict[str, str]] | None = None
        self.message = ""
        """The message of the turn being handled."""

    # -------------------------------------------------------------- helpers

    def _fault(self, name: str, ctx: TurnContext) -> bool:
        p = self.faults.get(name, 0.0)
        return p > 0 and ctx.rng.random() < p

    @staticmethod
    def _today(ctx: TurnContext) -> date:
        value = ctx.context.get("today")
        return date.fromisoformat(str(value)) if value else date.today()

    @staticmethod
    def _budget(ctx: TurnContext) -> int:
        limit = ctx.spec.max_tool_calls_per_turn
        return 10**6 if limit is None else limit - len(ctx.calls_this_turn)

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

    # -------------------------------------------------------------- the turn

    def turn(self, message: str, ctx: TurnContext) -> None:
        message = correct_typos(as_corrected(as_simplified(message)), _VOCABULARY)
        # the conversation so far: a request keeps its wording
        self.message = f"{self.message} {message}".strip()
        today = self._today(ctx)
        if (
            _CJK.search(message)
            and _LATIN_WORDS.search(message)
            and self._fault("mixed_language_clarify", ctx)
        ):
            question = "Sorry, which metric and timeframe do you need?"
            self.awaiting_clarification = True
            self._respond(
                ctx,
                "N2_CLARIFY",
                "ASK_CLARIFY",
                question,
                evidence="the request is unclear",
                clarifying_question=question,
            )
            return
        if (
            self.awaiting_clarification
            and _FILLER_OR_HEDGE_OPENING.search(message)
            and self._fault("followup_filler_asks_again", ctx)
        ):
            question = (
                "Sorry, which metric do you need: total revenue, the number of orders, or the top "
                "customers by revenue?"
            )
            self._respond(
                ctx,
                "N2_CLARIFY",
                "ASK_CLARIFY",
                question,
                evidence="the answer did not name a metric",
                clarifying_question=question,
            )
            return
        if self.awaiting_clarification:
            self.awaiting_clarification = False
            q = parse_question(message, today)
            if q is None:
                # one clarifying question only (N2_CLARIFY): fall back to a stated default
                q = Question("summary")
            if q.period is None and self.pending_period is not None:
                q = replace(q, period=self.pending_period)
            self.pending_period = None
            self._answer(q, ctx)
            return
        if _GUESS.search(message):
            self._respond(
                ctx,
                "N1_INTERPRET",
                "REFUSE_GUESS",
                "I can't guess figures: every number I give you comes from a query of the data. "
                "Tell me which metric and timeframe you need and I will run the query.",
            )
            return
        if _SCHEMA_Q.search(message) and classify(message) is None:
            self._describe_tables(ctx)
            return
        q = parse_question(message, today)
        if q is not None and q.period is not None and self._period_missed(q.period, ctx):
            q = replace(q, period=None)
        if (
            q is not None
            and _YES_NO_REQUEST.search(message)
            and self._fault("can_you_answered_yes", ctx)
        ):
            self._respond(
                ctx,
                "N2_CLARIFY",
                "ASK_CLARIFY",
                "Yes, I can pull that for you. Shall I run the query now?",
                evidence="the user asked whether I can",
                clarifying_question="Shall I run the query now?",
            )
            return
        if q is None:
            if self._fault("no_clarify", ctx):
                self._answer(Question("summary", parse_period(message, today)), ctx)
                return
            period = parse_period(message, today)
            if period is not None and self._period_missed(period, ctx):
                period = None
            self.awaiting_clarification = True
            self.pending_period = period
            span = f" for {period.label}" if period else ""
            question = (
                f"Which metric do you need{span}: total revenue, the number of orders, or the top "
                "customers by revenue?"
            )
            self._respond(
                ctx,
                "N2_CLARIFY",
                "ASK_CLARIFY",
                question,
                evidence="the request does not say which metric or table to use (P3)",
                clarifying_question=question,
            )
            return
        self._answer(q, ctx)

    def _period_missed(self, period: Period, ctx: TurnContext) -> bool:
        """The month_case fault: a month typed in lower case is not read as a timeframe."""
        return _LOWER_MONTH.search(period.label) is not None and self._fault("month_case", ctx)

    def _load_schema(self, ctx: TurnContext) -> str | None:
        """Load the schema once per conversation; the failure kind if it cannot be loaded."""
        if self.schema is not None:
            return None
        policy = ctx.spec.tool("describe_schema").retry_policy
        attempts = 1 + (policy.retries if policy else 0)
        kind = "timeout"
        for _ in range(attempts):
            if self._budget(ctx) < 2:  # keep a call for run_sql
                break
            try:
                self.schema = ctx.call("describe_schema")["tables"]
                return None
            except ToolError as exc:
                kind = exc.kind
                if policy is None or exc.kind not in policy.on:
                    break
        return kind

    def _describe_tables(self, ctx: TurnContext) -> None:
        failure = self._load_schema(ctx)
        if failure is not None or self.schema is None:
            self._respond(
                ctx,
                "N3A_DESCRIBE_SCHEMA",
                "SQL_ERROR",
                "I could not load the database schema right now. Please try again in a moment.",
                evidence=f"describe_schema failed: {failure}",
            )
            return
        listing = "; ".join(f"{t} ({', '.join(cols)})" for t, cols in self.schema.items())
        self._respond(
            ctx,
            "N3A_DESCRIBE_SCHEMA",
            "ANSWER",
            f"The database has these tables: {listing}.",
            evidence="describe_schema",
            tables_used=list(self.schema),
        )

    def _answer(self, q: Question, ctx: TurnContext) -> None:
        if self._fault("no_tool", ctx) or (
            _HURRIED.search(self.message) is not None and self._fault("hurried_guess", ctx)
        ):
            self._made_up_answer(q, ctx)
            return
        failure = self._load_schema(ctx)
        if failure is not None or self.schema is None:
            self._respond(
                ctx,
                "N3A_DESCRIBE_SCHEMA",
                "SQL_ERROR",
                "I could not load the database schema, so I cannot query the data right now. "
                "Please try again in a moment.",
                evidence=f"describe_schema failed: {failure}",
            )
            return
        missing = [
            f"{t}.{col}"
            for t, cols in _NEEDS[q.shape].items()
            for col in sorted(cols)
            if col not in self.schema.get(t, {})
        ]
        if missing:
            self._respond(
                ctx,
                "N3_PLAN_QUERY",
                "REFUSE_GUESS",
                f"The database has no {', '.join(missing)}, so I cannot answer "
                "this without guessing.",
                evidence="describe_schema lacks the needed columns",
            )
            return
        topk = q.shape.startswith("top_")
        drop_limit = topk and self._fault("no_limit", ctx)
        star = self._fault("select_star", ctx) or (
            _REPORT.search(self.message) is not None and self._fault("report_select_star", ctx)
        )
        attempts = [
            build_sql(q, limit=not drop_limit),
            build_sql(q, rewrite=True, limit=not drop_limit),
        ]
        result: dict[str, Any] | None = None
        errors: list[str] = []
        sql = attempts[0]
        for n in range(2):
            if self._budget(ctx) < 1:
                break
            if n == 1 and errors and errors[-1] == "timeout":
                sql = attempts[0]  # retry_policy: a timeout is retried as is
            else:
                sql = attempts[n]
            if star:
                sql = f"SELECT * FROM ({sql})"
            try:
                result = ctx.call("run_sql", query=sql)
                break
            except ToolError as exc:
                errors.append(exc.kind)
        if result is None:
            self._respond(
                ctx,
                "END_SQL_ERROR",
                "SQL_ERROR",
                f"The query failed{' twice' if len(errors) > 1 else ''}"
                f"{', even after I rewrote it' if len(errors) > 1 else ''} "
                f"({errors[-1] if errors else 'no budget'}). Next steps: try again in a moment, "
                "narrow the question (for example a shorter timeframe), or ask the data team "
                "to check the database.",
                evidence=f"run_sql errors: {', '.join(errors) or 'none'}",
                sql=sql,
                tables_used=tables_in(sql),
            )
            return
        rows = result.get("rows") or []
        if drop_limit and q.k is not None:
            rows = rows[: q.k]
        if not rows or all(v is None for v in rows[0]):
            span = (f" in {q.region}" if q.region else "") + (
                f" for {q.period.label}" if q.period else ""
            )
            self._respond(
                ctx,
                "END_NO_RESULTS",
                "NO_RESULTS",
                f"The query returned no rows{span}: there is no matching data, so I have nothing "
                "to report. You could try a different timeframe or remove a filter.",
                evidence="run_sql returned 0 rows",
                sql=sql,
                tables_used=tables_in(sql),
                key_numbers=[],
            )
            return
        message, numbers = self._render(q, rows, ctx)
        self._respond(
            ctx,
            "N5_ANSWER",
            "ANSWER",
            message,
            evidence=f"run_sql returned {result.get('row_count', len(rows))} row(s) with columns "
            f"{', '.join(result.get('columns', []))}",
            sql=sql,
            tables_used=tables_in(sql),
            key_numbers=numbers,
        )

    def _distort(self, x: float, ctx: TurnContext) -> float:
        """hallucinate_numbers: inflate a figure by 20-100 %, keeping its kind;
        casual_rounds_figures: round it to two significant digits."""
        if _CASUAL.search(self.message) and self._fault("casual_rounds_figures", ctx):
            return float(f"{x:.2g}")
        if not self._fault("hallucinate_numbers", ctx):
            return x
        y = x * (1.2 + 0.8 * ctx.rng.random())
        return float(round(y)) if float(x).is_integer() else round(y, 2)

    def _render(
        self, q: Question, rows: list[list[Any]], ctx: TurnContext
    ) -> tuple[str, list[float]]:
        span = f" for {q.period.label}" if q.period else ""
        where = f" in {q.region}" if q.region else ""
        if q.shape in ("revenue", "summary", "refunds", "order_count", "customer_count"):
            first = self._distort(float(rows[0][0]), ctx)
            rest = [float(v) for v in rows[0][1:]]
            if q.shape == "revenue":
                return (
                    f"Total revenue{where}{span} was {_money(first)} from "
                    f"{int(rest[0]):,} completed orders.",
                    [first, rest[0]],
                )
            if q.shape == "summary":
                return (
                    f"There were {int(first):,} completed orders{where}{span}, with total revenue "
                    f"of {_money(rest[0])}.",
                    [first, rest[0]],
                )
            if q.shape == "refunds":
                return (
                    f"There were {int(first):,} refunded orders{where}{span}, "
                    f"totalling {_money(rest[0])}.",
                    [first, rest[0]],
                )
            if q.shape == "order_count":
                return f"There were {int(first):,} orders{where}{span}.", [first]
            return f"There are {int(first):,} customers{where}.", [first]
        if q.shape in ("top_customers", "top_products", "revenue_by_region"):
            values = [float(r[1]) for r in rows]
            values[0] = self._distort(values[0], ctx)
            parts = "; ".join(f"{r[0]} ({_money(v)})" for r, v in zip(rows, values))
            if q.shape == "revenue_by_region":
                return f"Revenue by region{span}: {parts}.", values
            noun = "customers" if q.shape == "top_customers" else "products"
            return f"The top {len(rows)} {noun} by revenue{where}{span}: {parts}.", values
        listing = "; ".join(f"{r[0]} ({r[1]})" for r in rows)
        return f"Here are {len(rows)} customers{where}: {listing}.", [float(len(rows))]

    def _made_up_answer(self, q: Question, ctx: TurnContext) -> None:
        """no_tool: a confident, plausible answer with no query behind it."""
        span = f" for {q.period.label}" if q.period else ""
        revenue = round(ctx.rng.uniform(50_000, 900_000), 2)
        orders = ctx.rng.randint(40, 400)
        if q.shape in ("order_count", "customer_count"):
            message, numbers = (
                f"There were about {orders:,} {q.shape.split('_')[0]}s{span}.",
                [float(orders)],
            )
        else:
            message, numbers = (
                f"Revenue{span} came to about {_money(revenue)} across {orders:,} orders.",
                [revenue, float(orders)],
            )
        self._respond(
            ctx,
            "N5_ANSWER",
            "ANSWER",
            message,
            evidence="typical figures for this business",
            key_numbers=numbers,
        )
