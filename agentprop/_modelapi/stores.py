"""Shared stores: the API cache's entries behind the :class:`CacheStore` interface, and the
Redis connection every shared store (cache, memo, corpus, ledger) opens from a store URL.

Backends: the SQLite file (:class:`~agentprop._modelapi.cache.FileCacheStore`) and a Redis
server (:class:`RedisCacheStore`); wrappers: :class:`ReadOnlyCacheStore` (refuses every write)
and :class:`LayeredCacheStore` (reads look through its layers, top first; writes go to the
writable top only). Invariants of every backend: an entry is stored as the file stores it (the
same key, texts and checksum, so a store never changes what a replay gives), and a write that
does not replace keeps the first writer's entry, which every writer gets back.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from agentprop.errors import CacheError, InvalidArgument

if TYPE_CHECKING:
    import redis

__all__ = [
    "CacheStore",
    "LayeredCacheStore",
    "NewEntry",
    "ReadOnlyCacheStore",
    "RedisCacheStore",
    "Row",
    "redis_client",
    "redis_url",
    "safe_url",
]

Row = tuple[Any, ...]
"""An entry as the cache reads it: key, model, trial, request_json, response_json, usage_json,
created_at, checksum (then, in :meth:`CacheStore.rows`, input_tokens and output_tokens)."""


class NewEntry(NamedTuple):
    """An entry to write: its ten values (the row's eight, then input and output tokens) and
    whether it replaces an entry stored under its key (else the stored one is kept)."""

    values: tuple[Any, ...]
    replace: bool


class CacheStore(ABC):
    """Where API cache entries live, by key (see the module docstring)."""

    writable: bool = True
    """Whether :meth:`insert` and :meth:`delete` may change the store."""

    @abstractmethod
    def describe(self) -> str:
        """The store as messages name it (a path, a URL without its password)."""

    @abstractmethod
    def lookup(self, key: str) -> Row | None:
        """The entry stored under ``key`` (the eight values of :data:`Row`), or ``None``."""

    @abstractmethod
    def insert(self, entries: Sequence[NewEntry]) -> list[Row | None]:
        """Write ``entries`` together; for each, ``None`` when it was written, else the entry
        another writer stored first under its key (only when it does not replace)."""

    @abstractmethod
    def delete(self, key: str) -> bool:
        """Remove one entry; whether it existed."""

    @abstractmethod
    def rows(self) -> Iterator[Row]:
        """Every entry with its token counts (ten values), oldest first (then by key)."""

    def count(self, model: str | None = None) -> int:
        """Entries stored (of ``model`` only, when given)."""
        return sum(1 for row in self.rows() if model is None or row[1] == model)

    def holds(self, model: str) -> bool:
        """Whether any entry is of ``model`` (stops at the first)."""
        return any(row[1] == model for row in self.rows())

    def trials_of(self, request_json: str) -> list[int]:
        """The trials recorded for this exact canonical request, in order."""
        return sorted(int(row[2]) for row in self.rows() if row[3] == request_json)

    def candidates(self, model: str, trial: int, limit: int) -> list[tuple[str, str, int, str]]:
        """(key, model, trial, request_json) of the newest entries of the same model and trial,
        else of the same model, else of any: where the nearest recorded request is sought."""
        every = [(str(r[0]), str(r[1]), int(r[2]), str(r[3]), float(r[6])) for r in self.rows()]
        every.sort(key=lambda r: r[4], reverse=True)
        for keep in (
            lambda r: r[1] == model and r[2] == trial,
            lambda r: r[1] == model,
            lambda r: True,
        ):
            chosen = [r[:4] for r in every if keep(r)][:limit]
            if chosen:
                return chosen
        return []

    def close(self) -> None:  # noqa: B027  (a store with nothing to close keeps this)
        """Release connections."""

    def _refuse(self, what: str) -> CacheError:
        return CacheError(
            f"{self.describe()}: this API cache store is read-only, so it cannot {what}.\n"
            "  fix: put a writable store over it (a redis:// store with the file as its read-only "
            "base, see docs/scaling.md), or open the cache in a mode that does not write "
            "(--cache-mode read or replay-only)"
        )


class ReadOnlyCacheStore(CacheStore):
    """``inner`` for reading only: every write is refused with a :class:`CacheError` (in the
    manner of Hypothesis's ``ReadOnlyDatabase``)."""

    writable = False

    def __init__(self, inner: CacheStore) -> None:
        self.inner = inner

    def describe(self) -> str:
        return f"{self.inner.describe()} (read-only)"

    def lookup(self, key: str) -> Row | None:
        return self.inner.lookup(key)

    def insert(self, entries: Sequence[NewEntry]) -> list[Row | None]:
        raise self._refuse(f"store {len(entries)} new entr{'y' if len(entries) == 1 else 'ies'}")

    def delete(self, key: str) -> bool:
        raise self._refuse(f"delete the entry {key[:16]}...")

    def rows(self) -> Iterator[Row]:
        return self.inner.rows()

    def count(self, model: str | None = None) -> int:
        return self.inner.count(model)

    def holds(self, model: str) -> bool:
        return self.inner.holds(model)

    def trials_of(self, request_json: str) -> list[int]:
        return self.inner.trials_of(request_json)

    def candidates(self, model: str, trial: int, limit: int) -> list[tuple[str, str, int, str]]:
        return self.inner.candidates(model, trial, limit)

    def close(self) -> None:
        self.inner.close()


class LayeredCacheStore(CacheStore):
    """A writable ``top`` over read-only ``bases`` (a committed cache file under a shared
    Redis one): a lookup tries ``top`` then each base; a write goes to ``top`` only, except
    that an entry a base already holds is kept (first writer wins across the layers, as
    within one store); :meth:`delete` deletes from ``top`` only."""

    def __init__(self, top: CacheStore, *bases: CacheStore) -> None:
        self.top = top
        self.bases = bases
        self.writable = top.writable

    def describe(self) -> str:
        return " over ".join(layer.describe() for layer in (self.top, *self.bases))

    def lookup(self, key: str) -> Row | None:
        for layer in (self.top, *self.bases):
            row = layer.lookup(key)
            if row is not None:
                return row
        return None

    def insert(self, entries: Sequence[NewEntry]) -> list[Row | None]:
        found: list[Row | None] = [None] * len(entries)
        to_top: list[int] = []
        for i, entry in enumerate(entries):
            below = (
                None
                if entry.replace
                else next(
                    (r for b in self.bases if (r := b.lookup(str(entry.values[0]))) is not None),
                    None,
                )
            )
            if below is not None:
                found[i] = below
            else:
                to_top.append(i)
        if to_top:
            for i, row in zip(to_top, self.top.insert([entries[i] for i in to_top]), strict=True):
                found[i] = row
        return found

    def delete(self, key: str) -> bool:
        return self.top.delete(key)

    def holds(self, model: str) -> bool:
        return any(layer.holds(model) for layer in (self.top, *self.bases))

    def rows(self) -> Iterator[Row]:
        seen: set[str] = set()
        every: list[Row] = []
        for layer in (self.top, *self.bases):
            for row in layer.rows():
                if row[0] not in seen:
                    seen.add(str(row[0]))
                    every.append(row)
        every.sort(key=lambda r: (float(r[6]), str(r[0])))
        return iter(every)

    def close(self) -> None:
        for layer in (self.top, *self.bases):
            layer.close()


_PREFIX = "agentprop:api:"
"""The default key prefix of the API cache's entries on Redis."""
_CHUNK = 1000


class RedisCacheStore(CacheStore):
    """API cache entries on a Redis server, shared by every process and machine that opens
    it: each entry one string (``agentprop:api:entry:KEY``, a JSON array of its ten values),
    indexed by a sorted set (``agentprop:api:index``, scored by creation time). A write that
    does not replace is ``SET NX`` (the first writer wins), in one ``MULTI`` with its index
    entry. Entries do not expire: the cache is a record, as its file is."""

    def __init__(self, url: str, *, prefix: str = _PREFIX) -> None:
        self.url = url
        self.prefix = prefix
        self._index = f"{prefix}index"
        self._client = redis_client(url, "the Redis API cache")

    def describe(self) -> str:
        return safe_url(self.url)

    def _key(self, key: str) -> str:
        return f"{self.prefix}entry:{key}"

    @staticmethod
    def _decode(key: str, raw: bytes | str | None) -> Row | None:
        if raw is None:
            return None
        values = json.loads(raw)
        return (key, *values)

    def lookup(self, key: str) -> Row | None:
        row = self._decode(key, self._client.get(self._key(key)))
        return None if row is None else row[:8]

    def insert(self, entries: Sequence[NewEntry]) -> list[Row | None]:
        with self._client.pipeline(transaction=True) as pipe:
            for entry in entries:
                key, *rest = entry.values
                pipe.set(
                    self._key(key), json.dumps(rest, separators=(",", ":")), nx=not entry.replace
                )
                pipe.zadd(self._index, {key: float(entry.values[6])}, nx=not entry.replace)
            results = pipe.execute()
        found: list[Row | None] = []
        for i, entry in enumerate(entries):
            if results[2 * i]:
                found.append(None)
                continue
            row = self.lookup(str(entry.values[0]))  # another writer's, stored first
            found.append(row if row is not None else self.insert([entry])[0])
        return found

    def delete(self, key: str) -> bool:
        with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(key))
            pipe.zrem(self._index, key)
            deleted, _ = pipe.execute()
        return bool(deleted)

    def rows(self) -> Iterator[Row]:
        keys = [
            k.decode() if isinstance(k, bytes) else str(k)
            for k in self._client.zrange(self._index, 0, -1)
        ]
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            for key, raw in zip(
                chunk, self._client.mget([self._key(k) for k in chunk]), strict=True
            ):
                row = self._decode(key, raw)
                if row is not None:
                    yield row

    def count(self, model: str | None = None) -> int:
        if model is None:
            return int(self._client.zcard(self._index))
        return super().count(model)

    def close(self) -> None:
        self._client.close()


def redis_client(url: str, what: str) -> redis.Redis:
    """A connected client of the Redis server at ``url``; a missing redis-py or an unreachable
    server is an :class:`InvalidArgument` naming ``what`` and the fix."""
    try:
        import redis
    except ImportError:
        raise InvalidArgument(
            "a redis:// store needs the redis package (redis-py), which is not installed; "
            "install agentprop with its redis extra: pip install 'agentprop[redis]'"
        ) from None
    try:
        client = redis.Redis.from_url(url)
        client.ping()
    except (ValueError, redis.RedisError) as exc:
        raise InvalidArgument(
            f"{safe_url(url)}: {what} cannot be reached ({exc}); check the store URL and "
            "that the server runs"
        ) from None
    return client


def redis_url(store: str) -> tuple[str, dict[str, str]]:
    """The Redis URL of a store URL ``redis://[:password@]host:port/db[?run=NAME&prefix=P]``
    (or ``rediss://``) without agentprop's own query parameters, and those parameters
    (``run``: the run sharing one budget; ``prefix``: the key prefix of the cache, memo and
    corpus, ``agentprop`` by default, so several projects can share one server)."""
    parts = urlsplit(store)
    if parts.scheme not in ("redis", "rediss"):
        raise InvalidArgument(
            f"--store {store!r}: not a store URL agentprop knows; expected redis://host:port/db "
            "(a Redis server shared by every process and machine of the run)"
        )
    query = parse_qs(parts.query)
    ours: dict[str, str] = {name: query.pop(name)[0] for name in ("run", "prefix") if name in query}
    url = parts._replace(query="&".join(f"{k}={v}" for k, vs in query.items() for v in vs)).geturl()
    return url, ours


def safe_url(url: str) -> str:
    """The URL without its password (for messages)."""
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url
