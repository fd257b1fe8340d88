"""Retries for model API calls.

SDKs are called with ``max_retries=0`` and retried here, so the policy is ours, seeded in tests,
and every retry is counted. Retried: 408, 429, 5xx (unless the body says the request is
invalid), timeouts and dropped connections; ``x-should-retry`` overrides. The wait is full-jitter
backoff, or exactly the server's ``retry-after`` (raised instead when longer than
``max_retry_after``). After ``max_attempts`` the last error is raised with a note of the attempts.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import inspect
import json
import math
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, cast

from agentprop._modelapi.limiter import AdaptiveConcurrency
from agentprop.errors import DeadlineExceeded, InvalidArgument

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "DeadlineExceeded",
    "RetryDecision",
    "RetryEvent",
    "RetryPolicy",
    "RetryStats",
    "backoff_delay",
    "blames_the_request",
    "classify_error",
    "parse_retry_after",
    "retry_call",
    "retry_call_async",
    "retrying",
]

T = TypeVar("T")
P = ParamSpec("P")


# --------------------------------------------------------------------------------------------
# Policy and classification
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry.

    Attributes:
        max_attempts: attempts in total, the first one included (1 = never retry).
        base_delay: the backoff cap for the first retry, in seconds; doubles each retry.
        max_delay: the largest backoff cap, in seconds.
        max_retry_after: the longest server-requested wait we honour; a longer
            ``retry-after`` raises the error instead of sleeping.
        honour_retry_after: whether ``retry-after`` / ``retry-after-ms`` replace the backoff.
    """

    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    honour_retry_after: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise InvalidArgument(f"max_attempts={self.max_attempts!r} must be an int >= 1.")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise InvalidArgument(
                "base_delay, max_delay and max_retry_after must be >= 0 seconds; got "
                f"{self.base_delay}, {self.max_delay}, {self.max_retry_after}."
            )


DEFAULT_RETRY_POLICY = RetryPolicy()


@dataclass(frozen=True)
class RetryDecision:
    """What :func:`classify_error` concluded about one failed attempt.

    ``reason`` is one of ``rate_limited`` (429), ``overloaded`` (529), ``server_error`` (other
    5xx), ``timeout`` (408 or a client-side timeout), ``connection`` (network failure),
    ``server_says_retry`` (``x-should-retry: true``), ``malformed_response`` (a response body
    that is not JSON; not retried), ``invalid_request`` (a 5xx whose body blames the request;
    not retried) or ``not_retryable``.
    """

    retryable: bool
    reason: str
    status_code: int | None = None
    retry_after: float | None = None

    @property
    def is_congestion(self) -> bool:
        """Whether the server asked us to slow down (429 or 529)."""
        return self.reason in ("rate_limited", "overloaded")


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``retry-after``, or ``None``.

    ``retry-after`` may be a number of seconds (fractions accepted) or an HTTP date; a date in
    the past gives 0. Unparseable values give ``None``.
    """
    if headers is None:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        current = time.time() if now is None else now
        return max(0.0, float(email.utils.mktime_tz(parsed)) - current)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _status_and_headers(exc: BaseException) -> tuple[int | None, Mapping[str, str] | None]:
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not isinstance(status, int):
        status = getattr(response, "status_code", None)
        if not isinstance(status, int):
            status = None
    return status, headers if isinstance(headers, Mapping) or hasattr(headers, "items") else None


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _is_timeout(exc: BaseException) -> bool:
    # the SDKs' APITimeoutError (anthropic and openai name it alike) and httpx's timeouts, by
    # class name: neither SDK needs to be installed to classify the other's errors
    if isinstance(exc, DeadlineExceeded):
        return False
    names = _class_names(exc)
    return (
        isinstance(exc, TimeoutError)
        or "APITimeoutError" in names
        or any(n.endswith("TimeoutException") for n in names)
    )


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError):
        return True
    # the SDKs' APIConnectionError and httpx-style transport errors
    return bool(_class_names(exc) & {"APIConnectionError", "TransportError", "NetworkError"})


_NEVER_SENT = frozenset(
    {"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "ClientConnectorError", "gaierror"}
)
"""Errors of a connection that was never made: the request never reached the provider."""


def may_have_been_billed(exc: BaseException) -> bool:
    """Whether an attempt that ended in ``exc`` may have been billed by the provider: it was
    abandoned or cut off in flight (a timeout, a cancellation, a dropped or malformed answer),
    not refused with an HTTP error nor stopped before a connection was made. When in doubt,
    yes: the budget charges such a call its worst case rather than nothing."""
    if isinstance(exc, DeadlineExceeded):  # the wait after a failed attempt: that attempt decides
        return exc.__cause__ is not None and may_have_been_billed(exc.__cause__)
    if _status_and_headers(exc)[0] is not None:
        return False
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if _class_names(node) & _NEVER_SENT:
            return False
        node = node.__cause__ or node.__context__
    return True


_INVALID_REQUEST_KINDS = frozenset(
    {
        "invalid_request_error",
        "invalid_request",
        "bad_request",
        "badrequesterror",
        "validation_error",
        "invalid_value",
        "unprocessable_entity",
    }
)
"""Error ``type`` / ``code`` values (OpenAI, Anthropic and OpenAI-compatible servers) that
blame the request."""

_INVALID_REQUEST_TEXT = re.compile(
    r"\binvalid[ _](request|value|parameter|param|argument|schema|json|tool[ "
    r"_]choice|message|role)s?\b|\bunsupported[ _](parameter|value|tool[ _]choice)\b|\bvalidation "
    r"error\b|\bbad request\b",
    re.IGNORECASE,
)
"""Phrases in an error message that blame the request rather than the server."""


def _error_payload(exc: BaseException) -> Mapping[str, Any] | None:
    """The error object of an API error's JSON body (the SDKs keep it as ``.body``; the OpenAI
    SDK keeps the inner ``error`` object, the Anthropic SDK the whole body), or ``None``."""
    body = getattr(exc, "body", None)
    if not isinstance(body, Mapping):
        response = getattr(exc, "response", None)
        try:
            body = response.json() if response is not None and hasattr(response, "json") else None
        except Exception:  # noqa: BLE001 - any unreadable body is simply no evidence
            body = None
    if not isinstance(body, Mapping):
        return None
    inner = body.get("error")
    return (
        cast("Mapping[str, Any]", inner)
        if isinstance(inner, Mapping)
        else cast("Mapping[str, Any]", body)
    )


def blames_the_request(exc: BaseException) -> bool:
    """Whether a server error's body says the request itself is invalid (its ``type`` or
    ``code``, or its message), so that sending it again cannot succeed."""
    payload = _error_payload(exc)
    if payload is None:
        return False
    for field in ("type", "code"):
        value = payload.get(field)
        if isinstance(value, str) and value.strip().lower() in _INVALID_REQUEST_KINDS:
            return True
    message = payload.get("message")
    return isinstance(message, str) and _INVALID_REQUEST_TEXT.search(message) is not None


def classify_error(exc: BaseException) -> RetryDecision:
    """Decide whether ``exc`` (raised by one API attempt) is worth retrying, and how soon."""
    status, headers = _status_and_headers(exc)
    if status is not None:
        retry_after = parse_retry_after(headers)
        should = None
        if headers is not None:
            should = dict((str(k).lower(), str(v)) for k, v in headers.items()).get(
                "x-should-retry"
            )
        if should == "false":
            return RetryDecision(False, "not_retryable", status, retry_after)
        if status == 429:
            return RetryDecision(True, "rate_limited", status, retry_after)
        if status == 529:
            return RetryDecision(True, "overloaded", status, retry_after)
        if status == 408:
            return RetryDecision(True, "timeout", status, retry_after)
        if status >= 500:
            if should != "true" and blames_the_request(exc):
                return RetryDecision(False, "invalid_request", status, retry_after)
            return RetryDecision(True, "server_error", status, retry_after)
        if should == "true":
            return RetryDecision(True, "server_says_retry", status, retry_after)
        return RetryDecision(False, "not_retryable", status, retry_after)
    if isinstance(exc, json.JSONDecodeError):
        return RetryDecision(False, "malformed_response")
    if _is_timeout(exc):
        return RetryDecision(True, "timeout")
    if _is_connection_error(exc):
        return RetryDecision(True, "connection")
    return RetryDecision(False, "not_retryable")


def backoff_delay(retry_number: int, policy: RetryPolicy, rng: random.Random) -> float:
    """Full-jitter backoff before retry ``retry_number`` (1 for the first retry)."""
    if retry_number < 1:
        raise InvalidArgument(f"retry_number={retry_number} must be >= 1.")
    cap = min(policy.max_delay, policy.base_delay * (2.0 ** min(retry_number - 1, 60)))
    return rng.uniform(0.0, cap)


# --------------------------------------------------------------------------------------------
# Observability
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryEvent:
    """One retry about to happen: attempt ``attempt`` (1-based) failed; we wait ``delay``."""

    attempt: int
    delay: float
    reason: str
    status_code: int | None
    retry_after: float | None
    error: BaseException


class RetryStats:
    """Thread-safe counters of calls, attempts and retries, shared by many calls.

    ``by_reason`` counts retries per :attr:`RetryDecision.reason`; ``gave_up`` counts calls that
    raised after at least one retryable failure (attempts exhausted, retry-after too long, or a
    wait that would end past the turn's deadline, also counted in ``cut_by_deadline``).
    ``slept`` is the time actually spent waiting: a wait cut short (the turn timed out during
    it) counts only what elapsed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.attempts = 0
        self.retries = 0
        self.gave_up = 0
        self.slept = 0.0
        self.cut_by_deadline = 0
        self.by_reason: Counter[str] = Counter()

    def _record_attempt(self, first: bool) -> None:
        with self._lock:
            self.attempts += 1
            if first:
                self.calls += 1

    def _record_retry(self, event: RetryEvent) -> None:
        with self._lock:
            self.retries += 1
            self.by_reason[event.reason] += 1

    def _record_sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept += seconds

    def _record_give_up(self, *, deadline: bool = False) -> None:
        with self._lock:
            self.gave_up += 1
            if deadline:
                self.cut_by_deadline += 1

    def as_dict(self) -> dict[str, Any]:
        """A plain snapshot, for reports."""
        with self._lock:
            return {
                "calls": self.calls,
                "attempts": self.attempts,
                "retries": self.retries,
                "gave_up": self.gave_up,
                "slept_seconds": self.slept,
                "cut_by_deadline": self.cut_by_deadline,
                "by_reason": dict(self.by_reason),
            }


class _Attempts:
    """The bookkeeping of one call's attempts (what :func:`_retries` decides with)."""

    def __init__(
        self,
        policy: RetryPolicy,
        rng: random.Random | Callable[[], random.Random] | None,
        stats: RetryStats | None,
        on_retry: Callable[[RetryEvent], None] | None,
        classify: Callable[[BaseException], RetryDecision],
    ) -> None:
        self.policy = policy
        self._rng = rng
        self.stats = stats
        self.on_retry = on_retry
        self.classify = classify
        self.history: list[str] = []

    @property
    def rng(self) -> random.Random:
        """The jitter's random source, made when the first retry needs it (most calls never
        retry, so a seeded generator per call would be work for nothing)."""
        rng = self._rng
        if not isinstance(rng, random.Random):
            rng = self._rng = rng() if rng is not None else random.Random()
        return rng

    def started(self, attempt: int) -> None:
        if self.stats is not None:
            self.stats._record_attempt(first=attempt == 1)

    def after_failure(
        self, attempt: int, exc: BaseException, decision: RetryDecision, left: float | None = None
    ) -> float | None:
        """The delay before the next attempt, or ``None`` to raise ``exc`` now. ``left``: the
        seconds before the caller's deadline; a wait that would not end before it raises
        :class:`DeadlineExceeded` (from ``exc``) instead of sleeping."""
        label = (
            f"{decision.status_code} {decision.reason}" if decision.status_code else decision.reason
        )
        self.history.append(label)
        if not decision.retryable:
            if decision.reason == "malformed_response":
                self._note(
                    exc,
                    "the API answered with a body that is not valid JSON (a truncated reply, or "
                    "an error page from a proxy?); not retried",
                )
            elif decision.reason == "invalid_request":
                self._note(
                    exc,
                    f"the server answered {decision.status_code} but its error body says the "
                    "request itself is invalid, so sending it again cannot succeed; not retried "
                    "(fix the request: the model options, tool schemas or messages)",
                )
            elif len(self.history) > 1:
                self._note(exc, f"attempt {attempt} failed with a non-retryable error")
            return None
        if attempt >= self.policy.max_attempts:
            self._give_up(
                exc, f"gave up after {attempt} attempt(s), the most allowed by max_attempts"
            )
            return None
        if self.policy.honour_retry_after and decision.retry_after is not None:
            if decision.retry_after > self.policy.max_retry_after:
                self._give_up(
                    exc,
                    f"the server asked to retry after {decision.retry_after:.1f}s, longer than "
                    f"max_retry_after={self.policy.max_retry_after}s; not waiting",
                )
                return None
            delay = decision.retry_after
        else:
            delay = backoff_delay(attempt, self.policy, self.rng)
        if left is not None and delay >= left:
            asked = (
                "asked to retry after"
                if decision.retry_after is not None and self.policy.honour_retry_after
                else "would back off for"
            )
            why = (
                f"the server {asked} {delay:.1f}s but only {max(left, 0.0):.1f}s of the turn's "
                "time were left, so agentprop did not wait: the turn timeout won"
            )
            if self.stats is not None:
                self.stats._record_give_up(deadline=True)
            self._note(exc, why)
            raise DeadlineExceeded(f"{why} ({label} on attempt {attempt})") from exc
        event = RetryEvent(
            attempt, delay, decision.reason, decision.status_code, decision.retry_after, exc
        )
        if self.stats is not None:
            self.stats._record_retry(event)
        if self.on_retry is not None:
            self.on_retry(event)
        return delay

    def _give_up(self, exc: BaseException, why: str) -> None:
        if self.stats is not None:
            self.stats._record_give_up()
        self._note(exc, why)

    def _note(self, exc: BaseException, why: str) -> None:
        runs: list[list[Any]] = []
        for label in self.history:
            if runs and runs[-1][0] == label:
                runs[-1][1] += 1
            else:
                runs.append([label, 1])
        summary = ", ".join(label if n == 1 else f"{label} (x{n})" for label, n in runs)
        exc.add_note(f"agentprop retry: {why}. Attempts: {summary}.")


_Failure = tuple[BaseException, float | None]
"""What a driver sends back after a failed attempt: the error, and the seconds left before the
caller's deadline (``None``: no deadline)."""

_ATTEMPT = 0.0
"""What :func:`_retries` yields for "make an attempt now"."""
_GIVE_UP = -1.0
"""What :func:`_retries` yields for "raise the failed attempt's error"."""


def _retries(state: _Attempts) -> Generator[float, _Failure | None, None]:
    """The retry loop without its I/O: :func:`retry_call` and :func:`retry_call_async` only
    carry out what it yields.

    It yields :data:`_ATTEMPT` (a driver returns what succeeds, and sends back a
    :data:`_Failure` otherwise), a wait ``d > 0`` (wait ``d`` seconds, then send ``None``) or
    :data:`_GIVE_UP` (raise the error). A driver that closes it during a wait (the wait was
    cut short) has only the elapsed part counted in ``stats.slept``.
    """
    stats = state.stats
    attempt = 0
    while True:
        attempt += 1
        state.started(attempt)
        failure = yield _ATTEMPT
        if failure is None:
            raise InvalidArgument("a retry driver must send a failed attempt's error back")
        exc, left = failure
        delay = state.after_failure(attempt, exc, state.classify(exc), left)
        del exc, failure  # not held while waiting, nor by the error's traceback once raised
        if delay is None:
            yield _GIVE_UP
            return
        if delay > 0:
            started = time.monotonic()
            try:
                yield delay
            except GeneratorExit:  # cut short: count what really elapsed
                if stats is not None:
                    stats._record_sleep(min(delay, time.monotonic() - started))
                raise
            if stats is not None:
                stats._record_sleep(delay)


def retry_call(
    fn: Callable[[], T],
    /,
    *,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    rng: random.Random | None = None,
    sleep: Callable[[float], None] = time.sleep,
    stats: RetryStats | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    classify: Callable[[BaseException], RetryDecision] = classify_error,
) -> T:
    """Call ``fn()`` and retry it under ``policy`` when it raises a retryable error.

    ``rng`` supplies the jitter (pass ``random.Random(seed)`` for reproducible waits); ``sleep``
    is injectable so tests need not wait; ``stats`` and ``on_retry`` observe every retry.
    ``fn`` runs in the caller's thread, with no event loop of ours around it.
    """
    plan = _retries(_Attempts(policy, rng, stats, on_retry, classify))
    step = next(plan)
    while True:
        if step == _ATTEMPT:
            try:
                return fn()
            except Exception as exc:
                step = plan.send((exc, None))
                if step == _GIVE_UP:
                    raise
        else:
            try:
                sleep(step)
            except BaseException:
                plan.close()  # counts the part of the wait that elapsed
                raise
            step = plan.send(None)


async def retry_call_async(
    fn: Callable[[], Awaitable[T]],
    /,
    *,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    rng: random.Random | Callable[[], random.Random] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    stats: RetryStats | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    classify: Callable[[BaseException], RetryDecision] = classify_error,
    limiter: AdaptiveConcurrency | None = None,
    deadline: float | None = None,
) -> T:
    """The asyncio form of :func:`retry_call`: ``fn`` returns an awaitable (a fresh one per call).

    With ``limiter``, every attempt holds one of its slots, reports success or congestion to
    it, and the waits between attempts happen outside the slot. ``deadline`` (in the event
    loop's clock, ``loop.time()``) is when the caller's time runs out (a turn's timeout): a
    wait that would not end before it is not started; :class:`DeadlineExceeded` is raised
    instead, saying so. A wait cut short by cancellation counts only what elapsed in
    ``stats.slept``. ``rng`` may be a function making the generator: it is called at the first
    retry, so a call that succeeds at once never seeds one.
    """
    plan = _retries(_Attempts(policy, rng, stats, on_retry, classify))
    step = next(plan)
    while True:
        if step == _ATTEMPT:
            try:
                if limiter is None:
                    return await fn()
                # (not ``async with limiter.slot()``: an async generator per call; nor a
                # coroutine around the attempt: every resumption of it would pass through one
                # more frame)
                slot = await limiter.acquire()
                try:
                    try:
                        result = await fn()
                    except Exception as exc:
                        if classify(exc).is_congestion:
                            slot.rate_limited()
                        raise
                    slot.success()
                finally:
                    limiter.release()
                return result
            except Exception as exc:
                left = None if deadline is None else deadline - asyncio.get_running_loop().time()
                step = plan.send((exc, left))
                if step == _GIVE_UP:
                    raise
        else:
            try:
                await sleep(step)
            except BaseException:
                plan.close()  # counts the part of the wait that elapsed
                raise
            step = plan.send(None)


def retrying(
    *,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    rng: random.Random | None = None,
    stats: RetryStats | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    classify: Callable[[BaseException], RetryDecision] = classify_error,
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Decorator form: wraps a sync function with :func:`retry_call`, or a coroutine function
    with :func:`retry_call_async` (each call of the wrapped function is retried as a whole)."""

    def decorate(func: Callable[P, T]) -> Callable[P, T]:
        if inspect.iscoroutinefunction(func):
            async_func = cast("Callable[P, Awaitable[Any]]", func)

            @functools.wraps(func)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await retry_call_async(
                    lambda: async_func(*args, **kwargs),
                    policy=policy,
                    rng=rng,
                    stats=stats,
                    on_retry=on_retry,
                    classify=classify,
                )

            return cast("Callable[P, T]", async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            return retry_call(
                lambda: func(*args, **kwargs),
                policy=policy,
                rng=rng,
                stats=stats,
                on_retry=on_retry,
                classify=classify,
            )

        return wrapper

    return decorate
