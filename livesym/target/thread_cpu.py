"""Each thread's CPU time and system time since the previous look: what the kernel
accounted for it (/proc/PID/task/TID/schedstat and stat), for a sampler that
cannot see into the kernel to size its samples by (``cpu_split``).

schedstat's run time is in nanoseconds (updated at switches and scheduler ticks);
stat's user and system times in clock ticks (USER_HZ) say how that time divides.
Bounded: MAX_THREADS threads a look, each file's first 1 KiB.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from livesym.target.system_share import CLOCK_TICKS
from livesym.target.threads import STIME, UTIME, stat_fields

MAX_THREADS = 10_000  # threads read per look (a bigger process: the first ones)


class CpuTicks(NamedTuple):
    run_ns: int | None  # time on a CPU (schedstat), None where the kernel keeps none
    user: int  # clock ticks
    system: int


class ThreadTime(NamedTuple):
    on_cpu: float  # seconds on a CPU since the previous look
    system: float  # of which in the kernel


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(1024)
    except OSError:
        return None


def read_ticks(pid: int, tid: int) -> CpuTicks | None:
    """One thread's counters now; None if it is gone or its files are not as expected."""
    base = f"/proc/{pid}/task/{tid}"
    stat = _read(f"{base}/stat")
    if stat is None:
        return None
    fields = stat_fields(stat)
    if len(fields) <= STIME or not (fields[UTIME].isdigit() and fields[STIME].isdigit()):
        return None
    sched = (_read(f"{base}/schedstat") or b"").split()
    run_ns = int(sched[0]) if sched and sched[0].isdigit() and sched[0] != b"0" else None
    return CpuTicks(run_ns, int(fields[UTIME]), int(fields[STIME]))


def _tids(pid: int) -> list[int]:
    try:
        names = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())[:MAX_THREADS]


class ThreadCpu:
    """One process's threads' CPU time between looks."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._last: dict[int, CpuTicks] = {}
        self._at: float | None = None

    def look(self) -> tuple[float, dict[int, ThreadTime]]:
        """Seconds since the previous look and each thread's time in them; the first
        look only starts the count (no threads, 0 seconds). A thread new since the
        previous look counts from 0: it started within the span."""
        now = time.monotonic()
        ticks = {tid: t for tid in _tids(self.pid) if (t := read_ticks(self.pid, tid)) is not None}
        last, at = self._last, self._at
        self._last, self._at = ticks, now
        if at is None:
            return 0.0, {}
        return now - at, {tid: _between(last.get(tid), t) for tid, t in ticks.items()}


def _between(before: CpuTicks | None, after: CpuTicks) -> ThreadTime:
    zero = CpuTicks(0, 0, 0)
    was = before or zero
    user, system = max(after.user - was.user, 0), max(after.system - was.system, 0)
    if after.run_ns is not None and was.run_ns is not None:
        on_cpu = max(after.run_ns - was.run_ns, 0) / 1e9
    else:  # no schedstat: the ticks alone
        on_cpu = (user + system) / CLOCK_TICKS
    share = system / (user + system) if user + system else 0.0
    return ThreadTime(on_cpu, on_cpu * share)
