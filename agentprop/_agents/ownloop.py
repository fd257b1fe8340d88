"""A user async agent's own event loop, on a daemon thread of its own, reused across conversations.

A turn that blocks that loop (``time.sleep`` inside ``async def turn``) is still timed out from
the runner's loop; the loop and its thread, which nothing waits for then, are abandoned as a sync
agent's thread is. A conversation takes an idle loop from :data:`OWN_LOOPS` (or starts one) and
gives it back at its end only if nothing of it was abandoned: no turn was given up on, no agent
code escaped the loop, every task the agent left on it was cancelled and finished (as closing
the loop would) within :data:`DRAIN_TIMEOUT_S`, and the agent left no timer pending nor a loop
setting changed. An abandoned loop is never reused: it is stopped,
and closes itself once it gets control. Idle loops are bounded in number, and closed when their
pool is dropped or at interpreter exit.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from typing import Any

DRAIN_TIMEOUT_S = 1.0
"""How long the end of a conversation waits for its own loop to cancel and finish the tasks the
agent left on it; past it the loop is abandoned (stopped, not reused), and the run goes on."""

_DRAIN_ROUNDS = 3
"""Rounds of cancelling the tasks left on a loop (cancelled tasks may start new ones) before
the loop is abandoned."""


class _OwnLoop:
    """A user async agent's own event loop, served by a daemon thread until stopped."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.debug = self.loop.get_debug()
        self.tainted = False
        """Something of it was abandoned (a turn given up on, agent code that escaped the loop):
        it must not be reused."""
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        while True:
            try:
                self.loop.run_forever()
                break
            except BaseException:  # noqa: S112 (an agent's SystemExit: its task hands it to the run; serve on)
                self.tainted = True
                continue
        self.tainted = True  # stopped, by us or by the agent: never served again
        try:
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except BaseException:  # noqa: S110 (agent code that will not stop: the loop closes anyway)
            pass
        finally:
            self.loop.close()

    async def run(self, coro: Any) -> Any:
        """``coro`` as a task of this loop (in a copy of the caller's context), awaited from the
        runner's loop; cancelling that cancels the task once the loop gets control, and taints
        the loop (the task may still be running)."""
        try:
            handed = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # the loop closed meanwhile: the coroutine never runs
            coro.close()
            self.tainted = True
            raise
        future = asyncio.wrap_future(handed)
        try:
            return await future
        except BaseException:
            if future.cancelled():
                self.tainted = True
            raise

    async def _drain(self) -> bool:
        """On this loop: cancel the tasks the agent left on it and wait for them to finish;
        whether none is left."""
        me = asyncio.current_task()
        for _ in range(_DRAIN_ROUNDS):
            left = [task for task in asyncio.all_tasks() if task is not me]
            if not left:
                return _as_new(asyncio.get_running_loop(), self.debug)
            for task in left:
                task.cancel()
            await asyncio.wait(left)
        return not [task for task in asyncio.all_tasks() if task is not me] and _as_new(
            asyncio.get_running_loop(), self.debug
        )

    async def drained(self) -> bool:
        """Whether this loop is clean for another conversation, the tasks left on it cancelled
        and finished within :data:`DRAIN_TIMEOUT_S` (awaited from the runner's loop)."""
        if self.tainted or self.loop.is_closed():
            return False
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                clean = await self.run(self._drain())
        except Exception:  # a timeout, or a loop that closed meanwhile: abandoned
            return False
        return clean and not self.tainted

    def stop(self) -> None:
        """Stop the loop; its thread closes it (cancelling what is left) once it gets control."""
        self.tainted = True
        if not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # closed meanwhile
                pass


def _as_new(loop: asyncio.AbstractEventLoop, debug: bool) -> bool:
    """Whether ``loop`` (its tasks drained) is as a new one would be for the next conversation:
    no timer the agent scheduled still pending (``call_later``: it would fire in another run),
    and no task factory, exception handler or debug mode the agent set. A loop whose pending
    timers cannot be listed (not CPython's ``_scheduled``) is never reused."""
    scheduled = getattr(loop, "_scheduled", None)
    if not isinstance(scheduled, list) or any(not h.cancelled() for h in scheduled):
        return False
    return (
        loop.get_task_factory() is None
        and loop.get_exception_handler() is None
        and loop.get_debug() == debug
    )


def _stop_all(idle: list[_OwnLoop], within_s: float) -> None:
    """Stop the idle loops and give their threads ``within_s`` in all to close them (idle, they
    do so at once), so that none is left unclosed at interpreter exit."""
    loops = list(idle)
    idle.clear()
    for own in loops:
        own.stop()
    deadline = time.monotonic() + within_s
    for own in loops:
        own.thread.join(max(0.0, deadline - time.monotonic()))


class OwnLoops:
    """A thread-safe pool of idle own loops. At most ``max_idle`` are kept; the loops in use
    are as many as the conversations of user async agents in flight."""

    def __init__(self, *, max_idle: int = 64) -> None:
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[_OwnLoop] = []
        self._pid = os.getpid()
        weakref.finalize(self, _stop_all, self._idle, 2.0)  # also run at interpreter exit

    def take(self, name: str) -> _OwnLoop:
        """An idle loop, its thread renamed ``name``, or a new one."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's threads do not exist here
                self._pid = os.getpid()
                self._idle.clear()
            own = self._idle.pop() if self._idle else None
        if own is None:
            return _OwnLoop(name)
        own.thread.name = name
        return own

    async def give_back(self, own: _OwnLoop) -> None:
        """End a conversation's use of ``own``: keep it for the next one if it is clean
        (:meth:`_OwnLoop.drained`) and there is room, else stop it."""
        try:
            clean = await own.drained()
        except BaseException:  # cancelled meanwhile
            own.stop()
            raise
        if clean:
            with self._lock:
                if self._pid == os.getpid() and len(self._idle) < self._max_idle:
                    own.thread.name = "agentprop-agent-loop-idle"
                    self._idle.append(own)
                    return
        own.stop()

    def idle(self) -> int:
        """How many idle loops the pool holds."""
        with self._lock:
            return len(self._idle)


OWN_LOOPS = OwnLoops()
"""The own loops of the user async agents run in this process."""
