"""The live side of a session: a running target whose samples are resolved here.

``LiveSide`` owns what observing a process takes beyond sampling it: the maps
watcher and the address resolver (ELF images, symbol tables), the target's
CPU/RSS/thread readings, the watch on how often a stopping sampler stops it,
and source lines looked up on request. ``resolve`` runs in the engine's worker
thread and adds each sample's frames and stack to the session's tables,
against the maps generation current when the sample was taken.
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

from livesym.addr.maps import MapsEntry
from livesym.engine.frame_ids import FrameIds
from livesym.engine.lines import LinesBudget, lines_within
from livesym.engine.python_splice import (
    InstructionPointer,
    Role,
    checked,
    role_of,
    splice,
)
from livesym.engine.snapshot import Source
from livesym.engine.tables import MAX_KEPT_MAPPINGS, SessionTables
from livesym.records import (
    KERNEL_SAMPLED,
    KIND_NATIVE,
    KIND_PYTHON,
    PYTHON_UNREAD,
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    ProcessStat,
    StackEnd,
    truncated_frame_record,
)
from livesym.sampling.base import Sample, Sampler, SamplerEnd
from livesym.symbolize.explain import Explanation
from livesym.symbolize.kernel import (
    KernelSymbols,
    estimated_kernel_record,
    kernel_frame_record,
)
from livesym.symbolize.objects import LoadedObject, ObjectCache
from livesym.symbolize.process import MappingFacts, cache_for
from livesym.symbolize.records import frame_record, mapping_record
from livesym.symbolize.resolver import AddressResolver
from livesym.symbolize.syscalls import at_call_exit_record, syscall_frame_record
from livesym.target.maps_watcher import MappingEvent, MapsGeneration, MapsWatcher
from livesym.target.process import TargetProcess, page_size
from livesym.target.stats import StatsPoller, target_info
from livesym.target.stop_share import StopShare
from livesym.target.system_time import SystemTime
from livesym.unwind.walk import Registers, call_sites, unwind_copy

STATS_PERIOD = 1.0  # seconds between readings of the target's CPU, RSS and threads
MAX_KERNEL_ADDRESSES = 1 << 16  # kernel addresses whose frames are remembered
MAX_ESTIMATED = 100_000  # estimated kernel samples per thread per look
# A stack in three parts: frames before a deep walk's rest, the rest's call sites (a
# memo's, the same tuple each time: SuffixMemo), and what follows (why a walk stopped).
_Items = tuple[tuple[int | FrameRecord, ...], tuple[int, ...], tuple[FrameRecord, ...]]
ESTIMATED_KERNEL = estimated_kernel_record()
AT_CALL_EXIT = at_call_exit_record()
ESTIMATED_MODE = "estimated from system time"

Line = tuple[str, int] | None


@dataclass
class Shared:
    """What the sides of one session's processes share: loaded objects (one library
    parsed once, whichever process maps it), the kernel's symbols, and the counter that
    numbers maps generations (a number names one generation of one process)."""

    cache: ObjectCache
    kernel: KernelSymbols = dataclasses.field(default_factory=KernelSymbols)
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
        self._stops = StopShare(target.pid) if sampler.stops_target else None
        # The resolver serves one thread at a time: the symbolizing worker, or a
        # source-line question from the dashboard (asked off the event loop).
        self._lock = threading.Lock()
        self._lines: dict[int, Line] = {}  # frame id -> source line
        # (object id, ELF vaddr) -> source line: one address is one frame per generation
        # that mapped it, and a capture's final write looks each up once, not per frame.
        self._object_lines: dict[tuple[int, int], Line] = {}
        self._loaded: dict[int, LoadedObject] = {}  # object id -> its symbols and lines
        self._kernel = shared.kernel  # read in prepare where kernel mode is sampled
        self._system = SystemTime(target.pid)  # kernel time, where it is not sampled
        self._system_carry: dict[int, float] = {}  # fractions of estimated samples
        self._kernel_records: dict[int, FrameRecord] = {}  # kernel address -> its frame
        self._syscall_records: dict[int, FrameRecord] = {}  # system call number -> its frame
        self._roles: dict[int, Role] = {}  # frame id -> its role in mixed stacks
        # Where the interpreter keeps its instruction pointer, learnt from mixed samples.
        self._instruction_pointer = InstructionPointer()
        self._ids = FrameIds(
            self._tables, lambda when: self.resolver.watcher.at(when).number,
            self._address_frame_id, self._record_frame_id,
        )  # fmt: skip
        self._plain_mappings: dict[MapsEntry, MappingRecord] = {}  # see _mapping_record
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
            self._note_generation(self.watcher.current)
        if self._sampler.kernel_mode == KERNEL_SAMPLED:
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

    def _estimated_kernel(self, now: float) -> list[Sample]:
        """Where kernel mode is not sampled (and not left out on purpose), the threads'
        system time since the last look, as samples of the estimated kernel frame at
        the sampling rate: a process busy in system calls is never shown idle."""
        mode = self._sampler.kernel_mode
        if self._sampler.kernel_accounted or not self._sampler.kernel:
            return []
        if not mode.startswith(ESTIMATED_MODE):
            self._sampler.kernel_mode = f"{ESTIMATED_MODE} ({mode})"  # what header and capture say
        rate, carry, pid = self._sampler.rate_hz, self._system_carry, self.target.pid
        frames: tuple[int | FrameRecord, ...] = (ESTIMATED_KERNEL,)
        out: list[Sample] = []
        for tid, seconds in self._system.poll().items():
            due = carry.get(tid, 0.0) + seconds * rate
            whole = min(int(due), MAX_ESTIMATED)
            carry[tid] = due - int(due)
            out += [Sample(now, pid, tid, (), frames=frames) for _ in range(whole)]
        self._sampler.stats.samples += len(out)  # counted as samples, as they are shown
        return out

    def _watch_stops(self) -> None:
        """Probe whether the sampler keeps the target stopped; say so once if it does."""
        stops = self._stops
        if stops is None:
            return
        stops.probe()
        if stops.too_high():
            self._sampler.stats.error(
                f"the target was found stopped by the {self._sampler.name} sampler in "
                f"{stops.share:.0%} of looks at its threads: it runs that much slower; "
                "lower --rate, or use --sampler perf (it never stops the target)"
            )
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
            self._note_generation(self.watcher.current)
            return [self._stack_id(sample) for sample in batch]

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
        """Objects whose debug files arrived from debuginfod: loaded again with their
        symbols, and every frame of theirs named afresh (earlier samples included)."""
        if not arrived:
            return
        self.resolver.forget(arrived)
        tables = self._tables
        objects = {o.id for o in tables.objects if o.build_id in arrived}
        renamed: list[FrameRecord] = []
        refreshed: set[int] = set()
        for record in tables.frames:
            if record.object not in objects or record.kind != KIND_NATIVE:
                continue
            again = self.resolver.explain_again(record.generation, record.vma)
            if again is None:
                continue  # its generation is no longer held: it keeps its name
            generation, expl = again
            renamed.append(frame_record(record.id, record.generation, expl, record.object))
            if record.object not in refreshed and expl.mapping is not None:
                refreshed.add(record.object)
                obj = self.resolver.symbolizer(generation).object_for(expl.mapping)
                self._refresh_object(record.object, obj)
        tables.rename_frames(renamed)
        # Source lines looked up before may be in the debug file that arrived.
        self._lines.clear()
        self._object_lines = {k: v for k, v in self._object_lines.items() if k[0] not in objects}
        self._renamed = True

    def _refresh_object(self, object_id: int, obj: LoadedObject | None) -> None:
        """The object's record with the symbols it has now."""
        old = self._tables.objects[object_id]
        if obj is None or obj.image is None or obj.image.build_id_hex != old.build_id:
            return
        self._loaded[object_id] = obj
        self._tables.replace_object(dataclasses.replace(old, symbol_source=obj.symbol_source))

    def _stack_items(self, sample: Sample) -> tuple[_Items, tuple[Registers, ...]]:
        """The sample's stack, leaf first: its kernel frames, then its user frames; and
        the registers of its innermost evaluation loop frame, where it was asked for
        (``Sample.python_check``)."""
        (head, rest, tail), watched = self._user_items(sample)
        return self._with_kernel(sample, head, rest, tail), watched

    def _with_kernel(
        self,
        sample: Sample,
        head: tuple[int | FrameRecord, ...],
        rest: tuple[int, ...],
        tail: tuple[FrameRecord, ...],
    ) -> _Items:
        if sample.kernel_ips:
            return (*map(self._kernel_record, sample.kernel_ips), *head), rest, tail
        if sample.syscall is not None:
            return (self._syscall_record(sample.syscall), *head), rest, tail
        if sample.in_kernel:
            return (ESTIMATED_KERNEL, *head), rest, tail
        if sample.at_call_exit:
            return (AT_CALL_EXIT, *head), rest, tail
        return head, rest, tail

    def _syscall_record(self, nr: int) -> FrameRecord:
        found = self._syscall_records.get(nr)
        if found is None:
            if len(self._syscall_records) >= MAX_KERNEL_ADDRESSES:
                self._syscall_records.clear()
            found = self._syscall_records[nr] = syscall_frame_record(nr)
        return found

    def _kernel_record(self, address: int) -> FrameRecord:
        found = self._kernel_records.get(address)
        if found is None:
            if len(self._kernel_records) >= MAX_KERNEL_ADDRESSES:
                self._kernel_records.clear()
            found = kernel_frame_record(address, self._kernel.lookup(address))
            self._kernel_records[address] = found
        return found

    def _user_items(self, sample: Sample) -> tuple[_Items, tuple[Registers, ...]]:
        """The user part, each address the one to name its frame by (see
        ``call_sites``): unwound here from its registers and stack copy when the
        sampler took those, else as the sampler gave it."""
        regs, copy = sample.user_regs, sample.user_stack
        if regs is None or copy is None:
            items = tuple(
                item - 1 if depth and isinstance(item, int) else item
                for depth, item in enumerate(sample.stack)
            )
            return (items, (), ()), ()
        when = sample.time
        check = sample.python_check
        unwound = unwind_copy(
            regs,
            copy,
            sample.user_stack_complete,
            self.resolver.rules_at(when),
            self.resolver.code_at(when),
            self._ids.memo(when),
            (check.eval_start, check.eval_end) if check is not None else None,
        )
        rest = unwound.rest_sites
        sites = unwound.head_sites() if unwound.head else call_sites(sample.ips)
        if unwound.end is StackEnd.ROOT:
            return (sites, rest, ()), unwound.watched
        if unwound.end is StackEnd.STACK_COPY:
            self._sampler.stack_cut_short(sample.tid)
        tail = (truncated_frame_record(unwound.end, unwound.detail),)
        return (sites, rest, tail), unwound.watched

    def _stack_id(self, sample: Sample) -> int:
        when = sample.time
        (head, rest, tail), watched = self._stack_items(sample)
        frame_ids = self._ids
        ids = frame_ids.of(head, when)
        rest_ids = frame_ids.of_rest(rest, when) if rest else ()
        tail_ids = frame_ids.of(tail, when) if tail else []
        python = sample.python
        if python is not None and sample.python_check is not None:
            python = checked(
                python, sample.python_check, watched, self._instruction_pointer, sample.stack_copy()
            )
        if python is None:
            return frame_ids.stack_id(ids, rest_ids, tail_ids)
        return self._tables.intern_stack(
            tuple(self._with_python([*ids, *rest_ids, *tail_ids], python))
        )

    def _with_python(self, ids: list[int], python: tuple[FrameRecord, ...]) -> list[int]:
        """A mixed stack: the Python frames in place of the interpreter's (python_splice)."""
        roles = self._roles
        if len(roles) >= MAX_KERNEL_ADDRESSES:
            roles.clear()
        frames = self._tables.frames
        for frame_id in ids:
            if frame_id not in roles:
                record = frames[frame_id]
                native = record.kind == KIND_NATIVE
                roles[frame_id] = role_of(record.symbol, record.module) if native else Role.OTHER
        python_ids = [self._record_frame_id(r) for r in python]
        unread = self._record_frame_id(PYTHON_UNREAD)
        return splice(ids, [roles[i] for i in ids], python_ids, unread)

    def _address_frame_id(self, vma: int, when: float) -> int:
        tables = self._tables
        generation, expl = self.resolver.resolve(vma, when)
        frame_id = tables.frame_id(("address", generation.number, vma))
        if (
            frame_id is not None
            and expl.symbol is not None
            and tables.frames[frame_id].symbol is None
        ):
            # Named since (JIT code whose perf-map line came after its first sample):
            # samples from now on get the name, earlier ones keep what was known then.
            frame_id = None
        if frame_id is None:
            self._note_generation(generation)
            record = frame_record(
                len(tables.frames), generation.number, expl, self._object_id(generation, expl)
            )
            frame_id = tables.add_frame(record)
        return frame_id

    def _record_frame_id(self, record: FrameRecord) -> int:
        tables = self._tables
        frame_id = tables.frame_id(record.key)
        if frame_id is None:
            frame_id = tables.add_frame(dataclasses.replace(record, id=len(tables.frames)))
        return frame_id

    def _note_generation(self, generation: MapsGeneration) -> None:
        """Keep the facts of each maps generation the session used, for the capture."""
        if self._tables.has_generation(generation.number):
            return
        symbolizer = self.resolver.symbolizer(generation)
        records = tuple(self._mapping_record(facts) for facts in symbolizer.mappings())
        self._tables.add_generation(
            GenerationRecord(generation.number, generation.taken_at, records, self.target.pid)
        )

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
        found = self._tables.object_ids.get((expl.path, expl.build_id))
        if found is not None:
            return found
        return self._register_object(
            expl.path, self.resolver.symbolizer(generation).object_for(expl.mapping)
        )

    def _register_object(self, path: str, obj: LoadedObject | None) -> int | None:
        if obj is None or obj.image is None:
            return None
        tables = self._tables
        image = obj.image
        found = tables.object_ids.get((path, image.build_id_hex))
        if found is None:
            found = len(tables.objects)
            self._loaded[found] = obj
            tables.add_object(
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
        obj = self._loaded.get(oid) if oid is not None else None
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
