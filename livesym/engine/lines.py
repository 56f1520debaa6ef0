"""A capture's source lines, looked up once at its final write, within a hard time bound.

Lines are a bonus of a capture, never a reason to hold up its end: one big DWARF
unit's line program takes pyelftools a second or more (libpython's ``ceval.c``),
and a process told to leave (SIGTERM, SIGHUP, its terminal gone) has about two
seconds before whoever sent the signal loses patience. So the lookup runs in a
worker thread that is left behind when its time is up, and that time is cut short
the moment the process is told to leave, also while the lookup already runs. A
lookup left behind stops at its next read of the file (``symbolize.lines.cancel_on``):
running on, it held the interpreter from the session's last work (the capture's
write, the terminal's restoring: beside a busy core a second or more).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from livesym.records import FrameRecord
from livesym.symbolize.lines import cancel_on

LINES_BUDGET = 1.0  # seconds a capture's final write may spend on source lines
# Seconds the lookup may still run once the process was told to leave: what is left of
# the two seconds after the sampler detached, the capture written and the terminal back,
# on a busy machine.
HURRIED_LINES = 0.3
JOIN_STEP = 0.02  # seconds between two looks at a deadline that may have moved


class LinesBudget:
    """When a lookup that started at ``started`` must end: LINES_BUDGET after it began,
    or HURRIED_LINES after ``hurry``, whichever is first. ``hurry`` may be called from
    a signal handler or another thread, before or during a lookup."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock  # every deadline is on it (tests inject one)
        self._hurried: float | None = None

    def hurry(self) -> None:
        """The process was told to leave: from now on, lines get HURRIED_LINES at most."""
        if self._hurried is None:
            self._hurried = self.clock()

    @property
    def hurried(self) -> bool:
        return self._hurried is not None

    def until(self, started: float) -> float:
        end = started + LINES_BUDGET
        hurried = self._hurried
        return end if hurried is None else min(end, hurried + HURRIED_LINES)


class LinesOf(Protocol):
    def with_line(self, record: FrameRecord) -> FrameRecord: ...


def lines_within(
    frames: list[FrameRecord], side_of: Callable[[FrameRecord], LinesOf], budget: LinesBudget
) -> list[FrameRecord]:
    """``frames`` with their source lines where found within ``budget``, by a worker
    thread: a frame not reached by then keeps none, and a lookup under way then is
    left to finish alone (its result unused)."""
    clock = budget.clock
    started = clock()
    out = list(frames)
    over = threading.Event()

    def work() -> None:
        with cancel_on(over):
            for i, record in enumerate(frames):
                if clock() >= budget.until(started):
                    return
                out[i] = side_of(record).with_line(record)

    worker = threading.Thread(target=work, name="livesym-lines", daemon=True)
    worker.start()
    while worker.is_alive():
        left = budget.until(started) - clock()
        if left <= 0:
            break
        worker.join(min(left, JOIN_STEP))
    over.set()  # a lookup under way stops at its next read of the file
    return list(out)  # a copy: what the worker finds later stays out
