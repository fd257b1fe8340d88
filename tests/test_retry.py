"""Retry policy and adaptive concurrency, against the real SDK and the loopback server."""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import statistics
from typing import Any

import anthropic
import pytest

from agentprop._modelapi.limiter import AdaptiveConcurrency
from agentprop._modelapi.retry import (
    RetryEvent,
    RetryPolicy,
    RetryStats,
    backoff_delay,
    classify_error,
    parse_retry_after,
    retry_call,
    retry_call_async,
    retrying,
)
from agentprop.errors import InvalidArgument
from agentprop.testing import (
    MessagesServer,
    drop_connection,
    error_reply,
    malformed_reply,
    overloaded_reply,
    rate_limit_reply,
    text_reply,
)

REQUEST: dict[str, Any] = {
    "model": "claude-test-1",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hello"}],
}


def sdk(server: MessagesServer, **kwargs: Any) -> anthropic.Anthropic:
    # max_retries=0: exactly one HTTP attempt per create(); the retry policy is ours
    return anthropic.Anthropic(base_url=server.base_url, api_key="dummy", max_retries=0, **kwargs)


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def error_from(reply: Any) -> BaseException:
    with MessagesServer([reply]) as server:
        try:
            sdk(server).messages.create(**REQUEST)
        except Exception as exc:  # noqa: BLE001 - we want whatever the SDK raises
            return exc
    raise AssertionError("the scripted fault did not raise")


# -- parse_retry_after ---------------------------------------------------------------------------


def test_parse_retry_after_seconds_ms_and_dates() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"Retry-After": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after": "3", "retry-after-ms": "1500"}) == 1.5
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 42, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(42.0)
    past = email.utils.formatdate(now - 100, usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None
    assert parse_retry_after({"retry-after": "-5"}) == 0.0


# -- classify_error on real SDK exceptions
# ------------------------------------------------------------


def test_classify_real_sdk_errors() -> None:
    rate = classify_error(error_from(rate_limit_reply(7)))
    assert (rate.retryable, rate.reason, rate.status_code, rate.retry_after) == (
        True,
        "rate_limited",
        429,
        7.0,
    )
    assert rate.is_congestion
    over = classify_error(error_from(overloaded_reply()))
    assert (over.retryable, over.reason, over.status_code) == (True, "overloaded", 529)
    assert over.is_congestion
    assert classify_error(error_from(error_reply(503))).reason == "server_error"
    assert classify_error(error_from(error_reply(408))).reason == "timeout"
    bad = classify_error(error_from(error_reply(400)))
    assert (bad.retryable, bad.status_code) == (False, 400)
    vetoed = classify_error(error_from(error_reply(500, headers={"x-should-retry": "false"})))
    assert not vetoed.retryable
    forced = classify_error(error_from(error_reply(409, headers={"x-should-retry": "true"})))
    assert forced.retryable
    assert classify_error(error_from(drop_connection())).reason == "connection"
    malformed = classify_error(error_from(malformed_reply()))
    assert (malformed.retryable, malformed.reason) == (False, "malformed_response")
    assert classify_error(TimeoutError()).reason == "timeout"
    assert classify_error(ConnectionResetError()).reason == "connection"
    assert not classify_error(ValueError("bug")).retryable


def test_sdk_timeout_is_retryable() -> None:
    from agentprop.testing import slow_reply

    with MessagesServer([slow_reply("late", 5.0)]) as server:
        with pytest.raises(anthropic.APITimeoutError) as err:
            sdk(server, timeout=0.2).messages.create(**REQUEST)
    assert classify_error(err.value).reason == "timeout"


# -- backoff -------------------------------------------------------------------------------------


def test_full_jitter_backoff_distribution_and_seeding() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0)
    rng = random.Random(1234)
    for retry_number, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (7, 4.0)]:
        samples = [backoff_delay(retry_number, policy, rng) for _ in range(4000)]
        assert min(samples) >= 0.0 and max(samples) <= cap
        # uniform(0, cap): mean cap/2, sd cap/sqrt(12); the sample mean of 4000 draws is within
        # 5 standard errors (sd/sqrt(4000)) of cap/2 except with probability < 1e-6
        tolerance = 5 * (cap / 12**0.5) / 4000**0.5
        assert abs(statistics.fmean(samples) - cap / 2) < tolerance
    a = [backoff_delay(n, policy, random.Random(7)) for n in range(1, 6)]
    b = [backoff_delay(n, policy, random.Random(7)) for n in range(1, 6)]
    assert a == b


# -- retry_call against the server
# ------------------------------------------------------------------


def test_429_with_retry_after_then_success_is_retried_and_counted() -> None:
    with MessagesServer([rate_limit_reply(0.05), text_reply("finally")]) as server:
        c = sdk(server)
        stats = RetryStats()
        events: list[RetryEvent] = []
        sleep = SleepRecorder()
        message = retry_call(
            lambda: c.messages.create(**REQUEST), stats=stats, on_retry=events.append, sleep=sleep
        )
        assert message.content[0].text == "finally"
        assert len(server.requests) == 2
        # each HTTP attempt is a first SDK attempt: the SDK itself did not retry
        assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "0"]
    assert sleep.delays == [0.05]  # retry-after honoured exactly
    assert stats.as_dict() == {
        "calls": 1,
        "attempts": 2,
        "retries": 1,
        "gave_up": 0,
        "slept_seconds": 0.05,
        "cut_by_deadline": 0,
        "by_reason": {"rate_limited": 1},
    }
    assert [(e.attempt, e.reason, e.status_code, e.retry_after) for e in events] == [
        (1, "rate_limited", 429, 0.05)
    ]


def test_5xx_and_529_are_retried_with_seeded_jitter() -> None:
    policy = RetryPolicy(base_delay=0.01, max_delay=0.04)
    with MessagesServer(
        [error_reply(500), overloaded_reply(), error_reply(502), text_reply("ok")]
    ) as server:
        c = sdk(server)
        sleep = SleepRecorder()
        stats = RetryStats()
        result = retry_call(
            lambda: c.messages.create(**REQUEST),
            policy=policy,
            rng=random.Random(99),
            sleep=sleep,
            stats=stats,
        )
    assert result.content[0].text == "ok"
    expected_rng = random.Random(99)
    assert sleep.delays == [backoff_delay(n, policy, expected_rng) for n in (1, 2, 3)]
    assert stats.by_reason == {"server_error": 2, "overloaded": 1}


def test_gives_up_after_max_attempts_with_a_note() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=0.0)
    with MessagesServer([error_reply(500)] * 3 + [text_reply("never reached")]) as server:
        c = sdk(server)
        stats = RetryStats()
        with pytest.raises(anthropic.InternalServerError) as err:
            retry_call(
                lambda: c.messages.create(**REQUEST),
                policy=policy,
                stats=stats,
                sleep=SleepRecorder(),
            )
        assert len(server.requests) == 3
    notes = " ".join(getattr(err.value, "__notes__", []))
    assert "gave up after 3 attempt(s)" in notes
    assert "500 server_error (x3)" in notes
    assert (stats.gave_up, stats.retries, stats.attempts) == (1, 2, 3)


def test_retry_after_longer_than_allowed_is_not_slept() -> None:
    policy = RetryPolicy(max_retry_after=5.0)
    with MessagesServer([rate_limit_reply(3600), text_reply("no")]) as server:
        c = sdk(server)
        sleep = SleepRecorder()
        with pytest.raises(anthropic.RateLimitError) as err:
            retry_call(lambda: c.messages.create(**REQUEST), policy=policy, sleep=sleep)
        assert len(server.requests) == 1
    assert sleep.delays == []
    assert "3600.0s" in " ".join(err.value.__notes__)


def test_malformed_reply_is_not_retried() -> None:
    with MessagesServer([malformed_reply(), text_reply("unused")]) as server:
        c = sdk(server)
        stats = RetryStats()
        with pytest.raises(json.JSONDecodeError) as err:
            retry_call(lambda: c.messages.create(**REQUEST), stats=stats, sleep=SleepRecorder())
        assert len(server.requests) == 1
    assert (stats.attempts, stats.retries) == (1, 0)
    assert "not valid JSON" in " ".join(err.value.__notes__)


def test_connection_drop_is_retried() -> None:
    with MessagesServer([drop_connection(), text_reply("reconnected")]) as server:
        c = sdk(server)
        stats = RetryStats()
        result = retry_call(
            lambda: c.messages.create(**REQUEST),
            stats=stats,
            sleep=SleepRecorder(),
            rng=random.Random(0),
        )
    assert result.content[0].text == "reconnected"
    assert stats.by_reason == {"connection": 1}


def test_async_retry_with_async_client() -> None:
    async def main(base_url: str) -> tuple[str, RetryStats, list[float]]:
        stats = RetryStats()
        slept: list[float] = []

        async def fake_sleep(seconds: float) -> None:
            slept.append(seconds)

        async with anthropic.AsyncAnthropic(base_url=base_url, api_key="dummy", max_retries=0) as c:
            message = await retry_call_async(
                lambda: c.messages.create(**REQUEST), stats=stats, sleep=fake_sleep
            )
        return message.content[0].text, stats, slept

    with MessagesServer(
        [rate_limit_reply(0.5), overloaded_reply(), text_reply("async ok")]
    ) as server:
        text, stats, slept = asyncio.run(main(server.base_url))
    assert text == "async ok"
    assert slept[0] == 0.5
    assert stats.by_reason == {"rate_limited": 1, "overloaded": 1}


def test_retrying_decorator_sync_and_async() -> None:
    attempts = {"sync": 0, "async": 0}
    policy = RetryPolicy(base_delay=0.0)

    @retrying(policy=policy)
    def flaky(x: int) -> int:
        attempts["sync"] += 1
        if attempts["sync"] < 3:
            raise ConnectionResetError("reset")
        return x * 2

    @retrying(policy=policy)
    async def aflaky(x: int) -> int:
        attempts["async"] += 1
        if attempts["async"] < 2:
            raise TimeoutError("slow")
        return x + 1

    assert flaky(21) == 42
    assert asyncio.run(aflaky(1)) == 2
    assert attempts == {"sync": 3, "async": 2}
    assert flaky.__name__ == "flaky"


def test_policy_validation() -> None:
    with pytest.raises(InvalidArgument):
        RetryPolicy(max_attempts=0)
    with pytest.raises(InvalidArgument):
        RetryPolicy(base_delay=-1)
    with pytest.raises(InvalidArgument):
        backoff_delay(0, RetryPolicy(), random.Random(0))


# -- AdaptiveConcurrency --------------------------------------------------------------------------


def test_additive_increase_one_step_per_window_of_successes() -> None:
    async def main() -> AdaptiveConcurrency:
        limiter = AdaptiveConcurrency(2, minimum=1, maximum=5)
        for _ in range(40):
            async with limiter.slot() as slot:
                slot.success()
        return limiter

    limiter = asyncio.run(main())
    # windows of 2, 3, 4 successes raise the limit to 3, 4, 5; then it stays at the maximum
    assert limiter.history == [2, 3, 4, 5]
    assert limiter.limit == 5 and limiter.increases == 3


def test_multiplicative_decrease_once_per_episode() -> None:
    async def main() -> AdaptiveConcurrency:
        limiter = AdaptiveConcurrency(8, minimum=1, maximum=16)
        burst = [await limiter.acquire() for _ in range(8)]
        assert limiter.in_flight == 8
        for slot in burst:  # eight 429s from calls that all started before any decrease
            slot.rate_limited()
            limiter.release()
        assert limiter.limit == 4 and limiter.decreases == 1
        async with limiter.slot() as later:  # started after the decrease: a new episode
            later.rate_limited()
        assert limiter.limit == 2
        for _ in range(5):
            async with limiter.slot() as s:
                s.rate_limited()
        return limiter

    limiter = asyncio.run(main())
    assert limiter.limit == 1  # floored at minimum
    assert limiter.history == [8, 4, 2, 1]


def test_limit_bounds_concurrency_and_waiters_are_fifo() -> None:
    async def main() -> tuple[int, list[int]]:
        limiter = AdaptiveConcurrency(3, maximum=3)
        running = 0
        peak = 0
        order: list[int] = []

        async def job(i: int) -> None:
            nonlocal running, peak
            async with limiter.slot() as slot:
                order.append(i)
                running += 1
                peak = max(peak, running)
                await asyncio.sleep(0.005)
                running -= 1
                slot.success()

        await asyncio.gather(*[job(i) for i in range(12)])
        return peak, order

    peak, order = asyncio.run(main())
    assert peak == 3
    assert order == list(range(12))


def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    async def main() -> AdaptiveConcurrency:
        limiter = AdaptiveConcurrency(1, maximum=1)
        holder = await limiter.acquire()
        waiter = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        del holder
        limiter.release()
        assert limiter.in_flight == 0
        await asyncio.wait_for(limiter.acquire(), timeout=1)  # the slot is free again
        return limiter

    assert asyncio.run(main()).in_flight == 1


class CapacityError(Exception):
    """A fake 429 from a server that can only handle `capacity` calls at once."""

    status_code = 429


def run_against_capacity(
    limiter: AdaptiveConcurrency | None, jobs: int, capacity: int
) -> tuple[int, int]:
    async def main() -> tuple[int, int]:
        active = 0
        rejected = 0

        async def api() -> str:
            nonlocal active, rejected
            if active >= capacity:
                rejected += 1
                raise CapacityError()
            active += 1
            try:
                await asyncio.sleep(0.002)
            finally:
                active -= 1
            return "ok"

        policy = RetryPolicy(max_attempts=10_000, base_delay=0.001, max_delay=0.01)
        rng = random.Random(5)
        results = await asyncio.gather(
            *[retry_call_async(api, policy=policy, rng=rng, limiter=limiter) for _ in range(jobs)]
        )
        assert results == ["ok"] * jobs
        return rejected, jobs

    return asyncio.run(main())


def test_adaptive_limiter_cuts_rate_limit_errors() -> None:
    limiter = AdaptiveConcurrency(16, minimum=1, maximum=32)
    with_limiter, _ = run_against_capacity(limiter, jobs=60, capacity=4)
    without_limiter, _ = run_against_capacity(None, jobs=60, capacity=4)
    assert limiter.decreases >= 1
    assert limiter.peak_in_flight <= 16
    assert with_limiter < without_limiter / 4


def test_limiter_validation() -> None:
    with pytest.raises(InvalidArgument):
        AdaptiveConcurrency(0)
    with pytest.raises(InvalidArgument):
        AdaptiveConcurrency(5, maximum=4)
    with pytest.raises(InvalidArgument):
        AdaptiveConcurrency(2, decrease_factor=1.0)
    limiter = AdaptiveConcurrency(1)
    with pytest.raises(InvalidArgument):
        limiter.release()


def test_the_jitter_source_is_made_only_when_a_call_is_retried() -> None:
    """A seeded generator per call is work for nothing when the call succeeds first time (most
    do): ``rng=`` may be a factory, called at the first retry and only then."""
    made: list[int] = []

    def factory() -> random.Random:
        made.append(1)
        return random.Random(7)

    async def flaky(failures: int) -> str:
        left = [failures]

        async def api() -> str:
            if left[0]:
                left[0] -= 1
                raise CapacityError()
            return "ok"

        async def no_sleep(seconds: float) -> None:
            return None

        return await retry_call_async(api, rng=factory, sleep=no_sleep)

    assert asyncio.run(flaky(0)) == "ok" and made == []
    assert asyncio.run(flaky(2)) == "ok" and made == [1]  # once per call, not per retry
    # the factory's generator gives the same waits as passing it directly
    waits: dict[str, list[float]] = {"factory": [], "direct": []}
    for label, rng in (("factory", lambda: random.Random(7)), ("direct", random.Random(7))):

        async def record(seconds: float, label: str = label) -> None:
            waits[label].append(seconds)

        calls = iter([CapacityError(), CapacityError(), "ok"])

        async def api() -> str:
            step = next(calls)
            if isinstance(step, Exception):
                raise step
            return step

        asyncio.run(retry_call_async(api, rng=rng, sleep=record))
    assert waits["factory"] == waits["direct"] and len(waits["direct"]) == 2


def test_a_failed_or_cancelled_attempt_gives_its_limiter_slot_back() -> None:
    async def main() -> AdaptiveConcurrency:
        limiter = AdaptiveConcurrency(2, minimum=1, maximum=2)

        async def boom() -> str:
            raise ValueError("not retryable")

        with pytest.raises(ValueError):
            await retry_call_async(boom, limiter=limiter)
        assert limiter.in_flight == 0

        async def forever() -> str:
            await asyncio.sleep(3600)
            return "never"

        task = asyncio.ensure_future(retry_call_async(forever, limiter=limiter))
        await asyncio.sleep(0)
        assert limiter.in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return limiter

    assert asyncio.run(main()).in_flight == 0


# -- errors the request itself caused are not retried
# -------------------------------------------------


def test_a_5xx_whose_body_blames_the_request_is_not_retryable() -> None:
    typed = classify_error(
        error_from(
            error_reply(500, error_type="invalid_request_error", message="tool_choice is wrong")
        )
    )
    assert (typed.retryable, typed.reason, typed.status_code) == (False, "invalid_request", 500)
    worded = classify_error(
        error_from(
            error_reply(
                500, message="Invalid tool_choice: 'required' is not supported by this model"
            )
        )
    )
    assert (worded.retryable, worded.reason) == (False, "invalid_request")
    # a plain server error, and one that blames the request but that the server says to retry
    assert classify_error(error_from(error_reply(500))).retryable
    assert classify_error(error_from(error_reply(503, message="upstream connect error"))).retryable
    forced = error_reply(
        500, error_type="invalid_request_error", headers={"x-should-retry": "true"}
    )
    assert classify_error(error_from(forced)).retryable
    unprocessable = classify_error(error_from(error_reply(422, error_type="unprocessable_entity")))
    assert (unprocessable.retryable, unprocessable.status_code) == (False, 422)


def test_an_invalid_request_500_is_sent_once_with_a_note_saying_why() -> None:
    reply = error_reply(500, message="Invalid request: messages[2].content must not be null")
    with MessagesServer([reply] * 6 + [text_reply("never reached")]) as server:
        c = sdk(server)
        stats = RetryStats()
        with pytest.raises(anthropic.InternalServerError) as err:
            retry_call(lambda: c.messages.create(**REQUEST), stats=stats, sleep=SleepRecorder())
        assert len(server.requests) == 1
    notes = " ".join(getattr(err.value, "__notes__", []))
    assert "says the request itself is invalid" in notes and "500 invalid_request" in notes
    assert (stats.attempts, stats.retries, stats.gave_up) == (1, 0, 0)


def test_openai_sdk_400_422_and_invalid_500_are_sent_once_but_a_plain_500_is_retried() -> None:
    import openai

    from agentprop.testing import OpenAIServer

    def attempts(reply: Any) -> int:
        with OpenAIServer([reply, reply, text_reply("ok")]) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="dummy", max_retries=0)
            try:
                retry_call(
                    lambda: client.chat.completions.create(
                        model="gpt-test", messages=[{"role": "user", "content": "hi"}]
                    ),
                    policy=RetryPolicy(max_attempts=6, base_delay=0.0),
                    sleep=SleepRecorder(),
                )
            except openai.APIStatusError:
                pass
            return len(server.requests)

    assert attempts(error_reply(400)) == 1
    assert attempts(error_reply(422, error_type="invalid_request_error")) == 1
    assert attempts(error_reply(500, error_type="invalid_request_error")) == 1
    assert attempts(error_reply(500, message="Unsupported value for tool_choice")) == 1
    assert attempts(error_reply(500)) == 3  # two failures, then the answer
