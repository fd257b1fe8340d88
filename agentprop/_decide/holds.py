"""Decisions held back from starting runs, for one pass of a budgeted run.

A budgeted ``agentprop run`` deepens its cases in passes (:func:`agentprop._pipeline.run.arun_cases`).
When what the budget has left cannot deepen every case, the pass holds back the cases that come
last in its order: a held decision (by its name) judges the runs the memo already has and starts
no new one, ending where its runs end, for a later pass to take up. The hold is a context
variable, in force for the tasks started inside the block and nowhere else; no hold is the default.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator

_HELD: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("agentprop_held_decisions", default=frozenset())


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
