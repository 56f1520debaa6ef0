"""What every sampler produces, and the small interface the engine drives them through.

A sampler observes one process and hands the engine batches of ``Sample``s:
where one thread was executing at one moment, as user-space instruction
pointers, leaf first. Samplers are interchangeable (perf_event, ptrace,
py-spy, a capture file); each counts what it lost and what went wrong beside
what it saw, so nothing disappears silently. A replay (``sampling.replay``)
yields ``RecordedRows`` instead: samples already resolved, whose stacks the
capture's tables hold.
"""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

from livesym.errors import UsageError
from livesym.records import KERNEL_BY_NONE, KernelMode, KernelSeen, TimeMode, WaitState
from livesym.target.maps_watcher import MappingEvent
from livesym.unwind.walk import stack_copy

if TYPE_CHECKING:
    from livesym.records import FrameRecord, StackCopy, StackEnd, UserRegisters


class ThreadState(Enum):
    """Whether the thread was on a CPU when sampled, and if not, why: off-CPU samples
    come only where the session collects them (--mode wall or off-cpu). ``IDLE`` is off
    the CPU for a reason the sampler cannot tell."""

    RUNNING = "running"
    IDLE = "idle"
    RUNNABLE = "runnable"  # preempted: ready, waiting for a CPU
    SLEEPING = "sleeping"
    DISK = "disk"

    @property
    def flags(self) -> int:
        """A sample's flags in the capture (docs/capture-format.md)."""
        return _FLAGS[self]


_FLAGS = {
    ThreadState.RUNNING: 0,
    ThreadState.IDLE: WaitState.UNKNOWN.flags(),
    ThreadState.RUNNABLE: WaitState.RUNNABLE.flags(),
    ThreadState.SLEEPING: WaitState.SLEEPING.flags(),
    ThreadState.DISK: WaitState.DISK.flags(),
}


@dataclass(frozen=True, slots=True)
class Sample:
    """One observation of one thread.

    ``time`` is seconds on CLOCK_MONOTONIC. ``ips`` are run-time addresses
    (VMAs), leaf first; the first is where the thread was executing, the rest
    are return addresses. ``maps_generation`` is the maps generation current
    when the sample was taken, if the sampler knows it (the engine stamps it
    otherwise).

    ``frames``, when set, is the whole stack instead, leaf first, mixing raw
    addresses for the engine to resolve with frames the sampler already named
    (py-spy's Python frames; a capture's records on replay). Its first element
    is the true leaf: raw addresses after it are return addresses. ``ips``
    then holds just the raw addresses. ``thread_name`` is the sampler's name
    for the thread when it knows a better one than /proc's comm.

    The last fields are what unwinding and kernel time need, None or empty where a
    sampler does not fill them: the user registers and a copy of the user stack from
    the stack pointer up, which the engine unwinds from (``ips`` then holds just the
    executing address); the kernel's call chain, leaf first; and how the stack ended
    once unwound.
    """

    time: float
    pid: int
    tid: int
    ips: tuple[int, ...]
    state: ThreadState = ThreadState.RUNNING
    maps_generation: int | None = None
    # Sampling periods (1/rate s) the sample stands for: 1 on the CPU; an off-CPU
    # interval's length (livesym.sampling.off_cpu).
    weight: int = 1
    frames: tuple[int | FrameRecord, ...] | None = None
    thread_name: str | None = None
    user_regs: UserRegisters | None = None
    user_stack: bytes | None = None  # from the stack pointer up
    user_stack_complete: bool = False  # the copy reaches the end of the stack
    kernel_ips: tuple[int, ...] = ()
    stack_end: StackEnd | None = None
    # Kernel time seen from outside, by a sampler without the kernel's stack (ptrace):
    # the system call the thread was in, and whether the sample stands for kernel time
    # (on a CPU; sized from system time) rather than user code or a blocked call.
    syscall: int | None = None
    in_kernel: bool = False
    # User time whose stop came at a system call's exit: the stack is the call's, the
    # place in the user code it stands for is not known (livesym.target.system_share).
    at_call_exit: bool = False
    # Mixed stacks (livesym.sampling.mixed): the thread's Python frames at the sample's
    # moment, leaf first, which the engine puts in place of the interpreter's frames
    # once it has unwound the native stack; (PYTHON_UNREAD,) where py-spy missed them.
    python: tuple[FrameRecord, ...] | None = None
    # Where ``python`` was read by livesym as the sample arrived (the thread ran on for
    # a fraction of a millisecond meanwhile): the run-time ranges of the interpreter's
    # evaluation loop and of each Python frame's bytecode. The engine keeps the frames
    # as the register of the sample's innermost evaluation loop frame that holds its
    # instruction pointer shows them (livesym.frames.python_splice.checked).
    python_check: PythonCheck | None = None

    @property
    def stack(self) -> tuple[int | FrameRecord, ...]:
        """The stack as the engine resolves it, leaf first."""
        return self.ips if self.frames is None else self.frames

    def stack_copy(self) -> StackCopy | None:
        """The copy of the user stack, from the stack pointer then; None without one."""
        regs, data = self.user_regs, self.user_stack
        if regs is None or data is None:
            return None
        return stack_copy(regs, data, self.user_stack_complete)


@dataclass(frozen=True, slots=True)
class PythonCheck:
    """See ``Sample.python_check``: [eval_start, eval_end), the [start, end) of each
    Python frame's bytecode, leaf first, and what names the function whose bytecode
    holds an address (a frame record; None where no code read so far holds it)."""

    eval_start: int
    eval_end: int
    codes: tuple[tuple[int, int], ...]
    code_at: Callable[[int], FrameRecord | None] = field(compare=False)
    # Read from the frame the sample's innermost loop ran then (livesym.target.cpython
    # ``PythonRead.anchored``): a leaf that is not the sample's function is a later
    # call's, made from the same caller into the same frame.
    anchored: bool = False
    loops: int = 0  # evaluation loops the frames read run in (each a C frame)


@dataclass
class SamplerStats:
    """Running counters; the engine copies them into every snapshot."""

    samples: int = 0
    lost: int = 0
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> None:
        """Record a non-fatal problem once (repeats are counted, not stored)."""
        if message not in self.errors and len(self.errors) < 100:
            self.errors.append(message)


class SamplerEnd(Enum):
    """Why a sampler stopped."""

    STOPPED = "stopped"  # asked to stop (duration over, Ctrl-C, quit)
    TARGET_EXITED = "target exited"
    FAILED = "failed"


# A recorded sample, already resolved against the session's tables (a capture's):
# (seconds since the session's start, thread id, stack id, flags, weight).
Row = tuple[float, int, int, int, int]


@dataclass(frozen=True, slots=True)
class RecordedRows:
    """Samples whose stacks are already in the session's tables, in time order: what a
    replay yields. Compact rows, not ``Sample`` objects: a capture brings millions."""

    rows: list[Row]


# What a sampler hands the engine at a time: raw samples to resolve, or recorded rows.
Batch = list[Sample] | RecordedRows

# Called by a sampler with each batch, on the event loop's thread.
SampleSink = Callable[[Batch], None]


# Called by a sampler when it learns the target's mappings changed: with the
# mappings it saw created (perf), or none when it only knows that they changed.
MapsHint = Callable[[tuple[MappingEvent, ...]], None]


class Sampler(ABC):
    """A source of samples for one target process.

    ``run`` samples until ``stop`` is set or the target exits, feeding ``sink``
    from the event loop. It must leave the target as it found it on every exit
    path (exceptions and cancellation included): nothing stopped, traced or
    left with open events.
    """

    name: str = "?"
    # The highest --rate livesym keeps up with through this sampler (a busy target's
    # every thread yields this many samples a second): above it samples are lost.
    max_rate_hz: ClassVar[int] = 10_000
    default_rate_hz: ClassVar[int] = 99  # when --rate is not given
    # Whether sampling stops the target's threads (ptrace, py-spy): the engine then
    # watches how much of the time it does (livesym.target.stop_share), by the
    # sampler's own count (``held``) where it keeps one, else by looking in /proc.
    stops_target: ClassVar[bool] = False
    # How the sampler has off-CPU time where it collects it (the header's words);
    # perf says at run time, where its switch events may be refused.
    off_cpu_way: ClassVar[str] = ""

    def __init__(self, pid: int, rate_hz: int, idle: bool = False) -> None:
        self.pid = pid
        self.rate_hz = rate_hz
        # Whether off-CPU time is collected (--mode wall or off-cpu), and the view the
        # session shows first (``set_mode``).
        self.idle = idle
        self.mode = TimeMode.WALL if idle else TimeMode.CPU
        # How off-CPU time and its stacks were had, for the header (empty: not collected).
        self.off_cpu_source = self.off_cpu_way if idle else ""
        self.stats = SamplerStats()
        self.kernel = True  # sample kernel mode too, where the sampler can and may
        # How the session sees kernel time, for the header: set by the sampler.
        self.kernel_mode: KernelMode = KERNEL_BY_NONE
        # Whether the sampler's samples account for kernel time themselves (perf in
        # kernel mode; ptrace's system calls): else the engine estimates it.
        self.kernel_accounted = False
        # Called once the sampler is in place on the target (a command livesym started,
        # stopped at its first instruction, is resumed then: livesym.target.launch).
        self.on_attached: Callable[[], None] | None = None
        # The target's exit status, where the sampler reaped it (a tracer reaps the exit
        # of its own child: -- CMD under ptrace).
        self.exit_status: int | None = None
        # What the sampler's events watch, for the header: perf's "per CPU" or "per
        # thread (why)"; empty where there is nothing to say.
        self.scope = ""

    def set_mode(self, mode: TimeMode) -> None:
        """--mode: the time the session shows first; off-CPU time is collected for
        ``wall`` and ``off-cpu`` (the samplers that cannot refuse before sampling)."""
        self.mode = mode
        self.idle = mode.collects_off_cpu
        self.off_cpu_source = self.off_cpu_way if self.idle else ""

    @classmethod
    @abstractmethod
    def available(cls) -> str | None:
        """None when this sampler can run here, else why not (one line, with a remedy)."""

    def set_stack_size(self, size: int) -> None:
        """Bytes of user stack to copy per sample (--stack-size), for samplers that
        copy stacks to unwind (they check it); the others keep it and copy nothing."""
        self.stack_size = size

    def keep_per_thread(self) -> None:
        """One of several processes' samplers: no events that see every process."""
        return None

    def stack_cut_short(self, tid: int) -> None:
        """The engine found a sample of thread ``tid`` whose stack went on past the
        copy: a sampler that sizes its copies to the target takes larger ones for it."""
        return None  # the others copy what they copy

    def pace(self, tick: float) -> None:
        """The engine takes the samples every ``tick`` seconds: a sampler that wakes by
        itself to read them may wake as seldom (perf's rings). The others keep theirs."""
        return None

    def held(self) -> float | None:
        """Seconds of the target's threads' time this sampler has kept them stopped, in
        all, where it counts them itself (ptrace: each stop from its moment to its
        resume); None where it cannot (py-spy stops the threads in its own process)."""
        return None

    def also_on_attached(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` when the sampler is in place, before the hook it had."""
        had = self.on_attached

        def both() -> None:
            hook()
            if had is not None:
                had()

        self.on_attached = both

    def attached(self) -> None:
        """Say the sampler is in place (once): ``on_attached`` runs."""
        hook, self.on_attached = self.on_attached, None
        if hook is not None:
            hook()

    def set_kernel(self, wanted: bool) -> None:
        """Whether to sample the kernel's part of the stacks (``--no-kernel``: not)."""
        self.kernel = wanted
        if not wanted:
            self.kernel_mode = KernelMode.of(KernelSeen.LEFT_OUT, "--no-kernel")
            self.kernel_accounted = False

    def rate_limit(self) -> tuple[int, str]:
        """The highest --rate this sampler takes here, and what sets that limit."""
        return self.max_rate_hz, f"the most the {self.name} sampler keeps up with"

    def check_rate(self) -> None:
        """Refuse a --rate this sampler cannot deliver, in one line naming the limit."""
        limit, why = self.rate_limit()
        if not 0 < self.rate_hz <= limit:
            raise UsageError(
                f"--rate {self.rate_hz} is not possible: {limit} Hz is {why}; use 1 to {limit} Hz"
            )

    @abstractmethod
    async def run(
        self, sink: SampleSink, stop: asyncio.Event, maps_changed: MapsHint | None = None
    ) -> SamplerEnd:
        """Sample until ``stop`` is set or the target exits; return why it ended."""

    def take_all(self) -> Batch:
        """Every sample at once, without an event loop: only a recording holds them all."""
        raise NotImplementedError(f"the {self.name} sampler samples only while it runs")


def on_grid(now: float, period: float) -> float:
    """The first multiple of ``period`` after ``now`` (the event loop's clock). The
    drains, the scans and the engine's ticks (``engine.hub``) fall due on one grid of
    the loop's clock, so that one wake-up serves them all, not one each out of phase."""
    return (math.floor(now / period) + 1) * period
