"""Run a coroutine to completion from synchronous code, even inside a running event loop
(pytest-asyncio, Jupyter): then it runs on a fresh loop in a helper thread, in a copy of the
caller's context (so the current session and test scope go with it).

The coroutine's value is never the result of the loop's main task: on Python 3.11
``asyncio.run`` formats that task (and so ``repr`` of its result) when it restores the SIGINT
handler, which for a run's report is the repr of every case, megabytes at the peak RSS.

:func:`run_serving` runs an async core for a sync caller whose callable must run as if called
directly: in the caller's thread, with no event loop of ours around it; :func:`call_off_loop`
calls a user's sync callable (a property) from inside a loop as if no loop were there."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
A = TypeVar("A")
R = TypeVar("R")


def is_async(fn: object) -> bool:
    """Whether calling ``fn`` makes a coroutine: an ``async def`` function, or an object whose
    ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (the bound __call__ method itself)
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, with the value kept out of the main task (see the module doc)."""
    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``run(coro)``; inside a running loop, on a fresh loop in a helper thread. An interrupt
    of the wait (Ctrl-C) cancels the coroutine and is raised once it has stopped (a second one
    at once: the helper thread, a daemon, then holds up no exit)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run(coro)
    box: dict[str, Any] = {}
    context = contextvars.copy_context()
    stop, finished = threading.Event(), threading.Event()
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        running.append((asyncio.get_running_loop(), task))
        if stop.is_set():
            coro.close()
            raise asyncio.CancelledError
        return await coro

    def runner() -> None:
        try:
            box["value"] = run(main())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            finished.set()

    thread = threading.Thread(
        target=context.run, args=(runner,), name="agentprop-sync", daemon=True
    )
    thread.start()
    try:
        # not thread.join(): on 3.11 a join an exception interrupts marks the thread stopped
        finished.wait()
    except BaseException:  # interrupted waiting: stop the coroutine before going on up
        stop.set()
        for loop, task in running:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # its loop closed meanwhile: it has stopped
                pass
        finished.wait()
        raise
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def call_off_loop(fn: Callable[..., R], *args: Any) -> R:
    """``fn(*args)`` as if called with no event loop around it: in this thread (its locals,
    an SQLite connection, Hypothesis's test context stay at hand), with the loop running here,
    if any, set aside meanwhile, so a user's sync callable may start a loop of its own
    (``asyncio.run``). The loop is held up meanwhile, as by any sync call made on it."""
    running = asyncio._get_running_loop()
    if running is None:
        return fn(*args)
    asyncio._set_running_loop(None)
    try:
        return fn(*args)
    finally:
        asyncio._set_running_loop(running)


async def to_daemon_thread(fn: Callable[[], R], name: str = "agentprop-work") -> R:
    """``await asyncio.to_thread(fn)``, on a daemon thread of its own (in a copy of this
    context): when the wait is cancelled (Ctrl-C), ``fn`` is left to run on, and neither the
    loop's shutdown nor the interpreter's exit waits for it, as both wait for ``to_thread``'s
    executor (for a shrink, every run of its budget)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[R] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def job() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = fn()
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop closed meanwhile: nobody waits any more
            pass

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(job,), name=name, daemon=True).start()
    return await done


def run_serving(
    core: Callable[[Callable[[A], Awaitable[R]]], Coroutine[Any, Any, T]], fn: Callable[[A], R]
) -> T:
    """``run_sync(core(call))``, where ``call(a)`` is ``fn(a)`` computed in this thread: the
    coroutine runs on a loop in a helper thread (in a copy of this context) while this thread
    serves its calls, one at a time, outside any loop of ours. So ``fn`` may start its own loop
    (``asyncio.run``) or rely on its thread, as when called directly. An interrupt here (Ctrl-C,
    in ``fn`` or between calls) cancels the coroutine and is raised once it has stopped."""
    calls: queue.SimpleQueue[tuple[A, concurrent.futures.Future[R]] | None] = queue.SimpleQueue()
    stop = threading.Event()
    running: list[asyncio.Task[None]] = []
    box: dict[str, Any] = {}

    async def call(arg: A) -> R:
        if stop.is_set():
            raise asyncio.CancelledError
        done: concurrent.futures.Future[R] = concurrent.futures.Future()
        calls.put((arg, done))
        return await asyncio.wrap_future(done)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        running.append(task)
        if stop.is_set():
            raise asyncio.CancelledError
        box["value"] = await core(call)

    def runner() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            calls.put(None)

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(runner,), name="agentprop-core")
    thread.start()
    try:
        while (item := calls.get()) is not None:
            arg, done = item
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(fn(arg))
                except Exception as exc:  # the core's to handle, as if fn had been awaited
                    done.set_exception(exc)
    except BaseException:  # an interrupt: stop the core, then raise it here
        stop.set()
        for task in running:
            task.get_loop().call_soon_threadsafe(task.cancel)
        while (item := calls.get()) is not None:
            item[1].cancel()
        thread.join()
        raise
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
