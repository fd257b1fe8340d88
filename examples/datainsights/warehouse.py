"""The DataInsights world: a real, in-memory SQLite analytics warehouse.

Each :class:`~agentprop.scenarios.World` gets its own database, built lazily on the first tool call
and kept in ``world.state``. Its contents are a pure function of ``world.seed``: a small analytics
schema (customers, products, orders, order_items) with orders dated from 2025-01-01 to
2026-06-30, so questions about 2025 or 2026 have data and questions about 2024 (or 2027) have
none.

Two stateful tool handlers answer the spec's tools (bind them under ``handlers:`` in
``agentprop.yaml``):

``run_sql(args, world)``
    executes the agent's query for real and returns ``{columns, rows, row_count}``. Only a
    single ``SELECT`` / ``WITH`` statement is accepted; anything else, and every SQLite error,
    is answered with ``ToolError("invalid_query", ...)``. The connection is read-only
    (``PRAGMA query_only`` and an authorizer that allows reads only), and a query that runs too
    long is interrupted and answered with ``ToolError("timeout", ...)``.
``describe_schema(args, world)``
    returns ``{tables: {table: {column: type}}}`` read from the database itself (``PRAGMA
    table_info``).

Because answers come from a real database, a test can check an agent's numbers against a Python
computation over :func:`generate_data` (see ``tests/test_datainsights_agent.py``).
"""

from __future__ import annotations

import hashlib
import random
import re
import sqlite3
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from agentprop import ToolError
from agentprop.scenarios import World

__all__ = [
    "DATA_END",
    "DATA_START",
    "MAX_ROWS",
    "SCHEMA_SQL",
    "Dataset",
    "build_database",
    "database",
    "describe_schema",
    "generate_data",
    "run_sql",
]

DATA_START = date(2025, 1, 1)
DATA_END = date(2026, 6, 30)
"""First and last order dates (inclusive)."""

MAX_ROWS = 1000
"""At most this many rows are returned; ``row_count`` still counts them all."""

MAX_VM_STEPS = 2_000_000
"""A query is interrupted (``timeout``) after about this many SQLite virtual-machine steps."""

_STATE_KEY = "datainsights.warehouse"

SCHEMA_SQL = """
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    region      TEXT NOT NULL,
    signup_date TEXT NOT NULL
);
CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    category   TEXT NOT NULL,
    unit_price REAL NOT NULL
);
CREATE TABLE orders (
    order_id    INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
    order_date  TEXT NOT NULL,
    status      TEXT NOT NULL,
    amount      REAL NOT NULL
);
CREATE TABLE order_items (
    order_id   INTEGER NOT NULL REFERENCES orders(order_id),
    product_id INTEGER NOT NULL REFERENCES products(product_id),
    quantity   INTEGER NOT NULL,
    unit_price REAL NOT NULL
);
"""

_CUSTOMER_NAMES = [
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella Health",
    "Stark Industries",
    "Wayne Logistics",
    "Hooli",
    "Vandelay Imports",
    "Soylent Foods",
    "Tyrell Systems",
    "Cyberdyne Labs",
    "Wonka Confections",
]
_REGIONS = ["North America", "Europe", "APAC", "LATAM"]
_PRODUCTS = [
    ("Analytics Seat", "software", 49.0),
    ("Analytics Team Pack", "software", 399.0),
    ("Data Connector", "software", 120.0),
    ("Onboarding Workshop", "services", 950.0),
    ("Support Plan", "services", 300.0),
    ("Storage Add-on", "infrastructure", 75.5),
    ("Compute Credits", "infrastructure", 19.99),
    ("Audit Report", "services", 640.0),
]


@dataclass(frozen=True)
class Dataset:
    """The rows of every table, as inserted (tuples in column order)."""

    customers: list[tuple[int, str, str, str]]
    products: list[tuple[int, str, str, float]]
    orders: list[tuple[int, int, str, str, float]]
    """``(order_id, customer_id, order_date, status, amount)``; ``amount`` is the sum of the
    order's items, rounded to cents."""
    order_items: list[tuple[int, int, int, float]]


def _stable_seed(*parts: object) -> int:
    """A 64-bit seed from the parts' text, the same in every process (``hash()`` is salted)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _random_day(rng: random.Random, start: date, end: date) -> date:
    return start + timedelta(days=rng.randint(0, (end - start).days))


def generate_data(seed: int) -> Dataset:
    """The warehouse contents for ``seed`` (deterministic across processes).

    Every customer has at least one completed order in each calendar year covered (2025 and
    2026), so per-year and top-k questions always have answers; 2024 and 2027 are empty.
    """
    rng = random.Random(_stable_seed("datainsights-warehouse", seed))
    customers = [
        (
            i + 1,
            name,
            rng.choice(_REGIONS),
            _random_day(rng, date(2023, 1, 1), date(2024, 12, 31)).isoformat(),
        )
        for i, name in enumerate(_CUSTOMER_NAMES)
    ]
    products = [
        (i + 1, name, category, price) for i, (name, category, price) in enumerate(_PRODUCTS)
    ]
    plan: list[tuple[int, date, str]] = []
    for cid, *_ in customers:
        plan.append((cid, _random_day(rng, date(2025, 1, 1), date(2025, 12, 31)), "completed"))
        plan.append((cid, _random_day(rng, date(2026, 1, 1), DATA_END), "completed"))
    for _ in range(150 + rng.randint(0, 30)):
        status = "refunded" if rng.random() < 0.08 else "completed"
        plan.append(
            (rng.randint(1, len(customers)), _random_day(rng, DATA_START, DATA_END), status)
        )
    plan.sort(key=lambda p: (p[1], p[0]))
    orders: list[tuple[int, int, str, str, float]] = []
    items: list[tuple[int, int, int, float]] = []
    for order_id, (cid, day, status) in enumerate(plan, start=1):
        total = 0.0
        for product_id in rng.sample(range(1, len(products) + 1), rng.randint(1, 3)):
            qty = rng.randint(1, 12)
            price = products[product_id - 1][3]
            items.append((order_id, product_id, qty, price))
            total += qty * price
        orders.append((order_id, cid, day.isoformat(), status, round(total, 2)))
    return Dataset(customers=customers, products=products, orders=orders, order_items=items)


# ----------------------------------------------------------------------------- database

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
_READ_ACTIONS.add(getattr(sqlite3, "SQLITE_RECURSIVE", 33))


def _read_only_authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


def build_database(seed: int) -> sqlite3.Connection:
    """A fresh in-memory database holding :func:`generate_data` ``(seed)``, made read-only."""
    # Agent turns may run in executor threads: the connection is used by one thread at a time.
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.executescript(SCHEMA_SQL)
    data = generate_data(seed)
    conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", data.customers)
    conn.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", data.products)
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", data.orders)
    conn.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?)", data.order_items)
    conn.commit()
    conn.execute("PRAGMA query_only = ON")
    return conn


def database(world: World) -> sqlite3.Connection:
    """The world's database, created on first use from ``world.seed``."""
    conn = world.state.get(_STATE_KEY)
    if conn is None:
        conn = world.state[_STATE_KEY] = build_database(world.seed)
    return conn  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- query checks

_TOKEN = re.compile(
    r"""
    (?P<string>'(?:[^']|'')*'?)            # 'text' ('' escapes a quote)
    | (?P<ident>"(?:[^"]|"")*"?|`[^`]*`?|\[[^\]]*\]?)
    | (?P<line_comment>--[^\n]*)
    | (?P<block_comment>/\*.*?(?:\*/|$))
    | (?P<semicolon>;)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def _check_read_only(query: str) -> None:
    """Accept one ``SELECT`` or ``WITH`` statement (a trailing ``;`` is fine), else raise."""
    words: list[str] = []
    statement_ended = False
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup
        if kind in ("line_comment", "block_comment") or (kind == "other" and m.group().isspace()):
            continue
        if kind == "semicolon":
            statement_ended = True
            continue
        if statement_ended:
            raise ToolError("invalid_query", "only one SQL statement per run_sql call is allowed")
        if kind == "word":
            words.append(m.group().upper())
        elif kind == "other" and m.group() == "(" and not words:
            continue
        elif not words:
            words.append(m.group())
    if not words:
        raise ToolError("invalid_query", "the query is empty; send one SELECT statement")
    if words[0] not in ("SELECT", "WITH"):
        raise ToolError(
            "invalid_query",
            "only read-only SELECT (or WITH ... SELECT) queries are allowed; this query "
            f"starts with {words[0]}",
        )


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


# ----------------------------------------------------------------------------- handlers


def run_sql(args: dict[str, Any], world: World) -> dict[str, Any]:
    """Handler of ``run_sql``: execute ``args["query"]`` against the world's database."""
    query = args.get("query")
    if not isinstance(query, str):
        raise ToolError("invalid_query", "run_sql needs a `query` string")
    _check_read_only(query)
    conn = database(world)
    steps = 0

    def progress() -> int:
        nonlocal steps
        steps += 1000
        return 1 if steps > MAX_VM_STEPS else 0

    conn.set_authorizer(_read_only_authorizer)
    conn.set_progress_handler(progress, 1000)
    try:
        cursor = conn.execute(query)
        columns = [d[0] for d in cursor.description or ()]
        rows: list[list[Any]] = []
        count = 0
        for row in cursor:
            count += 1
            if len(rows) < MAX_ROWS:
                rows.append([_jsonable(v) for v in row])
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise ToolError(
                "timeout", f"the query ran too long and was stopped (over {MAX_VM_STEPS:,} steps)"
            ) from None
        raise ToolError("invalid_query", f"SQLite error: {exc}") from None
    except (sqlite3.DatabaseError, sqlite3.Warning, sqlite3.ProgrammingError, ValueError) as exc:
        raise ToolError("invalid_query", f"SQLite error: {exc}") from None
    finally:
        conn.set_progress_handler(None, 0)
        conn.set_authorizer(None)
    return {"columns": columns, "rows": rows, "row_count": count}


def describe_schema(args: dict[str, Any], world: World) -> dict[str, Any]:
    """Handler of ``describe_schema``: ``{tables: {table: {column: declared type}}}``."""
    conn = database(world)
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
            "'sqlite_%' ORDER BY name"
        )
    ]
    tables: dict[str, dict[str, str]] = {}
    for name in names:
        info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
        tables[name] = {row[1]: row[2] for row in info}
    return {"tables": tables}
