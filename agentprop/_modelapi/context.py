"""The model-call context: what a model call takes from the session it runs in.

Model agents sit below the session in the layers, so the session hands them the budget, the
cache mode and the open API caches through this context variable
(:meth:`agentprop._decide.session.Session.activate` sets it). Outside any session the context is
empty (no budget, the default cache mode).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from agentprop._modelapi.budget import Budget
from agentprop._modelapi.cache import ApiCache, CacheMode, open_cache_store
from agentprop._modelapi.ledger import STORE_ENV


@dataclass(eq=False)
class ModelCallContext:
    """The budget, the default cache mode, the shared store and the open API caches of one
    session."""

    budget: Budget | None = None
    cache_mode: CacheMode | None = None
    """The mode of agents that choose none; ``None``: :meth:`CacheMode.default` (replay-only
    when ``CI`` is set)."""
    store: str | None = None
    """The shared store URL (``redis://...``) the API caches keep their entries in, over the
    cache file as a read-only base; ``None``: ``$AGENTPROP_STORE``, if set; ``""``: none."""
    _caches: dict[tuple[str, CacheMode, tuple[str, ...], str], ApiCache] = field(
        default_factory=dict, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def with_budget(self, budget: Budget | None) -> ModelCallContext:
        """This context, charging ``budget`` instead (same cache mode, same open caches): what a
        check with a budget of its own passes down to the model calls of its runs."""
        if budget is None or budget is self.budget:
            return self
        return ModelCallContext(
            budget=budget,
            cache_mode=self.cache_mode,
            store=self.store,
            _caches=self._caches,
            _lock=self._lock,
        )

    def default_cache_mode(self) -> CacheMode:
        return self.cache_mode if self.cache_mode is not None else CacheMode.default()

    def open_api_cache(
        self,
        path: str | os.PathLike[str],
        *,
        mode: CacheMode | str | None = None,
        secrets: Sequence[str] = (),
        store: str | None = None,
    ) -> ApiCache:
        """The session's :class:`ApiCache` for ``path`` in ``mode`` (opened once, then shared);
        with a shared store (``store``, else :attr:`store`, else ``$AGENTPROP_STORE``) its
        entries live there, over the file at ``path`` read-only (see :func:`open_cache_store`)."""
        resolved = CacheMode.parse(mode) if mode is not None else self.default_cache_mode()
        shared = (
            store
            if store is not None
            else self.store
            if self.store is not None
            else os.environ.get(STORE_ENV, "")
        )
        if resolved is CacheMode.OFF:
            shared = ""
        key = (str(Path(path).resolve()), resolved, tuple(sorted(s for s in secrets if s)), shared)
        with self._lock:
            cache = self._caches.get(key)
            if cache is None:
                entries = open_cache_store(shared, path) if shared else None
                cache = self._caches[key] = ApiCache(
                    path, mode=resolved, secrets=key[2], store=entries
                )
            return cache


T = TypeVar("T")

_current: contextvars.ContextVar[ModelCallContext | None] = contextvars.ContextVar(
    "agentprop_model_call_context", default=None
)


def current_model_context() -> ModelCallContext:
    """The context of the session in force; outside any, one made for (and kept in) the
    current context."""
    ctx = _current.get()
    if ctx is None:
        ctx = ModelCallContext()
        _current.set(ctx)
    return ctx


def model_context_in_force() -> ModelCallContext | None:
    """The context the session or check in force set; ``None`` outside any (none is made)."""
    return _current.get()


def set_current_model_context(ctx: ModelCallContext) -> None:
    """Make ``ctx`` current for the rest of the current context (no block to leave)."""
    _current.set(ctx)


@contextlib.contextmanager
def model_call_context(ctx: ModelCallContext) -> Iterator[ModelCallContext]:
    """Within this block, model agents charge ``ctx.budget`` and use ``ctx``'s cache mode."""
    previous, token = _current.get(), _current.set(ctx)
    try:
        yield ctx
    finally:
        restore(_current, token, previous)


def restore(var: contextvars.ContextVar[T], token: contextvars.Token[T], previous: T) -> None:
    """Undo ``var.set`` by its token; a block left in another context than it was entered in (a
    pytest hook ending a session a test's task began) sets the value it found instead, since a
    token cannot be reset there."""
    try:
        var.reset(token)
    except ValueError:
        var.set(previous)
