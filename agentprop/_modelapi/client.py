"""The model client: one path for every model call agentprop makes, whatever the provider.

A call goes, in order, through the API cache, the offline-key rule (a key is required only
when a request must really reach the provider's own host), the budget (the worst case reserved
first), retries under the adaptive concurrency limit, then the answer is cached with secrets
scrubbed and the reservation settled. An attempt abandoned in flight is charged its whole
reservation, so the dollar limit bounds what the provider may bill.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import random
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from agentprop._modelapi.budget import Budget, Reservation
from agentprop._modelapi.cache import ApiCache, CachedResponse, CacheMiss, CacheMode, scrub_text
from agentprop._modelapi.canonical import _RequestShape
from agentprop._modelapi.context import (
    ModelCallContext,
    current_model_context,
    model_context_in_force,
)
from agentprop._modelapi.limiter import AdaptiveConcurrency
from agentprop._modelapi.options import CLIENT_FIELDS, ModelOptions
from agentprop._modelapi.providers import Provider, TextPrompt, TokenUsage
from agentprop._modelapi.retry import (
    RetryEvent,
    RetryPolicy,
    RetryStats,
    classify_error,
    may_have_been_billed,
    retry_call_async,
)
from agentprop._util.scrub import register_secret
from agentprop.errors import (
    AgentPropError,
    ApiUnavailable,
    BudgetExhausted,
    DeadlineExceeded,
    InvalidArgument,
    MissingApiKey,
    ModelCallError,
)

TIMED_OUT = "agentprop_timed_out"
"""The key of a cache entry that records a call the turn's timeout cut off (not an answer)."""
UNANSWERED = "agentprop_unanswered"
"""The key of a cache entry that records a call the API never answered, every retry failing
(timeouts, connection errors, 5xx, 429): replayed only in ``replay-only`` mode, where it ends
the run as the live one ended (``api_unavailable``); a mode that may call the API asks again."""
_DEADLINE_SLACK_S = 0.05
"""A cancellation this close to the turn's deadline is the turn's timeout."""

__all__ = [
    "DEFAULT_API_CACHE_PATH",
    "INPUT_OVERHEAD_TOKENS",
    "OFFLINE_API_KEY",
    "MissingApiKey",
    "ModelCallError",
    "ModelClient",
    "ModelReply",
    "default_cache_mode",
    "open_api_cache",
]

DEFAULT_API_CACHE_PATH = Path(".agentprop") / "api-cache.sqlite"
"""Where the API cache lives when none is given (relative to the current directory)."""

OFFLINE_API_KEY = "agentprop-offline-no-key"
"""Sent when no key is configured and ``base_url`` is not the provider's own (a local server)."""

INPUT_OVERHEAD_TOKENS = 1024
"""Added to a request's size when bounding its input tokens: the provider's own prompt around
tools and messages (Anthropic's tool-use system prompt is a few hundred tokens)."""

_DISPLAY = {"anthropic": "Anthropic", "openai": "OpenAI"}


# --------------------------------------------------------------------------------------------
# Cache defaults and the shared caches
# --------------------------------------------------------------------------------------------


def default_cache_mode() -> CacheMode:
    """The mode a model call's cache uses when its client chose none: the session's
    (``--agentprop-cache-mode``), else :meth:`CacheMode.default` (``replay-only`` under CI)."""
    return current_model_context().default_cache_mode()


def open_api_cache(
    path: str | os.PathLike[str],
    *,
    mode: CacheMode | str | None = None,
    secrets: Sequence[str] = (),
) -> ApiCache:
    """The session's :class:`ApiCache` for ``path`` in ``mode`` (opened once, then shared)."""
    return current_model_context().open_api_cache(path, mode=mode, secrets=secrets)


# --------------------------------------------------------------------------------------------
# Replies and counters
# --------------------------------------------------------------------------------------------


class ModelReply(NamedTuple):
    """One model call's answer: the (possibly replayed) response and what it cost."""

    cached: CachedResponse
    usage: TokenUsage
    cost_usd: float | None
    """Dollars charged: 0.0 for a replay, ``None`` when the model has no price (unknown)."""

    @property
    def response(self) -> dict[str, Any]:
        """The response JSON, as the API sent it (or as a stream assembled it)."""
        return self.cached.response

    @property
    def from_cache(self) -> bool:
        return self.cached.from_cache

    @property
    def key(self) -> str:
        return self.cached.key


class _Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.model_calls = 0
        self.cache_hits = 0
        self.live_calls = 0
        self.failed_calls = 0
        self.refused_calls = 0

    def bump(self, *names: str) -> None:
        with self._lock:
            for name in names:
                setattr(self, name, getattr(self, name) + 1)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {
                "model_calls": self.model_calls,
                "cache_hits": self.cache_hits,
                "live_calls": self.live_calls,
                "failed_calls": self.failed_calls,
                "refused_calls": self.refused_calls,
            }


@dataclass
class _LoopState:
    """The SDK clients and the concurrency limit of one event loop (neither may cross loops):
    one client given (``sdk_client``), or :func:`_pools` made, which calls take in turn."""

    clients: tuple[Any, ...]
    limiter: AdaptiveConcurrency | None
    owned: bool
    closer: AsyncGenerator[None, None] | None = None
    turn: int = 0

    def next_client(self) -> Any:
        """The client of the next call (only this loop's thread calls it)."""
        self.turn = turn = (self.turn + 1) % len(self.clients)
        return self.clients[turn]


async def _close_at_loop_shutdown(clients: Sequence[Any]) -> AsyncGenerator[None, None]:
    """Started once per loop and left suspended: asyncio finalises the async generators of a
    loop when it shuts down (``asyncio.run`` does), which closes the clients' connections."""
    try:
        yield
    finally:
        for client in clients:
            await client.close()


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from the parts' text, stable across processes (as
    :func:`agentprop._scenario.world.stable_seed`, which the layer above owns)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _retry_rng(seed_parts: Sequence[object], trial: int) -> random.Random:
    """The retry jitter's random source for one call: reproducible from the call's seed parts
    and trial (made only when the call is retried)."""
    return random.Random(stable_seed("agentprop-retry", *seed_parts, trial))


_PRICING = Budget()
"""An unlimited budget used only for its price table when no budget is in play."""

_REQUESTS_PER_POOL = 16
"""Requests in flight per SDK client: a client's connection pool (httpcore's) probes every idle
connection it holds on each request it starts and ends, so one pool for hundreds of requests
in flight costs each call time in proportion to their number; the requests a client may have in
flight (``max_concurrent_requests``) are spread over ``ceil(n / 16)`` SDK clients instead, in
turn (:func:`_pools`)."""
_MAX_POOLS = 16


def _pools(max_concurrent_requests: int | None) -> int:
    """How many SDK clients (connection pools) share the requests of one event loop."""
    n = max_concurrent_requests if max_concurrent_requests is not None else 64
    return min(_MAX_POOLS, max(1, -(-n // _REQUESTS_PER_POOL)))


_SHAPE_LIMIT = 64
"""At most this many request shapes per client (past it the memo starts afresh)."""


class _Booking:
    """The budget reservation of a live call's attempt in flight (``held``), booked again when
    the call is retried (the ``on_retry`` of :func:`retry_call_async`): an attempt abandoned in
    flight may be billed, so its worst case is charged and the next attempt's booked
    (:class:`BudgetExhausted` here ends the call: no more attempts). An object rather than a
    closure: a call that waits holds no cell for each variable a closure would capture."""

    __slots__ = ("body", "budget", "client", "held", "text", "what")

    def __init__(
        self,
        client: ModelClient,
        budget: Budget,
        body: dict[str, Any],
        text: str,
        what: str | None,
        held: Reservation,
    ) -> None:
        self.client = client
        self.budget = budget
        self.body = body
        self.text = text
        self.what = what
        self.held: Reservation | None = held

    def __call__(self, event: RetryEvent) -> None:
        if may_have_been_billed(event.error) and self.held is not None:
            self.budget.charge_abandoned(self.held)
            self.held = None
            self.held = self.client._reserve(self.budget, self.body, self.text, self.what)


# --------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------


class ModelClient:
    """How to call one model: the provider, endpoint, key, cache, budget and retry policy.

    Args:
        provider: the API (:data:`~agentprop._modelapi.providers.ANTHROPIC_MESSAGES`,
            :data:`~agentprop._modelapi.providers.OPENAI_CHAT`, ...).
        model: the model name (for prices and messages; each request body names its model).
        options: a :class:`~agentprop._modelapi.options.ModelOptions`; the client reads its
            :data:`~agentprop._modelapi.options.CLIENT_FIELDS` (``base_url``: default the
            provider's environment variable, e.g. ``OPENAI_BASE_URL``, else its own host;
            ``api_key``: default the provider's environment variable, never stored; ``cache``:
            an :class:`ApiCache`, a path, ``None`` for :data:`DEFAULT_API_CACHE_PATH` or
            ``False``; ``cache_mode``, ``budget``: default the run context's; ``retry_policy``;
            ``timeout``: seconds per HTTP attempt; ``max_concurrent_requests``: the starting
            and highest number in flight per event loop, halved on 429/529, ``None`` for no
            limit; ``stream``: server-sent events, for providers that stream).
        keywords: the same client options by name, set over ``options``.
        sdk_client: an SDK client to use instead of making one (its own key and endpoint apply;
            a synchronous client is called in a worker thread).
    """

    def __init__(
        self,
        provider: Provider,
        model: str,
        options: ModelOptions | None = None,
        *,
        sdk_client: Any = None,
        **keywords: Any,
    ) -> None:
        chosen = ModelOptions.of(
            keywords,
            base=options,
            where="ModelClient",
            allowed=CLIENT_FIELDS,
            also=("options", "sdk_client"),
        )
        base_url, api_key, cache, cache_mode = (
            chosen.base_url,
            chosen.api_key,
            chosen.cache,
            chosen.cache_mode,
        )
        budget, retry_policy, timeout, stream = (
            chosen.budget,
            chosen.retry_policy,
            chosen.timeout,
            chosen.stream,
        )
        max_concurrent_requests = chosen.max_concurrent_requests
        if not isinstance(model, str) or not model.strip():
            raise InvalidArgument(f"model={model!r}: name the model to call.")
        if timeout <= 0:
            raise InvalidArgument(f"timeout={timeout} must be > 0 seconds.")
        if max_concurrent_requests is not None and max_concurrent_requests < 1:
            raise InvalidArgument(
                f"max_concurrent_requests={max_concurrent_requests} must be >= 1 or None."
            )
        if budget is not None and not isinstance(budget, Budget):
            raise InvalidArgument(
                f"budget must be an agentprop Budget, not {type(budget).__name__}."
            )
        if not isinstance(retry_policy, RetryPolicy):
            raise InvalidArgument(
                f"retry_policy must be a RetryPolicy, not {type(retry_policy).__name__}."
            )
        if stream and not provider.streams:
            raise InvalidArgument(
                f"stream=True: agentprop does not stream the {provider.label} API."
            )
        self.provider = provider
        self.model = model
        self.base_url = base_url
        self._api_key = api_key
        register_secret(api_key)  # never echoed into a trace, a report or the terminal
        self._cache_arg: Any = None if cache is True else cache
        self.cache_mode = None if cache_mode is None else CacheMode.parse(cache_mode)
        self.budget = budget
        self.store: str | None = None
        """The shared store URL of the API cache (``None``: the context's, see
        :meth:`ModelCallContext.open_api_cache`)."""
        self.retry_policy = retry_policy
        self.timeout = float(timeout)
        self.max_concurrent_requests = max_concurrent_requests
        self.stream = bool(stream)
        self.sdk_client = sdk_client
        self.retry_stats = RetryStats()
        self.missing_key_error: MissingApiKey | None = None
        """Set when a call needed the API and no key was configured (the CLI reports it)."""
        self._counters = _Counters()
        self._lock = threading.Lock()
        self._caches: dict[tuple[int, CacheMode], tuple[ModelCallContext, ApiCache]] = {}
        self._outside_sessions = ModelCallContext()
        """The context of this client's calls outside any session or check: one per client, not
        one per asyncio task (``asyncio.gather`` gives each run a copy of the context
        variables), so concurrent runs share one cache, its connection and its group commits."""
        self._off: ApiCache | None = None
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._shapes: dict[tuple[Any, ...], tuple[Any, Any, _RequestShape | None]] = {}

    # -- keys and endpoints ------------------------------------------------------------------------

    def resolved_base_url(self) -> str | None:
        """``base_url``, else the provider's environment variable, else ``None`` (its own)."""
        return self.base_url or os.environ.get(self.provider.base_url_env) or None

    def secrets(self) -> tuple[str, ...]:
        """Literal secrets to scrub from everything stored or shown: the keys in play."""
        found = [
            self._api_key,
            os.environ.get(self.provider.key_env),
            getattr(self.sdk_client, "api_key", None),
        ]
        return tuple(s for s in found if isinstance(s, str) and s and s != OFFLINE_API_KEY)

    def api_key(self) -> str:
        """The key to send: ``api_key=``, else the provider's environment variable, else (for a
        ``base_url`` that is not the provider's own host) a placeholder. Raises
        :class:`MissingApiKey` otherwise."""
        key = self._api_key or os.environ.get(self.provider.key_env)
        if key:
            return key
        base = self.resolved_base_url()
        host = (urlsplit(base).hostname or "") if base else self.provider.official_hosts[0]
        if base and host not in self.provider.official_hosts:
            return OFFLINE_API_KEY
        who = _DISPLAY.get(self.provider.name, self.provider.name)
        error = MissingApiKey(
            f"no {who} API key for model {self.model!r}, and this request is not in the API cache",
            expected=f"a key in the {self.provider.key_env} environment variable, or api_key=...",
            fix=f"export {self.provider.key_env}=... (or pass api_key=); to run offline, replay a "
            "recorded cache (--cache PATH --cache-mode replay-only) or point "
            "--base-url at a local server",
        )
        self.missing_key_error = error
        raise error

    def scrub(self, text: str) -> str:
        """``text`` with every secret in play, and anything shaped like a key, redacted."""
        return scrub_text(text, self.secrets())

    # -- cache and budget --------------------------------------------------------------------------

    @property
    def cache(self) -> ApiCache:
        """The API cache model calls use now (an ``off``-mode cache when caching is disabled)."""
        arg = self._cache_arg
        if isinstance(arg, ApiCache):
            return arg
        if arg is False:
            if self._off is None:
                self._off = ApiCache(DEFAULT_API_CACHE_PATH, mode=CacheMode.OFF)
            return self._off
        ctx = self._context()
        mode = self.cache_mode if self.cache_mode is not None else ctx.default_cache_mode()
        found = self._caches.get((id(ctx), mode))
        if found is not None and found[0] is ctx:
            return found[1]
        path = DEFAULT_API_CACHE_PATH if arg is None else Path(arg)
        cache = ctx.open_api_cache(path, mode=mode, secrets=self.secrets(), store=self.store)
        with self._lock:
            # the session's cache, remembered per session
            self._caches[(id(ctx), mode)] = (ctx, cache)
        return cache

    def active_budget(self) -> Budget | None:
        """The budget charged: the client's own, else the run context's."""
        return self.budget if self.budget is not None else self._context().budget

    def _context(self) -> ModelCallContext:
        """The model-call context in force, or this client's own outside any."""
        ctx = model_context_in_force()
        return ctx if ctx is not None else self._outside_sessions

    def request_shape(
        self,
        body: dict[str, Any] | Callable[[], dict[str, Any]],
        identity: tuple[Any, ...] | None = None,
    ) -> _RequestShape | None:
        """The cache's request shape of ``body`` (its conversation field's value is ignored):
        every request of a conversation shares it, so only the conversation is serialised per
        call (``body`` may be a function making it: called only when the shape is not
        remembered). ``identity``: what fully determines ``body`` but its conversation, to remember
        the shape by -- an object compared by identity (the tools list, never changed), then
        hashable values; ``None`` builds the shape afresh."""
        cache = self.cache
        if cache.mode is CacheMode.OFF:
            return None
        anchor = identity[0] if identity else None
        key = None if not identity else (id(cache), id(anchor), *identity[1:])
        if key is not None:
            found = self._shapes.get(key)
            if found is not None and found[0] is cache and found[1] is anchor:
                return found[2]
        shape = cache._request_shape(
            body() if callable(body) else body, self.provider.conversation_field
        )
        if key is not None:
            with self._lock:
                if len(self._shapes) >= _SHAPE_LIMIT:
                    self._shapes.clear()
                self._shapes[key] = (cache, anchor, shape)
        return shape

    # -- the SDK client ----------------------------------------------------------------------------

    async def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is not None:
            return state
        limiter = None
        if self.max_concurrent_requests is not None:
            n = self.max_concurrent_requests
            limiter = AdaptiveConcurrency(initial=n, minimum=1, maximum=n)
        if self.sdk_client is not None:
            state = _LoopState(clients=(self.sdk_client,), limiter=limiter, owned=False)
        else:
            made = self.provider.make_clients(
                _pools(self.max_concurrent_requests),
                api_key=self.api_key(),
                base_url=self.resolved_base_url(),
                timeout=self.timeout,
            )
            state = _LoopState(clients=made, limiter=limiter, owned=True)
        with self._lock:
            state = self._loops.setdefault(loop, state)
        if state.owned and state.closer is None:
            state.closer = _close_at_loop_shutdown(state.clients)
            await state.closer.__anext__()
        return state

    async def aclose(self) -> None:
        """Close the SDK client of the running event loop now. (Clients are also closed when
        their event loop shuts down, e.g. at the end of ``asyncio.run``.)"""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._loops.pop(loop, None)
        if state is not None and state.owned:
            if state.closer is not None:
                await state.closer.aclose()
            else:
                for client in state.clients:
                    await client.close()

    # -- one call --------------------------------------------------------------------------------

    async def call(
        self,
        body: dict[str, Any],
        *,
        trial: int,
        seed_parts: Sequence[object] = (),
        shape: _RequestShape | None = None,
        deadline: float | None = None,
        what: str | None = None,
    ) -> ModelReply:
        """One model call (see the module docstring for the path it takes).

        Args:
            body: the request body as the provider's API takes it (and as the cache keys it);
                ``shape.body(...)`` when ``shape`` is given.
            trial: the sample number: repeats of a request differ in it, replays share it.
            seed_parts: what seeds the retry jitter (with ``trial``), for reproducible waits.
            deadline: when the caller's time runs out, in the event loop's clock
                (``loop.time()``): no retry waits past it.
            what: names the call in messages (``"2 of turn 0"``).
        """
        cache = self.cache
        try:
            canonical, trial, hit = cache._begin(body, trial, shape)
        except CacheMiss:
            self._counters.bump("model_calls", "failed_calls")
            raise
        provider = self.provider
        budget = self.active_budget()
        replace: bool | None = None
        if hit is not None and UNANSWERED in hit.response:
            # the recorded run's API never answered this call
            if cache.mode is CacheMode.REPLAY_ONLY:
                self._counters.bump("model_calls", "cache_hits")
                why = hit.response[UNANSWERED].get("why", "the API did not answer")
                raise ApiUnavailable(
                    f"replayed from the API cache: when this call was recorded, {why}; "
                    "the run ends as it did (--cache-mode read-write asks the API again)",
                    kind="api_unavailable",
                )
            # a mode that may call the API asks again, and keeps the answer
            hit, replace = None, True
        if hit is not None:
            self._counters.bump("model_calls", "cache_hits")
            timed_out = hit.response.get(TIMED_OUT)
            if timed_out is not None:  # the recorded run's turn ran out of time on this call
                raise DeadlineExceeded(
                    "replayed from the API cache: when this call was recorded, "
                    f"{timed_out.get('why', 'it did not answer in time')}; the turn times out "
                    "again (--cache-mode write asks the API again)"
                )
            usage = provider.usage(hit.response)
            if budget is not None:
                budget.charge(
                    self._priced_model(hit.response, body, budget),
                    usage.input_tokens,
                    usage.output_tokens,
                    cache_creation_input_tokens=usage.cache_creation_input_tokens,
                    cache_read_input_tokens=usage.cache_read_input_tokens,
                    cached=True,
                )
            return ModelReply(hit, usage, 0.0)
        try:
            state = await self._loop_state()
            reservation = self._reserve(budget, body, canonical.text, what)
        except BudgetExhausted:
            self._counters.bump("model_calls", "refused_calls")
            raise
        except BaseException:
            self._counters.bump("model_calls", "failed_calls")
            raise
        self._counters.bump("model_calls", "live_calls")
        # the attempt is the provider's send itself, not a coroutine around it: every
        # resumption of a call (each read and write of the HTTP exchange) passes through each
        # frame of the chain
        attempt = functools.partial(provider.send, state.next_client(), body, stream=self.stream)
        booking = (
            _Booking(self, budget, body, canonical.text, what, reservation)
            if budget is not None and reservation is not None
            else None
        )
        try:
            response = await retry_call_async(
                attempt,
                policy=self.retry_policy,
                rng=functools.partial(_retry_rng, seed_parts, trial),
                stats=self.retry_stats,
                on_retry=booking,
                limiter=state.limiter,
                deadline=deadline,
            )
        except BaseException as exc:
            held = booking.held if booking is not None else reservation
            if budget is not None and held is not None:
                if may_have_been_billed(exc):
                    budget.charge_abandoned(held)
                else:
                    budget.release(held)
            if not isinstance(exc, DeadlineExceeded):
                self._counters.bump("failed_calls")
            self._record_timeout(exc, deadline, cache, canonical, trial)
            self._record_unanswered(exc, cache, canonical, trial)
            raise
        if booking is not None:
            reservation = booking.held
        # the answer is paid for: charge it before storing it, so that a failed write or a
        # caller cancelled meanwhile still leaves the spend on the budget
        usage = provider.usage(response)
        if budget is not None and reservation is not None:
            usd = budget.settle(
                reservation,
                usage.input_tokens,
                usage.output_tokens,
                model=self._priced_model(response, body, budget),
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
            )
        else:
            usd = _PRICING.cost(
                self._priced_model(response, body, _PRICING),
                usage.input_tokens,
                usage.output_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
            )
        try:
            staged = cache._store(canonical, trial, response, replace=replace)
            del response  # not held while the batch commits (see ApiCache._stage)
            stored = (
                staged if isinstance(staged, CachedResponse) else await cache._committed(staged)
            )
        except BaseException:
            self._counters.bump("failed_calls")
            raise
        return ModelReply(stored, provider.usage(stored.response), usd)

    @staticmethod
    def _record_timeout(
        exc: BaseException, deadline: float | None, cache: ApiCache, canonical: Any, trial: int
    ) -> None:
        """A call the turn's timeout cut off (cancelled at the deadline, or a retry that would
        have waited past it) is recorded as such, so a replay of the run times out on the same
        call instead of missing the cache on it (a call the live run never finished)."""
        if deadline is None:
            return
        now = asyncio.get_running_loop().time()
        if isinstance(exc, DeadlineExceeded):
            why = f"the turn's time ran out ({str(exc).splitlines()[0]})"
        elif isinstance(exc, asyncio.CancelledError) and now >= deadline - _DEADLINE_SLACK_S:
            why = "it did not answer before the turn's timeout"
        else:
            return
        try:
            # committed by the loop, awaited by no one
            cache._store(canonical, trial, {TIMED_OUT: {"why": why}})
        except Exception:  # a cache that cannot take it: the replay misses, as before
            pass

    @staticmethod
    def _record_unanswered(exc: BaseException, cache: ApiCache, canonical: Any, trial: int) -> None:
        """A call the API never answered (every attempt a timeout, a dropped connection, a 5xx
        or a 429: the retries given up) is recorded as such, so a replay-only run ends as the
        live one did (``api_unavailable``) instead of missing the cache on it."""
        if (
            isinstance(exc, (DeadlineExceeded, asyncio.CancelledError))
            or not classify_error(exc).retryable
        ):
            return
        notes = " ".join(str(n) for n in getattr(exc, "__notes__", []))
        why = (
            f"the API did not answer it ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}{f' [{notes}]' if notes else ''})"
        )
        try:
            # committed by the loop, awaited by no one
            cache._store(canonical, trial, {UNANSWERED: {"why": why}})
        except Exception:  # a cache that cannot take it: the replay misses, as before
            pass

    def _reserve(
        self, budget: Budget | None, body: Mapping[str, Any], canonical_text: str, what: str | None
    ) -> Reservation | None:
        if budget is None:
            return None
        model = str(body.get("model") or self.model)
        max_out = self.provider.max_output_tokens(body)
        if max_out is None:
            if budget.max_usd is None and budget.max_tokens is None:
                max_out = 0  # no limit to protect: the reservation only counts the call
            else:
                raise InvalidArgument(
                    f"the request to {model!r} sets no {self.provider.max_tokens_field}, so its "
                    "worst-case cost is unknown and the budget's limit cannot be kept: set the "
                    "most output tokens per call"
                )
        bound = len(canonical_text.encode("utf-8")) + INPUT_OVERHEAD_TOKENS
        return budget.reserve(model, input_tokens=bound, max_output_tokens=max_out, call=what)

    def _priced_model(
        self, response: Mapping[str, Any], body: Mapping[str, Any], budget: Budget
    ) -> str:
        """The model a call is priced as: the one that answered (often a dated name) when the
        table prices it, else the one asked for."""
        answered = self.provider.response_model(response)
        asked = str(body.get("model") or self.model)
        if answered is not None and (answered == asked or budget.price(answered) is not None):
            return answered
        return asked

    def forget(self, reply: ModelReply) -> None:
        """Delete a recorded reply from the cache (an unusable answer, so a
        later run asks again)."""
        cache = self.cache
        if cache.mode.writes or cache.mode is CacheMode.READ:
            try:
                cache.delete(reply.key)
            except AgentPropError:
                pass

    async def text(
        self,
        prompt: TextPrompt,
        *,
        trial: int,
        seed_parts: Sequence[object] = (),
        what: str | None = None,
    ) -> tuple[str, ModelReply]:
        """A text-only call (no tools): the reply's text and the reply."""
        reply = await self.call(
            self.provider.text_body(self.model, prompt),
            trial=trial,
            seed_parts=seed_parts,
            what=what,
        )
        return self.provider.text_of(reply.response), reply

    def stats(self) -> dict[str, Any]:
        """Counters for reports: model calls, cache hits, live calls, refusals, retries."""
        return {**self._counters.as_dict(), "retries": self.retry_stats.as_dict()}
