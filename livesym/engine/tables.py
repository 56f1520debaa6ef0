"""The session's tables, kept as a capture stores them (docs/capture-format.md).

A frame table (one record per distinct maps generation and address, or per
frame a sampler named itself), a stack table (frame ids, leaf first), the
samples as (time, thread, stack, weight, flags) in compact arrays, the objects and maps
generations with their facts, thread names, the target's CPU/RSS/threads over
time, and samples per second. A live session fills them as it resolves samples;
a replay loads a capture's frames, stacks and objects and appends its samples.

One thread mutates them: the symbolizing worker in a live session (the loop's
thread only reads, through ``freeze``), the loop's thread in a replay. Every
table only grows, until ``SessionTables`` is dropped, so ids stay valid.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from livesym.capture.chunks import Increment, Mark, changed_records
from livesym.capture.session import Tables
from livesym.engine.folding import DETAIL_SECONDS, Folds, fold, forget
from livesym.engine.readings import Readings
from livesym.frames.table import MAX_KEPT_MAPPINGS
from livesym.profile.stack_counts import SampleArrays
from livesym.records import (
    IDLE_FLAG,
    SAMPLE_FLAGS,
    Capture,
    Frame,
    FrameRecord,
    GenerationRecord,
    ObjectRecord,
    ProcessRecord,
    ProcessStat,
)
from livesym.sampling.base import Row

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MAX_SECONDS = 1 << 22  # seconds of samples-per-second kept (48 days)
MAX_LOST_SECONDS = 1 << 16  # seconds with lost samples kept apart (the rest: in the total)
MAX_GENERATION_RECORDS = 4096  # maps generations kept for the capture and the pane
MAX_PROCESS_STATS = 1_000_000


def _add_at(per_second: array[int], second: int, n: int) -> None:
    if 0 <= second < MAX_SECONDS:
        if len(per_second) <= second:
            per_second.extend([0] * (second + 1 - len(per_second)))
        per_second[second] += n


class SessionTables:
    """Frames, stacks, samples, objects, generations, threads and readings of a session."""

    def __init__(self) -> None:
        self.frames: list[FrameRecord] = []
        self._frame_ids: dict[tuple[object, ...], int] = {}
        self._profile_frames: list[Frame | None] = []  # frame id -> Frame, made on first use
        self.objects: list[ObjectRecord] = []
        self.object_ids: dict[tuple[str, str | None], int] = {}
        self.stacks: list[tuple[int, ...]] = []
        self._stack_ids: dict[tuple[int, ...], int] = {}
        self._stack_frames: list[tuple[Frame, ...] | None] = []  # made on first use
        self.samples = SampleArrays(array("d"), array("q"), array("q"), array("q"), array("b"))
        self.folds = Folds()  # where the rows stand as old ones are folded (live sessions)
        self.generations: list[GenerationRecord] = []
        # The order each kept generation was added in (the list keeps a bounded tail).
        self._generation_order: dict[int, int] = {}
        self._generations_added = 0
        # Ids of frames renamed and objects replaced in place, in order: what a recording's
        # next chunk says again.
        self.renamed: list[int] = []
        self.replaced: list[int] = []
        self._generation_numbers: set[int] = set()
        self._kept_mappings = 0  # mappings in self.generations, over all of them
        self.threads: dict[int, str] = {}
        self.thread_pids: dict[int, int] = {}  # tid -> its process
        self.processes: dict[int, ProcessRecord] = {}  # pid -> the process, as first seen
        self.process = Readings()  # the target's, once a second (machine words)
        # Counts a second, as machine words: a day of them is 0.7 MB, not 3 (int objects).
        self.per_second = array("q")  # samples (the header's rate)
        # The timeline's rows: samples on a CPU, and sampling periods off it (a wait's
        # weight), in each second.
        self.cpu_per_second = array("q")
        self.off_per_second = array("q")
        # Samples lost in each second of the session (the timeline's marks): when the
        # sampler said so, live; as the capture says, replayed.
        self.lost_seconds: dict[int, int] = {}

    def load(self, capture: Capture) -> None:
        """A capture's objects, frames, stacks and thread names, as they are: a replay
        never looks a frame up by its key, and its samples refer to these ids."""
        self.objects = list(capture.objects)
        self.object_ids = {(o.path, o.build_id): o.id for o in capture.objects}
        self.frames = list(capture.frames)
        self._profile_frames = [None] * len(self.frames)
        for stack in capture.stacks:
            self._append_stack(stack)  # duplicates included: the samples use these ids
        self.threads.update(capture.threads)
        self.thread_pids.update(capture.thread_pids)
        self.processes.update((p.pid, p) for p in capture.processes)

    # -- frames and stacks -------------------------------------------------------

    def frame_id(self, key: tuple[object, ...]) -> int | None:
        return self._frame_ids.get(key)

    def add_frame(self, record: FrameRecord) -> int:
        """Append ``record``, whose id must be ``len(frames)``."""
        self.frames.append(record)
        self._profile_frames.append(None)
        self._frame_ids[record.key] = record.id
        return record.id

    def rename_frames(self, records: list[FrameRecord]) -> None:
        """Put ``records`` in place of the frames of their ids (named since: a debug file
        arrived), each stack's frames made again on next use."""
        for record in records:
            self.frames[record.id] = record
            self._profile_frames[record.id] = None
            self.renamed.append(record.id)
        if records:
            self._stack_frames = [None] * len(self.stacks)

    def intern_stack(self, stack: tuple[int, ...]) -> int:
        stack_id = self._stack_ids.get(stack)
        if stack_id is None:
            stack_id = self._append_stack(stack)
        return stack_id

    def _append_stack(self, stack: tuple[int, ...]) -> int:
        # Cheap: a capture brings a hundred thousand stacks, most sampled rarely.
        stack_id = len(self.stacks)
        self._stack_ids.setdefault(stack, stack_id)
        self.stacks.append(stack)
        self._stack_frames.append(None)
        return stack_id

    def frames_of(self, stack_id: int) -> tuple[Frame, ...]:
        """The stack's profile frames; one tuple per stack, made once (the profile
        finds it again by identity)."""
        frames = self._stack_frames[stack_id]
        if frames is None:
            profile_frame = self.profile_frame
            frames = tuple([profile_frame(i) for i in self.stacks[stack_id]])
            self._stack_frames[stack_id] = frames
        return frames

    def profile_frame(self, frame_id: int) -> Frame:
        frame = self._profile_frames[frame_id]
        if frame is None:
            frame = self._profile_frames[frame_id] = self.frames[frame_id].frame()
        return frame

    # -- samples -------------------------------------------------------------------

    def keep(
        self, when: float, tid: int, stack_id: int, flags: int, weight: int, start: float
    ) -> None:
        """Store one sample. The flags go last: ``freeze`` counts on it."""
        s = self.samples
        s.times.append(when)
        s.tids.append(tid)
        s.stack_of.append(stack_id)
        s.weights.append(weight)
        s.flags.append(flags & SAMPLE_FLAGS)
        second = int(when - start)
        self.count_seconds(((second, 1),))
        if flags & IDLE_FLAG:
            _add_at(self.off_per_second, second, weight)
        else:
            _add_at(self.cpu_per_second, second, 1)

    def keep_rows(self, rows: list[Row], start: float) -> None:
        """Store recorded rows (times relative to ``start``) at once."""
        times, tids, sids, flags, weights = zip(*rows, strict=True)
        self.samples.times.extend(start + t for t in times)
        self.samples.tids.extend(tids)
        self.samples.stack_of.extend(sids)
        self.samples.weights.extend(weights)
        self.samples.flags.extend(f & SAMPLE_FLAGS for f in flags)
        self.count_seconds(Counter(int(t) for t in times).items())
        cpu, off = self._seconds(len(self.samples.times) - len(rows), start)
        for counted, into in ((cpu, self.cpu_per_second), (off, self.off_per_second)):
            for second in counted.nonzero()[0].tolist():
                _add_at(into, second, int(counted[second]))

    def count_seconds(self, counts: Iterable[tuple[int, int]]) -> None:
        """Samples per second of the session (the header's graph), from (second, n)."""
        for second, n in counts:
            _add_at(self.per_second, second, n)

    def seconds_of(self, tids: Iterable[int], start: float) -> tuple[list[int], list[int]]:
        """The timeline's rows for the threads ``tids`` alone: samples on a CPU and
        periods off it in each second (by array: a million samples take milliseconds)."""
        cpu, off = self._seconds(0, start, tids)
        return cpu.tolist(), off.tolist()

    def _seconds(
        self, first: int, start: float, tids: Iterable[int] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Of the stored samples from index ``first`` on (of ``tids`` alone, where given):
        samples on a CPU, and periods off it, in each second from ``start``."""
        import numpy as np

        s = self.samples
        times = np.frombuffer(s.times, dtype=np.float64)[first:] - start
        keep = (times >= 0) & (times < MAX_SECONDS)
        if tids is not None:
            wanted = np.fromiter(tids, np.int64)
            keep &= np.isin(np.frombuffer(s.tids, dtype=np.int64)[first:], wanted)
        seconds = times[keep].astype(np.int64)
        idle = (np.frombuffer(s.flags, dtype=np.int8)[first:][keep] & IDLE_FLAG) != 0
        weights = np.frombuffer(s.weights, dtype=np.int64)[first:][keep]
        size = int(seconds.max()) + 1 if len(seconds) else 0
        cpu = np.bincount(seconds[~idle], minlength=size)
        off = np.bincount(seconds[idle], weights=weights[idle], minlength=size)
        return cpu.astype(np.int64), off.astype(np.int64)

    def count_lost(self, second: int, n: int) -> None:
        if (
            0 <= second < MAX_SECONDS
            and n > 0
            and (second in self.lost_seconds or len(self.lost_seconds) < MAX_LOST_SECONDS)
        ):
            self.lost_seconds[second] = self.lost_seconds.get(second, 0) + n

    # -- objects, generations, readings ----------------------------------------------

    def add_object(self, record: ObjectRecord) -> int:
        """Append ``record``, whose id must be ``len(objects)``."""
        self.objects.append(record)
        self.object_ids[(record.path, record.build_id)] = record.id
        return record.id

    def replace_object(self, record: ObjectRecord) -> None:
        """``record`` in place of the object of its id (its symbols changed)."""
        self.objects[record.id] = record
        self.replaced.append(record.id)

    def object_record(self, object_id: int) -> ObjectRecord | None:
        return self.objects[object_id] if 0 <= object_id < len(self.objects) else None

    def has_generation(self, number: int) -> bool:
        return number in self._generation_numbers

    def add_generation(self, record: GenerationRecord) -> None:
        """Keep a generation the session used. Bounded by count and by mappings in all:
        a target with 40,000 mappings whose maps change every second would otherwise
        keep 40,000 more records a second (and write a capture no reader takes: it
        refuses 5 million mappings)."""
        self._generation_numbers.add(record.number)
        self._generation_order[record.number] = self._generations_added
        self._generations_added += 1
        self.generations.append(record)
        self._kept_mappings += len(record.mappings)
        while len(self.generations) > 1 and (
            len(self.generations) > MAX_GENERATION_RECORDS
            or self._kept_mappings > MAX_KEPT_MAPPINGS
        ):
            dropped = self.generations.pop(0)
            self._kept_mappings -= len(dropped.mappings)
            self._generation_order.pop(dropped.number, None)

    def add_recorded_generations(self, records: list[GenerationRecord]) -> None:
        """A capture's generations, as recorded (the reader bounded them)."""
        for record in records:
            self._generation_order[record.number] = self._generations_added
            self._generations_added += 1
        self.generations.extend(records)

    def add_process_record(self, record: ProcessRecord) -> None:
        """A process of the session, the first time it is seen (later ones keep it)."""
        self.processes.setdefault(record.pid, record)

    def process_ended(self, pid: int, when: float) -> None:
        """The process ``pid`` exited at ``when`` (on the session's clock)."""
        record = self.processes.get(pid)
        if record is not None and record.ended is None:
            self.processes[pid] = dataclasses.replace(record, ended=when)

    def keep_thread(self, tid: int, pid: int, name: str | None) -> None:
        """A sample's thread: its process as first seen, and the sampler's name for it
        where it has one (better than /proc's comm)."""
        if name is not None:
            self.threads[tid] = name
        self.thread_pids.setdefault(tid, pid)

    def threads_of(self, pid: int, default: int) -> frozenset[int]:
        """The threads of process ``pid`` (those of unknown process: ``default``'s)."""
        seen = set(self.threads) | set(self.thread_pids)  # every thread counted is named
        return frozenset(tid for tid in seen if self.thread_pids.get(tid, default) == pid)

    def process_of(self, tid: int, default: int) -> tuple[int, str]:
        """The (pid, name) of thread ``tid`` (``default``'s when it is not known)."""
        pid = self.thread_pids.get(tid, default)
        record = self.processes.get(pid)
        return pid, record.name if record is not None else str(pid)

    def add_process(self, stats: list[ProcessStat]) -> None:
        room = MAX_PROCESS_STATS - len(self.process)
        self.process.extend(stats[: max(0, room)])  # (11 days of them: 32 MB)

    # -- a consistent copy -------------------------------------------------------------

    def freeze(self, end: float, state: str) -> Tables:
        """The tables now, consistent however the symbolizing worker goes on: it
        appends a sample's time, thread, stack, weight and flags in that order, and a sample's
        stack and frames before the sample. So the flags' length counts samples whose
        every field is there, and the stacks and frames taken after it hold all they
        use. Cheap (array slices and list copies, each atomic under the GIL): this is
        all that runs on the event loop when a capture is written."""
        times, tids, stack_of, weights, flags = self.samples
        n = len(flags)
        return Tables(
            end=end,
            state=state,
            times=times[:n],
            tids=tids[:n],
            stack_of=stack_of[:n],
            flags=flags[:n],
            weights=weights[:n],
            stacks=list(self.stacks),
            frames=list(self.frames),
            objects=list(self.objects),
            generations=list(self.generations),
            threads=dict(self.threads),
            process=list(self.process),
            processes=list(self.processes.values()),
            thread_pids=dict(self.thread_pids),
        )

    def increment(self, since: Mark, end: float, state: str) -> Increment:
        """What the tables hold beyond ``since``, consistent as ``freeze`` is (samples
        first, then the stacks and frames they use), for a recording's next chunk.
        Costs what is new, not what the session holds."""
        times, tids, stack_of, weights, flags = self.samples
        n = len(flags)
        first = self.folds.row(since.samples)  # (never folded before it was written)
        stacks, frames, objects = len(self.stacks), len(self.frames), len(self.objects)
        renamed, replaced = len(self.renamed), len(self.replaced)
        process = len(self.process)
        # Generations by the order they were added in (ordered before they are listed).
        order = self._generation_order
        generations = [g for g in list(self.generations)
                       if order.get(g.number, -1) >= since.generations]  # fmt: skip
        added = max((order.get(g.number, -1) + 1 for g in generations), default=since.generations)
        mark = Mark(self.folds.total(n), stacks, frames, renamed, objects, replaced, added, process)
        return Increment(since, mark, Tables(
            end=end,
            state=state,
            times=times[first:n],
            tids=tids[first:n],
            stack_of=stack_of[first:n],
            flags=flags[first:n],
            weights=weights[first:n],
            stacks=self.stacks[since.stacks : stacks],
            frames=changed_records(
                self.frames, since.frames, frames, self.renamed[since.renamed : renamed]
            ),
            objects=changed_records(
                self.objects, since.objects, objects, self.replaced[since.replaced : replaced]
            ),
            generations=generations,
            process=self.process[since.process : process],
            threads=dict(self.threads),
            thread_pids=dict(self.thread_pids),
            processes=list(self.processes.values()),
        ))  # fmt: skip

    # -- folding old samples (engine.folding) ------------------------------------------

    def fold(
        self, now: float, start: float, upto: int | None = None, detail: float = DETAIL_SECONDS
    ) -> bool:
        """Fold the rows that aged past the horizons (not past the absolute index
        ``upto``: what a recording has not written yet); whether any were."""
        rows = len(self.samples.flags)
        limit = self.folds.total(rows) if upto is None else upto
        folded = fold(self.samples, self.folds, now=now, start=start, upto=limit, detail=detail)
        if folded is not None:
            self.samples = folded
        return folded is not None

    def forget(self, before: float) -> None:
        """Drop the rows older than ``before`` (``engine.folding.forget``)."""
        kept = forget(self.samples, self.folds, before)
        if kept is not None:
            self.samples = kept

    def count_from_next(self) -> None:
        """The reset: samples are counted from the next one stored."""
        self.folds.reset(len(self.samples.flags))

    def stored(self) -> int:
        """Samples stored ever (folded ones each counted)."""
        return self.folds.total(len(self.samples.flags))
