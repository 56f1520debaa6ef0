"""A raw sample's frames and stack, in the session's tables.

``SampleFrames`` is the step between a sampler and the profile: a sample's user stack
unwound from its registers and stack copy (``unwind.walk``; its common walks in C,
``unwind.quick``) or taken as the sampler gave it, each address named against the
maps generation current at the sample's time (``symbolize.resolver``), the kernel's
frames (sampled addresses, the system call it was in, or the estimated kernel frame),
the Python frames read at the sample spliced in place of the interpreter's
(``python_splice``), and how the stack ended as its last frame. It adds what it names
to a ``FrameTable``: frames, stacks, the objects behind them and the maps generations
the session used, whose records a capture keeps.

One thread calls it at a time (the engine's worker); a sampler is told of a thread
whose stack went past its copy through ``cut_short``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from livesym.addr.maps import MapsEntry
from livesym.frames.ids import FrameIds
from livesym.frames.python_splice import InstructionPointer, Role, checked, role_of, splice
from livesym.frames.table import MAX_KEPT_MAPPINGS, FrameTable
from livesym.frames.waits import without_scheduler
from livesym.records import (
    KIND_NATIVE,
    PYTHON_UNREAD,
    WAITING_FOR_CPU,
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    StackEnd,
    truncated_frame_record,
)
from livesym.sampling.base import Sample, ThreadState
from livesym.symbolize.explain import Explanation
from livesym.symbolize.kernel import KernelSymbols, estimated_kernel_record, kernel_frame_record
from livesym.symbolize.objects import LoadedObject
from livesym.symbolize.process import MappingFacts
from livesym.symbolize.records import frame_record, mapping_record
from livesym.symbolize.resolver import AddressResolver, may_be_named_later
from livesym.symbolize.syscalls import at_call_exit_record, syscall_frame_record
from livesym.target.maps_watcher import MapsGeneration
from livesym.unwind.quick import QuickWalk
from livesym.unwind.quick import available as quick_available
from livesym.unwind.walk import Registers, call_sites, unwind_copy

MAX_KERNEL_ADDRESSES = 1 << 16  # kernel addresses (system calls, roles) whose frames are kept
MAX_UNNAMED_JIT = 4096  # frames of JIT code without a name yet, named when the perf map is
# Seconds between namings of earlier JIT frames: each has every view counted again
# (``Hub``), which a JIT compiling all the time would otherwise ask for twice a second.
JIT_NAMING_INTERVAL = 2.0
# A stack in three parts: frames before a deep walk's rest, the rest's call sites (a
# memo's, the same tuple each time: SuffixMemo), and what follows (why a walk stopped).
_Items = tuple[tuple[int | FrameRecord, ...], tuple[int, ...], tuple[FrameRecord, ...]]
ESTIMATED_KERNEL = estimated_kernel_record()
AT_CALL_EXIT = at_call_exit_record()


class SampleFrames:
    """The frames of one process's samples: ``resolver`` names its addresses, ``kernel``
    the kernel's, ``tables`` takes them; ``cut_short(tid)`` hears of a stack that went
    past its copy."""

    def __init__(
        self,
        pid: int,
        resolver: AddressResolver,
        tables: FrameTable,
        kernel: KernelSymbols,
        cut_short: Callable[[int], None],
    ) -> None:
        self._pid = pid
        self.resolver = resolver
        self._tables = tables
        self._kernel = kernel
        self._cut_short = cut_short
        self._loaded: dict[int, LoadedObject] = {}  # object id -> its symbols and lines
        self._kernel_records: dict[int, FrameRecord] = {}  # kernel address -> its frame
        self._syscall_records: dict[int, FrameRecord] = {}  # system call number -> its frame
        self._roles: dict[int, Role] = {}  # frame id -> its role in mixed stacks
        # Where the interpreter keeps its instruction pointer, learnt from mixed samples.
        self._instruction_pointer = InstructionPointer()
        self._ids = FrameIds(
            tables, lambda when: resolver.watcher.at(when).number,
            self._address_frame_id, self._record_frame_id,
        )  # fmt: skip
        self._plain_mappings: dict[MapsEntry, MappingRecord] = {}  # see _mapping_record
        # The common walks in C, with the rules the Python walk uses (unwind.quick).
        self._quick = QuickWalk() if quick_available() else None
        # JIT code no perf map line named yet: frame id -> (generation, address), and the
        # perf map's version when they were last looked for (``_name_jit``)
        self._unnamed_jit: dict[int, tuple[int, int]] = {}
        self._jit_version = -1
        self._jit_named_at = float("-inf")
        self.named_late = False  # JIT frames named since ``take_named_late``

    def stack_ids(self, batch: list[Sample]) -> list[int]:
        """The stack id of each sample, its frames and stack added to the tables."""
        self.note_generation(self.resolver.watcher.current)
        ids = [self._stack_id(sample) for sample in batch]
        if self._unnamed_jit:
            self._name_jit()
        return ids

    def take_named_late(self) -> bool:
        """Whether frames of JIT code were named, earlier samples' too, since the last call."""
        named, self.named_late = self.named_late, False
        return named

    def loaded(self, object_id: int | None) -> LoadedObject | None:
        """The loaded object behind an object id of the tables (its symbols and lines)."""
        return self._loaded.get(object_id) if object_id is not None else None

    def rename(self, arrived: set[str]) -> set[int]:
        """Objects whose debug files arrived (their build ids): loaded again with their
        symbols, and every frame of theirs named afresh (earlier samples' included).
        Returns the ids of those objects."""
        if not arrived:
            return set()
        self.resolver.forget(arrived)
        if self._quick is not None:
            self._quick.forget()  # a .debug_frame may hold rules eh_frame lacked
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
        return objects

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
        return (*self._kernel_part(sample), *head), rest, tail

    def _kernel_part(self, sample: Sample) -> tuple[FrameRecord, ...]:
        """The frames above the user stack: the kernel's, as the sampler saw them; an
        off-CPU sample's wait at the leaf (frames.waits), ``WAITING_FOR_CPU`` for one
        that was preempted."""
        runnable = sample.state is ThreadState.RUNNABLE
        if sample.kernel_ips:
            kernel = tuple(map(self._kernel_record, sample.kernel_ips))
            if sample.state is not ThreadState.RUNNING:
                return without_scheduler(kernel, runnable)
            return kernel
        part: tuple[FrameRecord, ...] = ()
        if sample.syscall is not None:
            part = (self._syscall_record(sample.syscall),)
        elif sample.in_kernel:
            part = (ESTIMATED_KERNEL,)
        elif sample.at_call_exit:
            part = (AT_CALL_EXIT,)
        return (WAITING_FOR_CPU, *part) if runnable else part

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
        rules = self.resolver.rules_at(when)
        quick = self._quick
        if quick is not None and check is None:
            generation = self.resolver.watcher.at(when).number
            sites = quick.walk(regs, copy, generation, rules)
            if sites is not None:
                return (sites, (), ()), ()
            rules = quick.teaching(rules, generation)
        unwound = unwind_copy(
            regs,
            copy,
            sample.user_stack_complete,
            rules,
            self.resolver.code_at(when),
            self._ids.memo(when),
            (check.eval_start, check.eval_end) if check is not None else None,
        )
        rest = unwound.rest_sites
        sites = unwound.head_sites() if unwound.head else call_sites(sample.ips)
        if unwound.end is StackEnd.ROOT:
            return (sites, rest, ()), unwound.watched
        if unwound.end is StackEnd.STACK_COPY:
            self._cut_short(sample.tid)
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
            # Named since: JIT code whose perf-map line came after its first samples.
            self._name_jit()
            if tables.frames[frame_id].symbol is None:
                frame_id = None  # (not among those kept to be named: from now on)
        if frame_id is None:
            self.note_generation(generation)
            record = frame_record(
                len(tables.frames), generation.number, expl, self._object_id(generation, expl)
            )
            frame_id = tables.add_frame(record)
            if may_be_named_later(expl) and len(self._unnamed_jit) < MAX_UNNAMED_JIT:
                self._unnamed_jit[frame_id] = (generation.number, vma)
        return frame_id

    def _name_jit(self) -> None:
        """Frames of JIT code first seen before the perf map named it, named now that it
        does: earlier samples' too, as perf names them all from the map when it reports.
        A map line comes after its code is made, so samples processed before the map was
        read again, taken before or after ones processed later (rings drained apart),
        were left unnamed. Looked for when the map has changed: then each address costs
        a search of the map, and only the ones it covers are explained again."""
        perf_map = self.resolver.symbolizer(self.resolver.watcher.current).perf_map()
        now = time.monotonic()
        if perf_map.version == self._jit_version or now - self._jit_named_at < JIT_NAMING_INTERVAL:
            return
        self._jit_version = perf_map.version
        tables, renamed = self._tables, []
        for frame_id, (generation, vma) in list(self._unnamed_jit.items()):
            if not perf_map.covers(vma):
                continue
            again = self.resolver.explain_again(generation, vma)
            del self._unnamed_jit[frame_id]  # named now, or its generation is gone
            if again is not None and again[1].symbol is not None:
                expl = again[1]
                object_id = self._object_id(again[0], expl)
                renamed.append(frame_record(frame_id, generation, expl, object_id))
        if renamed:
            tables.rename_frames(renamed)
            self.named_late = True
            self._jit_named_at = now

    def _record_frame_id(self, record: FrameRecord) -> int:
        tables = self._tables
        frame_id = tables.frame_id(record.key)
        if frame_id is None:
            frame_id = tables.add_frame(dataclasses.replace(record, id=len(tables.frames)))
        return frame_id

    def note_generation(self, generation: MapsGeneration) -> None:
        """Keep the facts of each maps generation the session used, for the capture."""
        if self._tables.has_generation(generation.number):
            return
        symbolizer = self.resolver.symbolizer(generation)
        records = tuple(self._mapping_record(facts) for facts in symbolizer.mappings())
        self._tables.add_generation(
            GenerationRecord(generation.number, generation.taken_at, records, self._pid)
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
