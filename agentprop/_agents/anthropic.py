"""An agent backed by a real model through the Anthropic Messages API.

:class:`AnthropicAgent` is a *configuration*: model, system prompt, tool descriptions, sampling
parameters, step limit, endpoint, cache, budget and retry policy. It is also an agent factory:
``agent.factory()`` (or ``agent()``) gives a fresh :class:`AnthropicConversation`, which keeps
the Messages API conversation of one agentprop conversation across its turns.

One turn is the usual tool-use loop:

1. the user message (after the ``tool_result`` answering last turn's ``respond``) is appended;
2. the model is called with the spec's tools (their input schemas, descriptions overridable)
   plus a ``respond`` tool whose schema is the response contract;
3. text blocks are recorded with ``ctx.say``; each ``tool_use`` block is executed through
   ``ctx.call`` and answered with a ``tool_result`` (a :class:`~agentprop.errors.ToolError`
   becomes ``is_error: true`` with its kind and message); a ``respond`` call goes to
   ``ctx.respond``, and if it breaks the contract the problem is sent back as an error result so
   the model can correct it;
4. this repeats until ``respond`` succeeds or ``max_steps`` model calls were made (the runtime
   then records ``no_respond``).

Every model call goes through the API cache (:mod:`agentprop._modelapi.cache`, keyed by the request and
``ctx.trial``, so repeats are distinct samples and replays are exact), then through
:func:`agentprop._modelapi.retry.retry_call_async` (the SDK client has ``max_retries=0``: one HTTP attempt
per try), then through an :class:`~agentprop._modelapi.retry.AdaptiveConcurrency` limit that backs off on
429/529. Usage is recorded with ``ctx.add_usage`` and charged to the budget (the one passed in,
or the session's), priced by the budget's table; a replayed call costs nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import marshal
import os
import random
import functools
import threading
import weakref
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentprop._agents.loading import LoadedAgent
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.cache import ApiCache, CachedResponse, CacheMiss, CacheMode, _RequestShape, canonical_json
from agentprop._modelapi.context import current_model_context
from agentprop._agents.prompt import check_tool_descriptions, load_prompt, load_tool_descriptions
from agentprop._spec.response import respond_tool_schema
from agentprop._modelapi.retry import DEFAULT_RETRY_POLICY, AdaptiveConcurrency, RetryPolicy, RetryStats, retry_call_async
from agentprop._spec.model import Spec
from agentprop._scenario.world import copy_json, stable_seed
from agentprop.errors import InvalidArgument, ToolError
from agentprop.errors import MissingApiKey, ModelCallError  # noqa: F401 (re-exported: defined in errors.py)

if TYPE_CHECKING:
    import anthropic

    from agentprop._agents.runtime import TurnContext

__all__ = [
    "DEFAULT_API_CACHE_PATH",
    "RESPOND_TOOL",
    "AnthropicAgent",
    "AnthropicConversation",
    "MissingApiKey",
    "ModelCallError",
    "default_cache_mode",
    "open_api_cache",
]

RESPOND_TOOL = "respond"
"""The name of the tool that ends a turn with the structured response."""

DEFAULT_API_CACHE_PATH = Path(".agentprop") / "api-cache.sqlite"
"""Where the API cache lives when none is given (relative to the current directory)."""

OFFLINE_API_KEY = "agentprop-offline-no-key"
"""Sent when no key is configured and ``base_url`` is not Anthropic's (a local test server)."""

_ANTHROPIC_HOSTS = ("api.anthropic.com",)

_NUDGE = (
    "You ended your turn without calling the `respond` tool. Every turn must end with exactly one "
    "call of `respond`; call it now."
)

_DEFAULT_RESPOND_DESCRIPTION = (
    "Submit the structured response for this turn. Call it exactly once per turn, as the final action."
)


# --------------------------------------------------------------------------------------------
# Cache defaults (set by the CLI and the pytest plugin)
# --------------------------------------------------------------------------------------------

def default_cache_mode() -> CacheMode:
    """The mode an agent's cache uses when none was given: the session's
    (``--agentprop-cache-mode``), else :meth:`CacheMode.default`."""
    return current_model_context().default_cache_mode()


def open_api_cache(
    path: str | os.PathLike[str], *, mode: CacheMode | str | None = None, secrets: Sequence[str] = ()
) -> ApiCache:
    """The session's :class:`ApiCache` for ``path`` in ``mode`` (opened once, then shared)."""
    return current_model_context().open_api_cache(path, mode=mode, secrets=secrets)


# --------------------------------------------------------------------------------------------
# The configuration / factory
# --------------------------------------------------------------------------------------------


@dataclass
class _LoopState:
    """The SDK client and the concurrency limit of one event loop (neither may cross loops)."""

    client: anthropic.AsyncAnthropic
    limiter: AdaptiveConcurrency | None
    closer: AsyncGenerator[None, None] | None = None


async def _close_at_loop_shutdown(client: anthropic.AsyncAnthropic) -> AsyncGenerator[None, None]:
    """Started once per loop and left suspended: asyncio finalises the async generators of a
    loop when it shuts down (``asyncio.run`` does), which closes the client's connections."""
    try:
        yield
    finally:
        await client.close()


class _Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.model_calls = 0
        self.cache_hits = 0
        self.live_calls = 0
        self.failed_calls = 0

    def bump(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def replayed(self) -> None:
        """One model call answered from the cache."""
        with self._lock:
            self.model_calls += 1
            self.cache_hits += 1

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {
                "model_calls": self.model_calls,
                "cache_hits": self.cache_hits,
                "live_calls": self.live_calls,
                "failed_calls": self.failed_calls,
            }


_PRICING = Budget()
"""An unlimited budget used only for its price table when no budget is in play."""


class AnthropicAgent:
    """A model-backed agent: the TDAD compiled artifact (prompt + tool descriptions) plus the
    model and how to call it.

    Args:
        model: the model name sent to the API (e.g. ``"claude-sonnet-4-6"``).
        system_prompt: the system prompt; ``None`` builds a plain one from the spec (policies,
            assumptions, the runtime context and the ``respond`` rule).
        tool_descriptions: tool name -> description shown to the model, overriding the spec's
            description of that tool (``respond`` included). Unlisted tools keep the spec's.
        temperature, top_p, top_k, stop_sequences: sampling parameters (``None``: the API's
            default; not sent).
        max_tokens: the most output tokens per model call.
        max_steps: the most model calls in one turn; past it the turn ends without ``respond``.
        extra_body: more request body fields, sent as they are and part of the cache key and the
            fingerprint (e.g. ``{"output_config": {"effort": "low"}}`` or ``{"thinking": ...}``).
        base_url: the API endpoint (default: ``ANTHROPIC_BASE_URL``, else Anthropic's).
        api_key: the key (default: ``ANTHROPIC_API_KEY``). Never stored in the cache. Not needed
            for replays, nor for a ``base_url`` that is not Anthropic's (a local test server).
        cache: an :class:`ApiCache`, a path to one, ``None`` for :data:`DEFAULT_API_CACHE_PATH`,
            or ``False`` for no cache.
        cache_mode: the mode when ``cache`` is a path or ``None`` (default:
            :func:`default_cache_mode`).
        budget: the budget to charge (default: the session budget of :func:`agentprop.check`,
            if any). Its price table prices the calls.
        retry_policy: how API errors are retried (429/5xx/529/timeouts; ``retry-after`` honoured).
        timeout: seconds for one HTTP attempt.
        max_concurrent_requests: the starting (and highest) number of API requests in flight
            per event loop; halved on 429/529, then raised again as calls succeed.
        name: how the agent is named in reports (default ``anthropic:<model>``).
        prompt_path, tool_descriptions_path: where the prompt and descriptions came from (for
            error messages; :meth:`from_files` sets them).
    """

    def __init__(
        self,
        model: str,
        *,
        system_prompt: str | None = None,
        tool_descriptions: Mapping[str, str] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        stop_sequences: Sequence[str] | None = None,
        max_tokens: int = 1024,
        max_steps: int = 10,
        extra_body: Mapping[str, Any] | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        cache: ApiCache | str | os.PathLike[str] | bool | None = None,
        cache_mode: CacheMode | str | None = None,
        budget: Budget | None = None,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        timeout: float = 120.0,
        max_concurrent_requests: int | None = 64,
        name: str | None = None,
        prompt_path: str | os.PathLike[str] | None = None,
        tool_descriptions_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidArgument(f"model={model!r}: name the model to call, e.g. model='claude-sonnet-4-6'.")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise InvalidArgument(f"system_prompt must be a string or None, not {type(system_prompt).__name__}.")
        descriptions = dict(tool_descriptions or {})
        for k, v in descriptions.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidArgument(f"tool_descriptions must map tool names to strings; got {k!r}: {v!r}.")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise InvalidArgument(f"max_tokens={max_tokens!r} must be an int >= 1.")
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise InvalidArgument(f"max_steps={max_steps!r} must be an int >= 1 (model calls per turn).")
        if temperature is not None and not 0.0 <= float(temperature) <= 1.0:
            raise InvalidArgument(f"temperature={temperature} must be between 0 and 1.")
        if top_p is not None and not 0.0 < float(top_p) <= 1.0:
            raise InvalidArgument(f"top_p={top_p} must be in (0, 1].")
        if timeout <= 0:
            raise InvalidArgument(f"timeout={timeout} must be > 0 seconds.")
        if max_concurrent_requests is not None and max_concurrent_requests < 1:
            raise InvalidArgument(f"max_concurrent_requests={max_concurrent_requests} must be >= 1 or None.")
        if cache is True:
            cache = None
        extra = dict(extra_body or {})
        clash = sorted(set(extra) & {"model", "messages", "system", "tools", "max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "stream"})
        if clash:
            raise InvalidArgument(f"extra_body may not set {', '.join(clash)}: use the AnthropicAgent options of those names.")
        self.model = model
        self.system_prompt = system_prompt
        self.tool_descriptions: dict[str, str] = descriptions
        self.temperature = None if temperature is None else float(temperature)
        self.top_p = None if top_p is None else float(top_p)
        self.top_k = top_k
        self.stop_sequences = list(stop_sequences) if stop_sequences else None
        self.max_tokens = max_tokens
        self.max_steps = max_steps
        self.extra_body = extra
        self.base_url = base_url
        self._api_key = api_key
        self._cache_arg = cache
        self.cache_mode = None if cache_mode is None else CacheMode.parse(cache_mode)
        self.budget = budget
        self.retry_policy = retry_policy
        self.timeout = float(timeout)
        self.max_concurrent_requests = max_concurrent_requests
        self.name = name
        self.prompt_path = Path(prompt_path) if prompt_path is not None else None
        self.tool_descriptions_path = Path(tool_descriptions_path) if tool_descriptions_path is not None else None
        self.retry_stats = RetryStats()
        self._counters = _Counters()
        self._cache: ApiCache | None = None
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self._tools_memo: dict[int, tuple[Spec, list[dict[str, Any]]]] = {}
        self._shapes: dict[tuple[int, str, bytes], tuple[list[dict[str, Any]], _RequestShape | None]] = {}
        self.missing_key_error: MissingApiKey | None = None
        """Set when a call needed the API and no key was configured (the CLI reports it)."""

    # -- construction helpers -------------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        model: str,
        prompt: str | os.PathLike[str] | None = None,
        tool_descriptions: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> AnthropicAgent:
        """An agent whose system prompt and tool descriptions are loaded from files (TDAD's
        ``seed_prompt.txt`` and ``seed_tool_descriptions.yaml``); other options as in the
        constructor."""
        system = load_prompt(prompt) if prompt is not None else None
        descriptions = load_tool_descriptions(tool_descriptions) if tool_descriptions is not None else None
        return cls(
            model,
            system_prompt=system,
            tool_descriptions=descriptions,
            prompt_path=prompt,
            tool_descriptions_path=tool_descriptions,
            **options,
        )

    def replace(self, **changes: Any) -> AnthropicAgent:
        """A copy with some options changed (e.g. another prompt, for a prompt mutant)."""
        options: dict[str, Any] = {
            "system_prompt": self.system_prompt,
            "tool_descriptions": self.tool_descriptions,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "stop_sequences": self.stop_sequences,
            "max_tokens": self.max_tokens,
            "max_steps": self.max_steps,
            "extra_body": self.extra_body,
            "base_url": self.base_url,
            "api_key": self._api_key,
            "cache": self._cache if self._cache is not None else self._cache_arg,
            "cache_mode": self.cache_mode,
            "budget": self.budget,
            "retry_policy": self.retry_policy,
            "timeout": self.timeout,
            "max_concurrent_requests": self.max_concurrent_requests,
            "name": self.name,
            "prompt_path": self.prompt_path,
            "tool_descriptions_path": self.tool_descriptions_path,
        }
        model = changes.pop("model", self.model)
        unknown = set(changes) - set(options)
        if unknown:
            raise InvalidArgument(f"AnthropicAgent.replace: unknown option(s) {sorted(unknown)}; known: {sorted(options)}")
        options.update(changes)
        return AnthropicAgent(model, **options)

    # -- identity --------------------------------------------------------------------------------

    @property
    def ref(self) -> str:
        """The name in reports."""
        return self.name or f"anthropic:{self.model}"

    @property
    def fingerprint(self) -> str:
        """A digest of everything that changes the model's behaviour: model, system prompt, tool
        descriptions, sampling parameters and the step limit (not the endpoint, cache or key)."""
        payload = {
            "agent": "agentprop.AnthropicAgent/1",
            "model": self.model,
            "system": self.system_prompt,
            "tool_descriptions": self.tool_descriptions,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "stop_sequences": self.stop_sequences,
            "max_tokens": self.max_tokens,
            "max_steps": self.max_steps,
            "extra_body": self.extra_body,
        }
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()[:16]

    def loaded(self) -> LoadedAgent:
        """This agent as a :class:`~agentprop.LoadedAgent` (what ``check`` and ``agentprop run``
        take), fingerprinted by :attr:`fingerprint`."""
        return LoadedAgent(ref=self.ref, factory=self.factory, faults={}, fingerprint=self.fingerprint)

    def __repr__(self) -> str:
        # make_factory() fingerprints an object by its repr: include the behaviour fingerprint
        return f"AnthropicAgent(model={self.model!r}, fingerprint={self.fingerprint!r})"

    # -- the factory -----------------------------------------------------------------------------

    def factory(self) -> AnthropicConversation:
        """A fresh agent for one conversation (this method is an agent factory)."""
        return AnthropicConversation(self)

    def __call__(self) -> AnthropicConversation:
        return AnthropicConversation(self)

    # -- what the model sees ---------------------------------------------------------------------

    def check_spec(self, spec: Spec) -> None:
        """Raise :class:`InputError` if the tool descriptions name tools ``spec`` lacks."""
        check_tool_descriptions(self.tool_descriptions, spec, path=self.tool_descriptions_path)

    def tools_for(self, spec: Spec) -> list[dict[str, Any]]:
        """The ``tools`` of every request: the spec's action tools, then ``respond`` (a copy:
        changing it changes no request)."""
        return copy_json(self._tools_for(spec))

    def _tools_for(self, spec: Spec) -> list[dict[str, Any]]:
        """:meth:`tools_for`, worked out once per spec and kept private: the requests of every
        conversation send this very list, and nothing changes it (its schemas are copies of
        the spec's), so request shapes may be remembered by its identity."""
        memo = self._tools_memo.get(id(spec))
        if memo is not None and memo[0] is spec:
            return memo[1]
        self.check_spec(spec)
        tools: list[dict[str, Any]] = []
        for tool in spec.action_tools:
            schema = copy_json(tool.input_schema) if tool.input_schema else {"type": "object", "properties": {}}
            tools.append(
                {
                    "name": tool.name,
                    "description": self.tool_descriptions.get(tool.name, tool.description or tool.name),
                    "input_schema": schema,
                }
            )
        spec_respond = spec.tools_by_name.get(RESPOND_TOOL)
        respond_description = self.tool_descriptions.get(
            RESPOND_TOOL, (spec_respond.description if spec_respond is not None else "") or _DEFAULT_RESPOND_DESCRIPTION
        )
        tools.append({"name": RESPOND_TOOL, "description": respond_description, "input_schema": copy_json(respond_tool_schema(spec))})
        with self._lock:
            self._tools_memo[id(spec)] = (spec, tools)
        return tools

    def system_for(self, spec: Spec, context: Mapping[str, Any]) -> str:
        """The system prompt: the configured one, or one written from the spec."""
        if self.system_prompt is not None:
            return self.system_prompt
        return default_system_prompt(spec, context)

    def request(
        self, *, system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The Messages API request body for one call (what is sent and what the cache keys)."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": messages,
            "tools": tools,
            **self.extra_body,
        }
        for name, value in (
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("top_k", self.top_k),
            ("stop_sequences", self.stop_sequences),
        ):
            if value is not None:
                body[name] = value
        return body

    # -- credentials, client, cache ----------------------------------------------------------------

    def _base_url(self) -> str | None:
        return self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None

    def api_key(self) -> str:
        """The key to send: ``api_key=``, else ``ANTHROPIC_API_KEY``, else (for a non-Anthropic
        ``base_url`` only) a placeholder. Raises :class:`MissingApiKey` otherwise."""
        key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
        if key:
            return key
        base = self._base_url()
        host = (urlsplit(base).hostname or "") if base else "api.anthropic.com"
        if base and host not in _ANTHROPIC_HOSTS:
            return OFFLINE_API_KEY
        error = MissingApiKey(
            f"no Anthropic API key for model {self.model!r}, and this request is not in the API cache",
            expected="a key in the ANTHROPIC_API_KEY environment variable, or AnthropicAgent(api_key=...)",
            fix="export ANTHROPIC_API_KEY=sk-ant-... (or pass api_key=); to run offline, replay a recorded "
            "cache (--cache PATH --cache-mode replay-only) or point --base-url at a local server",
        )
        self.missing_key_error = error
        raise error

    def _make_client(self) -> anthropic.AsyncAnthropic:
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self.api_key(), base_url=self._base_url(), max_retries=0, timeout=self.timeout
        )

    async def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._loops.get(loop)
        if state is not None:
            return state
        limiter = None
        if self.max_concurrent_requests is not None:
            n = self.max_concurrent_requests
            limiter = AdaptiveConcurrency(initial=n, minimum=1, maximum=n)
        state = _LoopState(client=self._make_client(), limiter=limiter)
        with self._lock:
            state = self._loops.setdefault(loop, state)
        if state.closer is None:
            state.closer = _close_at_loop_shutdown(state.client)
            await state.closer.__anext__()
        return state

    @property
    def cache(self) -> ApiCache:
        """The API cache in use (an ``off``-mode cache when caching is disabled)."""
        if self._cache is not None:
            return self._cache
        with self._lock:
            if self._cache is None:
                arg = self._cache_arg
                secrets = tuple(s for s in (self._api_key, os.environ.get("ANTHROPIC_API_KEY")) if s)
                if isinstance(arg, ApiCache):
                    self._cache = arg
                elif arg is False:
                    self._cache = ApiCache(DEFAULT_API_CACHE_PATH, mode=CacheMode.OFF)
                else:
                    path = DEFAULT_API_CACHE_PATH if arg is None else Path(arg)  # type: ignore[arg-type]
                    self._cache = open_api_cache(path, mode=self.cache_mode, secrets=secrets)
            return self._cache

    def _pricing(self) -> Budget:
        budget = self._active_budget()
        return budget if budget is not None else _PRICING

    def _active_budget(self) -> Budget | None:
        if self.budget is not None:
            return self.budget
        return current_model_context().budget

    def _request_shape(self, system: str, tools: list[dict[str, Any]]) -> _RequestShape | None:
        """The cache's :class:`~agentprop._modelapi.cache._RequestShape` of this agent's requests with
        ``system`` and ``tools`` (a list from :meth:`_tools_for`, which never changes).

        Remembered under the identity of ``tools``, the prompt, and the exact ``marshal`` of
        every other option that goes into a request (model, sampling, ``extra_body`` ...), so
        changing an option gives a new shape. ``None``: key requests the general way.
        """
        options = (self.model, self.max_tokens, self.temperature, self.top_p, self.top_k, self.stop_sequences, self.extra_body)
        try:
            frozen = marshal.dumps(options)
        except ValueError:  # not plain built-in data
            return None
        key = (id(tools), system, frozen)
        found = self._shapes.get(key)
        if found is not None and found[0] is tools:
            return found[1]
        cache = self.cache
        request = self.request(system=system, tools=tools, messages=[])
        shape = cache._request_shape(request) if cache.mode is not CacheMode.OFF else None
        with self._lock:
            if len(self._shapes) >= _SHAPE_LIMIT:
                self._shapes.clear()
            self._shapes[key] = (tools, shape)
        return shape

    def stats(self) -> dict[str, Any]:
        """Counters for reports: model calls, cache hits, live calls, retries."""
        return {**self._counters.as_dict(), "retries": self.retry_stats.as_dict()}

    async def aclose(self) -> None:
        """Close the SDK client of the running event loop now. (Clients are also closed when
        their event loop shuts down, e.g. at the end of ``asyncio.run``.)"""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._loops.pop(loop, None)
        if state is not None:
            if state.closer is not None:
                await state.closer.aclose()
            else:
                await state.client.close()

    # -- one model call ----------------------------------------------------------------------------

    async def call_model(self, request: dict[str, Any], *, trial: int, seed_parts: Sequence[object] = ()) -> CachedResponse:
        """One model call through the cache, the retry loop and the concurrency limit.

        Returns the (possibly replayed) response as JSON in a :class:`CachedResponse`.
        """
        return await self._call_model(request, None, trial, seed_parts)

    async def _call_model(
        self, request: dict[str, Any], shape: _RequestShape | None, trial: int, seed_parts: Sequence[object]
    ) -> CachedResponse:
        """:meth:`call_model`; ``request`` is ``shape.body(...)`` when a shape is given."""

        async def live() -> Any:
            state = await self._loop_state()
            self._counters.bump("live_calls")
            kwargs = _sdk_arguments(request)
            messages = state.client.messages.with_raw_response

            async def attempt() -> dict[str, Any]:
                # the raw JSON is what the cache stores: no pydantic round trip per call
                raw = await messages.create(**kwargs)
                data = await raw.json()
                if not isinstance(data, dict) or not isinstance(data.get("content"), list):
                    raise ModelCallError(f"the API answered with JSON that is not a message: {str(data)[:200]}")
                return data

            return await retry_call_async(
                attempt,
                policy=self.retry_policy,
                rng=random.Random(stable_seed("agentprop-retry", *seed_parts, trial)),
                stats=self.retry_stats,
                limiter=state.limiter,
            )

        cache = self.cache
        try:
            if shape is not None:
                # :meth:`ApiCache._aget_or_call_shaped` in its two halves: a replay needs no
                # coroutine of the cache's
                canonical, checked, hit = cache._replay_shaped(shape, request, trial)
                result = hit if hit is not None else await cache._acall_and_put(canonical, checked, live)
            else:
                result = await cache.aget_or_call(request, trial=trial, call=live)
        except Exception:
            self._counters.bump("model_calls")
            self._counters.bump("failed_calls")
            raise
        except BaseException:  # cancelled: still a call made
            self._counters.bump("model_calls")
            raise
        if result.from_cache:
            self._counters.replayed()
        else:
            self._counters.bump("model_calls")
        return result

    def charge(self, result: CachedResponse) -> tuple[int, int, float]:
        """Charge one response to the budget; returns (input tokens, output tokens, dollars spent)."""
        usage = result.usage
        model = result.response.get("model")
        if not isinstance(model, str):
            model = self.model
        inp = int(usage.get("input_tokens") or 0)
        out = int(usage.get("output_tokens") or 0)
        created = int(usage.get("cache_creation_input_tokens") or 0)
        read = int(usage.get("cache_read_input_tokens") or 0)
        budget = self._active_budget()
        if budget is not None:
            usd = budget.charge(
                str(model), inp, out, cache_creation_input_tokens=created, cache_read_input_tokens=read, cached=result.from_cache
            )
        elif result.from_cache:
            usd = 0.0
        else:
            usd, _ = _PRICING.cost(str(model), inp, out, cache_creation_input_tokens=created, cache_read_input_tokens=read)
        return inp + created + read, out, usd


_SHAPE_LIMIT = 64
"""At most this many request shapes per agent (past it the memo starts afresh)."""


@functools.cache
def _sdk_parameters() -> frozenset[str]:
    """The keyword parameters of the installed SDK's ``messages.create``."""
    import inspect

    import anthropic

    return frozenset(inspect.signature(anthropic.resources.messages.AsyncMessages.create).parameters)


def _sdk_arguments(request: Mapping[str, Any]) -> dict[str, Any]:
    """``messages.create`` keyword arguments for a request body: fields the installed SDK does
    not take as parameters (``temperature`` in recent SDKs) travel in ``extra_body``."""
    parameters = _sdk_parameters()
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in request.items():
        (kwargs if key in parameters and key not in ("extra_body", "extra_headers", "extra_query", "timeout") else extra)[key] = value
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def default_system_prompt(spec: Spec, context: Mapping[str, Any]) -> str:
    """A plain system prompt written from the spec, used when no prompt is given."""
    lines = [f"You are the agent described by the spec {spec.title or spec.spec_id!r} ({spec.spec_id})."]
    if context:
        lines.append("")
        lines.append("Context of this conversation:")
        lines.extend(f"- {k}: {json.dumps(v, ensure_ascii=False)}" for k, v in context.items())
    if spec.assumptions:
        lines.append("")
        lines.append("Assumptions:")
        lines.extend(f"- {a}" for a in spec.assumptions)
    if spec.policies:
        lines.append("")
        lines.append("Policies (highest priority first):")
        ordered = sorted(spec.policies, key=lambda p: -(p.priority or 0))
        lines.extend(f"- {p.id}: {p.text}" for p in ordered)
    decisions = ", ".join(spec.response_contract.decision_enum)
    lines.append("")
    lines.append(
        "Use the tools to help the user. End every turn with exactly one call of the `respond` tool, "
        f"as your final action; its `decision` is one of: {decisions}."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# One conversation
# --------------------------------------------------------------------------------------------


def _tool_result(tool_use_id: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


# ``json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)`` without building an
# encoder on every call
_TEXT_ENCODE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


_ACK = {"acknowledged": True}
_ACK_TEXT = _TEXT_ENCODE(_ACK)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if type(value) is dict and len(value) == 1 and value.get("acknowledged") is True:
        return _ACK_TEXT  # what ``respond`` answers: the same text, without encoding it again
    return _TEXT_ENCODE(value)


class AnthropicConversation:
    """The agent for one conversation: the Messages API history across turns."""

    def __init__(self, config: AnthropicAgent) -> None:
        self.config = config
        self.messages: list[dict[str, Any]] = []
        """The conversation as sent to the API (plain JSON)."""
        self._carry: list[dict[str, Any]] = []
        self._system: str | None = None
        self._tools: list[dict[str, Any]] | None = None

    def _push_user(self, blocks: list[dict[str, Any]]) -> None:
        """Add user content, merging into a trailing user message (never mutated in place:
        earlier requests keep their own lists)."""
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == "user":
            last = self.messages[-1]
            self.messages[-1] = {"role": "user", "content": [*last["content"], *blocks]}
        else:
            self.messages.append({"role": "user", "content": list(blocks)})

    async def turn(self, message: str, ctx: TurnContext) -> None:
        cfg = self.config
        if self._tools is None:
            self._tools = cfg._tools_for(ctx.spec)
            self._system = cfg.system_for(ctx.spec, ctx.context)
        assert self._system is not None
        trial = int(getattr(ctx, "trial", 0))
        case_id = str(getattr(ctx, "case_id", ""))
        self._push_user([*self._carry, {"type": "text", "text": message}])
        self._carry = []
        # every request of the turn has the same fields but its messages: key them through one
        # shape (built from, and checked against, this turn's tools, prompt and options)
        shape = cfg._request_shape(self._system, self._tools)
        for step in range(cfg.max_steps):
            if shape is not None:
                request = shape.body(list(self.messages))
            else:
                request = cfg.request(system=self._system, tools=self._tools, messages=list(self.messages))
            try:
                result = await cfg._call_model(request, shape, trial, (case_id, ctx.turn_index, step))
            except (CacheMiss, MissingApiKey):
                raise
            except Exception as exc:
                notes = " ".join(getattr(exc, "__notes__", []))
                raise ModelCallError(
                    f"model call {step + 1} of turn {ctx.turn_index} ({cfg.model}) failed: "
                    f"{type(exc).__name__}: {exc}" + (f" [{notes}]" if notes else "")
                ) from exc
            inp, out, usd = cfg.charge(result)
            ctx.add_usage(input_tokens=inp, output_tokens=out, cost_usd=usd, model_calls=1)
            response = result.response
            content = [b for b in (response.get("content") or []) if isinstance(b, dict)]
            if content:
                self.messages.append({"role": "assistant", "content": content})
            results, responded = self._execute(content, ctx)
            if responded:
                self._carry = results
                return
            if results:
                self._push_user(results)
            elif response.get("stop_reason") == "refusal":
                return
            else:
                self._push_user([{"type": "text", "text": _NUDGE}])
        # step limit reached: the runtime records no_respond; pending results open the next turn

    def _execute(self, content: list[dict[str, Any]], ctx: TurnContext) -> tuple[list[dict[str, Any]], bool]:
        results: list[dict[str, Any]] = []
        responded = False
        for block in content:
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    ctx.say(text)
                continue
            if kind != "tool_use":
                continue
            use_id = str(block.get("id", ""))
            name = str(block.get("name", ""))
            args = block.get("input")
            if not isinstance(args, dict):
                results.append(_tool_result(use_id, f"invalid_arguments: the input of {name} must be a JSON object", is_error=True))
                continue
            try:
                if name == RESPOND_TOOL:
                    ack = ctx.respond(**args)
                    responded = True
                    results.append(_tool_result(use_id, _as_text(ack)))
                else:
                    output = ctx.call(name, **args)
                    results.append(_tool_result(use_id, _as_text(output)))
            except ToolError as exc:
                results.append(_tool_result(use_id, f"{exc.kind}: {exc.message}", is_error=True))
        return results, responded
