"""The model-API cache: every response, keyed by (canonical request, trial index).

The *n*-th repeat of a request gets its own sample and a re-run replays exactly the same
samples. Secrets are never stored: only request bodies are seen, and they are scrubbed before
anything is hashed or written; a write that still holds a registered secret is refused. The
modes are those of :class:`CacheMode`; in ``replay-only`` a miss raises :class:`CacheMiss`
with the nearest recorded request.
"""

from __future__ import annotations

import asyncio
import difflib
import enum
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

from agentprop._modelapi.canonical import (
    KEY_FIELDS,
    SCHEMA_VERSION,
    _Canonical,
    _canonical,
    _decode_stored,
    _fast_plain_json,
    _key_from_canonical,
    _plain_copy,
    _RequestShape,
    _secret_needles,
    _to_plain,
    _validate_trial,
    cache_key,
    canonical_json,
    canonical_request,
)
from agentprop._modelapi.stores import (
    CacheStore,
    LayeredCacheStore,
    NewEntry,
    ReadOnlyCacheStore,
    RedisCacheStore,
    Row,
    redis_url,
)
from agentprop._util.scrub import REDACTED, literal_secrets, scrub_secrets, scrub_text
from agentprop.errors import CacheError, CacheMiss, InvalidArgument

__all__ = [
    "KEY_FIELDS",
    "REDACTED",
    "SCHEMA_VERSION",
    "ApiCache",
    "CacheError",
    "CacheMiss",
    "CacheMode",
    "CacheStats",
    "CachedResponse",
    "FileCacheStore",
    "cache_key",
    "open_cache_store",
    "canonical_json",
    "canonical_request",
    "scrub_secrets",
    "scrub_text",
]


_T = TypeVar("_T")

_CANDIDATE_LIMIT = 2000
_DIFF_LINE_LIMIT = 80


def _pretty(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# Errors and modes
# --------------------------------------------------------------------------------------------


class CacheMode(str, enum.Enum):
    """How the cache is used; see the module docstring."""

    OFF = "off"
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read-write"
    REPLAY_ONLY = "replay-only"

    @property
    def reads(self) -> bool:
        """Whether recorded responses are replayed."""
        return self in (CacheMode.READ, CacheMode.READ_WRITE, CacheMode.REPLAY_ONLY)

    @property
    def writes(self) -> bool:
        """Whether fresh responses are stored."""
        return self in (CacheMode.WRITE, CacheMode.READ_WRITE)

    @property
    def calls_api(self) -> bool:
        """Whether a miss may call the model API."""
        return self is not CacheMode.REPLAY_ONLY

    @classmethod
    def parse(cls, value: CacheMode | str) -> CacheMode:
        """A mode from an enum member or its value (``"read-write"``, case-insensitive;
        underscores accepted)."""
        if isinstance(value, CacheMode):
            return value
        if isinstance(value, str):
            wanted = value.strip().lower().replace("_", "-")
            for mode in cls:
                if mode.value == wanted:
                    return mode
        raise InvalidArgument(
            f"Unknown cache mode {value!r}; use one of {', '.join(m.value for m in cls)}."
        )

    @classmethod
    def default(cls, environ: Mapping[str, str] | None = None) -> CacheMode:
        """``AGENTPROP_CACHE_MODE`` if set; else ``replay-only`` under CI (``CI`` set to anything
        but ``""``, ``0``, ``false`` or ``no``); else ``read-write``."""
        env = os.environ if environ is None else environ
        explicit = env.get("AGENTPROP_CACHE_MODE")
        if explicit:
            return cls.parse(explicit)
        ci = env.get("CI")
        if ci is not None and ci.strip().lower() not in ("", "0", "false", "no"):
            return cls.REPLAY_ONLY
        return cls.READ_WRITE


def _checksum(key: str, request_json: str | bytes, response_json: str, usage_json: str) -> str:
    """SHA-256 hex of the entry's four texts joined by U+001F, UTF-8 encoded. ``request_json``
    may be given as its UTF-8 bytes (as lookups read it: the largest text, not decoded only to
    be encoded again); the digest is the same."""
    if isinstance(request_json, bytes):
        digest = hashlib.sha256(key.encode())
        digest.update(b"\x1f")
        digest.update(request_json)
        digest.update(("\x1f" + response_json + "\x1f" + usage_json).encode())
        return digest.hexdigest()
    return hashlib.sha256(
        "\x1f".join((key, request_json, response_json, usage_json)).encode()
    ).hexdigest()


_COLUMN_TYPES: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("key", (str,)),
    ("model", (str,)),
    ("trial", (int,)),
    ("request_json", (str, bytes)),
    ("response_json", (str,)),
    ("usage_json", (str,)),
    ("created_at", (float, int)),
    ("checksum", (str,)),
)
"""The columns of :data:`_COLUMNS`, each with the Python types SQLite may give for it."""


def _sql_type(value: object) -> str:
    return {
        type(None): "NULL",
        str: "text",
        bytes: "a blob",
        int: "an integer",
        float: "a real",
    }.get(type(value), type(value).__name__)


def _wrong_column_types(row: tuple[Any, ...]) -> str:
    """What is wrong with the types of a row of :data:`_COLUMNS` (``""`` when nothing): a
    NULL or a value of the wrong kind in a column that SQLite does not type strictly."""
    return ", ".join(
        f"{name} is {_sql_type(value)}"
        for (name, types), value in zip(_COLUMN_TYPES, row, strict=True)
        if type(value) not in types
    )


# --------------------------------------------------------------------------------------------
# Results and stats
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedResponse:
    """A response as returned by the cache.

    ``response`` is the Messages API response JSON (rebuild the SDK object with
    ``anthropic.types.Message.model_validate(response)``); ``usage`` its ``usage`` object;
    ``from_cache`` is true when it was replayed rather than fetched by this call.
    """

    key: str
    model: str
    trial: int
    response: dict[str, Any]
    usage: dict[str, Any]
    from_cache: bool
    created_at: float

    @property
    def input_tokens(self) -> int:
        """``usage.input_tokens``, or Chat Completions' ``prompt_tokens`` (0 if absent)."""
        return usage_tokens(self.usage)[0]

    @property
    def output_tokens(self) -> int:
        """``usage.output_tokens``, or Chat Completions' ``completion_tokens`` (0 if absent)."""
        return usage_tokens(self.usage)[1]


def usage_tokens(usage: Mapping[str, Any]) -> tuple[int, int]:
    """Input and output tokens of a stored ``usage`` object, whichever API answered: the
    Messages and Responses APIs name them ``input_tokens`` / ``output_tokens``, Chat
    Completions ``prompt_tokens`` / ``completion_tokens`` (0 when neither is there)."""

    def first(*names: str) -> int:
        for name in names:
            value = usage.get(name)
            if type(value) is int and value >= 0:
                return value
        return 0

    return first("input_tokens", "prompt_tokens"), first("output_tokens", "completion_tokens")


@dataclass
class CacheStats:
    """Counters for one :class:`ApiCache` instance (this process only)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _bump(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def _hit(self) -> None:
        with self._lock:
            self.hits += 1

    def as_dict(self) -> dict[str, int]:
        """A plain snapshot, for reports."""
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "writes": self.writes,
                "calls": self.calls,
            }


# --------------------------------------------------------------------------------------------
# The cache
# --------------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS responses (
    key           TEXT PRIMARY KEY,
    model         TEXT NOT NULL,
    trial         INTEGER NOT NULL,
    request_json  TEXT NOT NULL,
    response_json TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    usage_json    TEXT NOT NULL,
    created_at    REAL NOT NULL,
    checksum      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_model_trial ON responses (model, trial);
"""

_MMAP_BYTES = 256 << 20
"""How much of the cache file each connection may read through a memory map."""

_COLUMNS = "key, model, trial, request_json, response_json, usage_json, created_at, checksum"
_SELECT_BY_KEY = (
    "SELECT key, model, trial, CAST(request_json AS BLOB), response_json, usage_json, created_at, "
    "checksum FROM responses WHERE key = ?"
)
"""One entry by key; the request comes as its stored UTF-8 bytes, which only the checksum reads."""


_INSERT_COLUMNS = f"{_COLUMNS}, input_tokens, output_tokens"
_INSERT_OR_IGNORE = (
    f"INSERT OR IGNORE INTO responses ({_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_OR_REPLACE = (
    f"INSERT OR REPLACE INTO responses ({_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class _PendingRow(NamedTuple):
    """An entry ready to write: the statement, its values (``_INSERT_COLUMNS`` order), the
    response as stored and its usage JSON."""

    statement: str
    values: tuple[Any, ...]
    stored: dict[str, Any]
    usage_json: str


def _insert_row(conn: sqlite3.Connection, row: _PendingRow) -> tuple[Any, ...] | None:
    """Write one entry (inside the caller's transaction); ``None`` when the row is ours, else
    the entry another writer stored first under the same key (``INSERT OR IGNORE``)."""
    if conn.execute(row.statement, row.values).rowcount == 1:
        return None  # the row is ours: no need to read it back
    existing: tuple[Any, ...] = conn.execute(
        f"SELECT {_COLUMNS} FROM responses WHERE key = ?", (row.values[0],)
    ).fetchone()
    return existing


@dataclass
class _WriteBatch:
    """The entries put on one event loop during one pass of it, committed together by
    :meth:`ApiCache._commit_batch`, which sets ``found`` (for each row, ``None`` when the row is
    ours, else the entry another writer stored first) or ``error``, then ``done``."""

    loop: asyncio.AbstractEventLoop
    rows: list[_PendingRow] = field(default_factory=list)
    found: list[tuple[Any, ...] | None] = field(default_factory=list)
    error: Exception | None = None
    done: bool = False
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    """Callers that resumed before the commit ran (only on a loop that does not run its
    callbacks in the order they were scheduled); woken when it has."""


class _Staged(NamedTuple):
    """An entry waiting in ``batch`` at ``position`` for its commit (:meth:`ApiCache._stage`)."""

    batch: _WriteBatch
    position: int


class ApiCache:
    """A SQLite-backed cache of Messages API responses keyed by (request, trial index).

    Args:
        path: the SQLite file (created, with parent folders, in modes that write).
        mode: a :class:`CacheMode` or its value; default :meth:`CacheMode.default`.
        secrets: extra literal strings (for example the API key in use) to redact wherever they
            appear in stored JSON.
        busy_timeout: seconds to wait for another process's write lock.
        store: where the entries live instead of the file at ``path`` (a
            :class:`~agentprop._modelapi.stores.CacheStore`: Redis, read-only, layered); keys,
            modes and replays are the same. ``None``: the SQLite file at ``path``.

    Typical use, around one SDK call::

        result = cache.get_or_call(request, trial=k, call=lambda: client.messages.create(**request))
        message = anthropic.types.Message.model_validate(result.response)
        budget.charge_usage(message.model, message.usage, cached=result.from_cache)

    Safe to share between threads and asyncio tasks, and between processes using the same file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: CacheMode | str | None = None,
        secrets: Iterable[str] = (),
        busy_timeout: float = 30.0,
        store: CacheStore | None = None,
    ) -> None:
        self.path = Path(path)
        self.store = store
        self._mode = CacheMode.default() if mode is None else CacheMode.parse(mode)
        self._secrets = literal_secrets(secrets)
        self._needles = _secret_needles(self._secrets)
        if busy_timeout < 0:
            raise InvalidArgument(f"busy_timeout={busy_timeout} must be >= 0 seconds.")
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._conn_lock = threading.Lock()
        self._schema_ready = False
        self._closed = False
        self._pid = os.getpid()
        self.stats = CacheStats()

    @property
    def mode(self) -> CacheMode:
        """The mode, fixed when the cache is opened."""
        return self._mode

    # -- connections -----------------------------------------------------------------------------

    def _busy_retry(
        self, op: Callable[[], _T], failed: sqlite3.OperationalError | None = None
    ) -> _T:
        """Run ``op``, retrying while SQLite reports the database busy or locked.

        ``busy_timeout`` covers ordinary lock waits, but SQLite returns ``SQLITE_BUSY`` at once
        in a few WAL situations (another process recovering the WAL after a crash, or cleaning
        up as its last connection closes); those are retried here until ``busy_timeout``.
        ``failed``: the error of a first attempt the caller already made (handled as if it had
        been this function's own first attempt).
        """
        deadline = time.monotonic() + self._busy_timeout
        pause = 0.005
        while True:
            if failed is None:
                try:
                    return op()
                except sqlite3.OperationalError as exc:
                    failed = exc
                except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed" ...
                    raise self._damaged(exc) from None
            message = str(failed).lower()
            if "locked" not in message and "busy" not in message:
                raise self._damaged(failed) from None
            if time.monotonic() >= deadline:
                raise failed
            failed = None
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _damaged(self, exc: BaseException) -> CacheError:
        """SQLite could not use the file: a damaged (or foreign) cache, never an agent failure."""
        return CacheError(
            f"{self.path}: the API cache file cannot be used: SQLite says {exc}.\n"
            "  fix: delete the file (responses are recorded again in read-write mode) or restore "
            f"it from version control; ApiCache({str(self.path)!r}).verify() lists "
            "what is wrong with it"
        )

    def _connection(self) -> sqlite3.Connection | None:
        """This thread's connection, or ``None`` when a mode that never writes finds no cache.

        Modes that write create the file and schema; the others only read what exists.
        """
        if self._closed:
            raise CacheError(f"The cache {self.path} is closed.")
        if os.getpid() != self._pid:
            # a forked child must not use its parent's SQLite connections: start afresh
            self._pid = os.getpid()
            self._local = threading.local()
            with self._conn_lock:
                self._connections = []
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if not self.path.exists():
            if not self.mode.writes:
                return None
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._busy_retry(self._open)
        if conn is None:
            return None
        self._local.conn = conn
        with self._conn_lock:
            self._connections.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection | None:
        conn = sqlite3.connect(
            str(self.path), timeout=self._busy_timeout, isolation_level=None, check_same_thread=True
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            self._refuse_foreign(conn)  # before anything is changed: no tables added, no WAL
            # read pages through a memory map (no read() system call per page: replays look up
            # rows all over the file); a hint, which SQLite may cap, changes no results
            conn.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
            if self.mode.writes:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._ensure_schema(conn)
            elif not self._check_schema(conn):
                conn.close()
                return None
        except BaseException:
            conn.close()
            raise
        return conn

    def _refuse_foreign(self, conn: sqlite3.Connection) -> None:
        """Refuse a SQLite file that holds tables of another application (as the trial memo
        does): adding agentprop's tables and switching it to WAL mode would change someone
        else's database."""
        try:
            tables = {
                str(r[0])
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                ).fetchall()
            }
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        foreign = sorted(
            n for n in tables - {"schema_version", "responses"} if not n.startswith("sqlite_")
        )
        if foreign:
            shown = ", ".join(foreign[:5]) + (
                f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
            )
            raise CacheError(
                f"{self.path}: not an agentprop API cache: the SQLite file holds other tables "
                f"({shown}); it was left unchanged.\n  fix: point the cache at a file of its own "
                "(--cache PATH, or cache= in Python; the default is .agentprop/api-cache.sqlite)"
            )

    def _version_error(self, found: str) -> CacheError:
        return CacheError(
            f"{self.path}: the cache file has schema version {found}, this agentprop uses "
            f"version {SCHEMA_VERSION}. Delete the file (it will be re-recorded) or point the "
            "cache at another path."
        )

    def _check_schema(self, conn: sqlite3.Connection) -> bool:
        """Read-only check for connections that never write: False if there is no cache yet."""
        tables = {
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        }
        if not {"schema_version", "responses"} <= tables:
            return False
        rows = conn.execute("SELECT version FROM schema_version").fetchall()
        if [r[0] for r in rows] != [SCHEMA_VERSION]:
            raise self._version_error(", ".join(str(r[0]) for r in rows) or "(none)")
        return True

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        if self._schema_ready:
            return

        def create(c: sqlite3.Connection) -> None:
            for statement in filter(None, (part.strip() for part in _SCHEMA.split(";"))):
                c.execute(statement)
            row = c.execute("SELECT version FROM schema_version").fetchall()
            if not row:
                c.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif len(row) != 1 or row[0][0] != SCHEMA_VERSION:
                raise self._version_error(", ".join(str(r[0]) for r in row))

        self._transaction(conn, create)
        self._schema_ready = True

    @staticmethod
    def _transaction(conn: sqlite3.Connection, body: Callable[[sqlite3.Connection], _T]) -> _T:
        """``body`` inside one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back if it raises)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = body(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def _write(self, body: Callable[[sqlite3.Connection], _T]) -> _T:
        conn = self._connection()
        if conn is None:
            raise CacheError(
                f"The cache file {self.path} does not exist, so nothing can be changed in it."
            )
        return self._busy_retry(lambda: self._transaction(conn, body))

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]] | None:
        """All rows of one query, or ``None`` when there is no cache file to read."""
        conn = self._connection()
        if conn is None:
            return None
        return self._busy_retry(lambda: conn.execute(sql, params).fetchall())

    def close(self) -> None:
        """Close every connection this instance opened (in any thread)."""
        with self._conn_lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            try:
                conn.close()
            except sqlite3.ProgrammingError:
                # opened in another thread that still owns it; it closes when collected
                pass
        self._local = threading.local()
        self._closed = True
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> ApiCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- keys ------------------------------------------------------------------------------------

    def canonical(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The scrubbed canonical form of ``request`` (what is hashed and stored)."""
        return self._canonical(request).value

    def _canonical(self, request: Mapping[str, Any]) -> _Canonical:
        return _canonical(request, self._secrets, self._needles)

    def key(self, request: Mapping[str, Any], *, trial: int) -> str:
        """The cache key of ``request`` for sample ``trial``."""
        return self._canonical(request).key(_validate_trial(trial))

    # -- reading ---------------------------------------------------------------------------------

    def _row_to_result(self, row: tuple[Any, ...], *, from_cache: bool) -> CachedResponse:
        key, model, trial, request_json, response_json, usage_json, created_at, checksum = row
        wrong = _wrong_column_types(row)
        if wrong:
            raise CacheError(
                f"{self.path}: the entry {str(key)[:16]}... is damaged ({wrong}): the row was "
                "edited, or written by another program. Run ApiCache.verify() to list damaged "
                "entries, delete them with ApiCache.delete(key), and re-record."
            )
        if _checksum(key, request_json, response_json, usage_json) != checksum:
            raise CacheError(
                f"{self.path}: the entry {key[:16]}... fails its checksum (the file was edited or "
                "damaged). Run ApiCache.verify() to list damaged entries, delete them with "
                "ApiCache.delete(key), and re-record."
            )
        try:
            return CachedResponse(
                key,
                model,
                int(trial),
                _decode_stored(response_json),
                _decode_stored(usage_json),
                from_cache,
                float(created_at),
            )
        except (ValueError, TypeError, RecursionError) as exc:
            raise CacheError(
                f"{self.path}: the entry {str(key)[:16]}... cannot be read back "
                f"({type(exc).__name__}: {str(exc)[:200]}). Run ApiCache.verify() to list damaged "
                "entries, delete them with ApiCache.delete(key), and re-record."
            ) from None

    def lookup(self, request: Mapping[str, Any], *, trial: int) -> CachedResponse | None:
        """The recorded response for (request, trial), whatever the mode; ``None`` if absent."""
        key = self.key(request, trial=trial)
        return self._lookup_key(key)

    def _lookup_key(self, key: str) -> CachedResponse | None:
        if self.store is not None:
            found = self.store.lookup(key)
            return None if found is None else self._row_to_result(found, from_cache=True)
        conn = self._connection()
        if conn is None:
            return None
        try:  # the usual case first, without building the retry closure
            row = conn.execute(_SELECT_BY_KEY, (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            row = self._busy_retry(lambda: conn.execute(_SELECT_BY_KEY, (key,)).fetchone(), exc)
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        return None if row is None else self._row_to_result(row, from_cache=True)

    def get(self, request: Mapping[str, Any], *, trial: int) -> CachedResponse | None:
        """The recorded response if the mode reads; ``None`` on a miss (or in ``off`` / ``write``).

        In ``replay-only`` mode a miss raises :class:`CacheMiss` instead.
        """
        if not self.mode.reads:
            return None
        return self._get_canonical(self._canonical(request), _validate_trial(trial))

    def _get_canonical(self, canonical: _Canonical, trial: int) -> CachedResponse | None:
        """:meth:`get` once the canonical request is known (the mode reads)."""
        key = canonical.key(trial)
        found = self._lookup_key(key)
        if found is not None:
            self.stats._hit()
            return found
        self.stats._bump("misses")
        if self.mode is CacheMode.REPLAY_ONLY:
            raise self._miss_error(canonical.value, canonical.text, key, trial)
        return None

    # -- writing ---------------------------------------------------------------------------------

    def put(
        self, request: Mapping[str, Any], *, trial: int, response: Any, replace: bool | None = None
    ) -> CachedResponse:
        """Store ``response`` (a JSON mapping or a pydantic model such as the SDK's ``Message``)
        for (request, trial) and return what is stored.

        Writes only in ``write`` / ``read-write`` mode (otherwise returns the response unstored).
        The first writer of a key wins (``read-write``), so concurrent writers all get the same
        stored answer; ``write`` mode (``replace=True``) overwrites.
        """
        return self._put_canonical(
            self._canonical(request), _validate_trial(trial), response, replace
        )

    def _put_canonical(
        self, canonical: _Canonical, trial: int, response: Any, replace: bool | None
    ) -> CachedResponse:
        """:meth:`put` once the canonical request is known: one transaction for the one entry."""
        row = self._prepare_row(canonical, trial, response, replace)
        if isinstance(row, CachedResponse):
            return row
        existing = self._insert([row])[0]
        self.stats._bump("writes")
        return self._stored_result(row, existing)

    async def _aput_canonical(
        self, canonical: _Canonical, trial: int, response: Any
    ) -> CachedResponse:
        """:meth:`_put_canonical` for the event loop, with group commit: every entry put on one
        loop within one pass of the loop is written by one transaction, at the start of the
        next pass, and each caller resumes only once that transaction has committed. So an
        answer is never handed on before it is stored (a kill loses nothing that was
        returned), and a burst of answers arriving together pays one ``COMMIT`` (the bulk of a
        write's cost) instead of one each. (:meth:`_stage` then :meth:`_committed`.)"""
        staged = self._stage(canonical, trial, response)
        del response  # not held while waiting: see _stage
        return staged if isinstance(staged, CachedResponse) else await self._committed(staged)

    def _stage(
        self, canonical: _Canonical, trial: int, response: Any, replace: bool | None = None
    ) -> CachedResponse | _Staged:
        """The first half of :meth:`_aput_canonical`: the entry prepared and added to this
        pass's batch (the answer as returned, in a mode that does not write). The caller should
        drop its own reference to ``response`` before awaiting :meth:`_committed`: a batch's
        callers all wait at once, and what they hold meanwhile is what the garbage collector's
        youngest generation sees grow."""
        row = self._prepare_row(canonical, trial, response, replace)
        if isinstance(row, CachedResponse):
            return row
        batch: _WriteBatch | None = getattr(self._local, "batch", None)
        loop = asyncio.get_running_loop()
        if batch is None or batch.loop is not loop:
            batch = _WriteBatch(loop)
            self._local.batch = batch
            loop.call_soon(self._commit_batch, batch)
        batch.rows.append(row)
        return _Staged(batch, len(batch.rows) - 1)

    async def _committed(self, staged: _Staged) -> CachedResponse:
        """The second half of :meth:`_aput_canonical`: wait for the batch's commit and return
        the entry as stored. The wait is one yield: the commit was scheduled before any of its
        callers yielded, and asyncio runs ready callbacks in order; a caller that finds it has
        not run (a loop that reorders callbacks) waits for it."""
        batch = staged.batch
        await asyncio.sleep(0)
        if not batch.done:
            waiter: asyncio.Future[None] = batch.loop.create_future()
            batch.waiters.append(waiter)
            await waiter
        if batch.error is not None:
            raise batch.error
        return self._stored_result(batch.rows[staged.position], batch.found[staged.position])

    def _commit_batch(self, batch: _WriteBatch) -> None:
        """Write a :class:`_WriteBatch` in one transaction (a loop callback); its callers read
        the outcome when they resume. A caller cancelled meanwhile has its entry stored all
        the same: the answer was paid for."""
        if getattr(self._local, "batch", None) is batch:
            self._local.batch = None
        rows = batch.rows
        try:
            batch.found = self._insert(rows)
            with self.stats._lock:
                self.stats.writes += len(rows)
        except Exception as exc:  # every caller of the batch gets it
            batch.error = exc
        finally:
            batch.done = True
            for waiter in batch.waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _insert(self, rows: list[_PendingRow]) -> list[tuple[Any, ...] | None]:
        """Write ``rows`` in one transaction (of the file, or of the store); for each, ``None``
        when it is ours, else the entry another writer stored first."""
        if self.store is not None:
            return self.store.insert(
                [NewEntry(row.values, row.statement is _INSERT_OR_REPLACE) for row in rows]
            )
        return self._write(lambda conn: [_insert_row(conn, row) for row in rows])

    def _prepare_row(
        self, canonical: _Canonical, trial: int, response: Any, replace: bool | None
    ) -> _PendingRow | CachedResponse:
        """The entry to write for ``response`` (scrubbed, checksummed), or, in a mode that
        does not write, the response as it would be returned."""
        canonical_text = canonical.text
        key = canonical.key(trial)
        fast = _fast_plain_json(response, self._needles) if type(response) is dict else None
        response_plain: dict[str, Any] | None = None  # the response as given, as plain data
        stored: dict[str, Any] | None = None  # the response as stored (keys sorted)
        if fast is not None:
            response_json, stored = fast
        else:
            plain = _to_plain(response, "response")
            if not isinstance(plain, dict):
                raise InvalidArgument(
                    f"response must be a JSON object (a Message), not {type(response).__name__}."
                )
            response_plain = scrub_secrets(plain, self._secrets)
            response_json = canonical_json(response_plain)
        request_model = canonical.model
        now = time.time()
        if not self.mode.writes:
            if response_plain is None:
                response_plain = _plain_copy(response)
            raw_usage = response_plain.get("usage")
            usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
            return CachedResponse(
                key, request_model, trial, response_plain, dict(usage), False, now
            )
        if stored is None:
            stored = json.loads(response_json)
        raw_usage = stored.get("usage")
        usage = raw_usage if isinstance(raw_usage, dict) else {}
        usage_json = canonical_json(usage)
        for text in (canonical_text, response_json):
            for secret in self._secrets:
                if secret in text:  # scrubbing makes this unreachable; refuse rather than leak
                    raise CacheError(
                        "Refusing to store a cache entry that contains a registered secret."
                    )
        checksum = _checksum(key, canonical_text, response_json, usage_json)
        overwrite = self.mode is CacheMode.WRITE if replace is None else replace
        values = (
            key,
            request_model,
            trial,
            canonical_text,
            response_json,
            usage_json,
            now,
            checksum,
            *usage_tokens(usage),
        )
        return _PendingRow(
            _INSERT_OR_REPLACE if overwrite else _INSERT_OR_IGNORE, values, stored, usage_json
        )

    def _stored_result(self, row: _PendingRow, existing: tuple[Any, ...] | None) -> CachedResponse:
        """What a put returns: the new entry, or the one another writer stored first."""
        if existing is not None:  # another writer was first: everyone gets the stored answer
            return self._row_to_result(existing, from_cache=False)
        key, model, trial, _request, _response, usage_json, now = row.values[:7]
        # what reading it back would give
        return CachedResponse(key, model, trial, row.stored, json.loads(usage_json), False, now)

    def delete(self, key: str) -> bool:
        """Remove one entry by key; returns whether it existed."""
        if self.store is not None:
            return self.store.delete(key)
        if self._connection() is None:
            return False
        return self._write(
            lambda conn: conn.execute("DELETE FROM responses WHERE key = ?", (key,)).rowcount > 0
        )

    # -- the usual path --------------------------------------------------------------------------

    def get_or_call(
        self, request: Mapping[str, Any], *, trial: int, call: Callable[[], Any]
    ) -> CachedResponse:
        """Replay (request, trial) if recorded and the mode reads; otherwise ``call()`` the API
        (unless replay-only, which raises :class:`CacheMiss`) and store the answer if the mode
        writes. ``call`` returns the response as a mapping or a pydantic model."""
        canonical, trial, hit = self._begin(request, trial)
        if hit is not None:
            return hit
        self.stats._bump("calls")
        return self._put_canonical(canonical, trial, call(), None)

    async def aget_or_call(
        self, request: Mapping[str, Any], *, trial: int, call: Callable[[], Awaitable[Any]]
    ) -> CachedResponse:
        """The asyncio form of :meth:`get_or_call` (``call`` returns an awaitable); the answer
        is group-committed (see :meth:`_aput_canonical`)."""
        return await self._aget_or_call_shaped(None, request, trial=trial, call=call)

    def _request_shape(
        self, request: Mapping[str, Any], field: str = "messages"
    ) -> _RequestShape | None:
        """The :class:`_RequestShape` of ``request`` for this cache, its conversation in
        ``field`` (``None``: key such requests with :meth:`aget_or_call`)."""
        return _RequestShape.build(request, self._needles, field)

    async def _aget_or_call_shaped(
        self,
        shape: _RequestShape | None,
        request: Mapping[str, Any],
        *,
        trial: int,
        call: Callable[[], Awaitable[Any]],
    ) -> CachedResponse:
        """:meth:`aget_or_call`, keyed through ``shape`` when given (the same key, less work;
        ``request`` must then be ``shape.body(messages)`` for a shape this cache made)."""
        canonical, trial, hit = self._begin(request, trial, shape)
        if hit is not None:
            return hit
        self.stats._bump("calls")
        return await self._aput_canonical(canonical, trial, await call())

    def _begin(
        self, request: Mapping[str, Any], trial: int, shape: _RequestShape | None = None
    ) -> tuple[_Canonical, int, CachedResponse | None]:
        """The lookup half of every get-or-call (the sync and async ones here, and the
        model-client layer's): the canonical request, the validated trial and the replayed
        response, if the mode reads and has one (a miss in ``replay-only`` mode raises
        :class:`CacheMiss`). ``request`` must be ``shape.body(...)`` when a shape is given.
        Finish a miss with :meth:`_put_canonical`, :meth:`_aput_canonical` or :meth:`_store`."""
        canonical = (
            shape.canonical(request[shape.field])
            if shape is not None and shape._needles is self._needles
            else None
        )
        if canonical is None:
            canonical = self._canonical(request)
        trial = _validate_trial(trial)
        hit = self._get_canonical(canonical, trial) if self.mode.reads else None
        return canonical, trial, hit

    def _store(
        self, canonical: _Canonical, trial: int, response: Any, *, replace: bool | None = None
    ) -> CachedResponse | _Staged:
        """The second half of a model call after :meth:`_begin` missed: record the response the
        API gave (if the mode writes). Group-committed: returns the entry staged for the next
        commit (await :meth:`_committed` for it, having dropped ``response``; see
        :meth:`_stage`), or the response as returned in a mode that does not write.
        ``replace``: overwrite an entry already stored under the key (default: only in
        ``write`` mode)."""
        self.stats._bump("calls")
        return self._stage(canonical, trial, response, replace)

    # -- inspection ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.count()

    def count(self, *, model: str | None = None) -> int:
        """Entries stored (of ``model`` only, when given); 0 when there is no cache file."""
        if self.store is not None:
            return self.store.count(model)
        rows = (
            self._read("SELECT COUNT(*) FROM responses")
            if model is None
            else self._read("SELECT COUNT(*) FROM responses WHERE model = ?", (model,))
        )
        return int(rows[0][0]) if rows else 0

    def holds(self, model: str) -> bool:
        """Whether any recorded response is of ``model`` (cheaper than :meth:`count`)."""
        if self.store is not None:
            return self.store.holds(model)
        return bool(self._read("SELECT 1 FROM responses WHERE model = ? LIMIT 1", (model,)))

    def where(self) -> str:
        """Where the entries live, as messages name it: the file, or the store."""
        return self.store.describe() if self.store is not None else str(self.path)

    def entries(self) -> Iterator[CachedResponse]:
        """Every stored entry, oldest first."""
        if self.store is not None:
            for full in self.store.rows():
                yield self._row_to_result(full[:8], from_cache=True)
            return
        rows = self._read(f"SELECT {_COLUMNS} FROM responses ORDER BY created_at, key") or []
        for row in rows:
            yield self._row_to_result(row, from_cache=True)

    def verify(self) -> list[str]:
        """Check the file: SQLite's ``integrity_check``, then every entry's checksum, JSON and
        key. Returns the problems found (empty when the cache is sound); never raises for a
        damaged file, which is itself a problem on the list. With a :attr:`store`, every
        entry of the store is checked."""
        if self.store is not None:
            return self._entry_problems(self.store.rows())
        if not self.path.exists():
            return []
        problems: list[str] = []

        def read(sql: str) -> list[tuple[Any, ...]] | None:
            try:
                return self._read(sql)
            except CacheError as exc:
                problems.append(str(exc).splitlines()[0].removeprefix(f"{self.path}: "))
                return None

        integrity = read("PRAGMA integrity_check")
        if integrity is None:
            return problems or [
                "not an agentprop API cache: the file has no schema_version and responses tables"
            ]
        if [r[0] for r in integrity] != ["ok"]:
            problems.extend(f"integrity_check: {r[0]}" for r in integrity)
        version = read("SELECT version FROM schema_version")
        if version is not None and [v[0] for v in version] != [SCHEMA_VERSION]:
            problems.append(f"schema_version is {version}, expected [{SCHEMA_VERSION}]")
        return problems + self._entry_problems(
            read(f"SELECT {_COLUMNS}, input_tokens, output_tokens FROM responses") or []
        )

    @staticmethod
    def _entry_problems(rows: Iterable[tuple[Any, ...]]) -> list[str]:
        """What is wrong with each entry (its ten values): types, checksum, JSON, key, model."""
        problems: list[str] = []
        for full in rows:
            row, tokens = full[:8], full[8:]
            key = str(row[0])[:64]
            wrong = _wrong_column_types(row) or ", ".join(
                f"{n} is {_sql_type(v)}, not an integer"
                for n, v in zip(("input_tokens", "output_tokens"), tokens, strict=True)
                if type(v) is not int
            )
            if wrong:
                problems.append(f"{key}: damaged entry ({wrong})")
                continue
            try:
                key, model, trial, request_json, response_json, usage_json, _created, checksum = row
                if _checksum(key, request_json, response_json, usage_json) != checksum:
                    problems.append(f"{key}: checksum mismatch")
                    continue
                request = json.loads(request_json)
                json.loads(response_json)
                json.loads(usage_json)
                if _key_from_canonical(request_json, int(trial)) != key:
                    problems.append(f"{key}: key does not match the stored request and trial")
                if not isinstance(request, dict) or request.get("model") != model:
                    problems.append(f"{key}: model column {model!r} differs from the request's")
            except (ValueError, TypeError, AttributeError, RecursionError) as exc:
                problems.append(f"{key}: unreadable entry ({type(exc).__name__}: {str(exc)[:200]})")
        return problems

    # -- miss explanation ------------------------------------------------------------------------

    def _candidates(self, model: str, trial: int) -> list[tuple[str, str, int, str]]:
        if self.store is not None:
            return self.store.candidates(model, trial, _CANDIDATE_LIMIT)
        queries = (
            ("WHERE model = ? AND trial = ?", (model, trial)),
            ("WHERE model = ?", (model,)),
            ("", ()),
        )
        for where, params in queries:
            rows = self._read(
                f"SELECT key, model, trial, request_json FROM responses {where} ORDER BY "
                f"created_at DESC LIMIT {_CANDIDATE_LIMIT}",
                params,
            )
            if rows:
                return [(str(r[0]), str(r[1]), int(r[2]), str(r[3])) for r in rows]
        return []

    def _miss_error(
        self, canonical: dict[str, Any], canonical_text: str, key: str, trial: int
    ) -> CacheMiss:
        model = str(canonical.get("model"))
        head = (
            f"No recorded response for this request (model {model!r}, trial {trial}, key "
            f"{key[:16]}...), and the cache is in replay-only mode, so no API call was made."
        )
        fix = (
            "  fix: if the change is intended, record it: run once with the cache in read-write "
            "mode (unset CI, or set AGENTPROP_CACHE_MODE=read-write), then commit the updated "
            f"cache file {self.path}."
        )
        total = len(self)
        lines = [head, f"  cache: {self.path} ({total} recorded responses)"]
        if total == 0:
            lines.append(
                "  the cache is empty or the file does not exist: nothing has been recorded yet."
            )
            lines.append(fix)
            return CacheMiss(
                "\n".join(lines), key=key, model=model, trial=trial, nearest_key=None, diff=None
            )

        if self.store is not None:
            same_request = [(t,) for t in self.store.trials_of(canonical_text)]
        else:
            same_request = (
                self._read(
                    "SELECT trial FROM responses WHERE request_json = ? ORDER BY trial",
                    (canonical_text,),
                )
                or []
            )
        if same_request:
            trials = ", ".join(str(r[0]) for r in same_request)
            lines.append(
                f"  this exact request is recorded for trial(s) {trials} but not for trial "
                f"{trial}: replay-only mode cannot draw a new sample."
            )
            lines.append(
                "  fix: record the extra trials (read-write mode), or ask for no more "
                "repeats than were recorded."
            )
            return CacheMiss(
                "\n".join(lines), key=key, model=model, trial=trial, nearest_key=None, diff=None
            )

        from rapidfuzz import fuzz, process

        candidates = self._candidates(model, trial)
        best = process.extractOne(canonical_text, [c[3] for c in candidates], scorer=fuzz.ratio)
        if best is None:  # the entries vanished meanwhile (another process deleted them)
            lines.append(fix)
            return CacheMiss(
                "\n".join(lines), key=key, model=model, trial=trial, nearest_key=None, diff=None
            )
        _choice, score, index = best
        near_key, near_model, near_trial, near_json = candidates[index]
        recorded = _pretty(json.loads(near_json))
        requested = _pretty(canonical)
        diff_lines = list(
            difflib.unified_diff(
                recorded.splitlines(),
                requested.splitlines(),
                fromfile=f"recorded (key {near_key[:16]}..., trial {near_trial})",
                tofile=f"requested (trial {trial})",
                lineterm="",
                n=3,
            )
        )
        if near_trial != trial:
            diff_lines.append(f"(and the trial differs: recorded {near_trial}, requested {trial})")
        if len(diff_lines) > _DIFF_LINE_LIMIT:
            extra = len(diff_lines) - _DIFF_LINE_LIMIT
            diff_lines = diff_lines[:_DIFF_LINE_LIMIT] + [f"... ({extra} more diff lines)"]
        diff = "\n".join(diff_lines)
        scope = (
            "same model and trial"
            if (near_model == model and near_trial == trial)
            else ("same model" if near_model == model else "any model")
        )
        lines.append(
            f"  nearest recorded request ({scope}): key {near_key[:16]}..., model {near_model!r}, "
            f"trial {near_trial}, similarity {score:.1f}%"
        )
        lines.append("  what changed (- recorded, + requested):")
        lines.extend("    " + line for line in diff.splitlines())
        lines.append(fix)
        return CacheMiss(
            "\n".join(lines), key=key, model=model, trial=trial, nearest_key=near_key, diff=diff
        )


class FileCacheStore(CacheStore):
    """The SQLite cache file at ``path`` behind the :class:`CacheStore` interface (what a
    layered store reads its committed base through): an :class:`ApiCache` on the file, in
    ``read`` mode (never creating or changing it) unless ``writable``."""

    def __init__(self, path: str | os.PathLike[str], *, writable: bool = False) -> None:
        self.writable = writable
        self.cache = ApiCache(path, mode=CacheMode.READ_WRITE if writable else CacheMode.READ)

    def describe(self) -> str:
        return str(self.cache.path)

    def lookup(self, key: str) -> Row | None:
        conn = self.cache._connection()
        if conn is None:
            return None
        found: Row | None = self.cache._busy_retry(
            lambda: conn.execute(_SELECT_BY_KEY, (key,)).fetchone()
        )
        return found

    def insert(self, entries: Sequence[NewEntry]) -> list[Row | None]:
        if not self.writable:
            raise self._refuse(f"store {len(entries)} new entries")
        rows = [
            _PendingRow(_INSERT_OR_REPLACE if e.replace else _INSERT_OR_IGNORE, e.values, {}, "")
            for e in entries
        ]
        return self.cache._insert(rows)

    def delete(self, key: str) -> bool:
        if not self.writable:
            raise self._refuse(f"delete the entry {key[:16]}...")
        return self.cache.delete(key)

    def rows(self) -> Iterator[Row]:
        return iter(
            self.cache._read(
                f"SELECT {_COLUMNS}, input_tokens, output_tokens FROM responses "
                "ORDER BY created_at, key"
            )
            or []
        )

    def count(self, model: str | None = None) -> int:
        return self.cache.count(model=model)

    def holds(self, model: str) -> bool:
        return self.cache.holds(model)

    def trials_of(self, request_json: str) -> list[int]:
        rows = (
            self.cache._read(
                "SELECT trial FROM responses WHERE request_json = ? ORDER BY trial", (request_json,)
            )
            or []
        )
        return [int(r[0]) for r in rows]

    def candidates(self, model: str, trial: int, limit: int) -> list[tuple[str, str, int, str]]:
        return self.cache._candidates(model, trial)[:limit]

    def close(self) -> None:
        self.cache.close()


def open_cache_store(store: str, base: str | os.PathLike[str] | None = None) -> CacheStore:
    """The API cache store of a shared store URL (``redis://host:port/db``): the Redis server,
    writable, layered over the cache file at ``base`` read-only when that file exists (a
    committed cache: replayed from, never written; new answers go to Redis)."""
    url, ours = redis_url(store)
    top = RedisCacheStore(url, prefix=f"{ours.get('prefix', 'agentprop')}:api:")
    if base is not None and Path(base).is_file():
        return LayeredCacheStore(top, ReadOnlyCacheStore(FileCacheStore(base)))
    return top
