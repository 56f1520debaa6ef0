"""The dashboard's way out when its terminal goes away (an SSH connection drops).

Textual's Linux driver writes to the terminal from a thread fed by a queue of 30
writes (textual 8, ``drivers/_writer_thread.py``). When the terminal hangs up, the
thread's first write raises EIO and the thread dies; the app's next 30 writes fill
the queue and the 31st blocks the event loop for good, inside the app's shutdown
when not before. The driver's input thread turns the read error into a panic that
prints a traceback. Neither is ours to patch in place, so this module wraps them:

- ``guarded_driver`` gives the driver an output that never raises: a failed write
  marks the terminal lost, calls back (the app then ends through its ordinary quit
  path: the sampler detaches, a capture being recorded is completed), and every
  later write is dropped. The writer thread lives, the queue drains, the shutdown
  finishes.
- ``terminal_alive`` tells a panic caused by a dead terminal from a real one.
- ``Deadline`` is the backstop for whatever else could hold the process after it
  was asked to stop (a terminal that stalls instead of failing, a loop that never
  gets to run again): once armed, it runs the session's last clean-ups (the demo
  stops its target) and leaves with ``os._exit``. It is armed long enough for the
  sampler to detach first, and re-armed short once it has.
"""

from __future__ import annotations

import contextlib
import os
import termios
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from textual.driver import Driver


def terminal_alive(fd: int) -> bool:
    """Whether ``fd`` is still a working terminal: a hung-up one fails every ioctl."""
    try:
        termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError):
        return False
    return True


class GuardedOutput:
    """A terminal stream whose writes cannot fail: the first failure is reported once
    through ``on_failure`` (from the writing thread), then output is dropped."""

    def __init__(self, stream: IO[str], on_failure: Callable[[], None]) -> None:
        self._stream = stream
        self._on_failure = on_failure
        self.failed = threading.Event()

    def write(self, text: str) -> int:
        if not self.failed.is_set():
            try:
                return self._stream.write(text)
            except (OSError, ValueError):  # EIO, EPIPE; ValueError: the stream was closed
                self._fail()
        return len(text)

    def flush(self) -> None:
        if not self.failed.is_set():
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._fail()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return True

    def _fail(self) -> None:
        self.failed.set()
        self._on_failure()


def guarded_driver(base: type[Driver], on_failure: Callable[[], None]) -> type[Driver]:
    """``base`` (Textual's Linux driver) with its output wrapped in a GuardedOutput.

    Textual keeps the driver's output stream in ``_file``; where a later release does
    not, the driver is left as it is and only the Deadline guards the exit. A SIGCONT
    resumes application mode only after a SIGTSTP suspended it.
    """

    class GuardedDriver(base):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._suspended = False  # by a SIGTSTP (Ctrl-Z), and not resumed yet
            stream = getattr(self, "_file", None)
            if stream is not None and hasattr(stream, "write"):
                self._file = GuardedOutput(stream, on_failure)

        def _sigtstp_application(self, *args: Any) -> None:
            self._suspended = True
            super()._sigtstp_application(*args)

        def _sigcont_application(self, *args: Any) -> None:
            # A hung-up terminal sends SIGHUP and SIGCONT to its foreground group: Textual
            # then started application mode again, new terminal threads and all, on a
            # terminal that is gone (their start waited on an input thread spinning on the
            # closed terminal's end of file: 1-3 s more to leave). Only a Ctrl-Z resumes.
            if self._suspended:
                self._suspended = False
                super()._sigcont_application(*args)

    GuardedDriver.__name__ = f"Guarded{base.__name__}"
    return GuardedDriver


class Deadline:
    """Leaves the process with ``os._exit(code)`` once armed time runs out, after
    running ``cleanups``; ``cancel`` when the process is leaving on its own."""

    def __init__(self, code: int, cleanups: tuple[Callable[[], None], ...] = ()) -> None:
        self.code = code
        self._cleanups = cleanups
        self._due: float | None = None
        self._cancelled = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> None:
        """Leave in ``seconds`` at the latest (an earlier arming stands)."""
        with self._changed:
            due = time.monotonic() + seconds
            if self._due is None or due < self._due:
                self._due = due
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._wait, name="livesym-deadline", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def cancel(self) -> None:
        with self._changed:
            self._cancelled = True
            self._changed.notify_all()

    @property
    def armed(self) -> bool:
        return self._due is not None and not self._cancelled

    def _wait(self) -> None:
        with self._changed:
            while not self._cancelled:
                assert self._due is not None
                left = self._due - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            if self._cancelled:
                return
        for cleanup in self._cleanups:
            with contextlib.suppress(Exception):  # leaving regardless: each gets its turn
                cleanup()
        os._exit(self.code)
