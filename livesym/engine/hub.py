"""The asyncio hub: sampler -> target side -> profile -> snapshots (and captures).

The sampler feeds batches on the event loop. Every tick the hub takes what has
arrived and routes it: raw samples go to the target side, which has them turned
into frames (``frames.SampleFrames``) in a worker thread (ELF loading and
symbol-table parsing never block the loop) in the session's tables; recorded
rows (a replay's) are already resolved. Both are then counted into the profile
and the per-stack counts (``counting.Counted``), which only the loop's thread
touches. ``snapshot`` is cheap and returns immutable data for the dashboard or a
one-shot report; captures are kept and written by ``captures.SessionCaptures``.

A replay is the same loop: its sampler (``sampling.replay``) yields recorded
rows, and its side (``engine.recorded``) loads the capture's tables and
releases its maps generations and readings as the replay's clock reaches them.
The hub never asks which kind of session it runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from livesym.capture.reader import paused_gc
from livesym.capture.session import SessionFacts
from livesym.engine.captures import SessionCaptures
from livesym.engine.counting import Counted, Stored, cut_short
from livesym.engine.group import ProcessGroupSide
from livesym.engine.live import LiveSide
from livesym.engine.recorded import RecordedSide
from livesym.engine.side import TargetSide
from livesym.engine.snapshot import EngineSnapshot, Source, TimelineData
from livesym.engine.tables import SessionTables
from livesym.engine.timeline import SessionTimeline
from livesym.frames.waits import wait_state
from livesym.priority import said
from livesym.profile import HotAddress, StackSample
from livesym.profile.mapping_rows import MappingRow, MappingsPane
from livesym.records import (
    IDLE_FLAG,
    Capture,
    Frame,
    FrameRecord,
    GenerationRecord,
    ObjectRecord,
    TimeMode,
)
from livesym.sampling.base import (
    Batch,
    RecordedRows,
    Row,
    Sample,
    Sampler,
    SamplerEnd,
    ThreadState,
    on_grid,
)
from livesym.sampling.group import SamplerGroup
from livesym.sampling.replay import CaptureSampler
from livesym.symbolize.debuginfod import fetching as debuginfod_fetching
from livesym.target.maps_watcher import MappingEvent
from livesym.target.process import TargetProcess
from livesym.target.stats import TargetInfo

TICK = 0.1  # seconds between symbolization rounds
# ... where nobody needs the samples sooner (a recording; a dashboard updated once a
# second): a round costs its wake-ups whatever it brings (``Sampler.pace``; rounds of a
# tenth of a second cost a recording at 99 Hz a third of its CPU)
QUIET_TICK = 0.25
# ... and a headless recording's: a chunk a round (capture.appender.INTERVAL), each
# sample in the capture within a second of its moment (the must-hold of a kill -9 is
# 1.5 s). At 99 Hz on four busy threads its rounds at 0.25 s cost 1.13-1.27 % of a
# core, at 0.5 s 1.03-1.17 % (its chunk writers included).
RECORD_TICK = 0.5


def tick_for(refresh: float) -> float:
    """The engine's round for a dashboard updated every ``refresh`` seconds: a few
    rounds an update, no more often than TICK, no less than QUIET_TICK."""
    return min(max(TICK, refresh / 4), QUIET_TICK)


# ... for the first EARLY_SECONDS, this often: what the first samples show the sampler
# (a thread's stack deeper than its copy: Sampler.stack_cut_short) is told it soon.
EARLY_TICK = 0.02
EARLY_SECONDS = 0.3
PREFETCH_THREADS = 8  # a finished session's busiest threads, their views made ahead
CHUNK_PAUSE = 0.02  # seconds between the recorded chunks already delivered
RECORDED_BUDGET = 0.04  # seconds a tick may spend counting recorded chunks
MAPS_PERIOD = 1.0  # seconds between timed re-reads of the maps
RATE_HISTORY = 60  # seconds of samples-per-second kept in snapshots
PROCESS_HISTORY = 120  # process readings kept in snapshots


class Engine:
    """Runs one sampler on one target (or one recording) and keeps the profile up to date."""

    def __init__(
        self,
        target: TargetProcess | None,
        sampler: Sampler,
        clock: Callable[[], float] = time.monotonic,
        recent_window: float = 5.0,
    ) -> None:
        self.sampler = sampler
        self.clock = clock
        self.tables = SessionTables()
        self.side: TargetSide = _side_for(target, sampler, self.tables, clock)
        self.counted = Counted(self.tables, recent_window, self._thread_name, self._process_of)
        self.state: str = self.side.source  # "live", or "replay" until a replay ends
        self._live = self.side.source == "live"  # (a replay keeps its capture's losses)
        self.captures = SessionCaptures(
            lambda: self.tables.freeze(self._end(), self.state),
            lambda since: self.tables.increment(since, self._end(), self.state),
            lambda: session_facts(self.sampler, self.side, self._started, self.tables),
            self.side.frames_with_lines, clock,
        )  # fmt: skip
        self._pending: list[Sample] = []  # raw samples not resolved yet
        self._recorded: list[list[Row]] = []  # recorded chunks not counted yet
        self._maps_hint = False
        self._mapping_events: list[MappingEvent] = []
        self._started = clock()
        self._ended: float | None = None
        self._recorded_rows = 0  # recorded samples counted so far (resets do not matter)
        self.timelines = SessionTimeline(self.tables)
        self._mappings = MappingsPane()
        # Seconds a headless session waits at its end for debug files still being
        # fetched (--debuginfod-wait); the dashboard never waits.
        self.fetch_wait = 0.0
        self._in_place = False  # the sampler is in place: the session has its start
        self.tick = TICK  # seconds between rounds once started (a headless record: longer)

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
        sampler = CaptureSampler(capture, speed, wall_clock)
        return cls(None, sampler, sampler.clock, recent_window)

    @property
    def info(self) -> TargetInfo:
        return self.side.info

    @property
    def source(self) -> Source:
        return self.side.source

    @property
    def started(self) -> float:
        return self._started

    @property
    def generations(self) -> tuple[GenerationRecord, ...]:
        """The maps generations of the session so far, with their facts."""
        return tuple(self.tables.generations)

    # -- running -------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, duration: float | None = None) -> SamplerEnd:
        """Sample until ``stop`` is set, ``duration`` passes or the target exits."""
        prepared = _preparing(self.side)
        self._started = self.side.begin(self.clock())
        self._pending.extend(self.side.observe(self._started))
        self._in_place = not self._live
        if self._live:
            self.sampler.also_on_attached(self._now_in_place)
            self.sampler.pace(self.tick)
        task = asyncio.create_task(self.sampler.run(self._take, stop, self._hint))
        loop = asyncio.get_running_loop()
        last_maps = self.clock()
        try:
            while not task.done():
                early = self.clock() - self._started < EARLY_SECONDS
                tick = EARLY_TICK if early else self.tick
                await asyncio.wait({task}, timeout=on_grid(loop.time(), tick) - loop.time())
                now = self.clock()
                if duration is not None and now - self._started >= duration:
                    stop.set()
                self._pending.extend(self.side.observe(now))
                if not prepared.done():
                    continue
                prepared.result()  # (its failure is the session's)
                refresh = self._maps_hint or now - last_maps >= MAPS_PERIOD
                if refresh:
                    self._maps_hint = False
                    last_maps = now
                if self._live:  # (a replay has its capture's losses, and no samples aging)
                    self.timelines.note_lost(self.sampler.stats.lost, int(now - self._started))
                    self.counted.fold(now, self._started, self.captures.written())
                await self._drain(refresh_maps=refresh)
                if self._in_place:  # (chunks are on the session's clock, from its start)
                    self.captures.tick()  # a chunk in a thread; a refused one ends it
            await prepared
            end = task.result()
            self._pending.extend(self.side.last_look(self.clock()))
            while self._recorded and not stop.is_set():
                await asyncio.sleep(CHUNK_PAUSE)  # the screen draws between chunks
                await self._drain(refresh_maps=False)
            if not stop.is_set():
                await self._settle(stop)
        except BaseException:
            stop.set()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, prepared, return_exceptions=True)
            self.state = "failed"
            self._finish()
            raise
        if self.fetch_wait > 0:
            await asyncio.to_thread(self.side.wait_for_fetches, self.fetch_wait)
        await self._drain(refresh_maps=False)
        self.state = self.side.end_state(end)
        self._finish()
        return end

    def _now_in_place(self) -> None:
        """A live session starts when its sampler is in place (the 0.6 s of opening
        40,000 mappings' objects and events had no samples). Maybe in its thread."""
        self._started, self._in_place = self.clock(), True

    async def _settle(self, stop: asyncio.Event) -> None:
        """A session that ended by itself (a replay at its end, a target that exited) is
        browsed next: build the function -> stacks index and each frame's mapping now,
        while nobody waits, rather than on the first Enter, and the views of the busiest
        threads (about 50 ms each on a million samples; they never change now). Frozen
        from the collector, or every full collection walks them again."""
        with paused_gc():
            self._counted().counts.index()
            t = self.tables
            self._mappings.leaves.count(self.counted.counts.leaves, t.frames, t.generations)
        for row in self.snapshot().view.threads[:PREFETCH_THREADS]:
            await asyncio.sleep(0)  # a key pressed meanwhile goes first
            if stop.is_set():
                return
            with paused_gc():
                self.snapshot(thread=row.tid)

    def replay_all(self) -> None:
        """Take every sample at once, without an event loop: for a sampler that holds
        them all (a recording: ``report``, ``--instant``)."""
        self._started = self.side.begin(self.clock())
        self._take(self.sampler.take_all())
        self._pending.extend(self.side.observe(self.clock()))
        while self._recorded:
            self._count_recorded(self._recorded.pop(0))
        self.state = self.side.end_state(SamplerEnd.STOPPED)
        self._finish()

    def _take(self, batch: Batch) -> None:
        """The sampler's sink: raw samples wait to be resolved, recorded rows counted."""
        if isinstance(batch, RecordedRows):
            self._recorded.append(batch.rows)
        else:
            self._pending.extend(batch)

    def _hint(self, events: tuple[MappingEvent, ...]) -> None:
        self._maps_hint = True
        self._mapping_events.extend(events)

    def _finish(self) -> None:
        """Close the session: stamp its end and write the final capture (nothing lost)."""
        self._ended = self.clock()
        self.captures.finish()

    async def _drain(self, *, refresh_maps: bool) -> None:
        # Every recorded chunk that is due, within a budget: a timed replay keeps pace
        # with its clock (the sampler delivers more often than the hub ticks), and a big
        # instant replay fills the screen progressively, keys answered between.
        deadline = time.perf_counter() + RECORDED_BUDGET
        while self._recorded:
            self._count_recorded(self._recorded.pop(0))
            if time.perf_counter() >= deadline:
                break
        if not self._pending and not refresh_maps and not self.side.names_arrived():
            return
        batch, self._pending[:] = self._pending[:], []
        events, self._mapping_events = self._mapping_events, []
        stacks = await asyncio.to_thread(self._resolve, batch, refresh_maps, events)
        if self.side.take_renamed():
            # Every view counted again, this batch included (it is stored already).
            self.counted.recount(self._started, self.clock())
            return
        self.counted.add(stacks)

    # -- counting ------------------------------------------------------------------

    def _resolve(
        self, batch: list[Sample], refresh_maps: bool, events: list[MappingEvent]
    ) -> Stored:
        """In a worker thread: resolve the samples and store them as the capture does;
        return them as the profile takes them."""
        stack_ids = self.side.resolve(batch, refresh_maps, events)
        return _stored(self.tables, batch, stack_ids, self._started, self._thread_name,
                       self._process_of, not self.counted.deferred)  # fmt: skip

    def _counted(self) -> Counted:
        """``counted``, every stored sample in it (``Counted.deferred``: when asked)."""
        return self.counted.caught_up(self._started, self._end())

    def _count_recorded(self, rows: list[Row]) -> None:
        """Store and count recorded samples at once (``counting.count_rows``)."""
        if not rows:
            return
        self.tables.keep_rows(rows, self._started)
        self.counted.add_rows(rows, self._started, self.clock())
        self._recorded_rows += len(rows)

    def _process_of(self, tid: int) -> tuple[int, str]:
        """The thread's process (pid, name): the target's where unknown (captures v1-3)."""
        return self.tables.process_of(tid, self.info.pid)

    def _thread_name(self, tid: int) -> str:
        name = self.tables.threads.get(tid)
        if name is None:
            name = self.tables.threads[tid] = self.side.thread_name(tid)
        return name

    def reset(self) -> None:
        """Forget the samples counted so far (the capture keeps them)."""
        self.counted.reset()

    def snapshot(
        self,
        *,
        recent: bool = False,
        thread: int | None = None,
        module: str | None = None,
        mode: TimeMode | None = None,
        process: int | None = None,
        between: tuple[float, float] | None = None,
    ) -> EngineSnapshot:
        """The session now. ``mode`` None: the time the session was asked for (--mode), as
        top and report count. ``process``: that pid's samples; ``between``: those from
        (start, end) seconds after the session's start."""
        if mode is None:
            mode = self.sampler.mode
        end = self._end()
        # A finished session's recent window stays the last seconds it sampled.
        counted = self._counted()
        rate = self.sampler.rate_hz
        period = 1.0 / rate if rate else 0.0  # (a wait's weight is in periods: a range cuts it)
        view = counted.view(end, recent=recent, thread=thread, module=module, mode=mode,
                            process=process, between=_on_clock(between, self._started),
                            period=period)  # fmt: skip
        tables, stats = self.tables, self.sampler.stats
        second = int(max(0.0, end - self._started))
        history = tables.per_second[max(0, second - RATE_HISTORY + 1) : second + 1]
        return EngineSnapshot(
            view=view,
            samples=stats.samples,
            lost=stats.lost,
            errors=tuple(stats.errors),
            sampler=self.sampler.name,
            rate_hz=self.sampler.rate_hz,
            kernel=self.sampler.kernel_mode,
            scope=self.sampler.scope,
            priority=said() if self._live else "",
            fetching=len(debuginfod_fetching()),
            elapsed=end - self._started,
            state=self.state,
            maps_generation=tables.generations[-1].number if tables.generations else 0,
            target=self.info,
            process=tuple(tables.process[-PROCESS_HISTORY:]),
            rate_history=tuple(history) + (0,) * (len(history) == 0),
            progress=self.side.progress(self._recorded_rows),
            source=self.source,
            recent_window=counted.profile.recent_window,
            stacks_cut=counted.cut,
            stacks_counted=counted.samples,
            processes=dict(tables.processes),
            selected_process=process,
            processes_left_out=(
                self.sampler.left_out if isinstance(self.sampler, SamplerGroup) else 0
            ),
            mode=mode,
            off_cpu_collected=self.sampler.idle,
            off_cpu=self.sampler.off_cpu_source,
            timeline=self.timeline(thread=thread, process=process, between=between),
        )

    def _end(self) -> float:
        return self._ended if self._ended is not None else self.clock()

    def timeline(
        self, *, thread: int | None = None, process: int | None = None,
        between: tuple[float, float] | None = None,
    ) -> TimelineData:  # fmt: skip
        """The session over time until now: every thread's, or the thread's or the
        process's chosen (``engine.timeline``)."""
        return self.timelines.data(self._end() - self._started, self._started,
                                   self.sampler.idle, self.info.pid, thread=thread,
                                   process=process, between=between)  # fmt: skip

    def hot_addresses(
        self, frame: Frame, limit: int = 10, *, recent: bool = False, thread: int | None = None,
        module: str | None = None, mode: TimeMode | None = None, process: int | None = None,
        between: tuple[float, float] | None = None,
    ) -> list[HotAddress]:  # fmt: skip
        """Where in ``frame`` the samples a snapshot with the same arguments selects were,
        hottest first, with counts."""
        if mode is None:
            mode = self.sampler.mode
        among = None if process is None else self.tables.threads_of(process, self.info.pid)
        span = None
        if recent or between is not None:
            span = _span(self._end() - self.counted.profile.recent_window, between,
                         self._started)  # fmt: skip
        return self._counted().hot_addresses(frame, limit, span, thread, mode, among, module)

    def object_record(self, object_id: int) -> ObjectRecord | None:
        """The object a frame or mapping refers to, by its id."""
        return self.tables.object_record(object_id)

    def source_line(self, record: FrameRecord) -> tuple[str, int] | None:
        """A frame's source file and line, if known (slow once for a big object)."""
        return self.side.source_line(record)

    def mappings(self, process: int | None = None) -> tuple[MappingRow, ...]:
        """Every mapping of one process of the session (the target's unless ``process``
        says which) with its facts and leaf samples (the maps pane)."""
        root, t, c = self.info.pid, self.tables, self._counted()
        pid = process if process is not None else root
        return self._mappings.rows(pid, root, c.counts.leaves, t.frames, t.generations,
                                   (c.samples, c.epoch), self.clock())  # fmt: skip

    # -- captures (recording, writing, documents: ``captures``) ---------------------

    async def write_capture_async(self, path: str | Path) -> None:
        """``write_capture`` without holding up the event loop."""
        await self.captures.write_async(path)

    def hurry(self) -> None:
        """The process was told to leave (SIGTERM, SIGHUP, its terminal gone): the last
        write keeps the source lines it finds within HURRIED_LINES. Signal-safe."""
        self.captures.budget.hurry()


def _preparing(side: TargetSide) -> asyncio.Future[None]:
    """The side's preparing (the target's objects opened) beside the sampler's start, not
    before it: on a box on fire that was 0.4-0.5 s of a session's 3 s before its first
    sample. The samples wait in the engine until it is done."""
    return asyncio.ensure_future(asyncio.to_thread(side.prepare))


def _stored(
    tables: SessionTables, batch: list[Sample], stack_ids: list[int], started: float,
    thread_name: Callable[[int], str], process_of: Callable[[int], tuple[int, str]],
    profiled: bool,
) -> Stored:  # fmt: skip
    """Resolved samples stored as the capture keeps them, and made into the profile's
    where it counts them as they come (``profiled``)."""
    out = []
    weight = cut = 0
    for sample, stack_id in zip(batch, stack_ids, strict=True):
        tables.keep_thread(sample.tid, sample.pid, sample.thread_name)
        name = thread_name(sample.tid)  # (read from /proc now, while the thread is there)
        frames = tables.frames_of(stack_id)
        flags, w = _flags(sample, frames), sample.weight
        tables.keep(sample.time, sample.tid, stack_id, flags, w, started)
        weight += w
        if cut_short(frames):
            cut += w
        if profiled:
            stack = StackSample(
                sample.time, sample.tid, name, frames,
                bool(flags & IDLE_FLAG), w, *process_of(sample.tid), flags,
            )  # fmt: skip
            out.append((stack, stack_id))
    return Stored(out, weight, cut)


def _flags(sample: Sample, frames: tuple[Frame, ...]) -> int:
    """A sample's flags as its capture row keeps them: on the CPU or off it, and why
    (``frames.waits.wait_state``: disk where a sleep waits in io_schedule)."""
    state = sample.state
    if state is ThreadState.RUNNING:
        return 0
    return wait_state(state, frames).flags


def session_facts(
    sampler: Sampler, side: TargetSide, start: float, tables: SessionTables
) -> SessionFacts:
    """What a capture says of the session beside its tables, as of now."""
    stats = sampler.stats
    return SessionFacts(
        target=side.info.as_json(),
        host=side.host(),
        sampler={
            "name": sampler.name,
            "rate_hz": sampler.rate_hz,
            "idle": sampler.idle,
            "mode": sampler.mode.value,
            "off_cpu": sampler.off_cpu_source,
            "kernel": str(sampler.kernel_mode),
            "scope": sampler.scope,
        },
        start=start,
        samples=stats.samples,
        lost=stats.lost,
        errors=tuple(stats.errors),
        lost_at=tuple(sorted(tables.lost_seconds.items())),
    )


def _side_for(
    target: TargetProcess | None,
    sampler: Sampler,
    tables: SessionTables,
    clock: Callable[[], float],
) -> TargetSide:
    """A running target's side (its processes' when the sampler samples several), or a
    recording's when the sampler replays one."""
    if target is not None and isinstance(sampler, SamplerGroup):
        dirs = target.debug_dirs

        def make_target(pid: int) -> TargetProcess:
            return target if pid == target.pid else TargetProcess(pid, debug_dirs=dirs)

        return ProcessGroupSide(sampler, make_target, tables, clock)
    if target is not None:
        return LiveSide(target, sampler, tables, clock)
    if isinstance(sampler, CaptureSampler):
        return RecordedSide(sampler, tables)
    raise ValueError("an engine needs a target process, or a sampler that replays a capture")


def _span(
    cutoff: float, between: tuple[float, float] | None, started: float
) -> tuple[float, float]:
    """The moments, on the session's clock, a range holds (from ``started``); without one,
    from ``cutoff`` on (the recent window)."""
    on = _on_clock(between, started)
    return (cutoff, float("inf")) if on is None else on


def _on_clock(between: tuple[float, float] | None, started: float) -> tuple[float, float] | None:
    """A range of seconds from the session's start, on the session's clock."""
    return None if between is None else (started + between[0], started + between[1])


def replay_snapshot(
    capture: Capture,
    *,
    recent_window: float = 5.0,
    process: int | None = None,
    mode: TimeMode | None = None,
) -> EngineSnapshot:
    """What ``top`` would have shown at the end of the captured session (of ``process``
    alone, where given; of ``mode``'s time, else the session's)."""
    engine = Engine.for_capture(capture, recent_window=recent_window)
    engine.replay_all()
    return engine.snapshot(process=process, mode=mode)
