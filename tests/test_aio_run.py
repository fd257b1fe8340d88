"""``agentprop._util.aio.run``: the coroutine's value never becomes the main task's result, so
``asyncio.run`` never formats it (Python 3.11 formats the task when it restores SIGINT)."""

from __future__ import annotations

import asyncio

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
