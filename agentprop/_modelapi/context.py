"""The run context: the budget and the cache mode that model calls use, passed down to them.

Whoever runs agents -- :func:`agentprop.check`, ``agentprop run``, the pytest plugin -- says which
budget their model calls draw from and which cache mode they use; a model agent, PromptSmith or
a paraphrase pool deep below reads them here, instead of reaching up into the code that runs it.

Two levels:

- the **session** (:func:`set_session`): process-wide defaults, set by the pytest plugin for a
  test session (``--agentprop-max-usd``, ``--agentprop-cache-mode``) and by the CLI for a command;
- the **current run** (:func:`run_context`): a :class:`contextvars.ContextVar`, set around a
  check (``check(..., budget=B)`` runs its model calls against ``B``). Asyncio tasks started
  inside inherit it; so do threads started with :func:`asyncio.to_thread`.

:func:`current` merges them: a field the current run leaves unset falls back to the session's.
A model client's own ``budget=`` / ``cache_mode=`` win over both.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentprop._modelapi.budget import Budget
    from agentprop._modelapi.cache import CacheMode

__all__ = ["RunContext", "current", "current_budget", "current_cache_mode", "run_context", "session", "set_session"]


@dataclass(frozen=True)
class RunContext:
    """What the model calls of a run draw on; ``None`` fields are unset (fall back)."""

    budget: Budget | None = None
    cache_mode: CacheMode | None = None

    def over(self, base: RunContext) -> RunContext:
        """This context, with its unset fields taken from ``base``."""
        return RunContext(
            budget=self.budget if self.budget is not None else base.budget,
            cache_mode=self.cache_mode if self.cache_mode is not None else base.cache_mode,
        )


_UNSET: Any = object()
_session = RunContext()
_session_lock = threading.Lock()
_current: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("agentprop_model_run", default=None)


def session() -> RunContext:
    """The process-wide defaults."""
    return _session


def set_session(*, budget: Budget | None = _UNSET, cache_mode: CacheMode | str | None = _UNSET) -> None:
    """Set the process-wide defaults (each argument given replaces that field; ``None`` unsets
    it). The cache mode may be given by its value (``"replay-only"``)."""
    global _session
    from agentprop._modelapi.cache import CacheMode

    with _session_lock:
        changes: dict[str, Any] = {}
        if budget is not _UNSET:
            changes["budget"] = budget
        if cache_mode is not _UNSET:
            changes["cache_mode"] = None if cache_mode is None else CacheMode.parse(cache_mode)
        _session = replace(_session, **changes)


def current() -> RunContext:
    """The context of the running code: the current run's fields over the session's."""
    run = _current.get()
    return _session if run is None else run.over(_session)


def current_budget() -> Budget | None:
    """``current().budget``, without building a context (it is asked on every model call)."""
    run = _current.get()
    if run is not None and run.budget is not None:
        return run.budget
    return _session.budget


def current_cache_mode() -> CacheMode | None:
    """``current().cache_mode``, without building a context."""
    run = _current.get()
    if run is not None and run.cache_mode is not None:
        return run.cache_mode
    return _session.cache_mode


@contextlib.contextmanager
def run_context(*, budget: Budget | None = None, cache_mode: CacheMode | str | None = None) -> Iterator[RunContext]:
    """Within this block (and the tasks it starts), model calls use ``budget`` and
    ``cache_mode``; fields left ``None`` keep the enclosing context's."""
    from agentprop._modelapi.cache import CacheMode

    mode = None if cache_mode is None else CacheMode.parse(cache_mode)
    outer = _current.get()
    mine = RunContext(budget=budget, cache_mode=mode)
    token = _current.set(mine if outer is None else mine.over(outer))
    try:
        yield current()
    finally:
        _current.reset(token)
