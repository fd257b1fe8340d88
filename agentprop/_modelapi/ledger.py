"""One budget for several processes: a :class:`~agentprop._modelapi.budget.Budget`'s totals
behind the :class:`Ledger` interface.

Invariant of every backend: :meth:`Ledger.book` reads the totals, decides and writes in one
atomic step, so two processes never both take the last run or dollar. Backends:
:class:`SharedLedger` (a SQLite file, one machine) and :class:`RedisLedger` (any number of
machines). A reservation left by a killed process stays held until the ledger ends.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agentprop._modelapi.stores import redis_client, redis_url
from agentprop.errors import InvalidArgument

if TYPE_CHECKING:
    import redis

__all__ = [
    "STORE_ENV",
    "RUN_ENV",
    "Ledger",
    "LedgerTotals",
    "RedisLedger",
    "SharedLedger",
    "open_ledger",
]

STORE_ENV = "AGENTPROP_STORE"
"""The environment variable naming the shared store (``redis://host:port/db``)
when no option does."""
RUN_ENV = "AGENTPROP_RUN_ID"
"""The environment variable naming the run whose processes share one budget on a shared store."""

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


class Ledger(ABC):
    """The shared totals of one run's budget. :meth:`book` reads the totals, asks a function
    what to change, and writes the change, atomically across every process using the same
    ledger; :meth:`totals` reads them."""

    @abstractmethod
    def totals(self) -> LedgerTotals:
        """What every process of the run has booked so far."""

    @abstractmethod
    def book(self, change: Callable[[LedgerTotals], LedgerTotals | None]) -> LedgerTotals | None:
        """Apply ``change`` to the current totals atomically across processes; ``change``
        returns the new totals, or ``None`` to book nothing (the limit is reached). Returns what
        ``change`` returned. ``change`` may be called more than once (a backend may retry after
        a conflict), so it must only compute, except when it returns ``None``."""

    def add(
        self,
        *,
        runs: int = 0,
        tokens: int = 0,
        usd: float = 0.0,
        reserved_tokens: int = 0,
        reserved_usd: float = 0.0,
    ) -> None:
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


class SharedLedger(Ledger):
    """The totals of one run's budget, shared through the SQLite file at ``path`` (the
    processes of one machine).

    Every :meth:`book` is one ``BEGIN IMMEDIATE`` transaction. Open one per process
    (connections are per thread, as SQLite wants)."""

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
                raise InvalidArgument(
                    f"{self.path}: the shared budget ledger cannot be opened ({exc})"
                ) from None
            self._local.con = con
        return con

    def totals(self) -> LedgerTotals:
        row = (
            self._connection()
            .execute(f"SELECT {', '.join(_COLUMNS)} FROM totals WHERE id = 0")
            .fetchone()
        )
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
                    (
                        new.runs,
                        new.tokens,
                        new.usd,
                        new.reserved_tokens,
                        max(0.0, new.reserved_usd),
                    ),
                )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return new


_REDIS_TTL_S = 7 * 24 * 3600
"""How long a run's totals stay in Redis after its last booking (a run ends; its key goes)."""


class RedisLedger(Ledger):
    """The totals of run ``run``'s budget, one Redis hash (``agentprop:budget:RUN``) shared by
    every process, on any machine, that opens the same server, database and run.

    Every :meth:`book` watches the hash, reads it, computes the change, and writes it in a
    ``MULTI``/``EXEC`` that fails if another process wrote in between; then it reads again and
    retries, so no booking is lost and none is made against stale totals. Each write renews the
    key's expiry (7 days)."""

    def __init__(self, url: str, run: str) -> None:
        if not run:
            raise InvalidArgument(
                "a Redis budget ledger needs a run name (the processes that share one budget)"
            )
        self.url = url
        self.run = run
        self.key = f"agentprop:budget:{run}"
        self._client: redis.Redis = redis_client(url, "the Redis budget ledger")

    def totals(self) -> LedgerTotals:
        return _parse(self._client.hgetall(self.key))

    def book(self, change: Callable[[LedgerTotals], LedgerTotals | None]) -> LedgerTotals | None:
        import redis  # imported by __init__: a lookup

        with self._client.pipeline() as pipe:
            while True:
                try:
                    # redis-py leaves watch() untyped
                    pipe.watch(self.key)  # type: ignore[no-untyped-call]
                    new = change(_parse(pipe.hgetall(self.key)))
                    if new is None:
                        pipe.unwatch()
                        return None
                    new = replace(new, reserved_usd=max(0.0, new.reserved_usd))
                    pipe.multi()
                    pipe.hset(
                        self.key,
                        mapping={f.name: repr(getattr(new, f.name)) for f in fields(LedgerTotals)},
                    )
                    pipe.expire(self.key, _REDIS_TTL_S)
                    pipe.execute()
                    return new
                except redis.WatchError:
                    continue


def _parse(raw: dict[bytes | str, bytes | str]) -> LedgerTotals:
    values = {_text(k): _text(v) for k, v in raw.items()}
    return LedgerTotals(
        runs=int(values.get("runs", 0)),
        tokens=int(values.get("tokens", 0)),
        usd=float(values.get("usd", 0.0)),
        reserved_tokens=int(values.get("reserved_tokens", 0)),
        reserved_usd=float(values.get("reserved_usd", 0.0)),
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def open_ledger(store: str, run: str | None = None) -> Ledger:
    """The ledger of a shared store URL: ``redis://[:password@]host:port/db[?run=NAME]`` (or
    ``rediss://``). The run's name comes from ``?run=``, else ``run``, else the environment
    variable ``AGENTPROP_RUN_ID``, else a fresh one (then only this process and the ones it
    hands the name to share the budget)."""
    url, ours = redis_url(store)
    name = ours.get("run") or run or os.environ.get(RUN_ENV, "") or uuid.uuid4().hex
    return RedisLedger(url, name)
