"""What the surrounding test says, in context variables that cost nothing to import.

The pytest plugin sets these for every test, in projects that never use agentprop too, so this
module imports only the standard library: the test in progress (results are recorded under
it), the settings its marker imposes (:func:`settings_scope`), and the function that makes
the plugin's session the first time a check asks for one (:func:`set_session_provider`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "current_test",
    "reset_session_provider",
    "scoped_overrides",
    "session_provider",
    "session_var",
    "set_session_provider",
    "settings_scope",
]

_test: contextvars.ContextVar[str] = contextvars.ContextVar("agentprop_test", default="")
"""The pytest node id of the test in progress."""

_overrides: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar(
    "agentprop_overrides",
    default={},  # noqa: B039 (never mutated: settings_scope sets a new dict)
)
"""Oracle settings imposed by the surrounding test (pytest marker, ``agentprop.settings``)."""

session_var: contextvars.ContextVar[Any] = contextvars.ContextVar("agentprop_session", default=None)
"""The current :class:`agentprop._decide.session.Session` (``None``: none yet in this context)."""

_provider: contextvars.ContextVar[Callable[[], Any] | None] = contextvars.ContextVar(
    "agentprop_session_provider", default=None
)
"""Makes (and activates) the session of the pytest run when a check first needs one."""


def current_test() -> str:
    return _test.get()


def scoped_overrides() -> dict[str, Any]:
    return _overrides.get()


@contextlib.contextmanager
def settings_scope(test: str = "", **overrides: Any) -> Iterator[None]:
    """Within this scope, :func:`agentprop.check` uses these overrides (``mode``, ``tau``,
    ``runs``, ``max_runs``, ``seed``) unless a call passes its own, and records results under
    ``test``."""
    merged = {**_overrides.get(), **{k: v for k, v in overrides.items() if v is not None}}
    t1 = _overrides.set(merged)
    t2 = _test.set(test or _test.get())
    try:
        yield
    finally:
        _overrides.reset(t1)
        _test.reset(t2)


def set_session_provider(
    provider: Callable[[], Any] | None,
) -> contextvars.Token[Callable[[], Any] | None]:
    return _provider.set(provider)


def reset_session_provider(token: contextvars.Token[Callable[[], Any] | None]) -> None:
    _provider.reset(token)


def session_provider() -> Callable[[], Any] | None:
    return _provider.get()
