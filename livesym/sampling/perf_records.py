"""What a perf session's ring buffers say: the records read from them, made into
samples, mapping events, lost and throttled counts, forks, and the threads whose
stacks went past their copies.

``Records`` keeps what was read since the session last delivered; ``perf_event``
opens, maps and reads the rings, and hands each ring's records here. A sample keeps
its user registers (in DWARF numbering) and its stack copy for the engine to unwind,
or the user part of the kernel's call chain where there are no registers to unwind
from; the kernel's own frames where kernel mode is sampled. The common sample (the
session's process, 64-bit registers, a copy not to be raised) is made in C
(``livesym._perfsamples``: 1-1.6 us where parsing it here took 9-15 us); every other
record, and everything where that extension was not built, is parsed here.
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Callable, Iterable

from livesym.frozen import maker
from livesym.records import UserRegisters
from livesym.sampling import perf_abi as abi
from livesym.sampling.base import MapsHint, Sample, SamplerStats, SampleSink, ThreadState
from livesym.sampling.off_cpu import OffCpuIntervals
from livesym.target.maps_watcher import MappingEvent
from livesym.target.stack_extent import StackExtents
from livesym.target.threads import task_state

try:
    from livesym import _perfsamples
except ImportError:  # built where a compiler and Python's headers were there
    _perfsamples = None  # type: ignore[assignment]

REGS = abi.user_regs_layout()
# A sample's registers in DWARF numbering, picked in C (a tuple built by a generator
# was a sixth of the time a sample took to read).
_IN_DWARF_ORDER = operator.itemgetter(*REGS.dwarf_order) if REGS is not None else None
MAX_MAPPING_EVENTS = 10_000  # mmap records kept between deliveries (a dlopen loop is fast)
ASLEEP = (b"S", b"D")  # /proc states of a thread off the CPU waiting for something
# Hundreds of samples a second are made here: in one call each (livesym.frozen).
_SAMPLE = maker(Sample, "time", "pid", "tid", "ips", "state", "user_regs", "user_stack",
                "user_stack_complete", "kernel_ips")  # fmt: skip
_USER_REGISTERS = maker(UserRegisters, "machine", "values")


class Records:
    """The records of one session's rings since its last delivery. ``per_cpu`` says
    whether its events are on every CPU (else on every thread), ``kernel``
    whether kernel mode is sampled (it may be refused once events open),
    ``stack_grows`` whether copies may be raised, ``on_sample`` what the sampler does
    with each sample as it arrives (the mixed sampler reads the target then)."""

    def __init__(
        self,
        pid: int,
        per_cpu: Callable[[], bool],
        stats: SamplerStats,
        kernel: Callable[[], bool],
        stack_grows: Callable[[], bool],
        on_sample: Callable[[Sample], Sample] | None,
    ) -> None:
        self.pid = pid
        self._per_cpu = per_cpu  # events on every CPU (they may fall back to threads)
        self.stats = stats
        self._kernel = kernel
        self._stack_grows = stack_grows
        self._on_sample = on_sample
        self.pending: list[Sample] = []
        self.maps_dirty = False
        self.mappings: list[MappingEvent] = []  # mmap records since the last delivery
        self.fork_seen = False
        self.throttled = 0
        self.deeper: set[int] = set()  # threads whose stacks went past their copies
        self.fuller: set[int] = set()  # threads whose rings were half full when read
        self.stacks = StackExtents(pid)  # where full copies ended
        # Off-CPU intervals, where the session collects them (perf_switches' events).
        self.off_cpu: OffCpuIntervals | None = None

    def handle(self, tid: int, raisable: bool, records: Iterable[abi.Record]) -> None:
        """The records of the ring of thread ``tid`` (-1: a CPU's); ``raisable``: its
        copies are below the kernel's most."""
        for record in records:
            if isinstance(record, abi.SampleRecord):
                self._sample(tid, raisable, record)
            elif isinstance(record, abi.LostRecord | abi.LostSamplesRecord):
                self.stats.lost += record.lost
            elif isinstance(record, abi.MmapRecord | abi.Mmap2Record):
                self._mapped(record)
            elif isinstance(record, abi.TaskRecord):
                # FORK: this thread made a new one, attach now rather than at the next scan.
                # EXIT: the thread's own exit; its HUP (or the next scan) closes the event.
                if not self._per_cpu():
                    self.fork_seen = self.fork_seen or not record.exited
            elif isinstance(record, abi.ThrottleRecord):
                self._throttle(record)
            elif isinstance(record, abi.TruncatedRecord):
                self.stats.error(
                    f"perf ring buffer of thread {tid} held a damaged record "
                    f"(size {record.size} with {record.remaining} bytes left); rest skipped"
                )
            elif isinstance(record, abi.UnknownRecord) and record.problem:
                self.stats.error(f"perf record of type {record.type} skipped: {record.problem}")

    def handle_ring(
        self, tid: int, raisable: bool, data: bytes | memoryview, sample_type: int,
        regs_count: int, pid: int | None,
    ) -> None:  # fmt: skip
        """The records in ``data``, a ring's bytes (``handle``; ``pid``: another
        process's are skipped): the common samples made in C (``livesym._perfsamples``),
        every other record parsed here, in the ring's order."""

        def parsed(part: bytes | memoryview) -> Iterable[abi.Record]:
            return abi.parse_records(part, sample_type, True, regs_count, pid)

        layout = _quick_layout(sample_type, regs_count) if self._on_sample is None else None
        if layout is None or REGS is None:
            self.handle(tid, raisable, parsed(data))
            return
        items, end = _perfsamples.samples(
            data, *layout, regs_count, REGS.dwarf_order, REGS.pc, -1 if pid is None else pid,
            self._kernel(), raisable, _USER_REGISTERS, REGS.machine, _SAMPLE,
            ThreadState.RUNNING,
        )  # fmt: skip
        view = memoryview(data).cast("B")
        for item in items:
            if type(item) is int:
                self.handle(tid, raisable, parsed(abi.record_at(view, item)))
            else:
                self.pending.append(item)
        if end < len(view):  # a bad header: the parser says what is wrong
            self.handle(tid, raisable, parsed(view[end:]))

    def _mapped(self, record: abi.MmapRecord | abi.Mmap2Record) -> None:
        if self._per_cpu() and record.pid != self.pid:
            return  # another process's mapping
        self.maps_dirty = True
        if record.time is not None and len(self.mappings) < MAX_MAPPING_EVENTS:
            self.mappings.append(
                MappingEvent(
                    time=record.time / 1e9,
                    start=record.addr,
                    end=record.addr + record.len,
                    pgoff=record.pgoff,
                    path=record.filename,
                )
            )

    def handle_clock(self, tid: int, clocks: list[tuple[float, int]], lost: int) -> None:
        """Thread ``tid``'s switch-outs, each with the time it had run then (``off_cpu``)."""
        if self.off_cpu is not None:
            self.pending += self.off_cpu.clocked(tid, clocks)
        self.stats.lost += lost

    def handle_switches(self, tid: int, records: Iterable[abi.Record]) -> None:
        """The records of thread ``tid``'s off-CPU stack event: samples as it left a CPU
        (``off_cpu``)."""
        intervals = self.off_cpu
        if intervals is None:
            return
        for record in records:
            if isinstance(record, abi.SampleRecord):
                sample = self._made(tid, record)
                if sample is not None:
                    on_sample = self._on_sample  # read now, while the thread still waits
                    sample = sample if on_sample is None else on_sample(sample)
                    self.pending += intervals.switched_out(sample)
            elif isinstance(record, abi.LostRecord | abi.LostSamplesRecord):
                self.stats.lost += record.lost
            elif isinstance(record, abi.TruncatedRecord):
                self.stats.error(
                    f"off-CPU ring of thread {tid} held a damaged record; rest skipped"
                )

    def asleep(self, tid: int) -> bool:
        """Whether thread ``tid`` is asleep (in S or D) now."""
        return task_state(self.pid, tid) in ASLEEP

    def _sample(self, event_tid: int, raisable: bool, record: abi.SampleRecord) -> None:
        sample = self._made(event_tid, record, raisable)
        if sample is not None:
            on_sample = self._on_sample
            self.pending.append(sample if on_sample is None else on_sample(sample))

    def _made(
        self, event_tid: int, record: abi.SampleRecord, raisable: bool = False
    ) -> Sample | None:
        """The sample a record holds (None: nothing in it to place)."""
        regs = _user_registers(record)
        tid = record.tid if record.tid is not None else event_tid
        if (
            raisable
            and len(record.stack) >= record.stack_asked > 0
            and regs is not None
            and REGS is not None
            and REGS.sp < len(regs.values)
            and self._stack_grows()
            and self.stacks.ended_inside(tid, regs.values[REGS.sp], record.stack_asked)
        ):
            # A full copy that ended inside the thread's frames: raised at once, not a
            # batch or two later when the engine's unwinding says (``stack_cut_short``,
            # which covers the stacks ``stack_extent`` cannot place).
            self.deeper.add(tid)
        in_kernel = record.misc & abi.PERF_RECORD_MISC_CPUMODE_MASK == abi.PERF_RECORD_MISC_KERNEL
        if regs is not None and REGS is not None:
            ips = [record.regs[REGS.pc]]  # where user code runs, or entered the kernel
        else:
            ips = abi.user_frames(record.callchain)
            # The callchain normally starts with the sampled ip; add it when it does not.
            if not in_kernel and record.ip is not None and (not ips or ips[0] != record.ip):
                ips.insert(0, record.ip)
        kernel = tuple(abi.kernel_frames(record.callchain)) if self._kernel() else ()
        if not ips and not kernel:
            return None
        when = record.time / 1e9 if record.time is not None else time.monotonic()
        return _SAMPLE(
            when,
            record.pid if record.pid is not None else self.pid,
            tid,
            # With registers and a stack copy, the engine unwinds from the leaf.
            tuple(ips) if regs is None else tuple(ips[:1]),
            ThreadState.RUNNING,  # cpu-clock only fires while the thread is on a CPU
            regs,
            record.stack if regs is not None else None,
            len(record.stack) < record.stack_asked,
            kernel,
        )

    def _throttle(self, record: abi.ThrottleRecord) -> None:
        if record.throttled:
            self.throttled += 1
            self.stats.error(
                "the kernel throttled sampling (too many samples per tick for "
                "kernel.perf_event_max_sample_rate): samples were dropped; lower --rate"
            )

    def deliver(self, sink: SampleSink, maps_changed: MapsHint | None) -> None:
        """What was read since the last delivery: the mappings that changed, then the
        samples."""
        if self.maps_dirty:
            self.maps_dirty = False
            events, self.mappings = tuple(self.mappings), []
            if maps_changed is not None:
                maps_changed(events)
        if self.off_cpu is not None:
            self.pending += self.off_cpu.open_waits(time.monotonic(), self.asleep)
        if self.pending:
            batch, self.pending = self.pending, []
            self.stats.samples += len(batch)
            sink(batch)


@functools.lru_cache(maxsize=8)
def _quick_layout(sample_type: int, regs_count: int) -> tuple[int, int, int, bool] | None:
    """Where ``_perfsamples`` finds a sample's fixed part, its pid and tid, its time and
    whether a callchain follows (``abi.SampleLayout``); None where it cannot read this
    sample_type (no time, registers or copy), or was not built."""
    if _perfsamples is None or REGS is None or regs_count != REGS.count:
        return None
    layout = abi.sample_layout(sample_type)
    if layout.tid < 0 or layout.time < 0 or not (layout.regs and layout.stack):
        return None
    return layout.fixed, layout.tid, layout.time, layout.callchain


def _user_registers(record: abi.SampleRecord) -> UserRegisters | None:
    """A sample's user registers in DWARF numbering; None where there are none to
    unwind from (a kernel thread, a 32-bit process, a machine livesym cannot unwind)."""
    if (
        REGS is None
        or _IN_DWARF_ORDER is None
        or record.regs_abi != abi.REGS_ABI_64
        or len(record.regs) != REGS.count
    ):
        return None
    return _USER_REGISTERS(REGS.machine, _IN_DWARF_ORDER(record.regs))
