"""Run permits: how many agent runs may be in flight at once, shared by every case of a run.

The total stays at ``--concurrency``: a needed trial waits for a permit in turn
(:meth:`RunPermits.acquire`); a trial run ahead of need takes only a permit nobody waits for
(:meth:`RunPermits.try_acquire`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from agentprop.errors import InvalidArgument


class RunPermits:
    """``capacity`` permits for runs in flight, first come first served (one event loop)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise InvalidArgument(f"RunPermits({capacity}): at least one run must be able to run")
        self.capacity = capacity
        self._free = capacity
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        """Permits free right now (0 while anyone waits)."""
        return 0 if self._waiters else self._free

    def try_acquire(self) -> bool:
        """Take a permit if one is free and nobody is waiting for one; never waits."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a permit, waiting in turn for one."""
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a permit just as we were cancelled: pass it on
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def release(self) -> None:
        """Give a permit back: to the first waiter, else to the pool."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


@dataclass(frozen=True)
class CaseLanes:
    """How the cases of one run use the concurrency: how many trials of one case may be in
    flight (``width``), and the permits every case's runs share (``None``: one trial at a time,
    cases in flight bounded by the caller)."""

    width: int = 1
    permits: RunPermits | None = None

    def for_case(self) -> dict[str, Any]:
        """The keyword arguments of :func:`agentprop._decide.check.acheck` for one case."""
        return {"concurrency": self.width, "permits": self.permits}
