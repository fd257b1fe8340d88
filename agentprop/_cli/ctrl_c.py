"""Ctrl-C over the whole of ``agentprop run``, not only while the event loop runs.

Python's own handler raises ``KeyboardInterrupt`` wherever the main thread is, and asyncio's
(only inside ``asyncio.run``) cancels the main task at once, even in the middle of its step, so
a Ctrl-C just after the last case was decided, or while the reports are written, threw the
whole run away. :class:`CtrlC` takes SIGINT from the header line to the exit code: the first
press cancels the run's task at its next ``await`` (the run then returns the cases decided so
far, marked interrupted) or, before or after the run, is only remembered; the command then
exits 130. A second press raises ``KeyboardInterrupt`` at once. A SIGINT the process was
started with ignored stays ignored, as Python and asyncio leave it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType
from typing import Any


class CtrlC:
    """SIGINT for one command (see the module doc); :meth:`install`, then :meth:`restore`."""

    def __init__(self) -> None:
        self.presses = 0
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: Any = None
        self._installed = False

    @property
    def pressed(self) -> bool:
        return self.presses > 0

    def install(self) -> None:
        """Take SIGINT, if this is the main thread and Python's default handler has it (not when
        it is ignored, or a host such as an embedding program set its own)."""
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        self._installed = True

    def restore(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def attach(self) -> None:
        """The run's task is the current one (call it first thing in the task): a press cancels
        it; one made before the run started cancels it now."""
        self._task, self._loop = asyncio.current_task(), asyncio.get_running_loop()
        if self.pressed:
            self._loop.call_soon(self._cancel)

    def detach(self) -> None:
        """The run is decided: a press from now on cancels nothing."""
        self._task = None

    def _cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # named as asyncio's handler: runtime._real_interrupt tells a real Ctrl-C by this frame
    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        if self.presses > 1:
            raise KeyboardInterrupt
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # between the task's steps, never inside one: a task cancelled in the middle of
            # its last step would end cancelled with its value (the report) thrown away
            loop.call_soon_threadsafe(self._cancel)
