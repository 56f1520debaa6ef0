"""The live side of a session: a running target, observed while it is sampled.

``LiveSide`` owns what observing a process takes beyond sampling it: the maps
watcher and the address resolver (ELF images, symbol tables), the target's
CPU/RSS/thread readings and the kernel time estimated from its system time, the
watch on how often a stopping sampler stops it, and source lines looked up on
request. ``resolve`` runs in the engine's worker thread: the maps re-read when
asked, debug files that arrived taken in, then each sample handed to
``frames.SampleFrames``, which turns it into frame and stack ids in the session's
tables against the maps generation current when the sample was taken.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from livesym.engine.lines import LinesBudget, lines_within
from livesym.engine.snapshot import Source
from livesym.engine.tables import SessionTables
from livesym.frames.sample_frames import SampleFrames
from livesym.records import (
    KIND_PYTHON,
    FrameRecord,
    KernelMode,
    KernelSeen,
    ProcessStat,
)
from livesym.sampling.base import Sample, Sampler, SamplerEnd
from livesym.sampling.kernel_estimate import Carry, estimated_samples
from livesym.symbolize.kernel import KernelSymbols, shared_symbols
from livesym.symbolize.objects import ObjectCache
from livesym.symbolize.process import cache_for
from livesym.symbolize.resolver import AddressResolver
from livesym.target.maps_watcher import MappingEvent, MapsWatcher
from livesym.target.process import TargetProcess, page_size
from livesym.target.stats import StatsPoller, target_info
from livesym.target.stop_share import StopShare
from livesym.target.system_time import SystemTime

STATS_PERIOD = 1.0  # seconds between readings of the target's CPU, RSS and threads

Line = tuple[str, int] | None


@dataclass
class Shared:
    """What the sides of one session's processes share: loaded objects (one library
    parsed once, whichever process maps it), the kernel's symbols, and the counter that
    numbers maps generations (a number names one generation of one process)."""

    cache: ObjectCache
    kernel: KernelSymbols = dataclasses.field(default_factory=shared_symbols)
    generations: Iterator[int] = dataclasses.field(default_factory=lambda: itertools.count(1))


class LiveSide:
    """One running target, observed while ``sampler`` samples it."""

    source: Source = "live"

    def __init__(
        self,
        target: TargetProcess,
        sampler: Sampler,
        tables: SessionTables,
        clock: Callable[[], float] = time.monotonic,
        shared: Shared | None = None,
        parent: int = 0,
    ) -> None:
        if shared is None:  # a live session never waits for a server: background fetches
            shared = Shared(cache_for(target, background=True))
        self.target = target
        self.watcher = MapsWatcher(target, clock, numbers=shared.generations)
        cache = shared.cache
        self._fetches = cache.search.background
        self.resolver = AddressResolver(target, self.watcher, cache)
        self._renamed = False  # frames renamed since the hub last asked
        self.info = target_info(target.pid, target.command_line())
        tables.add_process_record(self.info.record(parent, clock()))
        self._sampler = sampler
        self._tables = tables
        self._stats = StatsPoller(target.pid)
        self._last_stats = float("-inf")
        # The process's last CPU/RSS reading; kept in the tables unless a session of
        # several processes keeps their sum instead (``keep_readings`` False).
        self.reading: ProcessStat | None = None
        self.keep_readings = True
        self.gone = False  # the process exited: its maps are no longer read
        self._stops = StopShare(target.pid, sampler.held) if sampler.stops_target else None
        # The resolver serves one thread at a time: the symbolizing worker, or a
        # source-line question from the dashboard (asked off the event loop).
        self._lock = threading.Lock()
        self._lines: dict[int, Line] = {}  # frame id -> source line
        # (object id, ELF vaddr) -> source line: one address is one frame per generation
        # that mapped it, and a capture's final write looks each up once, not per frame.
        self._object_lines: dict[tuple[int, int], Line] = {}
        self._kernel = shared.kernel  # read in prepare where kernel mode is sampled
        self._system = SystemTime(target.pid)  # kernel time, where it is not sampled
        self._system_carry = Carry()  # fractions of estimated samples
        self.frames = SampleFrames(
            target.pid, self.resolver, tables, shared.kernel, sampler.stack_cut_short
        )
        self._page_size = page_size()

    def host(self) -> dict[str, object]:
        return {
            "hostname": platform.node(),
            "kernel": platform.release(),
            "machine": platform.machine(),
            "page_size": self._page_size,
            "cpus": os.cpu_count() or 1,
        }

    def begin(self, now: float) -> float:
        return now

    def prepare(self) -> None:
        """Open the mapped objects while the target surely runs: samples taken just
        before it exits still find their files. Start reading the kernel's symbols."""
        with self._lock:
            self.frames.note_generation(self.watcher.current)
        if self._sampler.kernel_mode.sampled:
            # Its first kernel address would read kallsyms (0.15 s) in the middle of
            # the session, holding up that batch: read it now, beside the sampling.
            self._kernel.read_soon()

    def observe(self, now: float) -> list[Sample]:
        self._watch_stops()
        if now - self._last_stats < STATS_PERIOD:
            return []
        self._last_stats = now
        stat = self.reading = self._stats.poll(now)
        if stat is not None and self.keep_readings:
            self._tables.add_process([stat])
        return self._estimated_kernel(now)

    def last_look(self, now: float) -> list[Sample]:
        return self._estimated_kernel(now)

    def _estimated_kernel(self, now: float) -> list[Sample]:
        """Where kernel mode is not sampled (and not left out on purpose), the threads'
        system time since the last look, as samples of the estimated kernel frame at
        the sampling rate: a process busy in system calls is never shown idle."""
        mode = self._sampler.kernel_mode
        if self._sampler.kernel_accounted or not self._sampler.kernel:
            return []
        if mode.seen is not KernelSeen.ESTIMATED:  # what header and capture say
            self._sampler.kernel_mode = KernelMode.of(KernelSeen.ESTIMATED, str(mode))
        rate, carry = self._sampler.rate_hz, self._system_carry
        seconds = self._system.poll()
        owed = {tid: carry.owed(tid, s * rate) for tid, s in seconds.items()}
        out = estimated_samples(self.target.pid, owed, now, now)
        self._sampler.stats.samples += len(out)  # counted as samples, as they are shown
        return out

    @property
    def stop_share(self) -> StopShare | None:
        """How the session watches the target's stops (None: its sampler stops none, or
        it has said so already)."""
        return self._stops

    def _watch_stops(self) -> None:
        """Probe whether the sampler keeps the target stopped; say so once if it does."""
        stops = self._stops
        if stops is None:
            return
        stops.probe()
        if stops.too_high():
            self._sampler.stats.error(stops.warning(self._sampler.name))
            self._stops = None  # said once

    def end_state(self, end: SamplerEnd) -> str:
        return str(end.value)

    def progress(self, counted: int) -> float | None:
        return None

    def thread_name(self, tid: int) -> str:
        name = str(tid)
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{self.target.pid}/task/{tid}/comm").read_text().strip()
        return name

    # -- resolving samples (the worker thread) -------------------------------------------

    def resolve(
        self,
        batch: list[Sample],
        refresh_maps: bool,
        events: list[MappingEvent],
        arrived: set[str] | None = None,
    ) -> list[int]:
        """(``arrived``: the build ids of debug files that arrived, when a session of
        several processes took them for all; else this side takes them.)"""
        with self._lock:
            if arrived is None:
                arrived = self.take_arrived()
            self._rename_arrived(arrived)
            self.resolver.note_mappings(events)
            if refresh_maps and not self.gone:
                try:
                    self.watcher.refresh()
                except Exception as e:
                    self.gone = not self.target.alive()
                    if not self.gone:  # an exited process's samples keep their last maps
                        self._sampler.stats.error(f"maps re-read failed: {e}")
            ids = self.frames.stack_ids(batch)
            if self.frames.take_named_late():
                self._renamed = True
            return ids

    # -- debug files that arrived (the worker thread) ----------------------------------

    def names_arrived(self) -> bool:
        return self._fetches is not None and self._fetches.has_arrived()

    def wait_for_fetches(self, timeout: float) -> None:
        if self._fetches is not None:
            self._fetches.wait(timeout)

    def take_renamed(self) -> bool:
        renamed, self._renamed = self._renamed, False
        return renamed

    def take_arrived(self) -> set[str]:
        """Build ids of the debug files that arrived since the last call."""
        return set(self._fetches.take_arrived()) if self._fetches is not None else set()

    def _rename_arrived(self, arrived: set[str]) -> None:
        """Frames of objects whose debug files arrived, named afresh; the source lines
        looked up before may be in those files."""
        objects = self.frames.rename(arrived)
        if objects:
            self._lines.clear()
            kept = self._object_lines.items()
            self._object_lines = {k: v for k, v in kept if k[0] not in objects}
            self._renamed = True

    # -- source lines (off the event loop) -----------------------------------------------

    def source_line(self, record: FrameRecord) -> Line:
        """Python frames and captured lines carry theirs; a native address is looked up
        in its object's DWARF line table on first request (possibly slow for a big
        object) and remembered."""
        known = record.known_line()
        if known is not None or record.kind == KIND_PYTHON:
            return known
        if record.id in self._lines:
            return self._lines[record.id]
        found = None
        if record.mapping is not None and record.symbol:
            found = self._line_of(record)
        self._lines[record.id] = found
        return found

    def _line_of(self, record: FrameRecord) -> Line:
        oid, vaddr = record.object, record.elf_vaddr
        obj = self.frames.loaded(oid)
        if obj is None or oid is None or vaddr is None:
            # Not an ELF object's frame: asked of the generation that mapped it.
            with self._lock:
                line = self.resolver.source_line(record.generation, record.vma)
            return (line.file, line.line) if line is not None else None
        key = (oid, vaddr)
        if key not in self._object_lines:
            with self._lock:
                line = self.resolver.object_line(obj, vaddr)
            self._object_lines[key] = (line.file, line.line) if line is not None else None
        return self._object_lines[key]

    def frames_with_lines(
        self, frames: list[FrameRecord], budget: LinesBudget
    ) -> list[FrameRecord]:
        """Source lines filled in where DWARF has them, within ``budget`` (a capture is
        written whole; lines are a bonus)."""
        return lines_within(frames, lambda record: self, budget)

    def with_line(self, record: FrameRecord) -> FrameRecord:
        """``record`` with its source line, when known."""
        if record.line is None and record.kind != KIND_PYTHON:
            found = self.source_line(record)
            if found is not None:
                return dataclasses.replace(record, source_file=found[0], line=found[1])
        return record
