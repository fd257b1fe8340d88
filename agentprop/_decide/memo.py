"""Memoised runs: every agent run is kept under (input, agent fingerprint, trial index).

The same key always gives the same trace, so Hypothesis's replay and shrinking see a
deterministic function and a re-run costs no agent run; fresh samples need a new namespace or
new trial indices. Runs are stored, never verdicts: the caller judges the stored trace on every
lookup. A run in flight is shared by concurrent requests for its key. Stores (a
:class:`MemoStore`): memory only, a SQLite file (safe across processes and threads; a file of
another format raises :class:`~agentprop.errors.MemoFileError`), or a Redis server (across
machines).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import warnings
import zlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Union

from pydantic import ValidationError

from agentprop._modelapi.stores import redis_client, redis_url, safe_url
from agentprop._scenario.trace import Trace
from agentprop.errors import AgentPropWarning, InvalidArgument, MemoFileError, SourceLocation

SCHEMA_VERSION = 2
"""Format of a memo file: 2 stores runs (``runs(key, trace_json)``); 1 (``user_version`` 0
with a ``trials`` table of verdicts) was written by earlier agentprop versions."""

_OLD_TRIALS_COLUMNS = {
    "key",
    "passed",
    "signature",
    "explanation",
    "clause",
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "trace_json",
}

_DELETE_FIX = (
    "delete the file (it is only a cache of agent runs: they are made again) or point the memo "
    "elsewhere (--agentprop-memo PATH, TrialMemo(path))"
)


def input_key(obj: Any) -> str:
    """A stable digest of any JSON-able description of an input."""
    text = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def trace_json(trace: Trace) -> str:
    """A trace as the memo stores it: JSON, with any value JSON cannot hold (an object a tool
    handler returned) written as its ``str``."""
    return trace.model_dump_json(fallback=str)


def _pack(text: str) -> bytes:
    """A run's JSON as the Redis store holds it (zlib's fastest level: a few times smaller)."""
    return zlib.compress(text.encode(), 1)


_ZDICT_MAX = 32 * 1024
"""zlib looks back 32 KB at most: a longer preset dictionary is cut to its end."""


class RunClaim:
    """The right, and the duty, to make the run of one key: other requests for the key wait for
    it. Settle it exactly once: :meth:`store` the run, or :meth:`release` it (the run was
    cancelled, refused by the budget or failed), which lets a waiting request make it."""

    __slots__ = ("_flight", "_memo", "key")

    def __init__(self, memo: TrialMemo, key: str, flight: asyncio.Future[bool] | None) -> None:
        self._memo = memo
        self.key = key
        self._flight = flight

    def store(self, trace: Trace) -> Trace:
        """Keep the run (see :meth:`TrialMemo.put`) and wake the requests waiting for it."""
        stored = self._memo.put(self.key, trace)
        self._settle(True)
        return stored

    def release(self) -> None:
        """Give the claim up without a run (a no-op once settled)."""
        self._settle(False)

    def _settle(self, stored: bool) -> None:
        flight, self._flight = self._flight, None
        if flight is None:
            return
        with self._memo._lock:
            if self._memo._flights.get(self.key) is flight:
                del self._memo._flights[self.key]
        if not flight.done():
            flight.set_result(stored)


Begun = Union[Trace, "asyncio.Future[bool]", RunClaim]
"""What :meth:`TrialMemo.begin` gives: the stored run, the flight of a run in progress to wait
for (:meth:`TrialMemo.shared`), or the claim to make the run."""


class MemoStore(ABC):
    """Where a memo keeps its runs beyond the process: each a trace's JSON by key."""

    @abstractmethod
    def describe(self) -> str:
        """The store as messages name it (a path, a URL without its password)."""

    @abstractmethod
    def get(self, key: str) -> str | None:
        """The run stored under ``key`` (its JSON), or ``None``."""

    @abstractmethod
    def put(self, key: str, text: str) -> None:
        """Store a run's JSON under ``key`` (replacing any)."""

    @abstractmethod
    def count(self) -> int:
        """Runs stored."""


class FileMemoStore(MemoStore):
    """Runs in a SQLite file (``runs(key, trace_json)``, format :data:`SCHEMA_VERSION`): safe
    across the processes and threads of one machine."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._open_file()

    def describe(self) -> str:
        return str(self.path)

    def _fail(self, problem: str, fix: str = _DELETE_FIX) -> MemoFileError:
        return MemoFileError(problem, location=SourceLocation(self.path), fix=fix)

    def _open_file(self) -> None:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._fail(
                f"cannot create the directory of the trial memo: {exc}",
                "give a memo path in a writable directory",
            ) from None
        if self.path.is_dir():
            raise self._fail(
                "the trial memo path is a directory",
                "give the path of a file, e.g. .agentprop/trials.sqlite",
            )
        try:
            con = self._con()
            con.execute("BEGIN IMMEDIATE")
            try:
                self._check_or_create(con)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
            con.execute("PRAGMA journal_mode=WAL")  # only once the file is known to be a memo
        except sqlite3.DatabaseError as exc:
            self._close()
            raise self._fail(f"not a usable trial memo: SQLite says {exc!s}") from None

    def _check_or_create(self, con: sqlite3.Connection) -> None:
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if version == SCHEMA_VERSION and "runs" in tables:
            columns = self._columns(con, "runs")
            if not {"key", "trace_json"} <= columns:
                raise self._fail(
                    "damaged trial memo: its `runs` table has columns "
                    f"{', '.join(sorted(columns))}, not key and trace_json"
                )
            problems = [str(r[0]) for r in con.execute("PRAGMA quick_check(5)")]
            if problems != ["ok"]:
                raise self._fail(
                    f"damaged trial memo: SQLite's quick_check says {'; '.join(problems)[:300]}"
                )
            return
        if version > SCHEMA_VERSION:
            raise self._fail(
                f"trial memo of format {version}, written by a newer agentprop (this one reads "
                f"format {SCHEMA_VERSION})",
                "use that agentprop version, or " + _DELETE_FIX,
            )
        if version == 0 and not tables:
            self._create(con)
            return
        if (
            version == 0
            and tables == {"trials"}
            and self._columns(con, "trials") == _OLD_TRIALS_COLUMNS
        ):
            dropped = int(con.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
            con.execute("DROP TABLE trials")
            self._create(con)
            warnings.warn(
                AgentPropWarning(
                    f"{self.path}: trial memo of format 1 (verdicts) converted to format "
                    f"{SCHEMA_VERSION} (runs); its {dropped} stored verdict(s) were dropped, "
                    "since a verdict cannot be judged again: format 1 kept no trace of passing "
                    "trials and keyed every trial by its property. Those trials run again once."
                ),
                stacklevel=3,
            )
            return
        listing = ", ".join(sorted(tables)) or "none"
        raise self._fail(
            f"not an agentprop trial memo (SQLite user_version {version}, tables: {listing}; a "
            f"memo of format {SCHEMA_VERSION} has user_version "
            f"{SCHEMA_VERSION} and a table `runs`)",
            "point the memo at another file (--agentprop-memo PATH, TrialMemo(path)); if this is "
            "an old memo, delete it (it is only a cache)",
        )

    @staticmethod
    def _columns(con: sqlite3.Connection, table: str) -> set[str]:
        return {str(r[1]) for r in con.execute(f"PRAGMA table_info({table})")}

    @staticmethod
    def _create(con: sqlite3.Connection) -> None:
        con.execute("CREATE TABLE runs (key TEXT PRIMARY KEY, trace_json TEXT NOT NULL)")
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _con(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            assert self.path is not None
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            try:
                con.execute("PRAGMA busy_timeout=30000")
                con.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.DatabaseError:
                con.close()
                raise
            self._local.con = con
        return con

    def _close(self) -> None:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    def _damaged(self, exc: sqlite3.DatabaseError) -> MemoFileError:
        """A memo file that broke after it was opened (another process, the disk)."""
        return self._fail(
            f"the trial memo failed: SQLite says {exc!s} (the file was damaged or "
            "changed while in use)"
        )

    def get(self, key: str) -> str | None:
        try:
            row = (
                self._con().execute("SELECT trace_json FROM runs WHERE key = ?", (key,)).fetchone()
            )
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        return None if row is None else str(row[0])

    def put(self, key: str, text: str) -> None:
        try:
            self._con().execute(
                "INSERT OR REPLACE INTO runs (key, trace_json) VALUES (?, ?)", (key, text)
            )
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None

    def count(self) -> int:
        try:
            return int(self._con().execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None


_REDIS_TTL_S = 30 * 24 * 3600
"""How long the runs of a Redis memo stay after its last write."""


class RedisMemoStore(MemoStore):
    """Runs on a Redis server, shared by every process and machine that opens it: one hash
    (``PREFIX:memo``, ``agentprop:memo`` by default) of zlib-compressed trace JSON by key,
    kept 30 days after its last write."""

    def __init__(self, url: str, *, prefix: str = "agentprop") -> None:
        self.url = url
        self.key = f"{prefix}:memo"
        self._client = redis_client(url, "the Redis trial memo")

    def describe(self) -> str:
        return safe_url(self.url)

    def get(self, key: str) -> str | None:
        packed = self._client.hget(self.key, key)
        if packed is None:
            return None
        return zlib.decompress(
            packed if isinstance(packed, bytes) else packed.encode("latin-1")
        ).decode()

    def put(self, key: str, text: str) -> None:
        with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(self.key, key, _pack(text))
            pipe.expire(self.key, _REDIS_TTL_S)
            pipe.execute()

    def count(self) -> int:
        return int(self._client.hlen(self.key))


class ReadOnlyMemoStore(MemoStore):
    """``inner`` for reading only: a run stored through it is dropped, never written (the memo
    saves runs, it is not a record: a run not kept is made again by a later process)."""

    def __init__(self, inner: MemoStore) -> None:
        self.inner = inner

    def describe(self) -> str:
        return f"{self.inner.describe()} (read-only)"

    def get(self, key: str) -> str | None:
        return self.inner.get(key)

    def put(self, key: str, text: str) -> None:
        return None

    def count(self) -> int:
        return self.inner.count()


class LayeredMemoStore(MemoStore):
    """A writable ``top`` over read-only ``bases`` (a shared Redis memo over a memo file from an
    earlier session): a run is looked up in ``top``, then in each base; a run stored goes to
    ``top`` only."""

    def __init__(self, top: MemoStore, *bases: MemoStore) -> None:
        self.top = top
        self.bases = bases

    def describe(self) -> str:
        return " over ".join(layer.describe() for layer in (self.top, *self.bases))

    def get(self, key: str) -> str | None:
        for layer in (self.top, *self.bases):
            text = layer.get(key)
            if text is not None:
                return text
        return None

    def put(self, key: str, text: str) -> None:
        self.top.put(key, text)

    def count(self) -> int:
        """Runs stored in every layer (a run in two layers counts twice)."""
        return sum(layer.count() for layer in (self.top, *self.bases))


class FrozenFileMemoStore(MemoStore):
    """A memo file read as it is, never written or converted (SQLite's ``immutable`` mode, or
    read-only when a WAL beside it holds runs not yet in the file): the base of a
    :class:`LayeredMemoStore`. A file that is not a memo of format :data:`SCHEMA_VERSION` is an
    error naming it."""

    def __init__(self, path: str | Path) -> None:
        from urllib.parse import quote

        self.path = Path(path)
        self._lock = threading.Lock()
        # immutable when the file is all there is; a WAL beside it (a session still open, or
        # killed before its checkpoint) holds runs only a read-only reader of the WAL sees
        wal = self.path.with_name(self.path.name + "-wal")
        mode = "mode=ro" if wal.exists() and wal.stat().st_size else "immutable=1"
        uri = f"file:{quote(str(self.path.resolve()))}?{mode}"
        try:
            self._con = sqlite3.connect(uri, uri=True, check_same_thread=False)
            version = int(self._con.execute("PRAGMA user_version").fetchone()[0])
            tables = {
                str(r[0])
                for r in self._con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        except sqlite3.DatabaseError as exc:
            raise MemoFileError(
                f"not a usable trial memo: SQLite says {exc!s}",
                location=SourceLocation(self.path),
                fix=_DELETE_FIX,
            ) from None
        if version != SCHEMA_VERSION or "runs" not in tables:
            self._con.close()
            raise MemoFileError(
                f"not a trial memo of format {SCHEMA_VERSION} (user_version {version}), so it "
                "cannot be read as it is under a shared store",
                location=SourceLocation(self.path),
                fix=_DELETE_FIX,
            )

    def describe(self) -> str:
        return f"{self.path} (read-only)"

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._con.execute("SELECT trace_json FROM runs WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, text: str) -> None:
        raise MemoFileError(
            "a memo file read under a shared store is not written",
            location=SourceLocation(self.path),
            fix="wrap it in LayeredMemoStore(top, FrozenFileMemoStore(path)): runs go to top",
        )

    def count(self) -> int:
        with self._lock:
            return int(self._con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def open_memo_store(store: str) -> MemoStore:
    """The memo store of a shared store URL (``redis://host:port/db[?prefix=P]``)."""
    url, ours = redis_url(store)
    return RedisMemoStore(url, prefix=ours.get("prefix", "agentprop"))


class TrialMemo:
    """A store of agent runs (traces) keyed by ``(input key, agent fingerprint, trial)``: in
    memory, and in ``store`` (a :class:`MemoStore`; ``path``: a :class:`FileMemoStore` there)."""

    def __init__(
        self, path: str | Path | None = None, *, namespace: str = "", store: MemoStore | None = None
    ) -> None:
        if path is not None and store is not None:
            raise InvalidArgument("TrialMemo: give a path or a store, not both")
        self.path = Path(path) if path is not None else None
        self.store = FileMemoStore(path) if path is not None else store
        self.namespace = namespace
        self._mem: dict[str, bytes] = {}
        """The runs held in memory, compressed (a run of many thousand cases keeps every run)
        against :attr:`_zdict`."""
        self._zdict: bytes | None = None
        """The first run's JSON: the preset dictionary every run in :attr:`_mem` is compressed
        with (runs of one agent repeat its keys, tools and ids: a small run packs 3x smaller)."""
        self._lock = threading.Lock()
        self._local = threading.local()
        self._flights: dict[str, asyncio.Future[bool]] = {}
        """Runs in progress, by key: each resolves to whether its run was stored."""
        self.hits = 0
        self.misses = 0
        self.unreadable = 0
        """Stored runs that no longer parse as a trace (written by another agentprop version):
        looked up as misses, so the trial runs again and its new run replaces them."""

    # ------------------------------------------------------------------ runs

    def key(self, input_digest: str, fingerprint: str, trial: int) -> str:
        return hashlib.sha256(
            f"{self.namespace}\x1f{input_digest}\x1f{fingerprint}\x1f{trial}".encode()
        ).hexdigest()

    def get(self, key: str) -> Trace | None:
        """The run stored under ``key`` (a fresh copy on every call), or ``None``."""
        with self._lock:
            packed = self._mem.get(key)
        text: str | bytes | None = self._unpack(packed) if packed is not None else None
        if text is None and self.store is not None:
            text = self.store.get(key)
            if text is not None:
                self._keep(key, text)
        trace = None
        if text is not None:
            try:
                trace = Trace.from_json(text)
            except ValidationError:
                with self._lock:
                    self.unreadable += 1
                    self._mem.pop(key, None)
            if trace is not None and trace.infrastructure_error is not None:
                trace = None  # kept by an older agentprop: a run that was never made, made again
        with self._lock:
            if trace is None:
                self.misses += 1
            else:
                self.hits += 1
        return trace

    def put(self, key: str, trace: Trace) -> Trace:
        """Store a run under ``key``; returns it as every later :meth:`get` will see it (read
        back from its JSON), so a fresh run and a replayed one are judged on equal traces. A run
        stopped by an error that is not the agent's (a cache miss, no API key ...) is not a run
        of the agent: it is returned as it is and never stored, so the trial is made again."""
        if trace.infrastructure_error is not None:
            return trace
        text = trace_json(trace)
        self._keep(key, text)
        if self.store is not None:
            self.store.put(key, text)
        return Trace.from_json(text)

    def _keep(self, key: str, text: str) -> None:
        """Hold a run's JSON in memory, compressed against the memo's dictionary."""
        raw = text.encode()
        with self._lock:
            if self._zdict is None:
                self._zdict = raw[-_ZDICT_MAX:]
            zdict = self._zdict
        packer = zlib.compressobj(1, zdict=zdict)
        packed = packer.compress(raw) + packer.flush()
        with self._lock:
            self._mem[key] = packed

    def _unpack(self, packed: bytes) -> bytes:
        assert self._zdict is not None  # set by the first run kept
        return zlib.decompressobj(zdict=self._zdict).decompress(packed)

    def begin(self, key: str) -> Begun:
        """Start a request for the run of ``key``: the stored run (a copy) if there is one; else,
        if a task of this event loop is making it, that run's flight (``await``
        :meth:`shared`); else a :class:`RunClaim` on it, which the caller must settle. Outside
        an event loop, and for runs in progress on another loop, no run is shared."""
        trace = self.get(key)
        if trace is not None:
            return trace
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return RunClaim(self, key, None)
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                if flight.get_loop() is loop:
                    return flight
                return RunClaim(self, key, None)
            flight = self._flights[key] = loop.create_future()
        return RunClaim(self, key, flight)

    async def shared(self, key: str, flight: asyncio.Future[bool]) -> Trace | None:
        """Wait for the run in progress on ``flight``; its trace (a copy), or ``None`` if its
        maker gave it up (then :meth:`begin` again: this request may make it)."""
        if not await asyncio.shield(flight):
            return None
        return self.get(key)

    def in_flight(self) -> int:
        """Runs in progress that other requests could share."""
        with self._lock:
            return len(self._flights)

    def __len__(self) -> int:
        if self.store is not None:
            return self.store.count()
        return len(self._mem)
