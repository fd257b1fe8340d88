"""Ctrl-C and SIGTERM over the whole of ``agentprop run``, not only while the event loop runs.

Python's own handler raises ``KeyboardInterrupt`` wherever the main thread is, and asyncio's
(only inside ``asyncio.run``) cancels the main task at once, even in the middle of its step, so
a Ctrl-C just after the last case was decided, or while the reports are written, threw the
whole run away; SIGTERM (a CI runner cancelling the job) killed the process with no report at
all. :class:`CtrlC` takes both from the header line to the exit code: the first signal cancels
the run's task at its next ``await`` (the run then returns the cases decided so far, marked
interrupted) or, before or after the run, is only remembered; the command then exits 128 + that
signal (130 for SIGINT, 143 for SIGTERM). A second signal raises :class:`Interrupted` (a
``KeyboardInterrupt``) at once. A signal the process was started with ignored stays ignored,
as Python and asyncio leave it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType
from typing import Any

SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
"""How a report names what interrupted a run."""


class Interrupted(KeyboardInterrupt):
    """A second signal: the command ends at once, exiting 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal that raised ``exc`` (SIGINT when it does not say: Python's own)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


class CtrlC:
    """SIGINT and SIGTERM for one command (see the module doc); :meth:`install`, then
    :meth:`restore`."""

    def __init__(self) -> None:
        self.presses = 0
        self.signum: int = signal.SIGINT
        """The first signal received (SIGINT until one is)."""
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}

    @property
    def pressed(self) -> bool:
        return self.presses > 0

    @property
    def exit_code(self) -> int:
        """128 + the first signal received: 130 (Ctrl-C), 143 (SIGTERM)."""
        return 128 + self.signum

    @property
    def name(self) -> str:
        """What the first signal is called in the reports (``Ctrl-C``, ``SIGTERM``)."""
        return SIGNAL_NAMES.get(signal.Signals(self.signum), signal.Signals(self.signum).name)

    def install(self) -> None:
        """Take SIGINT and SIGTERM, if this is the main thread and Python's default handler has
        each (not one that is ignored, or that a host such as an embedding program set)."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
        for signum, default in defaults.items():
            if signal.getsignal(signum) is default:
                self._previous[signum] = signal.signal(signum, self._on_sigint)

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def attach(self) -> None:
        """The run's task is the current one (call it first thing in the task): a signal
        cancels it; one received before the run started cancels it now."""
        self._task, self._loop = asyncio.current_task(), asyncio.get_running_loop()
        if self.pressed:
            self._loop.call_soon(self._cancel)

    def detach(self) -> None:
        """The run is decided: a signal from now on cancels nothing."""
        self._task = None

    def _cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # named as asyncio's handler: runtime._real_interrupt tells a real Ctrl-C by this frame
    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        if self.presses > 1:
            raise Interrupted(signum)
        self.signum = signum
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # between the task's steps, never inside one: a task cancelled in the middle of
            # its last step would end cancelled with its value (the report) thrown away
            loop.call_soon_threadsafe(self._cancel)
