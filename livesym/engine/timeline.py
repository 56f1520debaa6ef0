"""The session over time, for the dashboard's timeline: samples on a CPU and periods off
it in each second, every thread's or one thread's or process's, and the marks (maps
changed, a process seen, samples lost).

Every thread's rows are counted as samples are stored (``SessionTables``); a thread's or
a process's are counted from the stored samples when first asked, and again only once
new samples came. Samples lost are put in the second the engine learnt of them from its
sampler, live; a replay has them from its capture.
"""

from __future__ import annotations

from collections.abc import Sequence

from livesym.engine.snapshot import TimelineData
from livesym.engine.tables import SessionTables
from livesym.records import MARK_EXITED, MARK_LOST, MARK_MAPS, MARK_PROCESS

# (samples stored, the tids) -> a thread's or process's rows
_Rows = tuple[list[int], list[int]]


class SessionTimeline:
    """The timeline of one session's tables."""

    def __init__(self, tables: SessionTables) -> None:
        self.tables = tables
        self._lost_seen = 0  # the sampler's lost count at the last look
        self._rows_of: tuple[tuple[int, int, tuple[int, ...]], _Rows] | None = None

    def note_lost(self, lost: int, second: int) -> None:
        """The sampler's lost count now, ``second`` seconds into the session: what it
        lost since the last look is marked there."""
        if lost > self._lost_seen:
            self.tables.count_lost(second, lost - self._lost_seen)
        self._lost_seen = lost

    def data(
        self, elapsed: float, started: float, off_cpu: bool, root: int, *,
        thread: int | None, process: int | None, between: tuple[float, float] | None,
    ) -> TimelineData:  # fmt: skip
        """The ``elapsed`` seconds since ``started``: every thread's, or the thread's or
        the process's chosen (``root``: the pid of threads whose process is not known);
        the off-CPU row where ``off_cpu`` time was collected."""
        tables = self.tables
        seconds = int(max(0.0, elapsed)) + 1
        cpu: Sequence[int]
        off: Sequence[int]
        if thread is None and process is None:
            cpu, off = tables.cpu_per_second, tables.off_per_second
            whose = ""
        else:
            tids = [thread] if thread is not None else \
                [t for t in tables.threads if tables.process_of(t, root)[0] == process]  # fmt: skip
            key = (tables.stored(), tables.folds.old, tuple(tids))  # (a fold: counted again)
            if self._rows_of is None or self._rows_of[0] != key:
                self._rows_of = (key, tables.seconds_of(tids, started))
            cpu, off = self._rows_of[1]
            whose = f"thread {thread}" if thread is not None else f"process {process}"
        return TimelineData(
            _padded(cpu, seconds), self._marks(started), between,
            _padded(off, seconds) if off_cpu else None, whose,
        )  # fmt: skip

    def _marks(self, started: float) -> tuple[tuple[float, str], ...]:
        """Each maps generation after a process's first, each process seen after the
        session began and each one seen to exit, each second samples were lost in."""
        tables = self.tables
        firsts: set[int] = set()
        marks: list[tuple[float, str]] = []
        for g in tables.generations:
            if g.pid in firsts:
                marks.append((g.time - started, MARK_MAPS))
            firsts.add(g.pid)
        marks += [(p.started - started, MARK_PROCESS) for p in tables.processes.values()
                  if p.started - started > 0.5]  # fmt: skip
        marks += [(p.ended - started, MARK_EXITED) for p in tables.processes.values()
                  if p.ended is not None]  # fmt: skip
        marks += [(float(s), MARK_LOST) for s in tables.lost_seconds]
        return tuple(sorted(marks))


def _padded(per_second: Sequence[int], n: int) -> tuple[int, ...]:
    """The first ``n`` seconds (zeros where none were counted)."""
    return tuple(per_second[:n]) + (0,) * max(0, n - len(per_second))
