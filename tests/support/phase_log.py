"""The log a sample target keeps of its own parts' times (``waits --times``, pywaits.py's
TIMES_FILE): a line per cycle, ``when total...``, the moment on CLOCK_MONOTONIC (the
clock of a capture's sample and session times) and running totals in seconds.

A profile is held to the program's own measure over the profile's seconds: read around
the recording instead, the window took in the profiler's start and end, when it
preempts the program most (the program's cpu_part 2.4-5.8 points above the profile's
share beside a busy core)."""

from __future__ import annotations

from bisect import bisect_left
from pathlib import Path


def read_log(path: Path) -> list[tuple[float, ...]]:
    """The log's whole lines, in order (a line being written is left out)."""
    rows = [line.split() for line in path.read_text().splitlines()]
    width = max((len(r) for r in rows), default=0)
    return [tuple(float(v) for v in r) for r in rows if len(r) == width and width >= 2]


def spent_between(log: list[tuple[float, ...]], start: float, end: float) -> list[float]:
    """Each total's growth from ``start`` to ``end``, taken between the log's lines on
    either side of each (linearly: a cycle's parts are tens of milliseconds); the
    window must lie within the log."""
    times = [row[0] for row in log]
    assert times and times[0] <= start < end <= times[-1], (times[:1], times[-1:], start, end)
    at_start, at_end = _at(log, times, start), _at(log, times, end)
    return [b - a for a, b in zip(at_start, at_end, strict=True)]


def _at(log: list[tuple[float, ...]], times: list[float], when: float) -> list[float]:
    i = bisect_left(times, when)
    if times[i] == when:
        return list(log[i][1:])
    (t0, *v0), (t1, *v1) = log[i - 1], log[i]
    share = (when - t0) / (t1 - t0)
    return [a + (b - a) * share for a, b in zip(v0, v1, strict=True)]
