"""The live side of a session of several processes: one ``LiveSide`` per process.

Every process of a name, a command with its children, a server's workers: each
process has its own maps generations, conversions and readings (the same library
sits at a different base in each), so each gets a ``LiveSide`` of its own. They
share the session's tables, the loaded objects (a library is parsed once for all
the processes that map it), the kernel's symbols, and one counter of maps
generations, so a frame's key names one generation of one process.

``ProcessGroupSide`` routes: a sample to its process's side, a maps hint to its
process's side, a frame's source line to the side that holds its generation. A
process found while the session runs (``SamplerGroup.add``) gets its side before
its sampler starts. The header's CPU and memory are the sum over the processes.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from livesym.engine.lines import LinesBudget, lines_within
from livesym.engine.live import STATS_PERIOD, LiveSide, Shared
from livesym.engine.snapshot import Source
from livesym.engine.tables import SessionTables
from livesym.records import KIND_PYTHON, FrameRecord, ProcessStat, StackEnd, truncated_frame_record
from livesym.sampling.base import Sample, Sampler, SamplerEnd
from livesym.sampling.group import SamplerGroup
from livesym.symbolize.process import cache_for
from livesym.target.maps_watcher import MappingEvent
from livesym.target.process import TargetProcess
from livesym.target.stats import TargetInfo

# A sample of a process whose side could not be made (it exited before its maps
# were read): shown as a stack that could not be unwound, never dropped.
NO_MAPS = truncated_frame_record(
    StackEnd.UNREADABLE, "the process exited before livesym read its maps"
)


class ProcessGroupSide:
    """The processes ``group`` samples, each observed by its own ``LiveSide``."""

    source: Source = "live"

    def __init__(
        self,
        group: SamplerGroup,
        make_target: Callable[[int], TargetProcess],
        tables: SessionTables,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make_target = make_target
        self._tables = tables
        self._clock = clock
        self._sides: dict[int, LiveSide] = {}
        self._unprepared: list[LiveSide] = []
        self._made = threading.Lock()  # sides are made on the loop's thread; read anywhere
        self._shared: Shared | None = None
        self._group = group
        self._exits_seen = 0  # of group.exited: those already in the tables
        for pid, sampler in list(group.members.items()):
            try:
                self._add(pid, sampler, group.parents.get(pid, 0))
            except Exception as e:
                if pid == group.root.pid:
                    raise  # the session's first process: nothing to profile without it
                group.drop(pid, e)  # one of a name that exited meanwhile
        group.on_member = self._add
        self._root = self._sides[group.root.pid]
        self.info: TargetInfo = self._root.info
        self._last_stats = float("-inf")

    def _add(self, pid: int, sampler: Sampler, parent: int) -> None:
        """A side for a process that joins (raises when it is gone already)."""
        target = self._make_target(pid)
        if self._shared is None:
            self._shared = Shared(cache_for(target, background=True))
        side = LiveSide(target, sampler, self._tables, self._clock, self._shared, parent)
        side.keep_readings = False  # the session keeps the sum of its processes'
        with self._made:
            self._sides[pid] = side
            self._unprepared.append(side)

    def host(self) -> dict[str, object]:
        return self._root.host()

    def begin(self, now: float) -> float:
        return now

    def prepare(self) -> None:
        self._prepare_new()

    def _prepare_new(self) -> None:
        with self._made:
            todo, self._unprepared = self._unprepared, []
        for side in todo:
            side.prepare()

    def observe(self, now: float) -> list[Sample]:
        out: list[Sample] = []
        for side in list(self._sides.values()):
            out += side.observe(now)
        self._note_exits(now)
        if now - self._last_stats >= STATS_PERIOD:
            self._last_stats = now
            self._keep_sum(now)
        return out

    def _note_exits(self, now: float) -> None:
        """The processes whose samplers ended as they exited since the last look, each
        at its moment (the group's clock is the monotonic one: put on the session's)."""
        exited = self._group.exited
        if len(exited) > self._exits_seen:
            lag = time.monotonic() - now
            for pid, when in list(exited.items())[self._exits_seen :]:
                self._tables.process_ended(pid, when - lag)
            self._exits_seen = len(exited)

    def last_look(self, now: float) -> list[Sample]:
        out: list[Sample] = []
        for side in list(self._sides.values()):
            out += side.last_look(now)
        self._note_exits(now)
        return out

    def _keep_sum(self, now: float) -> None:
        """One reading for the header: the processes' CPU, memory and threads summed
        (readings older than two periods are of processes that exited)."""
        fresh = [
            r
            for side in self._sides.values()
            if (r := side.reading) is not None and now - r.time < 2 * STATS_PERIOD
        ]
        if fresh:
            self._tables.add_process(
                [ProcessStat(now, sum(r.cpu_pct for r in fresh), sum(r.rss for r in fresh),
                             sum(r.threads for r in fresh))]
            )  # fmt: skip

    def resolve(
        self, batch: list[Sample], refresh_maps: bool, events: list[MappingEvent]
    ) -> list[int]:
        """Each process's samples by its side, in the batch's order."""
        self._prepare_new()
        arrived = self._root.take_arrived()
        by_pid: dict[int, list[int]] = {}
        for i, sample in enumerate(batch):
            by_pid.setdefault(sample.pid, []).append(i)
        events_of: dict[int, list[MappingEvent]] = {}
        for event in events:
            events_of.setdefault(event.pid, []).append(event)
        ids = [0] * len(batch)
        for pid, side in list(self._sides.items()):
            positions = by_pid.pop(pid, [])
            if not (positions or refresh_maps or events_of.get(pid) or arrived):
                continue
            got = side.resolve([batch[i] for i in positions], refresh_maps,
                               events_of.get(pid, []), arrived)  # fmt: skip
            for i, stack_id in zip(positions, got, strict=True):
                ids[i] = stack_id
        if by_pid:  # samples of processes without a side
            stack_id = self._tables.intern_stack((self._no_maps_frame(),))
            for positions in by_pid.values():
                for i in positions:
                    ids[i] = stack_id
        return ids

    def _no_maps_frame(self) -> int:
        tables = self._tables
        found = tables.frame_id(NO_MAPS.key)
        if found is None:
            found = tables.add_frame(dataclasses.replace(NO_MAPS, id=len(tables.frames)))
        return found

    def names_arrived(self) -> bool:
        return self._root.names_arrived()  # the fetches are the session's, shared

    def take_renamed(self) -> bool:
        renamed = [side.take_renamed() for side in list(self._sides.values())]
        return any(renamed)

    def wait_for_fetches(self, timeout: float) -> None:
        self._root.wait_for_fetches(timeout)

    def end_state(self, end: SamplerEnd) -> str:
        return str(end.value)

    def progress(self, counted: int) -> float | None:
        return None

    def thread_name(self, tid: int) -> str:
        side = self._sides.get(self._tables.thread_pids.get(tid, 0), self._root)
        return side.thread_name(tid)

    def _owners(self) -> dict[int, LiveSide]:
        """Each held maps generation's side, by its number."""
        return {g.number: side for side in list(self._sides.values())
                for g in side.watcher.history}  # fmt: skip

    def source_line(self, record: FrameRecord) -> tuple[str, int] | None:
        known = record.known_line()
        if known is not None or record.kind == KIND_PYTHON:
            return known
        return self._owners().get(record.generation, self._root).source_line(record)

    def frames_with_lines(
        self, frames: list[FrameRecord], budget: LinesBudget
    ) -> list[FrameRecord]:
        """(Frames a sampler named need no maps: any side fills them as they are.)"""
        owners = self._owners()
        return lines_within(frames, lambda f: owners.get(f.generation, self._root), budget)
