"""Numbered generations of a process's maps, so each sample meets the maps of its time.

A target loads and unloads libraries while it runs: a library unloaded and
another loaded at the same address must never take over the first one's
samples. The watcher keeps a bounded history of distinct maps snapshots, each
numbered and stamped with the time it was read; a sample is symbolized with
the generation current when it was taken (``at``). Re-reads happen on a timer,
on mmap hints from the sampler, and when a sample falls outside every known
mapping -- but never more often than ``min_interval``.
"""

from __future__ import annotations

import itertools
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from livesym.addr.maps import MapsEntry, MapsSnapshot, parse_maps_reusing
from livesym.target.process import TargetProcess

MAX_GENERATIONS = 256


@dataclass(frozen=True, slots=True)
class MappingEvent:
    """A mapping the target created, when the sampler saw it happen (perf mmap records).

    ``time`` is on CLOCK_MONOTONIC, like ``Sample.time``: a mapping found in
    the maps at an address is known to postdate every sample taken before it.
    """

    time: float
    start: int
    end: int
    pgoff: int
    path: str
    pid: int = 0  # whose mapping, in a session of several processes (0: the one target)


@dataclass(frozen=True)
class MapsGeneration:
    number: int
    taken_at: float  # seconds on the watcher's clock (CLOCK_MONOTONIC by default)
    snapshot: MapsSnapshot


class MapsWatcher:
    """Reads /proc/<pid>/maps into numbered generations; only changes make a new one."""

    def __init__(
        self,
        target: TargetProcess,
        clock: Callable[[], float] = time.monotonic,
        min_interval: float = 0.02,
        numbers: Iterator[int] | None = None,
    ) -> None:
        self._target = target
        # Generation numbers: a session watching several processes hands every watcher
        # the same counter, so a number names one generation of one process.
        self._numbers = numbers if numbers is not None else itertools.count(1)
        self._clock = clock
        self._min_interval = min_interval
        self._history: list[MapsGeneration] = []
        self._times: list[float] = []  # taken_at of each kept generation, for ``at``
        self._last_read = float("-inf")
        self.reads = 0
        self.read_cost = 0.0  # seconds the last read took, the kernel's part included
        self._text: str | None = None  # the last text read, and its parsed lines
        self._lines: dict[str, MapsEntry] = {}
        self.refresh(force=True)

    @property
    def current(self) -> MapsGeneration:
        return self._history[-1]

    @property
    def history(self) -> tuple[MapsGeneration, ...]:
        return tuple(self._history)

    def refresh(self, force: bool = False) -> MapsGeneration:
        """Re-read the maps (rate-limited unless forced); return the current generation.

        Raises TargetError when the process is gone.
        """
        now = self._clock()
        if not force and now - self._last_read < self._min_interval:
            return self.current
        started = time.perf_counter()
        text = self._target.read_maps_text()
        self._last_read = now
        self.reads += 1
        if self._history and text == self._text:
            self.read_cost = time.perf_counter() - started
            return self.current  # the common case: compared whole, nothing parsed
        snapshot, self._lines = parse_maps_reusing(text, self._lines)
        self._text = text
        self.read_cost = time.perf_counter() - started
        if not snapshot.entries and not self._target.alive():
            raise self._target.exited_error()
        if not snapshot.entries and self._history:
            return self.current  # an exiting process has let its address space go: no change
        if self._history and self._history[-1].snapshot.entries == snapshot.entries:
            return self.current
        self._history.append(MapsGeneration(next(self._numbers), now, snapshot))
        self._times.append(now)
        if len(self._history) > MAX_GENERATIONS:
            del self._history[0]
            del self._times[0]
        return self.current

    def at(self, when: float) -> MapsGeneration:
        """The generation current at ``when``: the last one read at or before it
        (the oldest kept one for times before all of them)."""
        i = bisect_right(self._times, when) - 1
        return self._history[max(i, 0)]

    def after(self, generation: MapsGeneration) -> MapsGeneration | None:
        """The generation read next after ``generation``, if any."""
        for g in self._history:
            if g.number > generation.number:
                return g
        return None
