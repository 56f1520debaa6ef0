"""Sampling with perf_event_open: software cpu-clock events on every CPU, or on every
thread of the target.

**Per CPU, where permitted** (root, CAP_PERFMON, or kernel.perf_event_paranoid <= 0):
an event on each online CPU (pid=-1, cpu=N), one ring each, fires ``rate_hz`` times a
second of that CPU's time, whoever runs there; samples of other processes are skipped
before they are parsed. A thread's CPU time is sampled wherever it is spent, however
little each thread has: a pool of 1,000 threads each running 0.03 ms every 50 ms
(half a core in all) got no sample from per-thread events in 8 s (perf's ``-p`` too),
as each per-thread event waits for 10 ms of its own thread's CPU time. Threads born
and gone between two looks at /proc are sampled too, and a process with thousands of
threads needs one ring per CPU, not one per thread. **Per thread, elsewhere** (and in a
session of several processes, where every process's events per CPU would each see
every sample): each thread gets its own event (pid=tid, cpu=-1) and its own mmap'd
ring buffer. ``PerfSampler.scope`` says which, and why.

A per-thread event fires ``rate_hz`` times per second of the
thread's on-CPU time and writes a PERF_RECORD_SAMPLE (ip, pid/tid, time,
user callchain, the user registers and a copy of ``stack_size`` bytes of the
user stack from its pointer up) into the ring. The engine unwinds the copy from
call-frame information (livesym.unwind); the kernel's frame-pointer callchain
is kept for a process whose registers livesym cannot unwind (32-bit). We read
the rings when their fd becomes
readable (a watermark) and every DRAIN_INTERVAL anyway, so quiet threads
still deliver promptly. /proc/<pid>/task is rescanned every RESCAN_INTERVAL
(and at once after a PERF_RECORD_FORK) to attach to new threads.
The ring buffers' protocol is in ``perf_ring``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass

from livesym.errors import TargetError, UsageError
from livesym.records import KERNEL_SAMPLED, KernelMode
from livesym.sampling import perf_abi as abi
from livesym.sampling.base import (
    MapsHint,
    Sample,
    Sampler,
    SamplerEnd,
    SamplerStats,
    SampleSink,
    on_grid,
)
from livesym.sampling.off_cpu import OffCpuIntervals, blocked_at
from livesym.sampling.off_cpu_poll import WaitPoller, switch_budget
from livesym.sampling.perf_records import ASLEEP, REGS, Records
from livesym.sampling.perf_ring import RingBuffer as _RingBuffer
from livesym.sampling.perf_switches import SwitchEvents, stack_attr
from livesym.target.permissions import (
    CAP_PERFMON,
    CAP_SYS_ADMIN,
    effective_caps,
    has_cap,
    read_sysctl,
)
from livesym.target.threads import GONE, live_threads, switch_rate, task_state

DEFAULT_STACK_SIZE = 16 * 1024  # bytes of user stack copied per sample (--stack-size)
MAX_STACK_SIZE = 65528  # the kernel's limit (a u16 record size, less the header)
# A thread whose stack went on past its copy (the engine says so: ``stack_cut_short``)
# gets its event opened again with copies of MAX_STACK_SIZE, unless --stack-size fixed
# the size. Copies that large for every thread would cost rings four times the size for
# the many threads whose stacks are shallow (bench/overhead.py --depth measures what deep
# stacks cost); deep ones are few (a compiler's parser, a recursive walk, deep C++).
DEEP_RING_SAMPLES = 2  # a deep thread's ring holds this many copies at least
MIN_DATA_PAGES = 8
PAGE = os.sysconf("SC_PAGE_SIZE")
RING_SAMPLES = 16  # samples a ring holds at the stack size asked for, at least
# ... and at least this many seconds of one busy thread's samples at the rate: at 999 Hz
# a 16-sample ring filled in 16 ms, and a stall of the event loop that long (a
# collection, a big batch unwound) lost samples on a busy machine; 60 ms rings still
# lost 1.1 % with both cores taken by other work. 0.25 s at 999 Hz with 16 KiB stack
# copies is a 4 MiB ring per thread (MAX_RING_TOTAL bounds them all); at 99 Hz the 16
# samples above are more.
RING_SECONDS = 0.25
# Bytes of a sample record besides its stack copy: header, ip, tid, time, registers and
# a kernel callchain of up to MAX_STACK frames (1 KiB).
RECORD_EXTRA = 1280
MAX_RING_TOTAL = 64 << 20  # bytes of rings over all threads: smaller rings beyond that
DRAIN_INTERVAL = 0.1  # seconds between reads of every ring, readable or not
# ... and for the first EARLY_SECONDS, this often: a thread deeper than its copy is
# seen (and its copies raised) after a sample or two rather than a ring's worth.
# Woken at each sample, samples go to the session at most this often, in batches.
DELIVER_INTERVAL = 0.02
EARLY_DRAIN_INTERVAL = 0.01
EARLY_SECONDS = 0.3
RESCAN_INTERVAL = 0.2  # seconds between looks at /proc/<pid>/task
# ... at most, however seldom the engine takes the samples (``pace``): a new thread's
# events are opened within this (a recording's rounds are half a second).
MAX_RESCAN_INTERVAL = 0.5
# Seconds between settings of the switch events' periods (off-CPU time): a thread that
# switches 25,000 times a second fills its ring in a few milliseconds at first.
ADAPT_INTERVAL = 0.005
MAX_STACK = 127  # frames per callchain (the kernel's default perf_event_max_stack)
MAX_CPUS = 4096  # CPUs given an event each, at most

SAMPLE_TYPE = (
    abi.SampleType.IP | abi.SampleType.TID | abi.SampleType.TIME | abi.SampleType.CALLCHAIN
) | ((abi.SampleType.REGS_USER | abi.SampleType.STACK_USER) if REGS is not None else 0)

# Errors that mean the kernel (or a seccomp filter) offers no perf_event_open here.
_UNAVAILABLE = {errno.ENOSYS, errno.ENOENT, errno.ENODEV, errno.EOPNOTSUPP}
_DENIED = {errno.EACCES, errno.EPERM}


def _read_sysctl(name: str) -> str | None:
    return read_sysctl(f"kernel/{name}")


def _denied_message() -> str:
    level = _read_sysctl("perf_event_paranoid") or "unknown"
    return (
        f"perf_event_open not permitted (perf_event_paranoid={level}); "
        "run as root, or use --sampler ptrace"
    )


_UNAVAILABLE_MESSAGE = "perf_event_open is not available on this kernel; use --sampler ptrace"


# --- one event ----------------------------------------------------------------------


@dataclass
class _ThreadEvent:
    tid: int
    fd: int
    ring: _RingBuffer
    stack_size: int  # bytes of stack its samples copy
    watched: bool = False  # registered with loop.add_reader


def data_pages_for(
    stack_size: int, page: int, rate_hz: int = 0, seconds: float = RING_SECONDS
) -> int:
    """Ring pages (a power of two) for RING_SAMPLES samples with ``stack_size`` copies,
    or ``seconds`` of them at ``rate_hz`` where that is more."""
    samples = max(RING_SAMPLES, round(rate_hz * seconds))
    need = samples * (stack_size + RECORD_EXTRA) // page
    pages = MIN_DATA_PAGES
    while pages < need:
        pages *= 2
    return pages


def kernel_refused() -> str | None:
    """None where this process may sample kernel mode, else why not: root, CAP_PERFMON
    (or CAP_SYS_ADMIN) or kernel.perf_event_paranoid <= 1 may. The kernel asks for the
    capabilities, not the uid: root without them (a container's) is refused too."""
    caps = effective_caps()
    if has_cap(CAP_PERFMON, caps) or has_cap(CAP_SYS_ADMIN, caps):
        return None
    level = _read_sysctl("perf_event_paranoid") or "unknown"
    if level.lstrip("-").isdigit() and int(level) <= 1:
        return None
    return (
        f"not permitted (perf_event_paranoid={level}, no CAP_PERFMON): run as root, "
        "or sysctl kernel.perf_event_paranoid=1"
    )


def online_cpus() -> list[int]:
    """The online CPUs (/sys/devices/system/cpu/online: "0-3,6"), at most MAX_CPUS;
    every CPU ``os.cpu_count`` counts where the file cannot be read."""
    try:
        with open("/sys/devices/system/cpu/online", "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
    except OSError:
        return list(range(min(os.cpu_count() or 1, MAX_CPUS)))
    cpus: list[int] = []
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            continue
        first, last = int(low), int(high or low)
        cpus.extend(range(first, min(last, first + MAX_CPUS) + 1))
        if len(cpus) >= MAX_CPUS:
            break
    return sorted(set(cpus))[:MAX_CPUS] or [0]


def _attr(
    rate_hz: int,
    data_size: int,
    stack_size: int = 0,
    kernel: bool = False,
    per_cpu: bool = False,
    wake_each: bool = False,
) -> abi.PerfEventAttr:
    attr = abi.PerfEventAttr()
    attr.type = abi.PERF_TYPE_SOFTWARE
    attr.size = ctypes.sizeof(abi.PerfEventAttr)
    attr.config = abi.PERF_COUNT_SW_CPU_CLOCK
    # Per thread, the kernel's frequency mode: it fires rate_hz times a second of the
    # thread's CPU time. Per CPU, a fixed period of CPU-clock nanoseconds: frequency
    # mode there fired a pool of short-running threads 57 % too rarely at 499 Hz (its
    # period is tuned at the ticks of a CPU that sleeps between the bursts).
    if per_cpu:
        attr.sample_period = round(1e9 / rate_hz)
    else:
        attr.sample_freq = rate_hz
    attr.sample_type = SAMPLE_TYPE
    where: int
    if not kernel:  # what paranoid level 2 allows
        where = abi.AttrFlag.EXCLUDE_KERNEL | abi.AttrFlag.EXCLUDE_CALLCHAIN_KERNEL
    elif REGS is not None:  # the user part is unwound from the stack copy
        where = abi.AttrFlag.EXCLUDE_CALLCHAIN_USER
    else:
        where = 0
    flags = (
        abi.AttrFlag.DISABLED  # enabled once the ring is mapped and watched
        | (0 if per_cpu else abi.AttrFlag.FREQ)
        | where
        | abi.AttrFlag.EXCLUDE_HV
        | abi.AttrFlag.USE_CLOCKID  # sample times on CLOCK_MONOTONIC, as Sample.time is
        | abi.AttrFlag.SAMPLE_ID_ALL  # mmap records carry their time too
        | abi.AttrFlag.WATERMARK
        # Mappings and thread births are reported to the event of the thread that
        # made them (the kernel writes side-band records into current's events
        # only), so every event asks for them, not just the first thread's.
        | abi.AttrFlag.MMAP
        | abi.AttrFlag.MMAP2
        | abi.AttrFlag.TASK
    )
    if per_cpu:
        flags |= abi.AttrFlag.EXCLUDE_IDLE  # an idle CPU's ticks are nobody's samples
    attr.flags = flags
    attr.wakeup_watermark = _watermark(data_size, stack_size, wake_each)
    attr.clockid = abi.CLOCK_MONOTONIC
    limit = _read_sysctl("perf_event_max_stack")
    attr.sample_max_stack = min(MAX_STACK, int(limit)) if limit and limit.isdigit() else MAX_STACK
    if REGS is not None:
        attr.sample_regs_user = REGS.mask
        attr.sample_stack_user = stack_size
    return attr


def _watermark(data_size: int, stack_size: int, wake_each: bool) -> int:
    """Bytes written to a ring between two wake-ups of livesym (the kernel counts the
    bytes written since its last wake-up, not the bytes unread): every sample where the
    sampler reads the target at each sample's moment (``PerfSampler.on_sample``);
    elsewhere three quarters of the ring, or less where two more samples would not fit
    after that.

    Every ring is drained every DRAIN_INTERVAL anyway and holds RING_SECONDS of one busy
    thread's samples at the rate, so a wake-up need only come before a ring can fill,
    not every few samples: a small ring (many threads' rings within MAX_RING_TOTAL, deep
    copies) still wakes livesym at each sample. At a quarter, a steady session at 99 Hz on
    two CPUs was woken 25 times a second by its rings; at three quarters, 9. Woken by its
    own samples at nice -20, livesym was also given fewer of a thread pool's samples by
    the kernel than perf -a beside a busy core: 0.82-1.07 of them (mean 0.93), now
    0.94-1.06 (mean 0.99)."""
    if wake_each:
        return 1
    record = stack_size + RECORD_EXTRA
    return max(1, min(data_size * 3 // 4, data_size - 2 * record))


def _is_hup(fd: int) -> bool:
    # The fd of an event whose thread has exited polls as POLLHUP forever.
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return any(mask & select.POLLHUP for _, mask in poller.poll(0))


def _no_such_process(pid: int) -> str:
    return f"cannot attach to {pid}: no such process; check the PID with ps or pgrep"


def _first_open_message(pid: int, e: OSError) -> str:
    if e.errno == errno.ESRCH:
        return _no_such_process(pid)
    if e.errno in _DENIED:
        return f"cannot attach to {pid}: {_denied_message()}"
    if e.errno in _UNAVAILABLE:
        return f"cannot attach to {pid}: {_UNAVAILABLE_MESSAGE}"
    reason = os.strerror(e.errno) if e.errno else str(e)
    return f"cannot attach to {pid}: perf_event_open failed ({reason}); use --sampler ptrace"


def _map_message(e: OSError, ring_bytes: int) -> str:
    # The kernel charges ring buffers to perf_event_mlock_kb, then to RLIMIT_MEMLOCK.
    return (
        f"cannot map a {ring_bytes // 1024} KiB perf ring buffer "
        f"({os.strerror(e.errno) if e.errno else e}); "
        "raise 'ulimit -l' or kernel.perf_event_mlock_kb, or run as root"
    )


# --- a sampling session ----------------------------------------------------------------


# A CPU's clock runs on whoever is on it: livesym woken at a sample of a thread runs
# there at once (it preempted the thread 40-60 us after each tick here), and the CPU's
# next tick finds the thread running again, so it is charged a whole period for the
# time livesym took. A Python thread read 16 % more CPU time than it had; in wall time
# that time was counted twice, as CPU and as the preemptions' waits. A thread's own
# clock stops while it waits: a sampler woken at every sample (the mixed sampler's own
# read of the Python frames) has events per thread, and loses the threads that live
# less than a look at /proc (a pool's 0.03 ms threads; a Python thread lives longer).
WOKEN_PER_THREAD = "per thread (livesym woken at every sample)"


class _Session:
    """The events of one ``run``: opened, read and (always) closed together."""

    def __init__(
        self, sampler: PerfSampler, loop: asyncio.AbstractEventLoop, wake: asyncio.Event
    ) -> None:
        self.pid = sampler.pid
        self.stats: SamplerStats = sampler.stats
        self.data_pages = sampler.data_pages
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.stack_size = sampler.stack_size
        self.sampler = sampler
        self.kernel = sampler.kernel_mode.sampled  # as decided when it was made
        # Events on every CPU, if permitted (else per thread); per thread where livesym is
        # woken at every sample (``WOKEN_PER_THREAD``).
        self.per_cpu = sampler.per_cpu and not self._wakes_each
        if sampler.per_cpu and not self.per_cpu:
            sampler.scope = WOKEN_PER_THREAD
        self.attr = self._make_attr()
        self.regs_count = REGS.count if REGS is not None else 0
        self.loop = loop
        self.wake = wake
        self.events: dict[int, _ThreadEvent] = {}
        self.retired: set[int] = set()  # tids whose events ended while /proc still lists them
        self.ready: set[int] = set()
        self.records = Records(
            self.pid, lambda: self.per_cpu, self.stats, lambda: self.kernel, sampler.stack_grows,
            sampler.on_sample,
        )  # fmt: skip
        self.cpus: dict[int, _ThreadEvent] = {}  # cpu -> its event (tid -1)
        self.ready_cpus: set[int] = set()
        # While the first events open, none is enabled: a target with hundreds of
        # threads takes a while, and early rings would fill unread meanwhile.
        self.attaching = False
        self.switches: SwitchEvents | None = None  # off-CPU events (--mode wall, off-cpu)
        self.poller: WaitPoller | None = None  # off-CPU time of the others, from /proc

    def _make_attr(self) -> abi.PerfEventAttr:
        return self._attr_for(self.data_pages, self.stack_size)

    def _attr_for(self, pages: int, stack_size: int) -> abi.PerfEventAttr:
        """The session's event, with a ring of ``pages`` and copies of ``stack_size``."""
        return _attr(self.sampler.rate_hz, pages * self.page, stack_size, self.kernel,
                     self.per_cpu, self._wakes_each)  # fmt: skip

    @property
    def _wakes_each(self) -> bool:
        """Woken at every sample: the sampler reads the target at each sample's moment."""
        return self.sampler.on_sample is not None

    # --- opening and closing

    def open_event(
        self, tid: int, deep_pages: int = 0, stack_size: int = MAX_STACK_SIZE
    ) -> _ThreadEvent:
        """Open, map, watch and enable the event of one thread (OSError on failure);
        with ``deep_pages``, copies of ``stack_size`` into a ring of that many pages."""
        try:
            fd = self._open(tid, deep_pages, stack_size=stack_size)
        except OSError as e:
            if not self.kernel or e.errno not in _DENIED:
                raise
            # Kernel mode refused after all (a seccomp filter, an LSM): user mode only.
            self.kernel = False
            why = f"refused ({os.strerror(e.errno or 0)})"
            self.sampler.kernel_mode = KernelMode.not_sampled(why)
            self.sampler.kernel_accounted = False
            self.attr = self._make_attr()
            fd = self._open(tid, deep_pages, stack_size=stack_size)
        event = self._mapped(tid, fd, deep_pages, stack_size)
        self.events[tid] = event
        try:
            self.loop.add_reader(fd, self._on_readable, tid)
            event.watched = True
            if not self.attaching:
                abi.ioctl_enable(fd)
        except BaseException:
            self.close_event(tid)
            raise
        return event

    def _open(self, tid: int, pages: int, cpu: int = -1, stack_size: int = MAX_STACK_SIZE) -> int:
        attr = self.attr
        if pages:
            attr = self._attr_for(pages, stack_size)
        return abi.perf_event_open(attr, tid, cpu, -1, abi.PERF_FLAG_FD_CLOEXEC)

    def _mapped(
        self, tid: int, fd: int, pages: int, stack_size: int = MAX_STACK_SIZE
    ) -> _ThreadEvent:
        """The event of ``fd`` with its ring mapped (``pages`` of it for copies of
        ``stack_size``, else the session's); the fd closed and _MapError raised where
        mmap refuses."""
        try:
            ring = _RingBuffer(fd, pages, self.page) if pages else self._map(fd)
        except OSError as e:
            os.close(fd)
            raise _MapError(e.errno or errno.ENOMEM, e.strerror or "mmap failed") from None
        return _ThreadEvent(tid, fd, ring, stack_size if pages else self.stack_size)

    def open_cpu_event(self, cpu: int, deep_pages: int = 0) -> _ThreadEvent:
        """Open, map and watch the event of one CPU (enabled by the caller)."""
        event = self._mapped(-1, self._open(-1, deep_pages, cpu), deep_pages)
        self.cpus[cpu] = event
        try:
            self.loop.add_reader(event.fd, self._on_cpu_readable, cpu)
            event.watched = True
        except BaseException:
            self.close_cpu_event(cpu)
            raise
        return event

    def close_cpu_event(self, cpu: int) -> None:
        event = self.cpus.pop(cpu, None)
        if event is not None:
            self.ready_cpus.discard(cpu)
            self._shut(event)

    def _map(self, fd: int) -> _RingBuffer:
        """The ring of one event; smaller ones where the locked-memory limit refuses
        (said once: stack copies of busy threads may then be lost, and counted)."""
        while True:
            try:
                return _RingBuffer(fd, self.data_pages, self.page)
            except OSError as e:
                if e.errno != errno.EPERM or self.data_pages <= MIN_DATA_PAGES:
                    raise
                self._resize(self.data_pages // 2)
                self.stats.error(
                    f"perf ring buffers cut to {self.data_pages * self.page // 1024} KiB a "
                    "thread by the locked-memory limit; at high rates samples may be lost "
                    "(raise 'ulimit -l' or kernel.perf_event_mlock_kb, or lower --stack-size)"
                )

    def attach(self) -> None:
        """Open the first events; raise TargetError if the target cannot be sampled."""
        if self.pid <= 0:
            raise TargetError(_no_such_process(self.pid))
        if self.per_cpu and self._attach_cpus():
            return
        self._fit_rings(len(live_threads(self.pid) or ()))
        self.attaching = True
        try:
            self._attach()
        finally:
            self.attaching = False
        for event in list(self.events.values()):
            with contextlib.suppress(OSError):  # a thread that exited meanwhile
                abi.ioctl_enable(event.fd)

    def _attach_cpus(self) -> bool:
        """Events on every online CPU; False (nothing left open, the scope said) where
        the kernel refuses them, and the threads get events of their own instead."""
        if not live_threads(self.pid):
            raise TargetError(_no_such_process(self.pid))
        cpus = online_cpus()
        self._fit_rings(len(cpus))
        refused: OSError | None = None
        for cpu in cpus:
            try:
                self.open_cpu_event(cpu)
            except abi.UnsupportedMachine as e:
                raise TargetError(f"cannot attach to {self.pid}: {e.strerror}") from None
            except OSError as e:
                if e.errno in (errno.ENODEV, errno.ENXIO, errno.EINVAL) and self.cpus:
                    continue  # a CPU that went offline meanwhile
                refused = e
                break
        if refused is not None or not self.cpus:
            for cpu in list(self.cpus):
                self.close_cpu_event(cpu)
            self.per_cpu = False
            self.attr = self._make_attr()
            why = os.strerror(refused.errno or 0) if refused is not None else "no CPU"
            self.sampler.scope = f"per thread (events per CPU refused: {why})"
            return False
        for event in self.cpus.values():
            with contextlib.suppress(OSError):
                abi.ioctl_enable(event.fd)
        self.sampler.scope = "per CPU"
        return True

    def _fit_rings(self, threads: int) -> None:
        """Rings within MAX_RING_TOTAL for all the threads there are: every thread has
        its own ring (per-thread events cannot share one)."""
        pages = self.data_pages
        while pages > MIN_DATA_PAGES and threads * (1 + pages) * self.page > MAX_RING_TOTAL:
            pages //= 2
        self._resize(pages)

    def _resize(self, pages: int) -> None:
        """Rings of ``pages`` from now on, their watermark fitted to them (``_watermark``)."""
        self.data_pages = pages
        self.attr.wakeup_watermark = _watermark(
            pages * self.page, self.attr.sample_stack_user, self._wakes_each
        )

    def _attach(self) -> None:
        try:
            self.open_event(self.pid)
        except abi.UnsupportedMachine as e:
            raise TargetError(f"cannot attach to {self.pid}: {e.strerror}") from None
        except _MapError as e:
            raise TargetError(
                f"cannot attach to {self.pid}: {_map_message(e, (1 + self.data_pages) * self.page)}"
            ) from None
        except OSError as e:
            # A leader that called pthread_exit cannot be sampled but its threads can.
            if e.errno != errno.ESRCH or not live_threads(self.pid):
                raise TargetError(_first_open_message(self.pid, e)) from None
        self.rescan()

    def close_event(self, tid: int) -> None:
        """Stop, unmap and close one event; safe to call at any point of its life."""
        event = self.events.pop(tid, None)
        if event is not None:
            self.ready.discard(tid)
            self._shut(event)

    def _shut(self, event: _ThreadEvent) -> None:
        try:
            if event.watched:
                self.loop.remove_reader(event.fd)
            abi.ioctl_disable(event.fd)
        except (OSError, RuntimeError):
            pass  # disabling is a courtesy; closing the fd frees the event anyway
        finally:
            event.ring.close()
            with contextlib.suppress(OSError):  # never let one fd keep the others open
                os.close(event.fd)

    def retire(self, tid: int) -> None:
        """The thread has ended: deliver what its ring holds and close the event."""
        event = self.events.get(tid)
        if event is not None:
            self.drain(event)
            self.close_event(tid)
            self.retired.add(tid)

    def close(self) -> None:
        if self.switches is not None:
            self.switches.close()
        if self.poller is not None:
            self.poller.close()
        for tid in list(self.events):
            self.close_event(tid)
        for cpu in list(self.cpus):
            self.close_cpu_event(cpu)

    # --- following the threads

    def rescan(self) -> bool:
        """Attach to new threads, drop ended ones; return False when the target is gone."""
        self.records.fork_seen = False
        if self.per_cpu:  # the events per CPU see every thread: is the target there?
            # Its leader's state alone, unless that is a zombie (a leader that called
            # pthread_exit): not a list of a pool's 1,000 threads five times a second
            # (livesym's CPU on that pool: 13-18 ticks in 4 s before, 12-13 after).
            if self.switches is not None or self.poller is not None:  # every thread's own
                tids = live_threads(self.pid)
                follow_waits(self, tids or set())
                return bool(tids)
            return task_state(self.pid, self.pid) not in GONE or bool(live_threads(self.pid))
        tids = live_threads(self.pid)
        if not tids:
            return False
        follow_waits(self, tids)
        for tid in list(self.events):
            if tid not in tids:
                self.retire(tid)
        self.retired &= tids
        for tid in sorted(tids - self.events.keys() - self.retired):
            self.open_later(tid)
        return True

    def open_later(self, tid: int) -> None:
        try:
            self.open_event(tid)
            # Mappings the thread made before we attached were reported to nobody.
            self.records.maps_dirty = True
        except _MapError as e:
            self.retired.add(tid)  # the same limit would refuse it again on every rescan
            self.stats.error(
                f"thread {tid} not sampled: {_map_message(e, (1 + self.data_pages) * self.page)}"
            )
        except OSError as e:
            if e.errno == errno.ESRCH:
                return  # the thread exited between the listing and the open: normal
            self.retired.add(tid)
            self.stats.error(f"thread {tid} not sampled: {e.strerror or e}")

    # --- reading

    def _on_readable(self, tid: int) -> None:
        # Called by the event loop; the reading happens in run(), where errors propagate.
        self.ready.add(tid)
        self.wake.set()

    def _on_cpu_readable(self, cpu: int) -> None:
        self.ready_cpus.add(cpu)
        self.wake.set()

    def drain_ready(self) -> None:
        if self.switches is not None:
            self.switches.drain_ready()
        for cpu in list(self.ready_cpus):
            self.ready_cpus.discard(cpu)
            event = self.cpus.get(cpu)
            if event is not None:
                self.drain(event)
        for tid in list(self.ready):
            self.ready.discard(tid)
            event = self.events.get(tid)
            if event is not None and self.drain(event) == 0 and _is_hup(event.fd):
                self.retire(tid)

    def drain_all(self) -> None:
        if self.switches is not None:
            self.switches.drain_all()
        self.ready.clear()
        self.ready_cpus.clear()
        for event in (*self.events.values(), *self.cpus.values()):
            self.drain(event)

    def drain(self, event: _ThreadEvent) -> int:
        """Parse everything in one ring; return how many bytes it held."""
        if event.ring.empty():
            return 0
        with contextlib.ExitStack() as held:
            try:
                data = held.enter_context(event.ring.published())
            except ValueError as e:
                self.stats.error(f"perf ring buffer of thread {event.tid} was inconsistent: {e}")
                return 0
            if data:
                mine = self.pid if self.per_cpu else None  # an event per CPU sees everyone
                raisable = event.stack_size < MAX_STACK_SIZE
                self.records.handle_ring(event.tid, raisable, data, SAMPLE_TYPE,
                                         self.regs_count, mine)  # fmt: skip
                if 2 * len(data) >= event.ring.data_size and not self.per_cpu:
                    self.records.fuller.add(event.tid)  # (``widen``)
            return len(data)


# --- off-CPU time -------------------------------------------------------------------


_SWITCHES = "perf context switches (stacks as threads leave a CPU)"


def watch_switches(session: _Session) -> None:
    """Off-CPU time of every thread, where the session collects it: switch events where
    kernel mode is permitted (their samples are taken in the scheduler), the threads that
    switch most read from /proc (``off_cpu_poll``); all of them from /proc where it is
    not permitted."""
    sampler = session.sampler
    if not sampler.idle:
        return
    read_more = sampler.on_sample  # the mixed sampler's read of the thread's Python frames
    session.poller = WaitPoller(session.pid, sampler.rate_hz, session.stack_size, read_more)
    why = kernel_refused()  # (--no-kernel leaves the kernel's frames out, not this)
    if why is not None:
        sampler.off_cpu_source = (
            f"/proc, read at the rate (blocked threads' stacks; switches not seen: {why})"
        )
        session.poller.follow(live_threads(session.pid) or set())
        return
    pages = session.data_pages
    attr = stack_attr(session.attr, pages * session.page, wake_each=read_more is not None)
    records = session.records
    session.switches = SwitchEvents(attr, pages, session.loop, session.wake, session.stats,
                                    records.handle_switches, records.handle_clock)  # fmt: skip
    sample_type, regs = int(attr.sample_type), session.regs_count
    session.switches.parse = lambda data: abi.parse_records(data, sample_type, True, regs)
    intervals = session.records.off_cpu = OffCpuIntervals(session.pid, sampler.rate_hz)
    intervals.budget = switch_budget()
    sampler.off_cpu_source = _SWITCHES
    pid, size = session.pid, session.stack_size

    def opened(tid: int, when: float) -> None:
        # A thread waiting already: where, read now that its event is on (its span so
        # far is that wait's until it next leaves a CPU).
        blocked = blocked_at(pid, tid, when, size) if task_state(pid, tid) in ASLEEP else None
        if blocked is not None and read_more is not None:
            blocked = read_more(blocked)
        intervals.opened(tid, when, blocked)

    session.switches.on_open = opened
    session.switches.on_gone = intervals.forget  # its waits' state, with the thread
    session.switches.first_every = lambda tid: intervals.first_every(tid, switch_rate(pid, tid))
    session.switches.follow(live_threads(session.pid) or set())


def follow_waits(session: _Session, tids: set[int]) -> None:
    """Off-CPU time for the threads in ``tids``: on switch events, or read from /proc
    (all of them where switches cannot be seen; else those handed over)."""
    if session.switches is not None:
        session.switches.follow(tids)
    if session.poller is not None:
        polled = tids if session.switches is None else tids & session.switches.elsewhere
        session.poller.follow(polled)


def adapt_switches(session: _Session) -> None:
    """Each busy thread's switch event set to fire about ``rate`` times a second
    (``OffCpuIntervals.periods``); the threads that switch most handed over to /proc,
    so that the switches with events stay within the budget (``switch_budget``)."""
    intervals, switches, poller = session.records.off_cpu, session.switches, session.poller
    if intervals is None or switches is None or poller is None:
        return
    for tid, every in intervals.periods(time.monotonic()).items():
        switches.set_every(tid, every)
    budget = intervals.budget
    handed = intervals.over_budget(budget) if poller.ready else []
    for tid in handed:
        switches.hand_over(tid)
        poller.add(tid)
    if handed:
        n = len(switches.elsewhere)
        session.sampler.off_cpu_source = (
            f"{_SWITCHES}; {n} thread{'s' * (n != 1)} switching faster read from /proc "
            f"at the rate (the events' budget: {budget:,.0f} switches a second)"
        )


def take_waits(session: _Session) -> None:
    """The off-CPU samples the /proc reads made since the last look (``off_cpu_poll``:
    a thread of their own)."""
    poller = session.poller
    if poller is None:
        return
    samples, dropped = poller.take()
    session.records.pending += samples
    session.stats.lost += dropped  # counted, not silently gone
    if poller.failure is not None:
        session.stats.error(poller.failure)
        poller.failure = None


def finish_off_cpu(session: _Session) -> None:
    """The session stops: the waits of the threads asleep now counted up to now."""
    intervals = session.records.off_cpu
    if session.poller is not None:
        session.poller.close()
        take_waits(session)
        session.records.pending += session.poller.poll(time.monotonic(), final=True)
    if intervals is not None:
        now = time.monotonic()
        session.records.pending += intervals.finish(now, session.records.asleep)


# --- stacks deeper than the copy -------------------------------------------------------


def deepen(session: _Session) -> None:
    """Open again, with copies of MAX_STACK_SIZE, the events of the threads whose
    stacks went past their copies (their samples so far delivered first). Where the
    larger ring cannot be had, the thread keeps its copy size, and that is said."""
    wanted, session.records.deeper = session.records.deeper, set()
    if session.per_cpu:
        _deepen_cpus(session)
        return
    for tid in sorted(wanted):
        event = session.events.get(tid)
        if event is None or event.stack_size >= MAX_STACK_SIZE:
            continue
        session.drain(event)
        session.close_event(tid)
        try:
            session.open_event(tid, _deep_pages(session))
        except OSError as e:
            if e.errno == errno.ESRCH:
                continue  # it ended meanwhile
            session.stats.error(
                f"thread {tid}'s stack copies could not be raised to {MAX_STACK_SIZE} "
                f"bytes ({e.strerror or e}): its deepest stacks end early"
            )
            session.open_later(tid)
            continue
        _say_raised(session)


def widen(session: _Session) -> None:
    """Open again, with a ring four times the size, the events of the threads whose
    rings were half full or more when read (their samples so far delivered first), up
    to the ring the session would give each thread had it few (``data_pages_for``),
    within MAX_RING_TOTAL.

    Many threads share MAX_RING_TOTAL: 304 threads at 499 Hz got 128 KiB each, 28 ms of
    a busy thread's samples, and a stall of the loop of 8 ms past its wake-up (a
    collection beside a busy core) lost some. Most of those threads sleep: their rings
    stay small, the few busy ones grow."""
    wanted, session.records.fuller = session.records.fuller, set()
    for tid in sorted(wanted):
        event = session.events.get(tid)
        if event is None:
            continue
        pages = event.ring.data_size // session.page
        more = min(4 * pages, session.sampler.pages_for(event.stack_size))
        if more <= pages:
            continue  # as large as a ring gets
        mapped = sum(e.ring.length for e in session.events.values())
        if mapped + (more - pages) * session.page > MAX_RING_TOTAL:
            continue
        session.drain(event)
        session.close_event(tid)
        try:
            session.open_event(tid, more, event.stack_size)
        except OSError as e:
            if e.errno == errno.ESRCH:
                continue  # it ended meanwhile
            with contextlib.suppress(OSError):  # the ring it had, as it was
                session.open_event(tid, pages, event.stack_size)
                continue
            session.open_later(tid)


def _deepen_cpus(session: _Session) -> None:
    """Per CPU, copies are one size for every thread: all raised, once."""
    if not session.cpus or all(e.stack_size >= MAX_STACK_SIZE for e in session.cpus.values()):
        return
    pages = _deep_pages(session)
    for cpu in list(session.cpus):
        session.drain(session.cpus[cpu])
        session.close_cpu_event(cpu)
        try:
            event = session.open_cpu_event(cpu, pages)
        except OSError as e:
            session.stats.error(
                f"stack copies could not be raised to {MAX_STACK_SIZE} bytes on CPU {cpu} "
                f"({e.strerror or e}): the deepest stacks sampled there end early"
            )
            with contextlib.suppress(OSError):
                event = session.open_cpu_event(cpu)
                abi.ioctl_enable(event.fd)
            continue
        with contextlib.suppress(OSError):
            abi.ioctl_enable(event.fd)
    _say_raised(session)


def _say_raised(session: _Session) -> None:
    session.stats.error(
        f"stack copies raised from {session.stack_size} to {MAX_STACK_SIZE} bytes (the "
        "kernel's limit) for threads whose stacks went deeper; --stack-size fixes the size"
    )


def _deep_pages(session: _Session) -> int:
    """Ring pages for a thread with copies of MAX_STACK_SIZE: as many as the others
    would take at that size, fewer where MAX_RING_TOTAL would be passed, never fewer
    than DEEP_RING_SAMPLES copies."""
    pages = session.sampler.pages_for(MAX_STACK_SIZE)
    least = MIN_DATA_PAGES
    while least * session.page < DEEP_RING_SAMPLES * (MAX_STACK_SIZE + RECORD_EXTRA):
        least *= 2
    mapped = sum(e.ring.length for e in (*session.events.values(), *session.cpus.values()))
    while pages > least and mapped + (1 + pages) * session.page > MAX_RING_TOTAL:
        pages //= 2
    return max(pages, least)


class _MapError(OSError):
    """mmap of a ring buffer failed (usually the locked-memory limit)."""


# --- the sampler -----------------------------------------------------------------------


class PerfSampler(Sampler):
    """Samples the on-CPU user stacks of every thread with perf_event_open."""

    name = "perf"

    def __init__(
        self,
        pid: int,
        rate_hz: int,
        idle: bool = False,
        *,
        data_pages: int | None = None,
        stack_size: int = DEFAULT_STACK_SIZE,
        per_cpu: bool = True,
    ) -> None:
        super().__init__(pid, rate_hz, idle)
        # How often the rings are read and the threads looked for, and the seconds of a
        # busy thread's samples a ring holds: ``pace``.
        self.drain_interval, self.rescan_interval = DRAIN_INTERVAL, RESCAN_INTERVAL
        self.ring_seconds = RING_SECONDS
        # Events on every CPU where the kernel permits them (the module doc), else on
        # every thread; ``scope`` says which once the session has begun.
        self.per_cpu = per_cpu
        self.scope = "per CPU" if per_cpu else "per thread"
        self.set_kernel(True)
        self._fixed_pages = data_pages
        if data_pages is not None and (data_pages <= 0 or data_pages & (data_pages - 1)):
            raise ValueError(f"data_pages must be a power of two, not {data_pages}")
        self._set_stack_size(stack_size)
        # Copies grow for threads whose stacks need more, unless --stack-size was given.
        self.stack_fixed = stack_size != DEFAULT_STACK_SIZE
        # Called with each sample as it is read, woken at every sample: for what must be
        # read from the target at the sample's moment (the mixed sampler's Python stacks).
        self.on_sample: Callable[[Sample], Sample] | None = None

    def set_stack_size(self, size: int) -> None:
        """--stack-size: every copy that size, for every thread, all session long."""
        self._set_stack_size(size)
        self.stack_fixed = True

    def stack_grows(self) -> bool:
        """Whether a thread's copies are raised when its stack is deeper."""
        return not self.stack_fixed and self.stack_size < MAX_STACK_SIZE

    def stack_cut_short(self, tid: int) -> None:
        """Called from the engine's worker thread: the sampler's loop is woken to open
        the thread's event again at once (every sample until then is cut short too)."""
        session = self._session
        if session is None or not self.stack_grows():
            return
        event = next(iter(session.cpus.values()), None) if session.per_cpu else None
        event = event or session.events.get(tid)
        if event is None or event.stack_size >= MAX_STACK_SIZE or tid in session.records.deeper:
            return
        session.records.deeper.add(tid)
        with contextlib.suppress(RuntimeError):  # the loop closed: the session is over
            session.loop.call_soon_threadsafe(session.wake.set)

    def _set_stack_size(self, size: int) -> None:
        if not 0 <= size <= MAX_STACK_SIZE or size % 8:
            raise UsageError(
                f"--stack-size {size} is not possible: use a multiple of 8 from 0 "
                f"to {MAX_STACK_SIZE} bytes (the kernel's limit)"
            )
        self.stack_size = size
        pages = self._fixed_pages
        self.data_pages = pages if pages is not None else self.pages_for(size)
        self._session: _Session | None = None

    def pages_for(self, stack_size: int) -> int:
        """Ring pages for copies of ``stack_size`` at this sampler's rate and pace."""
        return data_pages_for(stack_size, PAGE, self.rate_hz, self.ring_seconds)

    def pace(self, tick: float) -> None:
        """The engine takes the samples every ``tick`` seconds: the rings are read that
        often (not every DRAIN_INTERVAL), hold two ticks of a busy thread's samples (so
        that their watermark wakes livesym about once a tick, not a few times), and the
        threads are looked for every two ticks (MAX_RESCAN_INTERVAL at most). Each
        wake-up costs the same whatever it brings: a recording at 99 Hz was woken some
        40 times a second (its rings, the drains, the rescans); paced, its CPU fell from
        3.55 to 3.05 % of a core."""
        self.drain_interval = max(DRAIN_INTERVAL, tick)
        self.rescan_interval = max(RESCAN_INTERVAL, min(2 * tick, MAX_RESCAN_INTERVAL))
        self.ring_seconds = max(RING_SECONDS, 2 * tick)
        if self._fixed_pages is None:
            self.data_pages = self.pages_for(self.stack_size)

    @classmethod
    def available(cls) -> str | None:
        """None if this process can sample with perf_event_open, else why not (one line)."""
        attr = _attr(99, MIN_DATA_PAGES * os.sysconf("SC_PAGE_SIZE"), DEFAULT_STACK_SIZE)
        try:
            fd = abi.perf_event_open(attr, 0, -1, -1, abi.PERF_FLAG_FD_CLOEXEC)
        except abi.UnsupportedMachine as e:
            return str(e.strerror)
        except OSError as e:
            if e.errno in _DENIED:
                return _denied_message()
            if e.errno in _UNAVAILABLE:
                return _UNAVAILABLE_MESSAGE
            return f"perf_event_open failed ({os.strerror(e.errno or 0)}); use --sampler ptrace"
        os.close(fd)
        return None

    def set_kernel(self, wanted: bool) -> None:
        """Kernel mode is sampled where wanted and permitted; else how it is not, said
        from the start (the engine estimates it from system time where not permitted)."""
        super().set_kernel(wanted)
        if wanted:
            refused = kernel_refused()
            self.kernel_mode = (
                KERNEL_SAMPLED if refused is None else KernelMode.not_sampled(refused)
            )
            self.kernel_accounted = refused is None

    def keep_per_thread(self) -> None:
        self.per_cpu = False
        self.scope = "per thread (one of several processes)"

    def open_threads(self) -> frozenset[int]:
        """The tids that have an open event now (empty outside ``run``)."""
        return frozenset(self._session.events) if self._session else frozenset()

    def ring_bytes(self) -> dict[int, int]:
        """Each thread's ring, in bytes of samples it holds (empty outside ``run``)."""
        session = self._session
        return {t: e.ring.data_size for t, e in session.events.items()} if session else {}

    def rate_limit(self) -> tuple[int, str]:
        """livesym's own limit, or the kernel's where that is lower (it lowers
        kernel.perf_event_max_sample_rate by itself when sampling takes too long)."""
        kernel = _read_sysctl("perf_event_max_sample_rate")
        if kernel and kernel.isdigit() and int(kernel) < self.max_rate_hz:
            return int(kernel), "the kernel's perf_event_max_sample_rate (raise it with sysctl)"
        return super().rate_limit()

    async def run(
        self, sink: SampleSink, stop: asyncio.Event, maps_changed: MapsHint | None = None
    ) -> SamplerEnd:
        self.check_rate()
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        stop_watch = loop.create_task(stop.wait())
        stop_watch.add_done_callback(lambda _: wake.set())
        session = self._session = _Session(self, loop, wake)
        try:
            session.attach()
            watch_switches(session)
            self.attached()
            return await self._loop(session, sink, stop, maps_changed)
        finally:
            session.close()
            self._session = None
            stop_watch.cancel()

    async def _loop(
        self,
        session: _Session,
        sink: SampleSink,
        stop: asyncio.Event,
        maps_changed: MapsHint | None,
    ) -> SamplerEnd:
        loop = session.loop
        early = loop.time() + EARLY_SECONDS
        next_drain = on_grid(loop.time(), EARLY_DRAIN_INTERVAL)
        next_scan = on_grid(loop.time(), self.rescan_interval)
        # Woken at every sample (``on_sample``): samples still go on in batches.
        batched = self.on_sample is not None
        next_deliver = loop.time()
        adapted = loop.time()
        if session.poller is not None:
            session.poller.start()
        while True:
            now = loop.time()
            if now >= next_scan or session.records.fork_seen:
                next_scan = on_grid(now, self.rescan_interval)
                if not session.rescan():
                    session.drain_all()
                    session.records.deliver(sink, maps_changed)
                    return SamplerEnd.TARGET_EXITED
            if stop.is_set():
                session.drain_all()
                finish_off_cpu(session)
                session.records.deliver(sink, maps_changed)
                return SamplerEnd.STOPPED
            had_events = bool(session.events)
            if now >= next_drain:
                next_drain = on_grid(
                    now, EARLY_DRAIN_INTERVAL if now < early else self.drain_interval
                )
                session.drain_all()
            else:
                session.drain_ready()
            if now - adapted >= ADAPT_INTERVAL:  # a thread switching fast is sampled less
                adapt_switches(session)
                adapted = now
            take_waits(session)
            if not batched or now >= next_deliver:
                next_deliver = now + DELIVER_INTERVAL
                session.records.deliver(sink, maps_changed)
            if session.records.deeper:
                deepen(session)
            if session.records.fuller:
                widen(session)
            if had_events and not session.events:
                next_scan = now  # every fd hung up: see at once whether the target exited
                continue
            due = min(next_drain, next_scan, next_deliver if session.records.pending else next_scan)
            await _wait(session.wake, due - loop.time())


async def _wait(wake: asyncio.Event, timeout: float) -> None:
    """Sleep until ``wake`` is set or ``timeout`` seconds pass, then clear it."""
    if timeout > 0 and not wake.is_set():
        try:
            async with asyncio.timeout(timeout):
                await wake.wait()
        except TimeoutError:
            pass
    else:
        await asyncio.sleep(0)  # let the loop run its callbacks even when busy
    wake.clear()
