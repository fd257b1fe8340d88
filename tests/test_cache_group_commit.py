"""Group commit: the answers stored on one event loop in one pass of it share one transaction,
and nobody gets an answer back before it is committed."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentprop._modelapi.cache import ApiCache, CacheError
from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
from agentprop.testing import MessagesServer, text_reply


def _body(i: int) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": f"q{i}"}]}


def _answer(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "model": "m",
        "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }


def _count_commits(cache: ApiCache, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows each write transaction of ``cache`` held, in order."""
    sizes: list[int] = []
    original = ApiCache._write

    def counting(self: ApiCache, body: Any) -> Any:
        result = original(self, body)
        if self is cache:
            sizes.append(len(result) if isinstance(result, list) else 1)
        return result

    monkeypatch.setattr(ApiCache, "_write", counting)
    return sizes


def _stored_in_another_connection(path: Path, cache: ApiCache, body: dict[str, Any]) -> bool:
    """Whether a separate connection (another process, as far as SQLite can tell) sees the
    entry: it is committed, not merely inserted."""
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute(
                "SELECT 1 FROM responses WHERE key = ?", (cache.key(body, trial=0),)
            ).fetchone()
            is not None
        )
    finally:
        conn.close()


def test_answers_stored_in_one_pass_share_one_transaction_and_are_committed_before_anyone_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.sqlite"
    cache = ApiCache(path, mode="read-write")
    commits = _count_commits(cache, monkeypatch)
    seen_committed: list[bool] = []

    async def one(i: int) -> str:
        async def call() -> dict[str, Any]:
            return _answer(f"a{i}")

        got = await cache.aget_or_call(_body(i), trial=0, call=call)
        seen_committed.append(_stored_in_another_connection(path, cache, _body(i)))
        return str(got.response["content"][0]["text"])

    async def main() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(20)))

    assert asyncio.run(main()) == [f"a{i}" for i in range(20)]  # each caller gets its own answer
    assert commits == [20]  # one transaction, not twenty
    assert seen_committed == [True] * 20  # and every caller resumed after its commit
    assert len(cache) == 20 and cache.verify() == []


def test_answers_stored_in_different_passes_are_committed_separately(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ApiCache(tmp_path / "c.sqlite", mode="read-write")
    commits = _count_commits(cache, monkeypatch)

    async def main() -> None:
        for i in range(3):
            await cache.aget_or_call(
                _body(i), trial=0, call=lambda i=i: asyncio.sleep(0, _answer(f"a{i}"))
            )

    asyncio.run(main())
    assert commits == [1, 1, 1]


def test_the_same_request_twice_in_one_batch_gives_both_callers_the_first_answer(
    tmp_path: Path,
) -> None:
    cache = ApiCache(tmp_path / "c.sqlite", mode="read-write")

    async def one(tag: str) -> str:
        async def call() -> dict[str, Any]:
            return _answer(tag)

        got = await cache.aget_or_call(_body(0), trial=0, call=call)
        return str(got.response["content"][0]["text"])

    async def main() -> list[str]:
        return await asyncio.gather(one("first"), one("second"))

    assert asyncio.run(main()) == ["first", "first"]  # the first writer wins, as across processes
    assert len(cache) == 1


def test_a_failed_commit_reaches_every_caller_of_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ApiCache(tmp_path / "c.sqlite", mode="read-write")

    def failing_write(self: ApiCache, body: Any) -> Any:
        raise CacheError("disk full (simulated)")

    monkeypatch.setattr(ApiCache, "_write", failing_write)

    async def one(i: int) -> BaseException | None:
        try:
            await cache.aget_or_call(_body(i), trial=0, call=lambda: asyncio.sleep(0, _answer("x")))
        except CacheError as exc:
            return exc
        return None

    async def main() -> list[BaseException | None]:
        return await asyncio.gather(*(one(i) for i in range(5)))

    errors = asyncio.run(main())
    assert all(isinstance(e, CacheError) and "disk full" in str(e) for e in errors)


def test_a_caller_cancelled_while_its_answer_is_committed_still_leaves_it_stored(
    tmp_path: Path,
) -> None:
    """The answer is paid for: cancelling the caller must not drop it."""
    cache = ApiCache(tmp_path / "c.sqlite", mode="read-write")

    async def main() -> None:
        task = asyncio.ensure_future(
            cache.aget_or_call(_body(7), trial=0, call=lambda: asyncio.sleep(0, _answer("kept")))
        )
        for _ in range(3):  # until the answer is in the batch, waiting for its commit
            await asyncio.sleep(0)
            if getattr(cache._local, "batch", None) is not None:
                break
        assert getattr(cache._local, "batch", None) is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)  # the commit runs

    asyncio.run(main())
    stored = cache.lookup(_body(7), trial=0)
    assert stored is not None and stored.response["content"][0]["text"] == "kept"


_ASYNC_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from agentprop._modelapi.cache import ApiCache

    cache = ApiCache(sys.argv[1], mode="read-write")

    async def one(i):
        async def call():
            await asyncio.sleep(0.001 * (i % 3))
            return {"type": "message", "model": "m", "content": [{"type": "text", "text": f"a{i}:" + "x" * 2000}],
                    "usage": {"input_tokens": i, "output_tokens": 1}}
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": f"q{i}"}]}
        await cache.aget_or_call(body, trial=0, call=call)
        print(i, flush=True)  # handed back to the caller

    async def main():
        i = 0
        while True:
            await asyncio.gather(*(one(i + k) for k in range(16)))
            i += 16

    asyncio.run(main())
    """  # noqa: E501
)


def test_sigkill_loses_no_answer_that_was_handed_back(tmp_path: Path) -> None:
    """Group commit delays the answers, never their durability: every answer a caller got back
    before the process was killed is in the cache."""
    path = tmp_path / "c.sqlite"
    child = subprocess.Popen(
        [sys.executable, "-c", _ASYNC_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    handed_back = [int(child.stdout.readline()) for _ in range(100)]
    time.sleep(0.2)  # let it keep writing, then kill it mid-stream
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    handed_back += [int(line) for line in child.stdout.read().split()]
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    with ApiCache(path, mode="read") as cache:
        assert cache.verify() == []
        assert len(cache) >= len(handed_back) > 100
        for i in handed_back:
            entry = cache.lookup(_body(i), trial=0)
            assert entry is not None, f"answer {i} was handed back but is not stored"
            assert entry.response["content"][0]["text"].startswith(f"a{i}:")


def test_a_client_outside_any_session_shares_one_cache_across_concurrent_tasks(
    tmp_path: Path,
) -> None:
    """asyncio.gather gives each task a copy of the context variables: outside a session, a
    client must still use one cache (one connection, one group commit), not one per task."""
    with MessagesServer(handler=lambda request: text_reply("ok")) as server:
        client = ModelClient(
            ANTHROPIC_MESSAGES,
            "claude-haiku-4-5",
            base_url=server.base_url,
            api_key="k-test",
            cache=tmp_path / "c.sqlite",
        )
        caches: list[ApiCache] = []

        async def one(i: int) -> None:
            caches.append(client.cache)
            await client.call(
                {
                    "model": "claude-haiku-4-5",
                    "max_tokens": 8,
                    "messages": [{"role": "user", "content": f"hi {i}"}],
                },
                trial=0,
            )

        async def main() -> None:
            await asyncio.gather(*(one(i) for i in range(8)))
            await client.aclose()

        asyncio.run(main())
    assert len({id(c) for c in caches}) == 1
    assert len(caches[0]) == 8 and client.stats()["live_calls"] == 8


def test_callers_that_resume_before_the_commit_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio runs the commit before the callers it scheduled ahead of; a loop that did not
    (the commit deferred here by one more pass) must still hand nothing back uncommitted."""
    path = tmp_path / "c.sqlite"
    cache = ApiCache(path, mode="read-write")
    original = ApiCache._commit_batch
    deferred: set[int] = set()

    def late_commit(self: ApiCache, batch: Any) -> None:
        if id(batch) not in deferred:
            deferred.add(id(batch))
            batch.loop.call_soon(late_commit, self, batch)
            return
        original(self, batch)

    monkeypatch.setattr(ApiCache, "_commit_batch", late_commit)
    seen_committed: list[bool] = []

    async def one(i: int) -> None:
        await cache.aget_or_call(
            _body(i), trial=0, call=lambda i=i: asyncio.sleep(0, _answer(f"a{i}"))
        )
        seen_committed.append(_stored_in_another_connection(path, cache, _body(i)))

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(4)))

    asyncio.run(main())
    assert deferred and seen_committed == [True] * 4
