"""``ModelOptions``: the options of a model-backed agent, as one frozen object.

An agent's keyword arguments are collected into it once (:meth:`ModelOptions.of`: an unknown
keyword is an error naming the valid ones) and the object is passed down unchanged: agent ->
:class:`~agentprop._modelapi.client.ModelClient`, which reads only :data:`CLIENT_FIELDS`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentprop._modelapi.budget import Budget
from agentprop._modelapi.cache import ApiCache, CacheMode
from agentprop._modelapi.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from agentprop.errors import InvalidArgument

__all__ = ["CLIENT_FIELDS", "ModelOptions"]


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Every option a model agent shares, whatever API it speaks (as inspect_ai's
    ``GenerateConfig``); see :class:`~agentprop.agents.AnthropicAgent` for what each means.

    Give it as ``options=`` to an agent, or pass the same names as keyword arguments (they are
    folded into it, over ``options=`` when both are given)."""

    # what the model is shown
    system_prompt: str | None = None
    tool_descriptions: Mapping[str, str] | None = None
    max_steps: int = 10
    # sampling, sent in every request
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int = 1024
    extra_body: Mapping[str, Any] | None = None
    # the model client: endpoint, key, cache, budget, retries
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never shown: a repr ends up in logs
    cache: ApiCache | str | os.PathLike[str] | bool | None = None
    cache_mode: CacheMode | str | None = None
    budget: Budget | None = None
    retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY
    timeout: float = 120.0
    max_concurrent_requests: int | None = 64
    stream: bool = False
    # naming, for reports and error messages
    name: str | None = None
    prompt_path: str | os.PathLike[str] | None = None
    tool_descriptions_path: str | os.PathLike[str] | None = None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(
        cls,
        keywords: Mapping[str, Any],
        *,
        base: ModelOptions | None = None,
        where: str,
        allowed: Iterable[str] | None = None,
        also: Iterable[str] = (),
    ) -> ModelOptions:
        """``base`` (default: the defaults) with ``keywords`` set. A keyword outside ``allowed``
        (default: every option) raises :class:`InvalidArgument` naming it and the valid names
        (those and ``also``, the caller's own keywords)."""
        if base is not None and not isinstance(base, ModelOptions):
            raise InvalidArgument(
                f"{where}: options= must be a ModelOptions, not {type(base).__name__}."
            )
        valid = set(cls.names() if allowed is None else allowed)
        unknown = sorted(set(keywords) - valid)
        if unknown:
            raise InvalidArgument(
                f"{where}: unknown option(s) {', '.join(unknown)}; the valid ones are "
                f"{', '.join(sorted(valid | set(also)))}."
            )
        chosen = base if base is not None else cls()
        return dataclasses.replace(chosen, **keywords) if keywords else chosen


CLIENT_FIELDS = (
    "base_url",
    "api_key",
    "cache",
    "cache_mode",
    "budget",
    "retry_policy",
    "timeout",
    "max_concurrent_requests",
    "stream",
)
"""The options the model client reads (the rest are the agent's)."""
