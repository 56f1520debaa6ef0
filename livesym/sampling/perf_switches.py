"""The off-CPU events of a perf session: two per thread of the target, firing as the
thread leaves a CPU (``off_cpu`` says what is made of them).

- a **clock** event at every switch (``clock_attr``): the moment and the time the thread
  has run, 40 bytes, read in bulk (``clock_records``: a struct over the whole ring, not a
  record at a time: a thread switching 100,000 times a second writes that many);
- a **stack** event (``stack_attr``, made from the session's on-CPU event: its registers,
  stack copy and the kernel's call chain) at one switch in P, P set per thread
  (``set_every``, PERF_EVENT_IOC_PERIOD) from its rate by ``off_cpu``.

Events per thread (pid=tid, cpu=-1), not per CPU: they fire only for the target's
switches, and a thread's software event's enabled time is its own time on a CPU. Their
samples are taken in the scheduler, so they need kernel mode (root, CAP_PERFMON,
perf_event_paranoid <= 1). What overflows a ring is counted as lost: a lost clock record
merges two waits into one (none of their time is lost), a lost stack sample leaves its
waits to the next.

The kernel (6.1 here) writes the samples of one switch's events from one shared record
of what it gathered: an event's sample takes the size of the variable parts (call chain,
stack copy) of the events that wrote before it too, its own fields first and the rest
filler. The clock is opened last, so that it writes first (newest first), and its
records are read by their own fields whatever their size: another tool's switch event on
the same thread (``perf record -e context-switches``) may write before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from livesym.sampling import perf_abi as abi
from livesym.sampling.base import SamplerStats
from livesym.sampling.perf_ring import RingBuffer

# The flags the on-CPU event has that a switch event must not: frequency mode (a
# switch event fires at every switch), the side-band records the on-CPU events already
# deliver, and excluding kernel mode or its call chain (the wait is in the kernel).
_NOT_FOR_SWITCHES = (
    abi.AttrFlag.FREQ
    | abi.AttrFlag.MMAP
    | abi.AttrFlag.MMAP2
    | abi.AttrFlag.TASK
    | abi.AttrFlag.EXCLUDE_IDLE
    | abi.AttrFlag.EXCLUDE_KERNEL
    | abi.AttrFlag.EXCLUDE_CALLCHAIN_KERNEL
)

# Records handed on: the thread of the event, and its ring's records; the clock's: the
# thread, its switch-outs (seconds, ns run before), and the records lost.
OnRecords = Callable[[int, Iterable[abi.Record]], None]
OnClock = Callable[[int, list[tuple[float, int]], int], None]

CLOCK_PAGES = 64  # a clock ring: 256 KiB, 6,500 switches (read when half full)
_CLOCK_TYPE = abi.SampleType.TIME | abi.SampleType.READ
# A clock sample: header (type, misc, size), time, then the read: value, enabled, running.
_CLOCK = struct.Struct("=IHHQQQQ")
_HEADER = struct.Struct("=IHH")
_LOST = struct.Struct("=QQ")


def stack_attr(
    base: abi.PerfEventAttr, data_size: int, wake_each: bool = False
) -> abi.PerfEventAttr:
    """The session's event (``base``: its sample type, registers and stack copy) made
    an off-CPU one: a sample as the thread leaves a CPU, every switch until told less.
    ``wake_each``: livesym is woken at each sample, to read the target while the thread
    still waits (the mixed sampler's Python frames), else as a quarter of the ring fills."""
    attr = abi.PerfEventAttr()
    ctypes.memmove(ctypes.addressof(attr), ctypes.addressof(base), ctypes.sizeof(attr))
    attr.type = abi.PERF_TYPE_SOFTWARE
    attr.config = abi.PERF_COUNT_SW_CONTEXT_SWITCHES
    attr.sample_period = 1
    attr.flags = int(base.flags) & ~int(_NOT_FOR_SWITCHES)
    attr.wakeup_watermark = 1 if wake_each else max(1, data_size // 4)
    return attr


def clock_attr(page: int) -> abi.PerfEventAttr:
    """The clock event: at every switch out, its time and the thread's time run."""
    attr = abi.PerfEventAttr()
    attr.type = abi.PERF_TYPE_SOFTWARE
    attr.size = ctypes.sizeof(abi.PerfEventAttr)
    attr.config = abi.PERF_COUNT_SW_CONTEXT_SWITCHES
    attr.sample_period = 1
    attr.sample_type = _CLOCK_TYPE
    attr.read_format = abi.READ_FORMAT
    attr.flags = (abi.AttrFlag.DISABLED | abi.AttrFlag.EXCLUDE_HV | abi.AttrFlag.USE_CLOCKID
                  | abi.AttrFlag.WATERMARK)  # fmt: skip
    attr.clockid = abi.CLOCK_MONOTONIC
    attr.wakeup_watermark = CLOCK_PAGES * page // 2
    return attr


def clock_records(data: bytes | memoryview) -> tuple[list[tuple[float, int]], int]:
    """A clock ring's switch-outs (seconds, ns run before), and the records it lost:
    all at once where the ring holds nothing but samples (the usual), else record by
    record, skipping what is not a sample (hostile sizes end the walk)."""
    size = _CLOCK.size
    if len(data) % size == 0:
        rows = list(_CLOCK.iter_unpack(data))
        if all(r[0] == abi.PERF_RECORD_SAMPLE and r[2] == size for r in rows):
            return [(r[3] / 1e9, r[5]) for r in rows], 0
    out: list[tuple[float, int]] = []
    lost = offset = 0
    while offset + _HEADER.size <= len(data):
        rtype, _misc, length = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size or offset + length > len(data):
            break
        if rtype == abi.PERF_RECORD_SAMPLE and length >= size:
            # Longer than its fields where another event of the thread's switch wrote
            # before it (see the module doc): its own fields come first.
            r = _CLOCK.unpack_from(data, offset)
            out.append((r[3] / 1e9, r[5]))
        elif rtype == abi.PERF_RECORD_LOST and length >= _HEADER.size + _LOST.size:
            lost += _LOST.unpack_from(data, offset + _HEADER.size)[1]
        offset += length
    return out, lost


@dataclass
class _Pair:
    """A thread's two events: (fd, ring) each."""

    stack: tuple[int, RingBuffer]
    clock: tuple[int, RingBuffer]


class SwitchEvents:
    """The switch events of one session's threads: opened as threads appear (``follow``),
    read as their rings fill or the session drains, closed with the session."""

    def __init__(
        self,
        attr: abi.PerfEventAttr,
        pages: int,
        loop: asyncio.AbstractEventLoop,
        wake: asyncio.Event,
        stats: SamplerStats,
        on_records: OnRecords,
        on_clock: OnClock,
    ) -> None:
        self.attr = attr
        self.pages = pages
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.clock = clock_attr(self.page)
        self.loop = loop
        self.wake = wake
        self.stats = stats
        self.on_records = on_records
        self.on_clock = on_clock
        self.events: dict[int, _Pair] = {}
        self.refused: set[int] = set()  # threads whose events could not be had
        self.elsewhere: set[int] = set()  # threads handed over (``hand_over``)
        self.ready: set[int] = set()
        self.parse: Callable[[bytes | memoryview], Iterable[abi.Record]] = lambda data: ()
        self.on_open: Callable[[int, float], None] = lambda tid, when: None
        self.on_gone: Callable[[int], None] = lambda tid: None
        # A new thread's stack event's first period (its rate so far, before one is seen).
        self.first_every: Callable[[int], int] = lambda tid: 1

    def follow(self, tids: frozenset[int] | set[int]) -> None:
        """Events for the threads in ``tids`` that have none, closed for those gone
        (what their rings hold read first, then ``on_gone``)."""
        for tid in [t for t in self.events if t not in tids]:
            self._retire(tid)
        self.refused &= tids
        self.elsewhere &= tids
        for tid in sorted(tids - self.events.keys() - self.refused - self.elsewhere):
            self._open(tid)

    def hand_over(self, tid: int) -> None:
        """Thread ``tid``'s events closed for good (what they hold read first, then
        ``on_gone``): its off-CPU time is read some other way from now on."""
        self._retire(tid)
        self.elsewhere.add(tid)

    def _retire(self, tid: int) -> None:
        """What the thread's events hold read, the events closed, ``on_gone`` told."""
        self.drain(tid)
        self.close_event(tid)
        self.on_gone(tid)

    def _open(self, tid: int) -> None:
        opened: list[tuple[int, RingBuffer]] = []
        try:
            # The stack event first: the kernel runs a switch's events newest first, and
            # (the module doc) a record's size then includes its predecessors' stacks.
            for attr, pages in ((self.attr, self.pages), (self.clock, CLOCK_PAGES)):
                fd = abi.perf_event_open(attr, tid, -1, -1, abi.PERF_FLAG_FD_CLOEXEC)
                try:
                    opened.append((fd, RingBuffer(fd, pages, self.page)))
                except OSError:
                    os.close(fd)
                    raise
        except OSError as e:
            for fd, ring in opened:
                ring.close()
                os.close(fd)
            if e.errno != errno.ESRCH:  # not a thread that just ended
                self.refused.add(tid)
                self.stats.error(f"thread {tid}'s off-CPU time not seen: {e.strerror or e}")
            return
        pair = self.events[tid] = _Pair(stack=opened[0], clock=opened[1])
        every = self.first_every(tid)
        try:
            if every > 1:
                abi.ioctl_period(pair.stack[0], every)
            for fd, _ring in (pair.clock, pair.stack):
                self.loop.add_reader(fd, self._on_readable, tid)
            abi.ioctl_enable(pair.stack[0])  # the stack first: no switch-out without its clock
            abi.ioctl_enable(pair.clock[0])
        except (OSError, RuntimeError):
            self.close_event(tid)
            return
        self.on_open(tid, time.monotonic())

    def set_every(self, tid: int, every: int) -> None:
        """Thread ``tid``'s stack event fires at one switch in ``every`` from now on."""
        pair = self.events.get(tid)
        if pair is not None:
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                abi.ioctl_period(pair.stack[0], every)

    def _on_readable(self, tid: int) -> None:
        self.ready.add(tid)
        self.wake.set()

    def drain_ready(self) -> None:
        for tid in list(self.ready):
            self.ready.discard(tid)
            self.drain(tid)

    def drain_all(self) -> None:
        self.ready.clear()
        for tid in list(self.events):
            self.drain(tid)

    def drain(self, tid: int) -> None:
        """The thread's switch-outs, then its stacks (whose waits the clock ends)."""
        pair = self.events.get(tid)
        if pair is None:
            return
        if not pair.clock[1].empty():  # (most threads switched nowhere since the last)
            with self._published(tid, pair.clock[1]) as data:
                if data:
                    clocks, lost = clock_records(data)
                    self.on_clock(tid, clocks, lost)
        if not pair.stack[1].empty():
            with self._published(tid, pair.stack[1]) as data:
                if data:
                    self.on_records(tid, self.parse(data))

    @contextlib.contextmanager
    def _published(self, tid: int, ring: RingBuffer) -> Iterator[bytes | memoryview]:
        with contextlib.ExitStack() as held:
            try:
                data = held.enter_context(ring.published())
            except ValueError as e:
                self.stats.error(f"off-CPU ring of thread {tid} was inconsistent: {e}")
                data = b""
            yield data

    def close_event(self, tid: int) -> None:
        pair = self.events.pop(tid, None)
        self.ready.discard(tid)
        if pair is None:
            return
        for fd, ring in (pair.clock, pair.stack):
            with contextlib.suppress(OSError, RuntimeError):
                self.loop.remove_reader(fd)
                abi.ioctl_disable(fd)
            ring.close()
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        for tid in list(self.events):
            self.close_event(tid)
