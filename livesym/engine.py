"""The asyncio hub: sampler -> symbolizer -> profile -> snapshots (and captures).

The sampler feeds batches of raw samples on the event loop. Every tick the
engine takes what has arrived, symbolizes it in a worker thread (ELF loading
and symbol-table parsing never block the loop), and adds the result to the
profile, which only the loop's thread touches. ``snapshot`` is cheap and
returns immutable data for the dashboard or a one-shot report.

The session is kept as a capture is stored (docs/capture-format.md): a frame
table (one explanation record per distinct maps generation and address, or
per frame a sampler named itself), a stack table, the samples as (time,
thread, stack) in compact arrays, the maps generations with their facts, and
the target's CPU/RSS/threads over time. A replay (``Engine.for_capture``)
loads those tables from the capture and feeds its samples through the same
profile: a capture is just another sampler, and the dashboard cannot tell.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import platform
import threading
import time
from array import array
from bisect import bisect_left
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from livesym import __version__
from livesym.addr.maps import MapsEntry
from livesym.capture.reader import paused_gc
from livesym.capture.writer import PeriodicWriter, document, write_capture
from livesym.collector import collector_paused
from livesym.mapping_rows import LeafMappings, MappingKey, MappingRow, mapping_rows
from livesym.profile import Profile, ProfileView, StackSample
from livesym.records import (
    IDLE_FLAG,
    KIND_PYTHON,
    Capture,
    Frame,
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    ProcessStat,
)
from livesym.sampling.base import Sample, Sampler, SamplerEnd, ThreadState
from livesym.symbolize.explain import Explanation
from livesym.symbolize.objects import LoadedObject
from livesym.symbolize.process import MappingFacts
from livesym.symbolize.records import frame_record, mapping_record
from livesym.symbolize.resolver import AddressResolver
from livesym.target.maps_watcher import MappingEvent, MapsGeneration, MapsWatcher
from livesym.target.process import TargetProcess, page_size
from livesym.target.stats import StatsPoller, TargetInfo, target_info
from livesym.target.stop_share import StopShare

if TYPE_CHECKING:
    from livesym.capture.replay import CaptureSampler, Row

TICK = 0.1  # seconds between symbolization rounds
LINES_BUDGET = 2.0  # seconds a capture's final write may spend on source lines
MAX_SECONDS = 1 << 22  # seconds of samples-per-second kept (48 days)
MAX_VIEWS = 16  # views kept for reuse while nothing new is counted (filters toggled back)
PREFETCH_THREADS = 8  # a finished replay's busiest threads, their views made ahead
CHUNK_PAUSE = 0.02  # seconds between the chunks of a replay already delivered
REPLAY_BUDGET = 0.04  # seconds a tick may spend counting a replay's due chunks
MAPS_PERIOD = 1.0  # seconds between timed re-reads of the maps
STATS_PERIOD = 1.0  # seconds between readings of the target's CPU, RSS and threads
RATE_HISTORY = 60  # seconds of samples-per-second kept in snapshots
PROCESS_HISTORY = 120  # process readings kept in snapshots
MAX_GENERATION_RECORDS = 4096  # maps generations kept for the capture and the pane
MAX_KEPT_MAPPINGS = 2_000_000  # mappings over all kept generations (the reader takes 5M)
MAX_PROCESS_STATS = 1_000_000


NO_TARGET = TargetInfo(0, (), None, None)


class HotAddress(NamedTuple):
    """An address in a function with the samples in it; ``call``: the address of a call
    the function was making (a caller's frame), not an instruction it was executing."""

    record: FrameRecord
    samples: int
    call: bool


@dataclass(frozen=True)
class _Tables:
    """The session's tables at one moment, for a capture written from them."""

    end: float
    state: str
    times: array[float]
    tids: array[int]
    stack_of: array[int]
    flags: array[int]
    stacks: list[tuple[int, ...]]
    frames: list[FrameRecord]
    objects: list[ObjectRecord]
    generations: list[GenerationRecord]
    threads: dict[int, str]
    process: list[ProcessStat]


@dataclass(frozen=True)
class EngineSnapshot:
    """Everything a view of the session needs, frozen at one moment."""

    view: ProfileView
    samples: int
    lost: int
    errors: tuple[str, ...]
    sampler: str
    rate_hz: int
    elapsed: float
    state: str  # "live", "stopped", "target exited", "failed"; "replay" while replaying
    maps_generation: int
    target: TargetInfo = NO_TARGET
    process: tuple[ProcessStat, ...] = ()  # the latest readings, oldest first
    rate_history: tuple[int, ...] = ()  # samples per second over the last minute
    progress: float | None = None  # replay: share of the capture fed so far (0..1)
    source: str = "live"  # "live" or "replay"
    recent_window: float = 5.0  # seconds the recent view looks back


class Engine:
    """Runs one sampler on one target and keeps the profile up to date."""

    def __init__(
        self,
        target: TargetProcess | None,
        sampler: Sampler | CaptureSampler,
        clock: Callable[[], float] = time.monotonic,
        recent_window: float = 5.0,
    ) -> None:
        self.target = target
        self.sampler = sampler
        self.clock = clock
        self.watcher: MapsWatcher | None = None
        self.resolver: AddressResolver | None = None
        self.info = NO_TARGET
        self._stats: StatsPoller | None = None
        self._stops: StopShare | None = None  # how often a stopping sampler stops it
        if target is not None:
            self.watcher = MapsWatcher(target, clock)
            self.resolver = AddressResolver(target, self.watcher)
            self.info = target_info(target.pid, target.command_line())
            self._stats = StatsPoller(target.pid)
            if isinstance(sampler, Sampler) and sampler.stops_target:
                self._stops = StopShare(target.pid)
        self.profile = Profile(recent_window)
        self.state = "live"
        self.source = "live"
        self._replay: CaptureSampler | None = None
        self._pending: list[Sample] = []
        self._replayed: list[list[Row]] = []  # chunks of a replay's samples
        self._maps_hint = False
        self._mapping_events: list[MappingEvent] = []
        # The resolver serves one thread at a time: the symbolizing worker, or a
        # source-line question from the dashboard (asked off the event loop).
        self._resolver_lock = threading.Lock()
        self._lines: dict[int, tuple[str, int] | None] = {}  # frame id -> source line
        # (object id, ELF vaddr) -> source line: one address is one frame per generation
        # that mapped it, and a capture's final write looks each up once, not per frame.
        self._object_lines: dict[tuple[int, int], tuple[str, int] | None] = {}
        self._loaded: dict[int, LoadedObject] = {}  # object id -> its symbols and lines
        self._started = clock()
        self._ended: float | None = None
        self._thread_names: dict[int, str] = {}
        self._page_size = page_size()
        # The session as a capture stores it.
        self._frame_ids: dict[tuple[object, ...], int] = {}
        self._frames: list[FrameRecord] = []
        self._profile_frames: list[Frame | None] = []  # frame id -> Frame, made on first use
        self._object_ids: dict[tuple[str, str | None], int] = {}
        self._objects: list[ObjectRecord] = []
        self._stack_ids: dict[tuple[int, ...], int] = {}
        self._stacks: list[tuple[int, ...]] = []
        self._stack_frames: list[tuple[Frame, ...] | None] = []  # made on first use
        self._times = array("d")
        self._tids = array("q")
        self._stack_of = array("q")
        self._flags = array("b")
        self._generations: list[GenerationRecord] = []
        self._generation_numbers: set[int] = set()
        self._kept_mappings = 0  # mappings in self._generations, over all of them
        self._plain_mappings: dict[MapsEntry, MappingRecord] = {}  # see _mapping_record
        self._process: list[ProcessStat] = []
        self._per_second: list[int] = []
        # Since the last reset: samples per stack and per leaf frame.
        # Samples per stack for each (thread, idle): hot addresses under the view's
        # thread filter and idle choice.
        self._group_counts: dict[tuple[int, bool], dict[int, int]] = {}
        self._stack_counts: list[int] = []  # running samples per stack, all threads
        self._idle_counts: dict[int, int] = {}  # idle samples per stack, all threads
        self._first_sample = 0  # of the stored samples, the first one since the last reset
        self._leaf_counts: dict[int, int] = {}
        # Which stacks hold a function (for hot_addresses), built by _index_stacks for
        # the stacks that _stack_functions does not cover yet.
        self._function_ids: dict[Frame, int] = {}  # equal Frames of many records: one id
        self._function_of: list[int] = []  # frame record id -> function id (-1: not yet)
        self._stacks_with: list[list[int]] = []  # function id -> stacks holding it
        self._stack_functions: list[tuple[int, ...]] = []  # stack id -> function ids
        self._mapping_cache: tuple[tuple[int, int, int], tuple[MappingRow, ...]] | None = None
        self._leaf_mappings = LeafMappings()
        self._counted = 0  # samples counted since the last reset
        self._resets = 0
        self._replayed_rows = 0  # a replay's samples counted so far (resets do not matter)
        # Recent views by what they were made from: a finished session (a replay
        # above all) is asked for the same views several times a second.
        self._views: OrderedDict[tuple[object, ...], ProfileView] = OrderedDict()
        self.writer: PeriodicWriter[_Tables] | None = None

    @classmethod
    def for_capture(
        cls,
        capture: Capture,
        *,
        speed: float | None = None,
        recent_window: float = 5.0,
        wall_clock: Callable[[], float] = time.monotonic,
    ) -> Engine:
        """An engine that replays ``capture``: at ``speed`` times real time (by
        ``wall_clock``), or all at once (None). ``run`` feeds it, a chunk per tick;
        ``replay_all`` does it in one go without an event loop."""
        from livesym.capture.replay import CaptureSampler

        sampler = CaptureSampler(capture, speed, wall_clock)
        engine = cls(None, sampler, sampler.clock, recent_window)
        engine.source = "replay"
        engine.state = "replay"
        engine._replay = sampler
        engine.info = TargetInfo.from_json(capture.target)
        engine._started = sampler.start
        with paused_gc():  # hundreds of thousands of records, none of them garbage
            engine._load_tables(capture)
        return engine

    def _load_tables(self, capture: Capture) -> None:
        self._objects = list(capture.objects)
        self._object_ids = {(o.path, o.build_id): o.id for o in capture.objects}
        # As they are: a replay never looks a frame up by its key, and makes each
        # Frame when a sample first needs it.
        self._frames = list(capture.frames)
        self._profile_frames = [None] * len(self._frames)
        self._function_of = [-1] * len(self._frames)
        for stack in capture.stacks:
            # Verbatim, duplicates included: the samples refer to these ids.
            self._append_stack(stack)
        self._thread_names.update(capture.threads)

    @property
    def started(self) -> float:
        return self._started

    @property
    def generations(self) -> tuple[GenerationRecord, ...]:
        """The maps generations of the session so far, with their facts."""
        return tuple(self._generations)

    def record_to(self, path: str | Path) -> None:
        """Keep a capture at ``path`` up to date while running (written off the event
        loop), and complete at the end (source lines included in the last write)."""
        self.writer = PeriodicWriter(
            path,
            self._tables,
            lambda tables: self._document(tables, lines=self._ended is not None),
            self.clock,
        )

    def write_capture(self, path: str | Path) -> None:
        """Write the session so far to ``path`` (atomically; gzip for .gz), source lines
        included."""
        write_capture(path, self.capture_document(lines=True))

    def source_line(self, record: FrameRecord) -> tuple[str, int] | None:
        """Source file and line of a frame, when known: Python frames carry theirs; a
        native address is looked up in its object's DWARF line table on first request
        (possibly slow for a big object: call it off the event loop) and remembered."""
        if record.kind == KIND_PYTHON:
            return (record.module, record.line) if record.module and record.line else None
        if record.source_file is not None and record.line is not None:
            return (record.source_file, record.line)
        if record.id in self._lines:
            return self._lines[record.id]
        found = None
        if self.resolver is not None and record.mapping is not None and record.symbol:
            found = self._line_of(self.resolver, record)
        self._lines[record.id] = found
        return found

    def _line_of(self, resolver: AddressResolver, record: FrameRecord) -> tuple[str, int] | None:
        oid, vaddr = record.object, record.elf_vaddr
        obj = self._loaded.get(oid) if oid is not None else None
        if obj is None or oid is None or vaddr is None:
            # Not an ELF object's frame: asked of the generation that mapped it.
            with self._resolver_lock:
                line = resolver.source_line(record.generation, record.vma)
            return (line.file, line.line) if line is not None else None
        key = (oid, vaddr)
        if key not in self._object_lines:
            with self._resolver_lock:
                line = resolver.object_line(obj, vaddr)
            self._object_lines[key] = (line.file, line.line) if line is not None else None
        return self._object_lines[key]

    def _frames_with_lines(self, frames: list[FrameRecord]) -> list[FrameRecord]:
        """The frame table with source lines filled in where DWARF has them, within
        LINES_BUDGET seconds (a capture is written whole; lines are a bonus)."""
        deadline = time.monotonic() + LINES_BUDGET
        out = []
        for record in frames:
            if record.line is None and record.kind != KIND_PYTHON and time.monotonic() < deadline:
                found = self.source_line(record)
                if found is not None:
                    record = dataclasses.replace(record, source_file=found[0], line=found[1])
            out.append(record)
        return out

    async def run(self, stop: asyncio.Event, duration: float | None = None) -> SamplerEnd:
        """Sample until ``stop`` is set, ``duration`` passes or the target exits."""
        if self._replay is not None:
            self._replay.begin()  # a replay's start is the capture's own
        else:
            self._started = self.clock()
            # Open the mapped objects while the target surely runs: samples taken just
            # before it exits still find their files.
            await asyncio.to_thread(self._note_current_generation)
        self._poll_stats(self._started)
        if self._replay is not None:
            task = asyncio.create_task(self._replay.run(self._replayed.append, stop))
        else:
            assert isinstance(self.sampler, Sampler)
            task = asyncio.create_task(self.sampler.run(self._pending.extend, stop, self._hint))
        last_maps = last_stats = self.clock()
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=TICK)
                now = self.clock()
                if duration is not None and now - self._started >= duration:
                    stop.set()
                refresh = self._maps_hint or now - last_maps >= MAPS_PERIOD
                if refresh:
                    self._maps_hint = False
                    last_maps = now
                self._watch_stops()
                if now - last_stats >= STATS_PERIOD:
                    last_stats = now
                    self._poll_stats(now)
                await self._drain(refresh_maps=refresh)
                if self.writer is not None:
                    if self.writer.failure is not None:
                        raise self.writer.failure  # the disk refused: end, and say so
                    self.writer.maybe_write()  # in a thread: the loop only takes the tables
            end = task.result()
            while self._replayed and not stop.is_set():
                await asyncio.sleep(CHUNK_PAUSE)  # the screen draws between chunks
                await self._drain(refresh_maps=False)
            if self._replay is not None:
                # Build the function -> stacks index now, while nobody waits, rather
                # than on the first Enter; then freeze what the replay built, or every
                # full collection walks it again (50 ms a key on a million samples).
                with paused_gc():
                    self._index_stacks()
                    self._samples_by_mapping()  # each frame's mapping, for the maps pane
                await self._prefetch_thread_views(stop)
        except BaseException:
            stop.set()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self.state = "failed"
            self._finish()
            raise
        await self._drain(refresh_maps=False)
        self.state = self._end_state(end)
        self._finish()
        return end

    async def _prefetch_thread_views(self, stop: asyncio.Event) -> None:
        """Make the views of a finished replay's busiest threads while nobody waits:
        Enter on a thread then shows its functions at once. (Each costs about 50 ms on
        a million samples; a finished replay's views never change.)"""
        for row in self.snapshot().view.threads[:PREFETCH_THREADS]:
            await asyncio.sleep(0)  # a key pressed meanwhile goes first
            if stop.is_set():
                return
            with paused_gc():  # and frozen: kept for the session, not for full collections
                self.snapshot(thread=row.tid)

    def replay_all(self) -> None:
        """Feed a whole replay at once, without an event loop (``report``, ``--instant``)."""
        assert self._replay is not None, "replay_all is for engines made by for_capture"
        self._replay.begin()
        self._generations.extend(self._replay.generations_until(self._replay.end))
        self._poll_stats(self._replay.end)
        self._count_bulk(self._replay.take_rest())
        self.state = self._end_state(SamplerEnd.STOPPED)
        self._finish()

    def _count_bulk(self, rows: list[Row]) -> None:
        """Count a whole capture's samples at once: the same counts as feeding them one
        by one, in a fraction of the time (a million samples load in about a second).

        Samples are grouped by (thread, stack, idle) and added with weights; those
        inside the recent window (before the replay's end) go in as one group each
        at their latest time, the rest outside it.
        """
        if not rows:
            return
        with paused_gc():
            self._count_rows(rows)

    def _count_rows(self, rows: list[Row]) -> None:
        start = self._started
        times, tids, sids, flags = zip(*rows, strict=True)
        self._times.extend(start + t for t in times)
        self._tids.extend(tids)
        self._stack_of.extend(sids)
        self._flags.extend(f & IDLE_FLAG for f in flags)
        self._count_seconds(Counter(int(t) for t in times).items())
        cutoff = self.clock() - start - self.profile.recent_window
        old: Counter[tuple[int, int, int]] = Counter()
        recent: dict[tuple[int, int, int], list[float]] = {}
        old.update(
            (tid, sid, f & IDLE_FLAG) for t, tid, sid, f in rows if t < cutoff
        )  # fmt: skip
        for t, tid, sid, f in rows:
            if t >= cutoff:
                entry = recent.setdefault((tid, sid, f & IDLE_FLAG), [t, 0])
                entry[0] = max(entry[0], t)
                entry[1] += 1
        self._count_stacks((tid, bool(idle), sid, n) for (tid, sid, idle), n in old.items())
        self._count_stacks(
            (tid, bool(idle), sid, int(n)) for (tid, sid, idle), (_, n) in recent.items()
        )
        frames = self._frames_of
        self.profile.add(
            (
                StackSample(start, tid, self._thread_name(tid), frames(sid), bool(idle), n)
                for (tid, sid, idle), n in old.items()
            ),
            recent=False,
        )
        self.profile.add(
            StackSample(start + t, tid, self._thread_name(tid), frames(sid), bool(idle), int(n))
            for (tid, sid, idle), (t, n) in recent.items()
        )
        self._counted += len(rows)
        self._replayed_rows += len(rows)

    def _end_state(self, end: SamplerEnd) -> str:
        if self._replay is not None and end is SamplerEnd.STOPPED:
            return self._replay.end_reason
        return {
            SamplerEnd.TARGET_EXITED: "target exited",
            SamplerEnd.STOPPED: "stopped",
            SamplerEnd.FAILED: "failed",
        }[end]

    def _finish(self) -> None:
        """Close the session: stamp its end and write the final capture (nothing lost)."""
        self._ended = self.clock()
        if self.writer is not None:
            self.writer.write()

    def reset(self) -> None:
        """Forget the samples counted so far (the capture keeps them)."""
        self.profile.reset()
        self._group_counts = {}
        self._stack_counts = [0] * len(self._stacks)
        self._idle_counts = {}
        self._first_sample = len(self._times)
        self._leaf_counts = {}
        self._counted = 0
        self._resets += 1
        self._mapping_cache = None
        self._views.clear()

    def snapshot(
        self,
        *,
        recent: bool = False,
        thread: int | None = None,
        module: str | None = None,
        include_idle: bool | None = None,
    ) -> EngineSnapshot:
        """The session now. ``include_idle`` None counts idle samples when the session
        sampled them (``--idle``): top, report and the dashboard then agree."""
        if include_idle is None:
            include_idle = self.sampler.idle
        now = self.clock()
        end = self._ended if self._ended is not None else now
        stats = self.sampler.stats
        # A finished session's recent window stays the last seconds it sampled.
        key = (recent, thread, module, include_idle, self._counted, self._resets,
               end if recent else None)  # fmt: skip
        view = self._views.get(key)
        if view is None:
            view = self.profile.view(
                recent=recent, now=end, thread=thread, module=module, include_idle=include_idle
            )
            self._views[key] = view
            if len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(key)
        second = int(max(0.0, end - self._started))
        history = self._per_second[max(0, second - RATE_HISTORY + 1) : second + 1]
        return EngineSnapshot(
            view=view,
            samples=stats.samples,
            lost=stats.lost,
            errors=tuple(stats.errors),
            sampler=self.sampler.name,
            rate_hz=self.sampler.rate_hz,
            elapsed=end - self._started,
            state=self.state,
            maps_generation=self._generations[-1].number if self._generations else 0,
            target=self.info,
            process=tuple(self._process[-PROCESS_HISTORY:]),
            rate_history=tuple(history) + (0,) * (len(history) == 0),
            progress=self._replay_progress(),
            source=self.source,
            recent_window=self.profile.recent_window,
        )

    def _replay_progress(self) -> float | None:
        """How far a replay has got: its clock, and the samples counted (an instant
        replay's clock is at the end at once, its samples arrive chunk by chunk)."""
        if self._replay is None:
            return None
        total = len(self._replay.capture.samples)
        counted = self._replayed_rows / total if total else 1.0
        return min(self._replay.progress, counted)

    def _hint(self, events: tuple[MappingEvent, ...]) -> None:
        self._maps_hint = True
        self._mapping_events.extend(events)

    def _watch_stops(self) -> None:
        """Probe whether the sampler keeps the target stopped; say so once if it does."""
        stops = self._stops
        if stops is None:
            return
        stops.probe()
        if stops.too_high():
            self.sampler.stats.error(
                f"the target was found stopped by the {self.sampler.name} sampler in "
                f"{stops.share:.0%} of looks at its threads: it runs that much slower; "
                "lower --rate, or use --sampler perf (it never stops the target)"
            )
            self._stops = None  # said once

    def _poll_stats(self, now: float) -> None:
        if self._replay is not None:
            self._process.extend(self._replay.process_until(now))  # (and at every drain)
        elif self._stats is not None and len(self._process) < MAX_PROCESS_STATS:
            stat = self._stats.poll(now)
            if stat is not None:
                self._process.append(stat)

    async def _drain(self, *, refresh_maps: bool) -> None:
        if self._replay is not None:
            # Nothing to resolve: the capture's frame and stack tables are loaded.
            self._generations.extend(self._replay.generations_until(self.clock()))
            self._process.extend(self._replay.process_until(self.clock()))
            # Every chunk that is due, within a budget: a timed replay keeps pace with
            # its clock (the sampler delivers more often than the engine ticks), and a
            # big instant replay fills the screen progressively, keys answered between.
            deadline = time.perf_counter() + REPLAY_BUDGET
            while self._replayed:
                self._count_bulk(self._replayed.pop(0))
                if time.perf_counter() >= deadline:
                    break
            return
        if not self._pending and not refresh_maps:
            return
        batch, self._pending[:] = self._pending[:], []
        events, self._mapping_events = self._mapping_events, []
        stacks = await asyncio.to_thread(self._symbolize, batch, refresh_maps, events)
        self._count(stacks)

    def _count(self, stacks: list[tuple[StackSample, int]]) -> None:
        """On the loop's thread: the profile and the per-stack counters."""
        self.profile.add(s for s, _ in stacks)
        self._count_stacks((s.tid, s.idle, stack_id, s.weight) for s, stack_id in stacks)
        self._counted += len(stacks)

    def _count_stacks(self, counts: Iterable[tuple[int, bool, int, int]]) -> None:
        """Samples per (thread, idle) and stack, and per leaf frame (hot addresses, the
        mappings pane), from (tid, idle, stack id, samples)."""
        groups = self._group_counts
        leaves = self._leaf_counts
        stacks = self._stacks
        running = self._stack_counts
        running.extend([0] * (len(stacks) - len(running)))
        idle_counts = self._idle_counts
        for tid, idle, stack_id, n in counts:
            group = groups.get((tid, idle))
            if group is None:
                group = groups[(tid, idle)] = {}
            group[stack_id] = group.get(stack_id, 0) + n
            if idle:
                idle_counts[stack_id] = idle_counts.get(stack_id, 0) + n
            else:
                running[stack_id] += n
            stack = stacks[stack_id]
            if stack:
                leaves[stack[0]] = leaves.get(stack[0], 0) + n

    def _count_seconds(self, counts: Iterable[tuple[int, int]]) -> None:
        """Samples per second of the session (the header's graph)."""
        per_second = self._per_second
        for second, n in counts:
            if 0 <= second < MAX_SECONDS:
                if len(per_second) <= second:
                    per_second.extend([0] * (second + 1 - len(per_second)))
                per_second[second] += n

    def _symbolize(
        self, batch: list[Sample], refresh_maps: bool, events: list[MappingEvent]
    ) -> list[tuple[StackSample, int]]:
        """Runs in a worker thread: maps reads, ELF loading and lookups happen here."""
        with self._resolver_lock:
            return self._symbolize_locked(batch, refresh_maps, events)

    def _symbolize_locked(
        self, batch: list[Sample], refresh_maps: bool, events: list[MappingEvent]
    ) -> list[tuple[StackSample, int]]:
        assert self.watcher is not None and self.resolver is not None
        self.resolver.note_mappings(events)
        if refresh_maps:
            try:
                self.watcher.refresh()
            except Exception as e:
                self.sampler.stats.error(f"maps re-read failed: {e}")
        self._note_generation(self.watcher.current)
        return [self._stack_sample(sample) for sample in batch]

    def _stack_sample(self, sample: Sample) -> tuple[StackSample, int]:
        if sample.thread_name is not None:
            self._thread_names[sample.tid] = sample.thread_name
        stack_id = self._intern_stack(self._frame_ids_of(sample))
        return self._keep(sample.time, sample.tid, stack_id, sample.state is ThreadState.IDLE)

    def _keep(self, when: float, tid: int, stack_id: int, idle: bool) -> tuple[StackSample, int]:
        """Store one sample as the capture does; return it as the profile takes it."""
        self._times.append(when)
        self._tids.append(tid)
        self._stack_of.append(stack_id)
        self._flags.append(IDLE_FLAG if idle else 0)
        self._count_seconds(((int(when - self._started), 1),))
        sample = StackSample(
            time=when,
            tid=tid,
            thread_name=self._thread_name(tid),
            frames=self._frames_of(stack_id),
            idle=idle,
        )
        return sample, stack_id

    def _frame_ids_of(self, sample: Sample) -> tuple[int, ...]:
        ids = []
        for depth, item in enumerate(sample.stack):
            if isinstance(item, int):
                # A caller's return address points after its call instruction, which
                # may be the first byte of the next function: look up the call itself.
                ids.append(self._address_frame_id(item if depth == 0 else item - 1, sample.time))
            else:
                ids.append(self._record_frame_id(item))
        return tuple(ids)

    def _intern_stack(self, stack: tuple[int, ...]) -> int:
        stack_id = self._stack_ids.get(stack)
        if stack_id is None:
            stack_id = self._append_stack(stack)
        return stack_id

    def _append_stack(self, stack: tuple[int, ...]) -> int:
        # Cheap: a capture brings a hundred thousand stacks, most sampled rarely.
        stack_id = len(self._stacks)
        self._stack_ids.setdefault(stack, stack_id)
        self._stacks.append(stack)
        self._stack_frames.append(None)
        return stack_id

    def _frames_of(self, stack_id: int) -> tuple[Frame, ...]:
        """The stack's profile frames; one tuple per stack, made once (the profile
        finds it again by identity)."""
        frames = self._stack_frames[stack_id]
        if frames is None:
            profile_frame = self._profile_frame
            frames = tuple([profile_frame(i) for i in self._stacks[stack_id]])
            self._stack_frames[stack_id] = frames
        return frames

    def _profile_frame(self, frame_id: int) -> Frame:
        frame = self._profile_frames[frame_id]
        if frame is None:
            frame = self._profile_frames[frame_id] = self._frames[frame_id].frame()
        return frame

    def _function_id(self, frame_id: int) -> int:
        """One id for all the records of one function (equal Frames)."""
        fn = self._function_of[frame_id]
        if fn < 0:
            frame = self._profile_frame(frame_id)
            fn = self._function_ids.setdefault(frame, len(self._function_ids))
            if fn == len(self._stacks_with):
                self._stacks_with.append([])
            self._function_of[frame_id] = fn
        return fn

    def _index_stacks(self) -> None:
        """Bring the function -> stacks index up to date (for hot_addresses)."""
        function_id = self._function_id
        stacks_with = self._stacks_with
        for stack_id in range(len(self._stack_functions), len(self._stacks)):
            functions = tuple([function_id(i) for i in self._stacks[stack_id]])
            self._stack_functions.append(functions)
            for fn in set(functions):
                stacks_with[fn].append(stack_id)

    def _address_frame_id(self, vma: int, when: float) -> int:
        assert self.resolver is not None
        generation, expl = self.resolver.resolve(vma, when)
        frame_id = self._frame_ids.get(("address", generation.number, vma))
        if (
            frame_id is not None
            and expl.symbol is not None
            and self._frames[frame_id].symbol is None
        ):
            # Named since (JIT code whose perf-map line came after its first sample):
            # samples from now on get the name, earlier ones keep what was known then.
            frame_id = None
        if frame_id is None:
            self._note_generation(generation)
            record = frame_record(
                len(self._frames), generation.number, expl, self._object_id(generation, expl)
            )
            frame_id = self._add_frame(record)
        return frame_id

    def _record_frame_id(self, record: FrameRecord) -> int:
        frame_id = self._frame_ids.get(record.key)
        if frame_id is None:
            frame_id = self._add_frame(dataclasses.replace(record, id=len(self._frames)))
        return frame_id

    def _add_frame(self, record: FrameRecord) -> int:
        self._frames.append(record)
        self._profile_frames.append(None)
        self._function_of.append(-1)
        self._frame_ids[record.key] = record.id
        return record.id

    def _note_current_generation(self) -> None:
        assert self.watcher is not None
        with self._resolver_lock:
            self._note_generation(self.watcher.current)

    def _note_generation(self, generation: MapsGeneration) -> None:
        """Keep the facts of each maps generation the session used, for the capture."""
        if generation.number in self._generation_numbers:
            return
        assert self.resolver is not None
        self._generation_numbers.add(generation.number)
        symbolizer = self.resolver.symbolizer(generation)
        records = tuple(self._mapping_record(facts) for facts in symbolizer.mappings())
        self._generations.append(GenerationRecord(generation.number, generation.taken_at, records))
        self._kept_mappings += len(records)
        # Bounded by count and by mappings in all: a target with 40,000 mappings whose
        # maps change every second would otherwise keep 40,000 more records a second
        # (and write a capture no reader takes: it refuses 5 million mappings).
        while len(self._generations) > 1 and (
            len(self._generations) > MAX_GENERATION_RECORDS
            or self._kept_mappings > MAX_KEPT_MAPPINGS
        ):
            self._kept_mappings -= len(self._generations.pop(0).mappings)

    def _mapping_record(self, facts: MappingFacts) -> MappingRecord:
        """The capture's record of one mapping. A mapping with no object behind it
        (anonymous, shared memory, heap, stack) is the same record in every generation
        that has it: made once, shared."""
        if facts.obj is not None or facts.object_path is not None:
            return mapping_record(facts, self._register_object(facts.entry.path, facts.obj))
        found = self._plain_mappings.get(facts.entry)
        if found is None:
            if len(self._plain_mappings) >= MAX_KEPT_MAPPINGS:
                self._plain_mappings.clear()
            found = self._plain_mappings[facts.entry] = mapping_record(facts, None)
        return found

    def _object_id(self, generation: MapsGeneration, expl: Explanation) -> int | None:
        if expl.mapping is None or expl.path is None:
            return None
        found = self._object_ids.get((expl.path, expl.build_id))
        if found is not None:
            return found
        assert self.resolver is not None
        return self._register_object(
            expl.path, self.resolver.symbolizer(generation).object_for(expl.mapping)
        )

    def _register_object(self, path: str, obj: LoadedObject | None) -> int | None:
        if obj is None or obj.image is None:
            return None
        image = obj.image
        key = (path, image.build_id_hex)
        found = self._object_ids.get(key)
        if found is None:
            found = self._object_ids[key] = len(self._objects)
            self._loaded[found] = obj
            self._objects.append(
                ObjectRecord(
                    id=found,
                    path=path,
                    build_id=image.build_id_hex,
                    e_type=image.e_type,
                    elf_class=image.elf_class,
                    machine=image.e_machine,
                    segments=tuple(seg.as_json() for seg in image.segments),
                    symbol_source=obj.symbol_source,
                )
            )
        return found

    def object_record(self, object_id: int) -> ObjectRecord | None:
        """The object a frame or mapping refers to, by its id."""
        return self._objects[object_id] if 0 <= object_id < len(self._objects) else None

    def hot_addresses(
        self,
        frame: Frame,
        limit: int = 10,
        *,
        recent: bool = False,
        thread: int | None = None,
        module: str | None = None,
        include_idle: bool | None = None,
    ) -> list[HotAddress]:
        """Where in ``frame`` the samples were, hottest first, with counts, of the samples
        a snapshot with the same arguments selects.

        For each sample holding ``frame``, its innermost occurrence: the executing
        instruction when the function was the leaf, else the call it was in (for
        Python functions, the line); an address seen both ways is two entries.
        Counts since the last reset.
        """
        if include_idle is None:
            include_idle = self.sampler.idle
        self._index_stacks()
        fn = self._function_ids.get(frame)
        if fn is None:
            return []
        count = self._selected_stack_counts(recent, thread, include_idle)
        found: dict[tuple[int, bool], int] = {}
        for stack_id in self._stacks_with[fn]:
            n = count(stack_id)
            if not n:
                continue
            stack = self._stacks[stack_id]
            if module is not None and (not stack or self._frames[stack[0]].module != module):
                continue  # the module filter selects by the leaf frame, as views do
            at = self._stack_functions[stack_id].index(fn)
            key = (stack[at], at > 0)
            found[key] = found.get(key, 0) + n
        ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
        return [HotAddress(self._frames[fid], n, call) for (fid, call), n in ranked[:limit]]

    def _selected_stack_counts(
        self, recent: bool, thread: int | None, include_idle: bool
    ) -> Callable[[int], int]:
        """Samples per stack id of the selected threads, idleness and window."""
        if recent:
            counted = self._recent_stack_counts(thread, include_idle)
            return lambda sid: counted.get(sid, 0)
        if thread is not None:
            running = self._group_counts.get((thread, False), {})
            idle = self._group_counts.get((thread, True), {}) if include_idle else {}
            return lambda sid: running.get(sid, 0) + idle.get(sid, 0)
        counts = self._stack_counts
        if not include_idle:
            return lambda sid: counts[sid] if sid < len(counts) else 0
        idle_counts = self._idle_counts
        return lambda sid: (counts[sid] if sid < len(counts) else 0) + idle_counts.get(sid, 0)

    def _recent_stack_counts(self, thread: int | None, include_idle: bool) -> dict[int, int]:
        end = self._ended if self._ended is not None else self.clock()
        cutoff = end - self.profile.recent_window
        times, flags, tids, stack_of = self._times, self._flags, self._tids, self._stack_of
        # Sample times come nearly in order (per-CPU buffers are read in turn):
        # start a second early, then select exactly.
        first = max(self._first_sample, bisect_left(times, cutoff - 1.0))
        out: dict[int, int] = {}
        for i in range(first, len(times)):
            if (
                times[i] >= cutoff
                and (include_idle or not flags[i])
                and (thread is None or tids[i] == thread)
            ):
                sid = stack_of[i]
                out[sid] = out.get(sid, 0) + 1
        return out

    def mappings(self) -> tuple[MappingRow, ...]:
        """Every mapping of the session with its facts and leaf samples (the maps pane)."""
        now = self.clock()
        version = (len(self._generations), self._counted, int(now))
        if self._mapping_cache is not None and self._mapping_cache[0] == version:
            return self._mapping_cache[1]
        rows = mapping_rows(self._generations, self._samples_by_mapping(), now)
        self._mapping_cache = (version, rows)
        return rows

    def _samples_by_mapping(self) -> dict[MappingKey, int]:
        return self._leaf_mappings.count(self._leaf_counts, self._frames, self._generations)

    def capture_document(self, *, lines: bool = False) -> dict[str, object]:
        """The session so far as a capture document (docs/capture-format.md); with
        ``lines``, native frames get their source file and line where DWARF has them."""
        return self._document(self._tables(), lines)

    def _tables(self) -> _Tables:
        """The session's tables now, consistent however the symbolizing worker goes on:
        it appends a sample's time, thread, stack and flags in that order, and a sample's
        stack and frames before the sample. So the flags' length counts samples whose
        every field is there, and the stacks and frames taken after it hold all they
        use. Cheap (array slices and list copies, each atomic under the GIL): this is
        all that runs on the event loop when a capture is written."""
        n = len(self._flags)
        return _Tables(
            end=self._ended if self._ended is not None else self.clock(),
            state=self.state,
            times=self._times[:n],
            tids=self._tids[:n],
            stack_of=self._stack_of[:n],
            flags=self._flags[:n],
            stacks=list(self._stacks),
            frames=list(self._frames),
            objects=list(self._objects),
            generations=list(self._generations),
            threads=dict(self._thread_names),
            process=list(self._process),
        )

    def _document(self, t: _Tables, lines: bool) -> dict[str, object]:
        """The capture document of ``t``: pure work on a snapshot, for any thread."""
        stats = self.sampler.stats
        start = self._started
        samples = [
            (when - start, tid, stack, flags)
            for when, tid, stack, flags in zip(t.times, t.tids, t.stack_of, t.flags, strict=True)
        ]
        return document(
            created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            version=__version__,
            target=self.info.as_json(),
            host=self._host(),
            sampler={
                "name": self.sampler.name,
                "rate_hz": self.sampler.rate_hz,
                "idle": self.sampler.idle,
            },
            session={
                "start": start,
                "end": t.end,
                "end_reason": t.state,
                "samples": stats.samples,
                "lost": stats.lost,
                "errors": list(stats.errors),
            },
            maps=[dataclasses.replace(g, time=g.time - start) for g in t.generations],
            objects=t.objects,
            frames=self._frames_with_lines(t.frames) if lines else t.frames,
            stacks=t.stacks,
            threads=t.threads,
            samples=samples,
            process=[dataclasses.replace(p, time=p.time - start) for p in t.process],
        )

    async def write_capture_async(self, path: str | Path) -> None:
        """``write_capture`` without holding up the event loop: only the snapshot of the
        tables is taken on it; source lines, encoding and writing run in a thread."""
        tables = self._tables()

        def write() -> None:
            with collector_paused():  # a full collection here would stall the event loop
                doc = self._document(tables, True)
            write_capture(path, doc)

        await asyncio.to_thread(write)

    def _host(self) -> dict[str, object]:
        if self._replay is not None:
            return dict(self._replay.capture.host)
        return {
            "hostname": platform.node(),
            "kernel": platform.release(),
            "machine": platform.machine(),
            "page_size": self._page_size,
            "cpus": os.cpu_count() or 1,
        }

    def _thread_name(self, tid: int) -> str:
        name = self._thread_names.get(tid)
        if name is None:
            name = str(tid)
            if self.target is not None:
                with contextlib.suppress(OSError):
                    name = Path(f"/proc/{self.target.pid}/task/{tid}/comm").read_text().strip()
            self._thread_names[tid] = name
        return name


def replay_snapshot(capture: Capture, *, recent_window: float = 5.0) -> EngineSnapshot:
    """What ``top`` would have shown at the end of the captured session."""
    engine = Engine.for_capture(capture, recent_window=recent_window)
    engine.replay_all()
    return engine.snapshot()
