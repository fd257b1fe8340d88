"""One budget for several processes: the totals of a :class:`~agentprop._modelapi.budget.Budget`
kept in a small SQLite file that every process of a run updates in a transaction.

pytest-xdist runs a test suite in several worker processes. Each worker has its own session and
its own :class:`Budget`; with a :class:`SharedLedger` they check and book runs, tokens and
dollars against the same totals, so ``--agentprop-max-usd 10`` with eight workers allows $10,
not $80. Every booking is one ``BEGIN IMMEDIATE`` transaction: the check ("is anything left?")
and the booking happen under one write lock, so two workers can never both take the last run
or the last reserved dollar. The file holds one row of totals; it is created by the process that
starts the workers (the pytest-xdist controller) and removed with its temporary directory.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from agentprop.errors import InvalidArgument

__all__ = ["LedgerTotals", "SharedLedger"]

_BUSY_TIMEOUT_S = 60.0
"""How long a process waits for another's transaction (they last microseconds)."""


@dataclass(frozen=True)
class LedgerTotals:
    """What every process of the run has booked so far."""

    runs: int = 0
    tokens: int = 0
    usd: float = 0.0
    reserved_tokens: int = 0
    reserved_usd: float = 0.0


_COLUMNS = ("runs", "tokens", "usd", "reserved_tokens", "reserved_usd")


class SharedLedger:
    """The totals of one run's budget, shared through the SQLite file at ``path``.

    :meth:`book` reads the totals, asks a function what to change, and writes the change, all
    in one transaction; :meth:`totals` reads them. Open one per process (connections are per
    thread, as SQLite wants)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        con = self._connection()
        with con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 0), "
                "runs INTEGER NOT NULL, tokens INTEGER NOT NULL, usd REAL NOT NULL, "
                "reserved_tokens INTEGER NOT NULL, reserved_usd REAL NOT NULL)"
            )
            con.execute("INSERT OR IGNORE INTO totals VALUES (0, 0, 0, 0.0, 0, 0.0)")

    def _connection(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            try:
                con = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            except sqlite3.Error as exc:
                raise InvalidArgument(f"{self.path}: the shared budget ledger cannot be opened ({exc})") from None
            self._local.con = con
        return con

    def totals(self) -> LedgerTotals:
        row = self._connection().execute(f"SELECT {', '.join(_COLUMNS)} FROM totals WHERE id = 0").fetchone()
        return LedgerTotals(*row)

    def book(self, change: Callable[[LedgerTotals], LedgerTotals | None]) -> LedgerTotals | None:
        """Apply ``change`` to the current totals atomically across processes; ``change``
        returns the new totals, or ``None`` to book nothing (the limit is reached). Returns what
        ``change`` returned."""
        con = self._connection()
        con.execute("BEGIN IMMEDIATE")
        try:
            row = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM totals WHERE id = 0").fetchone()
            new = change(LedgerTotals(*row))
            if new is not None:
                con.execute(
                    f"UPDATE totals SET {', '.join(f'{c} = ?' for c in _COLUMNS)} WHERE id = 0",
                    (new.runs, new.tokens, new.usd, new.reserved_tokens, max(0.0, new.reserved_usd)),
                )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return new

    def add(self, *, runs: int = 0, tokens: int = 0, usd: float = 0.0, reserved_tokens: int = 0, reserved_usd: float = 0.0) -> None:
        """Book a change that no limit refuses (a charge after the fact, a freed reservation)."""
        self.book(
            lambda t: replace(
                t,
                runs=t.runs + runs,
                tokens=t.tokens + tokens,
                usd=t.usd + usd,
                reserved_tokens=max(0, t.reserved_tokens + reserved_tokens),
                reserved_usd=max(0.0, t.reserved_usd + reserved_usd),
            )
        )
