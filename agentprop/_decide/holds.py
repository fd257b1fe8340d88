"""Decisions held back from starting runs, for one pass of a budgeted run.

A held decision judges the runs the memo already has and starts no new one, for a later pass to
take up. The hold is a context variable, in force only for tasks started inside its block; no
hold is the default.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator

_HELD: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "agentprop_held_decisions", default=frozenset()
)


@contextlib.contextmanager
def holding(names: Iterable[str]) -> Iterator[None]:
    """Within the block, the decisions named ``names`` start no new agent run."""
    token = _HELD.set(frozenset(names))
    try:
        yield
    finally:
        _HELD.reset(token)


def held(name: str) -> bool:
    """Whether the decision ``name`` may not start a run now."""
    return name in _HELD.get()
