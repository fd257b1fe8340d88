"""The API cache behind a store interface (issue #29 item 3): the file and a real Redis server
give the same replays across processes; read-only and layered stores never write their base."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agentprop._modelapi.cache import (
    ApiCache,
    CacheError,
    CacheMiss,
    CacheMode,
    FileCacheStore,
    open_cache_store,
)
from agentprop._modelapi.context import ModelCallContext
from agentprop._modelapi.stores import (
    CacheStore,
    LayeredCacheStore,
    ReadOnlyCacheStore,
    RedisCacheStore,
)
from agentprop.errors import InvalidArgument


def request(text: str) -> dict[str, Any]:
    return {
        "model": "claude-test-1",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
    }


def reply(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 7, "output_tokens": 2},
    }


def _store(spec: tuple[str, str]) -> CacheStore:
    """A writable store: ('file', path) or ('redis', url with its test's prefix)."""
    backend, where = spec
    if backend == "file":
        return FileCacheStore(where, writable=True)
    url, prefix = where.split("#")
    return RedisCacheStore(url, prefix=prefix)


@pytest.fixture(params=["file", "redis"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """How a process opens one fresh writable store (picklable, for spawned processes)."""
    if request.param == "file":
        return ("file", str(tmp_path / "shared.sqlite"))
    url = request.getfixturevalue("redis_url")
    return ("redis", f"{url}#test:{os.getpid()}:{time.monotonic_ns()}:api:")


def _record(spec: tuple[str, str], path: str, texts: list[str]) -> None:
    """In another process: record one answer per text, through the event loop's group commit."""

    async def main() -> None:
        with ApiCache(path, mode="read-write", store=_store(spec)) as cache:

            async def answer(text: str) -> dict[str, Any]:
                return reply(f"answer to {text}")

            await asyncio.gather(
                *(
                    cache.aget_or_call(request(t), trial=0, call=lambda t=t: answer(t))
                    for t in texts
                )
            )

    asyncio.run(main())


def test_an_answer_recorded_by_one_process_is_replayed_by_another(
    store_spec: tuple[str, str], tmp_path: Path
) -> None:
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(
        target=_record, args=(store_spec, str(tmp_path / "unused.sqlite"), ["a", "b", "c"])
    )
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 0
    with ApiCache(tmp_path / "other.sqlite", mode="replay-only", store=_store(store_spec)) as cache:
        hit = cache.get(request("b"), trial=0)
        assert (
            hit is not None
            and hit.from_cache
            and hit.response["content"][0]["text"] == "answer to b"
        )
        assert cache.count() == 3 and cache.stats.hits == 1
        assert cache.verify() == []
        with pytest.raises(CacheMiss, match="nearest recorded request"):
            cache.get(request("d"), trial=0)
        with pytest.raises(CacheMiss, match=r"recorded for trial\(s\) 0 but not for trial 1"):
            cache.get(request("a"), trial=1)
    assert not (tmp_path / "other.sqlite").exists()  # the store holds the entries, not the path


def test_a_store_keeps_the_entry_byte_for_byte_as_the_file_does(
    store_spec: tuple[str, str], tmp_path: Path
) -> None:
    with (
        ApiCache(tmp_path / "plain.sqlite", mode="read-write") as plain,
        ApiCache(tmp_path / "x", mode="read-write", store=_store(store_spec)) as stored,
    ):
        for cache in (plain, stored):
            cache.put(request("same"), trial=3, response=reply("same answer"))
        assert stored.key(request("same"), trial=3) == plain.key(request("same"), trial=3)
        [a], [b] = list(plain.entries()), list(stored.entries())
        assert (a.key, a.model, a.trial, a.response, a.usage) == (
            b.key,
            b.model,
            b.trial,
            b.response,
            b.usage,
        )
        raw_plain = FileCacheStore(tmp_path / "plain.sqlite").lookup(a.key)
        raw_stored = stored.store.lookup(a.key) if stored.store is not None else None
        assert raw_plain is not None and raw_stored is not None
        # key, model, trial, request, response, usage and checksum are the same texts
        assert [raw_plain[i] for i in (0, 1, 2, 4, 5, 7)] == [
            raw_stored[i] for i in (0, 1, 2, 4, 5, 7)
        ]
        assert bytes(raw_plain[3]) == (
            raw_stored[3] if isinstance(raw_stored[3], bytes) else raw_stored[3].encode()
        )


def test_the_first_writer_wins_and_write_mode_replaces(
    store_spec: tuple[str, str], tmp_path: Path
) -> None:
    with (
        ApiCache(tmp_path / "x", mode="read-write", store=_store(store_spec)) as first,
        ApiCache(tmp_path / "y", mode="read-write", store=_store(store_spec)) as second,
    ):
        first.put(request("q"), trial=0, response=reply("first"))
        kept = second.put(request("q"), trial=0, response=reply("second"))
        assert kept.response["content"][0]["text"] == "first"
        second.put(request("q"), trial=0, response=reply("third"), replace=True)
        again = first.lookup(request("q"), trial=0)
        assert again is not None and again.response["content"][0]["text"] == "third"
        assert first.delete(first.key(request("q"), trial=0)) and first.count() == 0


def _committed(tmp_path: Path) -> tuple[Path, str]:
    """A committed cache file holding one answer, and its digest."""
    path = tmp_path / "committed.sqlite"
    with ApiCache(path, mode="read-write") as cache:
        cache.put(request("old"), trial=0, response=reply("committed answer"))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_layered_store_reads_through_to_its_read_only_base_and_writes_only_on_top(
    store_spec: tuple[str, str], tmp_path: Path
) -> None:
    base, digest = _committed(tmp_path)
    layered = LayeredCacheStore(_store(store_spec), ReadOnlyCacheStore(FileCacheStore(base)))
    calls: list[str] = []

    def call(text: str) -> dict[str, Any]:
        calls.append(text)
        return reply(f"fresh {text}")

    with ApiCache(tmp_path / "ignored.sqlite", mode="read-write", store=layered) as cache:
        old = cache.get_or_call(request("old"), trial=0, call=lambda: call("old"))
        assert (
            old.from_cache
            and old.response["content"][0]["text"] == "committed answer"
            and calls == []
        )
        new = cache.get_or_call(request("new"), trial=0, call=lambda: call("new"))
        assert not new.from_cache and calls == ["new"]
        # an answer the base holds is kept, not written on top
        kept = cache.put(request("old"), trial=0, response=reply("other"))
        assert kept.response["content"][0]["text"] == "committed answer"
        assert cache.count() == 2 and cache.verify() == []
    top = _store(store_spec)
    assert (
        top.count() == 1
        and top.lookup(ApiCache(base, mode="read").key(request("new"), trial=0)) is not None
    )
    assert hashlib.sha256(base.read_bytes()).hexdigest() == digest  # the base was never written
    with ApiCache(base, mode="read") as committed:
        assert committed.count() == 1


def test_whether_a_model_is_recorded_is_asked_of_every_layer(
    store_spec: tuple[str, str], tmp_path: Path
) -> None:
    base, _ = _committed(tmp_path)
    with ApiCache(
        tmp_path / "x",
        mode="replay-only",
        store=LayeredCacheStore(_store(store_spec), ReadOnlyCacheStore(FileCacheStore(base))),
    ) as cache:
        assert cache.holds("claude-test-1") and not cache.holds("another-model")
        assert cache.where().endswith(f"over {base} (read-only)")
    with ApiCache(tmp_path / "y", mode="replay-only", store=_store(store_spec)) as alone:
        assert not alone.holds("claude-test-1")
    assert ApiCache(base, mode="read").holds("claude-test-1") and not ApiCache(
        tmp_path / "absent.sqlite", mode="read"
    ).holds("claude-test-1")


def test_a_read_only_store_alone_refuses_writes_naming_the_fix(
    store_spec: tuple[str, str], tmp_path: Path
) -> None:
    with ApiCache(
        tmp_path / "x", mode="read-write", store=ReadOnlyCacheStore(_store(store_spec))
    ) as cache:
        assert cache.get(request("q"), trial=0) is None
        with pytest.raises(
            CacheError,
            match=r"read-only, so it cannot store 1 new entry.*\n  fix: put a "
            r"writable store over it",
        ):
            cache.put(request("q"), trial=0, response=reply("a"))
        with pytest.raises(CacheError, match="read-only"):
            cache.delete("0" * 64)


def test_a_store_url_layers_redis_over_the_cache_file(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, digest = _committed(tmp_path)
    url = f"{redis_url}?prefix=url{time.monotonic_ns()}"
    layered = open_cache_store(url, base)
    assert isinstance(layered, LayeredCacheStore) and isinstance(layered.top, RedisCacheStore)
    assert layered.top.prefix.endswith(":api:") and ":***@" not in layered.describe()
    assert isinstance(open_cache_store(url, tmp_path / "absent.sqlite"), RedisCacheStore)
    # the session's context, the option given or $AGENTPROP_STORE, opens it for every model agent
    monkeypatch.setenv("AGENTPROP_STORE", url)
    cache = ModelCallContext(cache_mode=CacheMode.READ_WRITE).open_api_cache(base)
    assert isinstance(cache.store, LayeredCacheStore)
    assert cache.get(request("old"), trial=0) is not None
    cache.put(request("fresh"), trial=0, response=reply("fresh"))
    assert hashlib.sha256(base.read_bytes()).hexdigest() == digest
    assert ModelCallContext(store="").open_api_cache(base, mode="read-write").store is None
    # off: no server is needed
    assert ModelCallContext(cache_mode=CacheMode.OFF).open_api_cache(base).store is None
    with pytest.raises(InvalidArgument, match="not a store URL"):
        open_cache_store("memcached://x", base)


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"


def test_a_cli_run_on_another_machine_replays_the_first_ones_answers_from_redis(
    redis_url: str, tmp_path: Path
) -> None:
    import io

    from agentprop._cli import main
    from agentprop.testing import MessagesServer, tool_use_reply

    store = f"{redis_url}?prefix=cli{time.monotonic_ns()}"
    reply = tool_use_reply("respond", {"text": "Done."}, input_tokens=100, output_tokens=10)
    common = [
        "run",
        str(EXAMPLE),
        "--agent",
        "anthropic",
        "--model",
        "claude-sonnet-4-6",
        "--kinds",
        "mft",
    ]
    common += [
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
        "--runs",
        "2",
        "--shrink-budget",
        "0",
        "--corpus",
        "none",
        "--store",
        store,
    ]
    with MessagesServer(handler=lambda request: reply) as server:
        first = tmp_path / "first" / "api-cache.sqlite"
        out, err = io.StringIO(), io.StringIO()
        code = main(
            [
                *common,
                "--base-url",
                server.base_url,
                "--cache",
                str(first),
                "--cache-mode",
                "read-write",
            ],
            out=out,
            err=err,
        )
        asked = len(server.requests)
        assert code in (0, 1) and asked > 0, out.getvalue() + err.getvalue()
        assert not first.exists()  # the answers went to the store
        assert (
            f"cache {redis_url}?prefix=" not in out.getvalue()
            and f"cache {redis_url} (read-write)" in out.getvalue()
        )
        # another machine: an empty cache directory, replay-only (as under CI), the same store
        second = tmp_path / "second" / "api-cache.sqlite"
        out2, err2 = io.StringIO(), io.StringIO()
        again = main(
            [
                *common,
                "--base-url",
                server.base_url,
                "--cache",
                str(second),
                "--cache-mode",
                "replay-only",
            ],
            out=out2,
            err=err2,
        )
        assert again == code and len(server.requests) == asked, out2.getvalue() + err2.getvalue()
        assert f"({asked} from the cache, 0 to the API" in out2.getvalue()
        # a store that cannot be reached is a usage error naming it, before any run
        out3, err3 = io.StringIO(), io.StringIO()
        bad = [
            *common[:-1],
            "redis://127.0.0.1:1/0",
            "--base-url",
            server.base_url,
            "--cache",
            str(second),
        ]
        assert main(bad, out=out3, err=err3) == 2
        assert (
            "--store: redis://127.0.0.1:1/0: the Redis API cache cannot be reached"
            in err3.getvalue()
        )
