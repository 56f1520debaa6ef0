"""The target's readings (its CPU, RSS and threads, once a second), kept as machine words.

A recording left on reads its target once a second for as long as it runs. Kept as
``ProcessStat`` objects a reading cost about 160 bytes (the object, its floats and its
int, the list's pointer): 14 MB a day. Here they are four columns of 8 bytes, 2.8 MB a
day, and read back as ``ProcessStat`` where they are read: a chunk's new ones, the
header's last, a whole capture's all.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from typing import overload

from livesym.records import ProcessStat


class Readings:
    """``ProcessStat``s in order, as a list of them reads (``len``, index, slice,
    iteration) and grows (``extend``)."""

    def __init__(self) -> None:
        self._time = array("d")
        self._cpu = array("d")
        self._rss = array("q")
        self._threads = array("q")

    def __len__(self) -> int:
        return len(self._threads)  # (appended last: a reading is whole when counted)

    def extend(self, stats: Iterable[ProcessStat]) -> None:
        for stat in stats:
            self._time.append(stat.time)
            self._cpu.append(stat.cpu_pct)
            self._rss.append(max(0, min(stat.rss, 1 << 62)))
            self._threads.append(max(0, min(stat.threads, 1 << 62)))

    @overload
    def __getitem__(self, index: int) -> ProcessStat: ...

    @overload
    def __getitem__(self, index: slice) -> list[ProcessStat]: ...

    def __getitem__(self, index: int | slice) -> ProcessStat | list[ProcessStat]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("reading index out of range")
        return self._at(index)

    def __iter__(self) -> Iterator[ProcessStat]:
        return (self._at(i) for i in range(len(self)))

    def _at(self, i: int) -> ProcessStat:
        return ProcessStat(self._time[i], self._cpu[i], self._rss[i], self._threads[i])
