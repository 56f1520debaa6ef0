"""The asyncio hub: sampler -> symbolizer -> profile -> snapshots (and captures).

The sampler feeds batches of raw samples on the event loop. Every tick the
engine takes what has arrived, symbolizes it in a worker thread (ELF loading
and symbol-table parsing never block the loop), and adds the result to the
profile, which only the loop's thread touches. ``snapshot`` is cheap and
returns immutable data for the dashboard or a one-shot report.

The session is kept as a capture is stored (docs/capture-format.md): a frame
table (one explanation record per distinct maps generation and address), a
stack table, and the samples as (time, thread, stack) in compact arrays. A
capture and a live session therefore rebuild the same profile the same way.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from livesym import __version__
from livesym.capture.model import FrameRecord, ObjectRecord, frame_record
from livesym.capture.writer import PeriodicWriter, document
from livesym.profile import Frame, Profile, ProfileView, StackSample
from livesym.sampling.base import Sample, Sampler, SamplerEnd, ThreadState
from livesym.symbolize.explain import Explanation
from livesym.symbolize.resolver import AddressResolver
from livesym.target.maps_watcher import MapsGeneration, MapsWatcher
from livesym.target.process import TargetProcess, page_size

TICK = 0.1  # seconds between symbolization rounds
MAPS_PERIOD = 1.0  # seconds between timed re-reads of the maps


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
    state: str  # "live", "target exited", "stopped", "failed"
    maps_generation: int


class Engine:
    """Runs one sampler on one target and keeps the profile up to date."""

    def __init__(
        self,
        target: TargetProcess,
        sampler: Sampler,
        clock: Callable[[], float] = time.monotonic,
        recent_window: float = 5.0,
    ) -> None:
        self.target = target
        self.sampler = sampler
        self.clock = clock
        self.watcher = MapsWatcher(target, clock)
        self.resolver = AddressResolver(target, self.watcher)
        self.profile = Profile(recent_window)
        self.state = "live"
        self._pending: list[Sample] = []
        self._maps_hint = False
        self._started = clock()
        self._ended: float | None = None
        self._thread_names: dict[int, str] = {}
        # The session as a capture stores it.
        self._frame_ids: dict[tuple[int, int], int] = {}
        self._frames: list[FrameRecord] = []
        self._profile_frames: list[Frame] = []
        self._object_ids: dict[tuple[str, str | None], int] = {}
        self._objects: list[ObjectRecord] = []
        self._stack_ids: dict[tuple[int, ...], int] = {}
        self._stacks: list[tuple[int, ...]] = []
        self._times = array("d")
        self._tids = array("q")
        self._stack_of = array("q")
        self._flags = array("b")
        self.writer: PeriodicWriter | None = None

    @property
    def started(self) -> float:
        return self._started

    def record_to(self, path: str | Path) -> None:
        """Keep a capture at ``path`` up to date while running, and complete at the end."""
        self.writer = PeriodicWriter(path, self.capture_document, self.clock)

    async def run(self, stop: asyncio.Event, duration: float | None = None) -> SamplerEnd:
        """Sample until ``stop`` is set, ``duration`` passes or the target exits."""
        self._started = self.clock()
        task = asyncio.create_task(self.sampler.run(self._pending.extend, stop, self._hint))
        last_maps = self.clock()
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
                await self._drain(refresh_maps=refresh)
                if self.writer is not None:
                    self.writer.maybe_write()
            end = task.result()
        except BaseException:
            stop.set()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self.state = "failed"
            self._finish()
            raise
        await self._drain(refresh_maps=False)
        self.state = {
            SamplerEnd.TARGET_EXITED: "target exited",
            SamplerEnd.STOPPED: "stopped",
            SamplerEnd.FAILED: "failed",
        }[end]
        self._finish()
        return end

    def _finish(self) -> None:
        """Close the session: stamp its end and write the final capture (nothing lost)."""
        self._ended = self.clock()
        if self.writer is not None:
            self.writer.write()

    def snapshot(self, *, recent: bool = False) -> EngineSnapshot:
        now = self.clock()
        end = self._ended if self._ended is not None else now
        stats = self.sampler.stats
        return EngineSnapshot(
            view=self.profile.view(recent=recent, now=now),
            samples=stats.samples,
            lost=stats.lost,
            errors=tuple(stats.errors),
            sampler=self.sampler.name,
            rate_hz=self.sampler.rate_hz,
            elapsed=end - self._started,
            state=self.state,
            maps_generation=self.watcher.current.number,
        )

    def _hint(self) -> None:
        self._maps_hint = True

    async def _drain(self, *, refresh_maps: bool) -> None:
        if not self._pending and not refresh_maps:
            return
        batch, self._pending[:] = self._pending[:], []
        stacks = await asyncio.to_thread(self._symbolize, batch, refresh_maps)
        self.profile.add(stacks)

    def _symbolize(self, batch: list[Sample], refresh_maps: bool) -> list[StackSample]:
        """Runs in a worker thread: maps reads, ELF loading and lookups happen here."""
        if refresh_maps:
            try:
                self.watcher.refresh()
            except Exception as e:
                self.sampler.stats.error(f"maps re-read failed: {e}")
        return [self._stack(sample) for sample in batch]

    def _stack(self, sample: Sample) -> StackSample:
        ids = []
        for depth, ip in enumerate(sample.ips):
            # A caller's return address points after its call instruction, which
            # may be the first byte of the next function: look up the call itself.
            ids.append(self._frame_id(ip if depth == 0 else ip - 1, sample.time))
        stack = tuple(ids)
        stack_id = self._stack_ids.get(stack)
        if stack_id is None:
            stack_id = self._stack_ids[stack] = len(self._stacks)
            self._stacks.append(stack)
        idle = sample.state is ThreadState.IDLE
        self._times.append(sample.time)
        self._tids.append(sample.tid)
        self._stack_of.append(stack_id)
        self._flags.append(1 if idle else 0)
        return StackSample(
            time=sample.time,
            tid=sample.tid,
            thread_name=self._thread_name(sample.tid),
            frames=tuple(self._profile_frames[i] for i in stack),
            idle=idle,
        )

    def _frame_id(self, vma: int, when: float) -> int:
        generation, expl = self.resolver.resolve(vma, when)
        key = (generation.number, vma)
        frame_id = self._frame_ids.get(key)
        if frame_id is None:
            frame_id = self._frame_ids[key] = len(self._frames)
            record = frame_record(
                frame_id, generation.number, expl, self._object_id(generation, expl)
            )
            self._frames.append(record)
            self._profile_frames.append(record.frame())
        return frame_id

    def _object_id(self, generation: MapsGeneration, expl: Explanation) -> int | None:
        if expl.mapping is None or expl.path is None:
            return None
        key = (expl.path, expl.build_id)
        found = self._object_ids.get(key)
        if found is not None:
            return found
        obj = self.resolver.symbolizer(generation).object_for(expl.mapping)
        if obj is None or obj.image is None:
            return None
        image = obj.image
        found = self._object_ids[key] = len(self._objects)
        self._objects.append(
            ObjectRecord(
                id=found,
                path=expl.path,
                build_id=image.build_id_hex,
                e_type=image.e_type,
                elf_class=image.elf_class,
                machine=image.e_machine,
                segments=tuple(seg.as_json() for seg in image.segments),
            )
        )
        return found

    def hot_addresses(self, frame: Frame, limit: int = 10) -> list[tuple[FrameRecord, int]]:
        """The leaf addresses sampled inside ``frame``, hottest first, with counts."""
        leaf_counts: dict[int, int] = {}
        for stack_id in self._stack_of:
            stack = self._stacks[stack_id]
            if stack:
                leaf_counts[stack[0]] = leaf_counts.get(stack[0], 0) + 1
        found = [
            (self._frames[fid], n)
            for fid, n in leaf_counts.items()
            if self._profile_frames[fid] == frame
        ]
        found.sort(key=lambda item: (-item[1], item[0].vma))
        return found[:limit]

    def capture_document(self) -> dict[str, object]:
        """The session so far as a capture document (docs/capture-format.md)."""
        stats = self.sampler.stats
        start = self._started
        end = self._ended if self._ended is not None else self.clock()
        samples = [
            (t - start, tid, stack, flags)
            for t, tid, stack, flags in zip(
                self._times, self._tids, self._stack_of, self._flags, strict=True
            )
        ]
        return document(
            created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            version=__version__,
            target={
                "pid": self.target.pid,
                "cmdline": self.target.command_line(),
            },
            host={
                "hostname": platform.node(),
                "kernel": platform.release(),
                "machine": platform.machine(),
                "page_size": page_size(),
                "cpus": os.cpu_count() or 1,
            },
            sampler={
                "name": self.sampler.name,
                "rate_hz": self.sampler.rate_hz,
                "idle": self.sampler.idle,
            },
            session={
                "start": start,
                "end": end,
                "end_reason": self.state,
                "samples": stats.samples,
                "lost": stats.lost,
                "errors": list(stats.errors),
            },
            maps=[_generation_json(g) for g in self.watcher.history],
            objects=list(self._objects),
            frames=list(self._frames),
            stacks=list(self._stacks),
            threads=dict(self._thread_names),
            samples=samples,
        )

    def _thread_name(self, tid: int) -> str:
        name = self._thread_names.get(tid)
        if name is None:
            try:
                name = Path(f"/proc/{self.target.pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                name = str(tid)
            self._thread_names[tid] = name
        return name


def _generation_json(g: MapsGeneration) -> dict[str, object]:
    return {
        "generation": g.number,
        "time": g.taken_at,
        "entries": [
            [f"{e.start:x}", f"{e.end:x}", e.perms, f"{e.pgoff:x}",
             f"{e.dev_major:02x}:{e.dev_minor:02x}", e.inode, e.path, e.deleted]
            for e in g.snapshot.entries
        ],
    }  # fmt: skip
