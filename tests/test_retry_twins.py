"""``retry_call`` and ``retry_call_async`` carry out one retry loop: driven through either, the
same failures give the same attempts, waits, events, counters, notes and result."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentprop._modelapi.retry import (
    RetryDecision,
    RetryEvent,
    RetryPolicy,
    RetryStats,
    retry_call,
    retry_call_async,
)


class Fault(Exception):
    """A scripted failure; ``decision`` is what the classifier says of it."""

    def __init__(self, decision: RetryDecision) -> None:
        super().__init__(decision.reason)
        self.decision = decision


def classify(exc: BaseException) -> RetryDecision:
    return exc.decision if isinstance(exc, Fault) else RetryDecision(False, "not_retryable")


FAULTS = [
    RetryDecision(True, "rate_limited", 429),
    RetryDecision(True, "rate_limited", 429, retry_after=1.5),
    RetryDecision(True, "rate_limited", 429, retry_after=500.0),  # longer than allowed
    RetryDecision(True, "overloaded", 529),
    RetryDecision(True, "server_error", 503),
    RetryDecision(True, "connection"),
    RetryDecision(True, "timeout", retry_after=0.0),  # a wait of zero: no sleep at all
    RetryDecision(False, "invalid_request", 500),
    RetryDecision(False, "not_retryable", 400),
]


@dataclass
class Observed:
    """What one driven call did."""

    attempts: int = 0
    sleeps: list[float] = field(default_factory=list)
    events: list[tuple[int, float, str, int | None, float | None]] = field(default_factory=list)
    outcome: Any = None
    notes: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


def scripted(seed: int) -> tuple[list[RetryDecision | None], RetryPolicy]:
    """A seeded failure sequence (``None``: the attempt succeeds) and a policy to meet it."""
    rng = random.Random(seed)
    steps: list[RetryDecision | None] = [rng.choice(FAULTS) for _ in range(rng.randint(0, 7))]
    if rng.random() < 0.7:
        steps.append(None)
    policy = RetryPolicy(
        max_attempts=rng.randint(1, 8),
        base_delay=rng.choice([0.0, 0.25, 0.5]),
        max_delay=rng.choice([1.0, 4.0]),
        max_retry_after=120.0,
        honour_retry_after=rng.random() < 0.8,
    )
    return steps, policy


def drive_sync(seed: int) -> Observed:
    steps, policy = scripted(seed)
    seen, stats = Observed(), RetryStats()

    def fn() -> str:
        step = steps[seen.attempts] if seen.attempts < len(steps) else None
        seen.attempts += 1
        if step is not None:
            raise Fault(step)
        return f"ok after {seen.attempts}"

    def on_retry(e: RetryEvent) -> None:
        seen.events.append((e.attempt, e.delay, e.reason, e.status_code, e.retry_after))

    try:
        seen.outcome = retry_call(
            fn,
            policy=policy,
            rng=random.Random(seed),
            sleep=seen.sleeps.append,
            stats=stats,
            on_retry=on_retry,
            classify=classify,
        )
    except Fault as exc:
        seen.outcome, seen.notes = ("raised", str(exc)), list(getattr(exc, "__notes__", []))
    seen.stats = stats.as_dict()
    return seen


def drive_async(seed: int) -> Observed:
    steps, policy = scripted(seed)
    seen, stats = Observed(), RetryStats()

    async def fn() -> str:
        step = steps[seen.attempts] if seen.attempts < len(steps) else None
        seen.attempts += 1
        await asyncio.sleep(0)
        if step is not None:
            raise Fault(step)
        return f"ok after {seen.attempts}"

    async def sleep(seconds: float) -> None:
        seen.sleeps.append(seconds)

    def on_retry(e: RetryEvent) -> None:
        seen.events.append((e.attempt, e.delay, e.reason, e.status_code, e.retry_after))

    try:
        seen.outcome = asyncio.run(
            retry_call_async(
                fn,
                policy=policy,
                rng=random.Random(seed),
                sleep=sleep,
                stats=stats,
                on_retry=on_retry,
                classify=classify,
            )
        )
    except Fault as exc:
        seen.outcome, seen.notes = ("raised", str(exc)), list(getattr(exc, "__notes__", []))
    seen.stats = stats.as_dict()
    return seen


def test_both_drivers_retry_a_seeded_table_of_failures_identically() -> None:
    kinds: set[str] = set()
    for seed in range(120):
        sync, async_ = drive_sync(seed), drive_async(seed)
        assert sync == async_, f"seed {seed}"
        # the table is not trivial: the counters agree with what was observed
        assert sync.stats["attempts"] == sync.attempts
        assert sync.stats["retries"] == len(sync.events) == sync.attempts - 1
        assert sync.stats["slept_seconds"] == pytest.approx(sum(sync.sleeps))
        kinds.add("raised" if isinstance(sync.outcome, tuple) else "returned")
        if sync.notes:
            kinds.add(sync.notes[-1].split(":")[1].split(" ")[1])  # "gave", "the", "attempt", ...
        if any(e[1] == 0.0 for e in sync.events):
            kinds.add("zero wait")
    # returned, gave up at max_attempts, a retry-after too long, not retryable, a zero wait
    assert {"returned", "raised", "gave", "zero wait"} <= kinds, kinds
    assert len(kinds) >= 6, kinds


def test_a_sync_callable_that_runs_its_own_event_loop_is_retried() -> None:
    """``retry_call`` runs ``fn`` in the caller's thread with no loop of ours around it, so a
    callable that calls ``asyncio.run`` itself works."""
    left = [2]

    async def api() -> str:
        await asyncio.sleep(0)
        if left[0]:
            left[0] -= 1
            raise Fault(RetryDecision(True, "server_error", 503))
        return "ok"

    stats, sleeps = RetryStats(), SleepList()
    got = retry_call(
        lambda: asyncio.run(api()),
        rng=random.Random(3),
        sleep=sleeps,
        stats=stats,
        classify=classify,
    )
    assert got == "ok" and (stats.attempts, stats.retries, len(sleeps)) == (3, 2, 2)


class SleepList(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_a_wait_cut_short_counts_only_what_elapsed_through_either_driver() -> None:
    """A wait interrupted (Ctrl-C in a sync sleep, cancellation in an async one) is counted in
    ``slept`` for what elapsed, not the whole wait, and no attempt is made after it."""
    policy = RetryPolicy(base_delay=50.0, max_delay=50.0)
    fault = RetryDecision(True, "server_error", 503)
    sync_stats, async_stats = RetryStats(), RetryStats()

    def sync_api() -> str:
        raise Fault(fault)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        retry_call(
            sync_api,
            policy=policy,
            rng=random.Random(1),
            sleep=interrupted,
            stats=sync_stats,
            classify=classify,
        )

    async def async_api() -> str:
        raise Fault(fault)

    async def main() -> None:
        task = asyncio.ensure_future(
            retry_call_async(
                async_api, policy=policy, rng=random.Random(1), stats=async_stats, classify=classify
            )
        )
        while async_stats.retries == 0:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    for stats in (sync_stats, async_stats):
        assert (stats.attempts, stats.retries) == (1, 1)
        assert 0.0 <= stats.slept < 5.0  # the wait drawn was up to 50 s; almost none elapsed
