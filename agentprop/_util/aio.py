"""Run a coroutine to completion from synchronous code, even inside a running event loop
(pytest-asyncio, Jupyter): then it runs on a fresh loop in a helper thread, in a copy of the
caller's context (so the current session and test scope go with it).

The coroutine's value is never the result of the loop's main task: on Python 3.11
``asyncio.run`` formats that task (and so ``repr`` of its result) when it restores the SIGINT
handler, which for a run's report is the repr of every case, megabytes at the peak RSS."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, with the value kept out of the main task (see the module doc)."""
    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run(coro)
    box: dict[str, Any] = {}
    context = contextvars.copy_context()

    def runner() -> None:
        try:
            box["value"] = run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=context.run, args=(runner,), name="agentprop-sync")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
