"""Memoised trials: every agent run is keyed by (input, agent fingerprint, trial index).

Hypothesis re-executes a test body while it replays and shrinks; a noisy agent run afresh
each time makes it raise ``Flaky``. With memoised trials the same input, agent and trial index
always give the same outcome, so replay and shrinking see a deterministic function, and a
re-run of a test suite is free. Fresh samples are an explicit choice: a new ``namespace``
(``--agentprop-fresh``) gives every key a new identity.

Two stores: in memory (default) and SQLite on disk (``path=``), safe for several processes
(WAL, busy timeout) and for concurrent threads (one connection per thread).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrialRecord:
    """What one trial of a property gave."""

    passed: bool
    signature: str | None = None
    explanation: str | None = None
    clause: str | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    trace_json: str | None = None


def input_key(obj: Any) -> str:
    """A stable digest of any JSON-able description of an input."""
    text = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class TrialMemo:
    """A store of trial outcomes keyed by ``(input key, agent fingerprint, trial)``."""

    def __init__(self, path: str | Path | None = None, *, namespace: str = "") -> None:
        self.path = Path(path) if path is not None else None
        self.namespace = namespace
        self._mem: dict[str, TrialRecord] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self.hits = 0
        self.misses = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = self._con()
            with con:
                con.execute(
                    "CREATE TABLE IF NOT EXISTS trials (key TEXT PRIMARY KEY, passed INTEGER NOT NULL, "
                    "signature TEXT, explanation TEXT, clause TEXT, cost_usd REAL, input_tokens INTEGER, "
                    "output_tokens INTEGER, trace_json TEXT)"
                )

    def _con(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            assert self.path is not None
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA busy_timeout=30000")
            self._local.con = con
        return con

    def key(self, input_digest: str, fingerprint: str, trial: int) -> str:
        return hashlib.sha256(f"{self.namespace}\x1f{input_digest}\x1f{fingerprint}\x1f{trial}".encode()).hexdigest()

    def get(self, key: str) -> TrialRecord | None:
        with self._lock:
            rec = self._mem.get(key)
        if rec is None and self.path is not None:
            row = self._con().execute(
                "SELECT passed, signature, explanation, clause, cost_usd, input_tokens, output_tokens, trace_json FROM trials WHERE key = ?",
                (key,),
            ).fetchone()
            if row is not None:
                rec = TrialRecord(bool(row[0]), row[1], row[2], row[3], row[4] or 0.0, row[5] or 0, row[6] or 0, row[7])
                with self._lock:
                    self._mem[key] = rec
        with self._lock:
            if rec is None:
                self.misses += 1
            else:
                self.hits += 1
        return rec

    def put(self, key: str, record: TrialRecord) -> None:
        with self._lock:
            self._mem[key] = record
        if self.path is not None:
            self._con().execute(
                "INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, int(record.passed), record.signature, record.explanation, record.clause, record.cost_usd, record.input_tokens, record.output_tokens, record.trace_json),
            )

    def __len__(self) -> int:
        if self.path is not None:
            return int(self._con().execute("SELECT COUNT(*) FROM trials").fetchone()[0])
        return len(self._mem)
