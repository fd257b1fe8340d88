"""``ApiCache.get_or_call`` and ``aget_or_call`` share one lookup half (``_begin``): through
either, the same requests in the same mode replay, call, store and count alike."""

from __future__ import annotations

import asyncio
import random
import shutil
from pathlib import Path
from typing import Any

from agentprop._modelapi.cache import ApiCache, CacheMode
from agentprop.errors import AgentPropError

MODES = [mode.value for mode in CacheMode]


def body(i: int) -> dict[str, Any]:
    return {
        "model": f"model-{i % 2}",
        "max_tokens": 32,
        "messages": [{"role": "user", "content": f"question {i}"}],
    }


def answer(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "model-0",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": len(text), "output_tokens": 2},
    }


class Boom(Exception):
    pass


def script(seed: int) -> tuple[str, list[tuple[int, int, bool]]]:
    """A mode and seeded steps: (request, trial, whether the API call fails)."""
    rng = random.Random(seed)
    steps = [(rng.randrange(4), rng.randrange(2), rng.random() < 0.2) for _ in range(12)]
    return MODES[seed % len(MODES)], steps


def recorded(tmp_path: Path) -> Path:
    """A cache file holding answers to requests 0 and 1, trial 0."""
    path = tmp_path / "recorded.db"
    with ApiCache(path, mode="read-write") as cache:
        for i in (0, 1):
            cache.put(body(i), trial=0, response=answer(f"recorded {i}"))
    return path


def outcome(got: Any) -> tuple[Any, ...]:
    if isinstance(got, BaseException):
        return ("raised", type(got).__name__)
    return (got.key, got.model, got.trial, got.response, got.usage, got.from_cache)


def drive(path: Path, mode: str, steps: list[tuple[int, int, bool]], *, is_async: bool) -> Any:
    calls: list[tuple[int, int]] = []
    seen: list[tuple[Any, ...]] = []
    with ApiCache(path, mode=mode) as cache:
        for i, trial, fails in steps:

            def api(i: int = i, trial: int = trial, fails: bool = fails) -> dict[str, Any]:
                calls.append((i, trial))
                if fails:
                    raise Boom(f"request {i}")
                return answer(f"live {i} {trial} {len(calls)}")

            async def aapi(api: Any = api) -> dict[str, Any]:
                await asyncio.sleep(0)
                return dict(api())

            try:
                if is_async:
                    got: Any = asyncio.run(cache.aget_or_call(body(i), trial=trial, call=aapi))
                else:
                    got = cache.get_or_call(body(i), trial=trial, call=api)
            except (Boom, AgentPropError) as exc:
                got = exc
            seen.append(outcome(got))
        entries = sorted((e.key, e.trial, str(e.response)) for e in cache.entries())
        return seen, calls, cache.stats.as_dict(), entries


def test_both_get_or_calls_agree_on_a_seeded_table_of_requests(tmp_path: Path) -> None:
    source = recorded(tmp_path)
    kinds: set[tuple[str, str]] = set()
    for seed in range(15):
        mode, steps = script(seed)
        sync_path, async_path = tmp_path / f"s{seed}.db", tmp_path / f"a{seed}.db"
        shutil.copy(source, sync_path)
        shutil.copy(source, async_path)
        sync = drive(sync_path, mode, steps, is_async=False)
        async_ = drive(async_path, mode, steps, is_async=True)
        assert sync == async_, f"seed {seed} ({mode})"
        for o in sync[0]:
            kinds.add((mode, o[1] if o[0] == "raised" else f"from_cache={o[-1]}"))
    # every mode answered; replays, live calls, failed calls and replay-only misses all occurred
    assert {m for m, _ in kinds} == set(MODES)
    assert {k for _, k in kinds} >= {"from_cache=True", "from_cache=False", "Boom", "CacheMiss"}


def test_a_sync_call_that_runs_its_own_event_loop_is_cached(tmp_path: Path) -> None:
    """``get_or_call`` calls ``call`` in the caller's thread with no loop around it, so an API
    call made with ``asyncio.run`` works, and its answer is stored and replayed."""

    async def api() -> dict[str, Any]:
        await asyncio.sleep(0)
        return answer("through asyncio.run")

    with ApiCache(tmp_path / "c.db", mode="read-write") as cache:
        first = cache.get_or_call(body(5), trial=0, call=lambda: asyncio.run(api()))
        again = cache.get_or_call(body(5), trial=0, call=lambda: asyncio.run(api()))
    assert not first.from_cache and again.from_cache and again.response == first.response
