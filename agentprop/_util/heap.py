"""The heap of an ``agentprop run`` process.

What a run loads before its first agent run (the modules, the model SDK's thousands of type
classes, the project, the agent) lives until the run ends; each full garbage collection would
walk all of it again, for nothing. :func:`frozen_heap` moves the objects alive at its start out
of the collector's sight (``gc.freeze``), :func:`freeze_more` those made since (call it when the
project and the agent are loaded), and the block's end gives them all back (``gc.unfreeze``).
Nothing is kept that would have been freed: what dies meanwhile is still freed by reference
counting, and cyclic garbage among them is collected after the block. A heap frozen by someone
else, or a disabled collector, is left as it is.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["freeze_more", "frozen_heap"]

_owned = [0]
"""How many :func:`frozen_heap` blocks of ours are open (the outermost one froze the heap)."""


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the objects alive now until the block ends (see the module docstring)."""
    if _owned[0]:
        _owned[0] += 1
        try:
            yield
        finally:
            _owned[0] -= 1
        return
    if gc.get_freeze_count() or not gc.isenabled():
        yield  # frozen by someone else, or no collector running: nothing to spare
        return
    gc.freeze()
    _owned[0] = 1
    try:
        yield
    finally:
        _owned[0] = 0
        gc.unfreeze()


def freeze_more() -> None:
    """Inside a :func:`frozen_heap` block, freeze the objects made since (else nothing)."""
    if _owned[0]:
        gc.freeze()
