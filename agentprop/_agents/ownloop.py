"""A user async agent's own event loop, on a daemon thread of its own.

A turn that blocks that loop (``time.sleep`` inside ``async def turn``) is still timed out from
the runner's loop; the thread, which nothing waits for then, is abandoned as a sync agent's is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any


class _OwnLoop:
    """A user async agent's own event loop, on a daemon thread for one conversation: a turn that
    blocks it (``time.sleep`` inside ``async def turn``) is still timed out from the runner's
    loop, and the thread, which nothing waits for then, is abandoned as a sync agent's is."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        while True:
            try:
                self.loop.run_forever()
                break
            except BaseException:  # noqa: S112 (an agent's SystemExit: its task hands it to the run; serve on)
                continue
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

    def run(self, coro: Any) -> Awaitable[Any]:
        """``coro`` as a task of this loop (in a copy of the caller's context), awaitable from
        the runner's loop; cancelling that cancels the task once the loop gets control."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self) -> None:
        if not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # closed meanwhile
                pass
