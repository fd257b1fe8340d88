"""An adaptive limit on concurrent model calls (AIMD).

:class:`AdaptiveConcurrency` raises the limit by ``increase_step`` after each full window of
successes and multiplies it by ``decrease_factor`` on a 429 or 529, once per congestion episode.
The retry loop holds one slot per attempt and reports its outcome.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agentprop.errors import InvalidArgument

__all__ = ["AdaptiveConcurrency", "ConcurrencySlot"]


class ConcurrencySlot:
    """One acquired slot of an :class:`AdaptiveConcurrency`; report the outcome on it."""

    __slots__ = ("_epoch", "_limiter", "_reported")

    def __init__(self, limiter: AdaptiveConcurrency, epoch: int) -> None:
        self._limiter = limiter
        self._epoch = epoch
        self._reported = False

    def success(self) -> None:
        """The call succeeded: counts towards the next additive increase."""
        if not self._reported:
            self._reported = True
            self._limiter._on_success()

    def rate_limited(self) -> None:
        """The server said slow down (429/529): decrease the limit, once per episode."""
        if not self._reported:
            self._reported = True
            self._limiter._on_congestion(self._epoch)


class AdaptiveConcurrency:
    """An asyncio concurrency limit that adapts to rate limiting (AIMD).

    Starts at ``initial`` concurrent slots. Each window of ``limit`` successful calls raises the
    limit by ``increase_step`` (up to ``maximum``); a rate-limited call multiplies it by
    ``decrease_factor`` (down to ``minimum``). Only calls that started after the latest decrease
    can decrease it again, so a burst of 429s from one overload halves the limit once, not once
    per failed call. Waiters are served first come, first served.

    Use one instance per event loop (it is not thread-safe)::

        limiter = AdaptiveConcurrency(initial=8, maximum=32)
        async with limiter.slot() as slot:
            reply = await call_api()
            slot.success()
    """

    def __init__(
        self,
        initial: int = 8,
        *,
        minimum: int = 1,
        maximum: int = 64,
        decrease_factor: float = 0.5,
        increase_step: int = 1,
    ) -> None:
        if not (isinstance(minimum, int) and isinstance(maximum, int) and isinstance(initial, int)):
            raise InvalidArgument("initial, minimum and maximum must be ints.")
        if not 1 <= minimum <= initial <= maximum:
            raise InvalidArgument(
                f"Need 1 <= minimum <= initial <= maximum; got minimum={minimum}, "
                f"initial={initial}, maximum={maximum}."
            )
        if not 0 < decrease_factor < 1:
            raise InvalidArgument(f"decrease_factor={decrease_factor} must be in (0, 1).")
        if not isinstance(increase_step, int) or increase_step < 1:
            raise InvalidArgument(f"increase_step={increase_step!r} must be an int >= 1.")
        self._limit = initial
        self.minimum = minimum
        self.maximum = maximum
        self.decrease_factor = decrease_factor
        self.increase_step = increase_step
        self._in_flight = 0
        self._epoch = 0
        self._successes_in_window = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.increases = 0
        self.decreases = 0
        self.peak_in_flight = 0
        self.history: list[int] = [initial]

    @property
    def limit(self) -> int:
        """The current number of calls allowed at once."""
        return self._limit

    @property
    def in_flight(self) -> int:
        """Calls currently holding a slot."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return sum(1 for fut in self._waiters if not fut.done())

    async def acquire(self) -> ConcurrencySlot:
        """Wait for a free slot and take it; pair with :meth:`release`."""
        if self._in_flight < self._limit and not self._waiters:
            self._take()
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    # the slot was handed to us just as we were cancelled: give it back
                    self._in_flight -= 1
                    self._wake()
                else:
                    try:
                        self._waiters.remove(future)
                    except ValueError:
                        pass
                raise
        return ConcurrencySlot(self, self._epoch)

    def release(self) -> None:
        """Give a slot back."""
        if self._in_flight <= 0:
            raise InvalidArgument("release() called more often than acquire().")
        self._in_flight -= 1
        self._wake()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[ConcurrencySlot]:
        """``async with limiter.slot() as slot:`` acquires and always releases a slot."""
        acquired = await self.acquire()
        try:
            yield acquired
        finally:
            self.release()

    def _take(self) -> None:
        self._in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self._in_flight)

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self._limit:
            future = self._waiters.popleft()
            if future.done():
                continue
            self._take()
            future.set_result(None)

    def _set_limit(self, new: int) -> None:
        if new != self._limit:
            self._limit = new
            self.history.append(new)
            self._wake()

    def _on_success(self) -> None:
        self._successes_in_window += 1
        if self._successes_in_window >= self._limit:
            self._successes_in_window = 0
            if self._limit < self.maximum:
                self.increases += 1
                self._set_limit(min(self.maximum, self._limit + self.increase_step))

    def _on_congestion(self, epoch: int) -> None:
        if epoch != self._epoch:
            return  # this call started before the last decrease: already reacted
        self._epoch += 1
        self._successes_in_window = 0
        new = max(self.minimum, int(self._limit * self.decrease_factor))
        if new < self._limit:
            self.decreases += 1
            self._set_limit(new)
