"""``agentprop._util.aio.run``: the coroutine's value never becomes the main task's result, so
``asyncio.run`` never formats it (Python 3.11 formats the task when it restores SIGINT)."""

from __future__ import annotations

import asyncio

import pytest

from agentprop._util import aio


class Loud:
    """A value that records every ``repr`` of it (a run's report costs megabytes to format)."""

    def __init__(self) -> None:
        self.reprs = 0

    def __repr__(self) -> str:
        self.reprs += 1
        return "Loud()"


async def give(value: Loud) -> Loud:
    await asyncio.sleep(0)
    return value


def test_run_returns_the_value_without_formatting_it() -> None:
    value = Loud()
    assert aio.run(give(value)) is value
    assert value.reprs == 0


def test_run_sync_returns_the_value_without_formatting_it() -> None:
    value = Loud()
    assert aio.run_sync(give(value)) is value
    assert value.reprs == 0


class Pressed(Exception):
    """Stands for the KeyboardInterrupt of a Ctrl-C, raised in the main thread by a timer."""


def test_an_interrupted_run_sync_stops_its_coroutine_before_raising() -> None:
    """Inside a running loop the coroutine runs in a helper thread: a Ctrl-C in the caller's
    wait went on up while the coroutine ran on (agent runs, model calls) to its end."""
    import signal
    import threading

    seen: list[str] = []
    started = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    def press(signum: int, frame: object) -> None:
        raise Pressed

    async def caller() -> None:  # sync code under a running loop, as a check in an async test
        aio.run_sync(forever())

    previous = signal.signal(signal.SIGALRM, press)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(Pressed):
            asyncio.run(caller())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert started.is_set() and seen == ["cancelled"]


def test_a_cancelled_wait_for_a_daemon_thread_holds_up_no_shutdown() -> None:
    """A run's shrink ran in asyncio.to_thread: after a Ctrl-C, asyncio.run's shutdown waited
    for the executor's thread, so for every run of the shrink's budget."""
    import threading

    release, started, finished = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        release.wait(timeout=10)
        finished.set()

    async def interrupted() -> None:
        waiting = asyncio.ensure_future(aio.to_daemon_thread(work))
        await asyncio.get_running_loop().run_in_executor(None, started.wait)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    try:
        asyncio.run(interrupted())
        assert not finished.is_set()  # asyncio.run returned with the work still running
    finally:
        release.set()


def test_to_daemon_thread_returns_the_value_or_raises_the_error() -> None:
    def fails() -> None:
        raise ValueError("boom")

    assert asyncio.run(aio.to_daemon_thread(lambda: 42)) == 42
    with pytest.raises(ValueError, match="boom"):
        asyncio.run(aio.to_daemon_thread(fails))
