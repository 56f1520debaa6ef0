"""Sampling with ptrace: the fallback where perf_event_open is not permitted.

Every tick (1/rate s) the threads in state ``R`` (with ``idle=True`` every
thread, the others marked IDLE) are stopped with PTRACE_INTERRUPT, their
registers read, up to STACK_COPY bytes of their stacks copied with
process_vm_readv, and resumed; the engine unwinds the copy from call-frame
information (livesym.unwind), with frame pointers as the fallback. (A 32-bit
process, whose registers the unwinder does not take, is walked here through
its frame pointers.) **Each sample stops the sampled thread
briefly** (measured on 2 CPUs: median 0.14 ms, p90 0.25 ms; 2-3 ms median
when other work oversubscribes the CPUs and the thread must wait for one to
reach its stop), so the rate is lower than perf's: ``DEFAULT_RATE_HZ`` = 49.

What it measures: on-CPU time, like perf's cpu-clock. ``R`` in /proc is
*runnable*: on a CPU, or waiting for one; threads found waiting (schedstat
tells, see ``_Tracer._decide``) are dropped, or kept as IDLE with
``idle=True`` (``PtraceSampler.off_cpu`` counts them). It matters even on an
idle machine: spin's three threads share two CPUs at the start of each
period, and sampling ``R`` alone gave 40/33/27 % where their CPU time was
52.6/31.6/15.8. Unlike perf, which samples from the timer interrupt of the
CPU the thread runs on, the tracer needs a CPU itself to take a sample, so
it runs SCHED_FIFO when permitted (``_raise_priority``).

Kernel time, which ptrace cannot see into: a thread stopped inside a system
call says which (``orig_rax``), and each thread's system time says how much of
its time the kernel had; the on-CPU samples are split between user code and
kernel time by that (``_Tracer._decide``), the kernel's shown as the system
call above the user stack that made it (``Sample.syscall``).

Design, and why:

* All ptrace requests come from ONE dedicated OS thread: the kernel ties a
  tracee to the *thread* that attached, so requests from any other thread
  (the event loop's, a pool's) fail with ESRCH. ``run`` starts that thread
  and awaits its end; batches reach the loop through ``call_soon_threadsafe``.
* PTRACE_SEIZE attaches without the SIGSTOP of PTRACE_ATTACH, per thread
  (/proc/<pid>/task, rescanned every RESCAN_INTERVAL). PTRACE_O_TRACEEXEC is
  set because without it an execve() raises a SIGTRAP that we would hand back
  to the target, killing it.
* A traced thread stops for *every* signal it gets (signal-delivery-stop)
  until the tracer passes the signal on, and for job control (group-stop).
  So between ticks the tracer waits for such events (woken by the SIGCHLD
  each one sends, see ``_wait_for_sigchld``, or after EVENT_POLL): signals
  are re-injected with PTRACE_CONT (each still costs the target a round
  trip: a target handling 1000 SIGALRM/s handled ~970/s while sampled, the
  rest merging while it waited; ~60/s when this was a 2 ms poll on a busy
  machine), group-stops are left stopped with PTRACE_LISTEN (job control
  keeps working: SIGCONT resumes them, after which they report a
  PTRACE_EVENT_STOP that we PTRACE_CONT), exits are reaped.
* The chosen threads of a tick are interrupted together, then handled as
  their stops arrive, each resumed as soon as its registers and stack are
  read. The round waits STOP_TIMEOUT at most; an interrupt cannot be
  withdrawn, so a slower thread (waiting for a CPU, in uninterruptible
  sleep) is sampled and resumed by the event poll whenever it stops.
* waitpid runs with __WNOTHREAD (only this thread's tracees, never another
  thread's children) and __WALL (non-leader threads). Caveat: the kernel
  reports a tracee's stops to *every* thread of the tracer's process, so a
  waitpid() on the target from elsewhere in this process (Popen.poll() on a
  target we started) can take a stop notification; a thread whose stop was
  taken is found with PTRACE_GETSIGINFO when the round's wait times out. And
  when the target is our own child, the kernel lets the tracer reap its exit
  status (the real parent then sees ECHILD: Popen reports returncode 0).

Leaving the target as found, on every exit path: the tracer thread's loop
checks its stop flag at least every EVENT_POLL and detaches in a ``finally``
(interrupt, wait for the stop, PTRACE_DETACH, passing on a signal caught in
the act; a thread in a group-stop is put back into it by the kernel);
``run`` sets the flag and waits for that thread whether it ends normally, by
an exception (a raising sink included: the exception is re-raised after the
detach), or by cancellation (KeyboardInterrupt and the CLI's SIGTERM handler
both arrive as a stop or a cancellation). Beyond that the kernel itself
detaches every tracee when the tracing thread exits (and so when our process
dies, even by SIGKILL): threads that would not stop in DETACH_TIMEOUT are
left to that. An ``atexit`` handler covers an interpreter exiting while a
tracer thread still runs (an event loop closed without cancelling ``run``):
it stops and joins the thread so the graceful detach runs; the thread is a
daemon so such an exit is never blocked forever.

Lost samples (``stats.lost``) are samples that should have been taken but
were not: a thread due for a sample whose previous interrupt has not yet
stopped it counts one; a tick skipped because the previous round ran more
than half a period late counts as many as the threads that round chose
(the best estimate of how many were running). Ticks are skipped, never
queued. Samples of threads found waiting for a CPU are not lost (perf would
not have taken them either): ``PtraceSampler.off_cpu`` counts them.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import functools
import os
import platform
import random
import signal
import struct
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from livesym.errors import TargetError, UsageError
from livesym.records import KernelMode, KernelSeen, UserRegisters
from livesym.sampling import ptrace_abi as abi
from livesym.sampling.base import (
    MapsHint,
    Sample,
    Sampler,
    SamplerEnd,
    SamplerStats,
    SampleSink,
    ThreadState,
)
from livesym.sampling.run_credit import RunCredit
from livesym.target.permissions import denied_remedy, ptrace_scope
from livesym.target.system_share import SystemTimeShare
from livesym.target.threads import (
    SAMPLEABLE,
    SchedStat,
    ThreadStates,
    list_tids,
    syscall_of,
    tracer_pid,
)
from livesym.unwind.walk import MACHINES

DEFAULT_RATE_HZ = 49  # every sample stops a thread: well below perf's 99
JITTER = 0.25  # of a period, either way, at random: see _Tracer._trace
MAX_RATE_HZ = 1000
# restart_syscall's number (x86-64's table; asm-generic's on AArch64): where a sleep
# interrupted by a stop resumes. Threads whose last call is remembered, at most.
RESTART_SYSCALL = frozenset({{"x86_64": 219, "aarch64": 128}.get(platform.machine(), -1)})
MAX_TRACKED_CALLS = 100_000
MAX_FRAMES = 128  # return addresses per stack, the leaf's address included
STACK_WINDOW = 4096  # bytes of stack read at once; most stacks need one or two reads
STACK_COPY = 64 * 1024  # bytes of each sampled thread's stack copied, from its pointer up
MAX_STACK_COPY = 1 << 20  # --stack-size at most
STOP_TIMEOUT = 0.025  # seconds to wait for an interrupted thread to stop
DETACH_TIMEOUT = 1.0  # seconds to wait for every thread to stop for PTRACE_DETACH
RESCAN_INTERVAL = 0.25  # seconds between looks at /proc/<pid>/task for new threads
QUEUED_SLACK = 0.0002  # seconds: a wait that began this soon before a round is ours
EVENT_POLL = 0.005  # seconds between looks for tracee events should no SIGCHLD wake us

_DEAD_STATES = frozenset("ZXx")


def _dead(state: str | None) -> bool:
    """Whether a thread in ``state`` (None: gone from /proc) will never run again."""
    return state is None or state in _DEAD_STATES


_HAVE_FP = "a frame pointer pointed to unreadable memory (code built without frame pointers?)"


def _attach_error(pid: int, tid: int, e: OSError) -> TargetError:
    """The one-line message for a PTRACE_SEIZE that failed on the target."""
    if e.errno == errno.ESRCH:
        return TargetError(
            f"cannot attach to {pid}: no such process; check the PID with ps or pgrep"
        )
    if e.errno == errno.EPERM:
        tracer = tracer_pid(pid, tid)
        if tracer:
            return TargetError(
                f"cannot attach to {pid}: already traced by pid {tracer} (a debugger?); "
                "detach it first, or use --sampler perf"
            )
        return TargetError(
            f"cannot attach to {pid}: ptrace not permitted; {denied_remedy(pid, attach=True)}"
        )
    return TargetError(f"cannot attach to {pid}: ptrace failed ({e.strerror}); use --sampler perf")


# --- stacks ------------------------------------------------------------------------------


def walk_stack(
    pid: int, frame: abi.WalkStart, align: int, max_frames: int = MAX_FRAMES
) -> tuple[tuple[int, ...], bool]:
    """Leaf-first addresses from a frame-pointer chain, and whether a read failed.

    Each frame is ``[fp] = caller's fp, [fp + word] = return address``. The
    walk stops at fp 0, a misaligned fp, an fp that does not grow (the stack
    grows down, so callers' frames lie above), a return address of 0, or
    memory that cannot be read. The stack is read STACK_WINDOW bytes at a
    time, so a typical stack costs one or two process_vm_readv calls.
    """
    word = frame.word
    fmt = "<QQ" if word == 8 else "<II"
    align = align if word == 8 else 4
    ips = [frame.pc]
    fp = frame.fp
    window_at, window = 0, b""
    while len(ips) < max_frames and fp:
        if fp % align:
            break
        offset = fp - window_at
        if offset < 0 or offset + 2 * word > len(window):
            try:
                window = abi.process_vm_readv(pid, fp, STACK_WINDOW)
            except OSError:
                return tuple(ips), True
            window_at, offset = fp, 0
            if len(window) < 2 * word:
                return tuple(ips), True
        next_fp, ret = struct.unpack_from(fmt, window, offset)
        if ret == 0:
            break
        ips.append(ret)
        if next_fp <= fp:
            break
        fp = next_fp
    return tuple(ips), False


@dataclass(frozen=True, slots=True)
class _Stack:
    """What was read of a stopped thread: its registers and a copy of its stack for
    the engine to unwind, or (a 32-bit process) the frame-pointer walk done here."""

    ips: tuple[int, ...]
    regs: UserRegisters | None = None
    copy: bytes | None = None
    complete: bool = False
    cut: bool = False  # the frame-pointer walk could not read on

    def sample(
        self, when: float, pid: int, tid: int, state: ThreadState,
        syscall: int | None = None, in_kernel: bool = False, at_call_exit: bool = False,
    ) -> Sample:  # fmt: skip
        return Sample(
            when, pid, tid, self.ips, state,
            user_regs=self.regs, user_stack=self.copy, user_stack_complete=self.complete,
            syscall=syscall, in_kernel=in_kernel, at_call_exit=at_call_exit,
        )  # fmt: skip


def _stack_of(pid: int, arch: abi.Arch, regs: abi.Regs, size: int) -> _Stack:
    user = abi.dwarf_registers(regs)
    copied = _copy_stack(pid, user, size)
    if copied is not None:
        return _Stack((arch.frame(regs).pc,), user, copied[0], copied[1])
    ips, cut = walk_stack(pid, arch.frame(regs), arch.frame_align)
    return _Stack(ips, cut=cut)


def _copy_stack(pid: int, regs: UserRegisters, size: int) -> tuple[bytes, bool] | None:
    """Up to ``size`` bytes of a stopped thread's stack from its stack pointer, and
    whether the copy reached the stack's end (the read came back short); None where
    the engine cannot unwind these registers (a 32-bit process: walked here)."""
    machine = MACHINES.get(regs.machine)
    if machine is None or machine.sp >= len(regs.values):
        return None
    sp = regs.values[machine.sp]
    if sp is None:
        return None
    try:
        data = abi.process_vm_readv(pid, sp, size)
    except OSError as e:
        if e.errno == errno.ESRCH:
            raise ProcessLookupError(e.errno, e.strerror) from None
        return b"", True  # the stack pointer points at nothing readable
    return data, len(data) < size


def _in_syscall(pid: int, tid: int, regs: abi.Regs) -> int | None:
    """The system call a thread in ptrace-stop is inside (its number), or None.

    On x86-64 that is ``orig_rax``: the syscall entry stores the number
    there and every other kernel entry (interrupt, exception) stores -1, so
    a stop taken at a syscall's exit, or in a blocking call interrupted to
    stop, shows it. Elsewhere /proc/<pid>/task/<tid>/syscall says the same
    (it reads the same register, ``syscallno`` on arm64) for a stopped task.
    """
    if isinstance(regs, abi.UserRegsX86_64):
        nr = regs.orig_rax
        return None if nr >= 1 << 63 else nr  # -1 as u64: not in a system call
    return syscall_of(pid, tid)


def _native_syscall(regs: abi.Regs, nr: int | None) -> int | None:
    """``nr`` where it numbers a call of the machine's own table; a 32-bit process's
    calls (i386 numbering) are not named."""
    if isinstance(regs, abi.UserRegsX86_64) and regs.cs == abi.X86_COMPAT_CS:
        return None
    return nr


def _sample_of(
    k: _Taken, pid: int, on_cpu: bool, in_kernel: bool, idle: bool, kernel: bool
) -> Sample | None:
    """What ``k`` is a sample of (see ``_Tracer._decide``): kernel time (None with
    --no-kernel), user code, or a thread waiting or blocked (None unless ``idle``)."""
    stack, when, tid = k.stack, k.time, k.tid
    if in_kernel:
        if not kernel:
            return None  # --no-kernel: left out, as perf leaves kernel mode out
        return stack.sample(when, pid, tid, ThreadState.RUNNING, k.named_syscall, True)
    if on_cpu:
        return stack.sample(when, pid, tid, ThreadState.RUNNING, at_call_exit=k.syscall is not None)
    if idle:
        # Why it waited, as /proc said just before the interrupt: runnable (it was
        # judged off a CPU: waiting for one), asleep, or in uninterruptible (disk) sleep.
        state = _WAITING.get(k.pending.state, ThreadState.IDLE)
        return stack.sample(when, pid, tid, state, k.named_syscall)
    return None


_WAITING = {"R": ThreadState.RUNNABLE, "S": ThreadState.SLEEPING, "D": ThreadState.DISK}


def _on_cpu(k: _Taken, displaced: _Taken | None, credit: RunCredit) -> bool:
    """Whether ``k``'s thread was on a CPU when the round began.

    perf's cpu-clock sees on-CPU time only; so must we, or a thread that waits a lot
    (its CPUs taken by other threads, even its own process's) gets the samples of the
    time it waited. A thread that was switched in before its stop was waiting, save
    one: when every CPU is busy, this tracer waking up for the round pushed one thread
    off its CPU (exactly one: it is one thread; ``_displaced`` finds it). What the
    judgement still takes for running, its CPU time since its previous sample does not
    allow (``RunCredit``). Threads waiting are dropped (counted in ``off_cpu``), or kept
    as IDLE with ``idle=True`` (with the system call a blocked one is in).
    """
    credit.tick(k.tid, k.pending.before.run_ns if k.pending.before else None)
    judged = k.pending.state == "R" and (k.queued is None or k is displaced)
    return judged and credit.allows(k.tid)


def _displaced(taken: list[_Taken]) -> _Taken | None:
    """The thread this tracer pushed off its CPU when it woke for the round, if any.

    It was queued for a CPU as the round began (the latest so queued: one queued
    earlier was already waiting), and on the CPU the tracer woke on. Without the
    second test, a thread another one preempted at about the same moment elsewhere
    (EEVDF ends a slice where the thread reads its CPU clock, so spin's workers are
    often queued at a system call's exit), or one woken from a sleep then, was taken
    for it: 5-15 % of spin's samples were stops at a call's exit, which perf puts at 2 %
    (CI run 132). Where either CPU is unknown, the time alone decides.
    """
    recent = [
        k for k in taken
        if k.queued is not None and k.queued >= k.pending.woke - QUEUED_SLACK
        and (k.pending.cpu is None or k.pending.tracer_cpu is None
             or k.pending.cpu == k.pending.tracer_cpu)
    ]  # fmt: skip
    return max(recent, key=lambda k: k.queued or 0.0, default=None)


# --- the tracer thread -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pending:
    """A thread interrupted to be sampled, as it was just before the interrupt."""

    state: str  # from /proc
    before: SchedStat | None  # its scheduler counters
    woke: float  # when the tracer woke for the round (time.monotonic())
    cpu: int | None = None  # the CPU it was on or queued for (/proc), None if unknown
    tracer_cpu: int | None = None  # the CPU the tracer woke on for the round


@dataclass(frozen=True, slots=True)
class _Taken:
    """A sample read from a stopped thread, before it is known whether it ran."""

    tid: int
    pending: _Pending
    stack: _Stack
    time: float
    queued: float | None  # see _Tracer._queued
    syscall: int | None  # the system call it stopped in (see _in_syscall), None if none
    named_syscall: int | None  # the same, where the machine's table names it
    system_ticks: int | None  # its system time when it stopped (clock ticks)


@dataclass
class _Traced:
    """What we know of one seized thread."""

    tid: int
    interrupted: bool = False  # PTRACE_INTERRUPT sent, its stop not seen yet
    listening: bool = False  # in a group-stop, under PTRACE_LISTEN
    pending: _Pending | None = None  # what to sample when the interrupt's stop comes


def _wait_for_sigchld(timeout: float) -> None:
    """Sleep until a SIGCHLD comes for this process, or ``timeout`` seconds pass.

    Every stop and exit of a tracee sends its tracer a SIGCHLD, and the kernel
    offers it first to the tracing thread: blocked in that thread (see
    ``_Tracer._main``) but waited for here, it ends the sleep at once, so a
    signal for the target waits microseconds for us, not a polling period.
    (One arriving while this thread is busy goes to another thread, where its
    default action ignores it; the caller's waitpid(WNOHANG) before each wait
    and the timeout cover that.) Nothing global changes: no disposition, no
    other thread's mask.
    """
    signal.sigtimedwait((signal.SIGCHLD,), timeout)


def _raise_priority() -> None:
    """Make the calling (tracer) thread SCHED_FIFO 1, if this process may.

    When the target's threads keep every CPU busy, a normal-priority tracer
    waking for a tick preempts one of them only at that thread's next
    scheduling point (EEVDF lets the running thread finish its slice), which
    for spin is its next clock_gettime syscall: the sample then shows the
    syscall, not where the thread was when the tick came. A real-time tracer
    preempts at once. Measured on 2 CPUs filled by spin: hot-function leaves
    64-76 % -> 91-98 %. It sleeps between ticks and uses ~2 % of a CPU, and the
    kernel's RT throttling bounds it anyway. Without CAP_SYS_NICE (or an
    RLIMIT_RTPRIO) it stays as it is; only this thread is changed.
    """
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))


def _status(signo: int, event: int) -> int:
    """The wait status a ptrace-stop would have had (for stops found by probing)."""
    return 0x7F | (signo << 8) | (event << 16)


# Tracer threads still running, for the atexit handler.
_LIVE: weakref.WeakSet[_Tracer] = weakref.WeakSet()
_atexit_registered = False
_atexit_lock = threading.Lock()


def _detach_at_exit() -> None:
    """Last resort: the interpreter is exiting while a tracer thread still runs.

    Daemon threads are frozen once finalization begins, before they could
    detach; stopping and joining them here lets each run its graceful detach
    (signals caught mid-delivery passed on, job-control stops kept). Were
    even this to fail, the kernel detaches the tracees when the thread dies.
    """
    tracers = list(_LIVE)
    for tracer in tracers:
        tracer.stop.set()
    for tracer in tracers:
        tracer.thread.join(DETACH_TIMEOUT + 1.0)


def _register_atexit() -> None:
    global _atexit_registered
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(_detach_at_exit)
            _atexit_registered = True


class _Stops:
    """What a thread's stop for our interrupt says: its registers and stack read, when
    it was last queued for a CPU, and which samples stand for user code, kernel time or
    time off the CPU (a round's stops decided together)."""

    def __init__(self, sampler: PtraceSampler, states: ThreadStates) -> None:
        self.sampler = sampler
        self.pid = sampler.pid
        self.arch = abi.arch_for()
        self.stats = sampler.stats
        self.idle = sampler.idle
        self.kernel = sampler.kernel
        self.states = states
        self.kernel_share = sampler.kernel_share = SystemTimeShare(sampler.rate_hz)
        self.run_credit = sampler.run_credit = RunCredit(sampler.rate_hz)
        self._calls: dict[int, int] = {}  # tid -> the call it was last seen in

    def read(self, tid: int, pending: _Pending) -> _Taken | None:
        """Read the registers and stack of thread ``tid``, stopped for our interrupt."""
        try:
            regs = abi.getregs(tid, self.arch)
            now = time.monotonic()
            stack = _stack_of(self.pid, self.arch, regs, self.sampler.stack_size)
        except ProcessLookupError:
            raise  # died meanwhile: _on_event forgets it
        except OSError as e:
            self.stats.error(f"reading the registers failed: {e.strerror}")
            return None
        if stack.cut:
            self.stats.error(f"some stacks end early: {_HAVE_FP}")
        syscall = _in_syscall(self.pid, tid, regs)
        named = self._restarted(tid, _native_syscall(regs, syscall))
        return _Taken(
            tid, pending, stack, now, self._queued(pending, tid, now), syscall,
            named, self.states.system_ticks(tid),
        )  # fmt: skip

    def _restarted(self, tid: int, nr: int | None) -> int | None:
        """The call a thread is in, as the program made it: a sleep this tracer's stop
        interrupted resumes in ``restart_syscall`` (the kernel's, as strace shows it),
        which is the program's own call going on, not a call of its own; it is named as
        the call the thread was last seen in."""
        last = self._calls
        if nr is not None and nr in RESTART_SYSCALL and tid in last:
            return last[tid]
        if nr is not None and len(last) < MAX_TRACKED_CALLS:
            last[tid] = nr
        return nr

    def _queued(self, pending: _Pending, tid: int, stopped: float) -> float | None:
        """When the thread was last queued for a CPU (at the latest), if it was
        switched in between the interrupt and its stop; None if it was not.

        R in /proc means runnable: on a CPU, or waiting for one. A thread that
        was on a CPU when interrupted traps without being switched in again:
        its count of switches (schedstat) is unchanged. One that was switched
        in first had been waiting since ``stopped`` minus the wait schedstat
        added (an upper bound: the stop is seen a little after it happens).
        With no scheduler statistics, R is all there is to go by (None).
        """
        before, after = pending.before, self.states.schedstat(tid)
        if before is None or after is None or after.switches == before.switches:
            return None
        return stopped - (after.wait_ns - before.wait_ns) / 1e9

    def decide(self, taken: list[_Taken]) -> list[Sample]:
        """The samples of threads on a CPU when the round began (``_on_cpu``), as
        user or kernel.

        Of the on-CPU samples, those that stand for kernel time are chosen by each
        thread's system time (``SystemTimeShare``): shown as the system call the thread
        stopped in, or the estimated kernel frame, above the user stack. The rest are
        user code; a stop at a call's exit keeps the call's stack under a frame saying so
        (the call's site is where the stop landed, not where the tick found the thread).
        """
        displaced = _displaced(taken)
        share, credit = self.kernel_share, self.run_credit
        out = []
        for k in taken:
            on_cpu = _on_cpu(k, displaced, credit)
            in_kernel = on_cpu and share.is_kernel(k.tid, k.system_ticks, k.syscall is not None)
            sample = _sample_of(k, self.pid, on_cpu, in_kernel, self.idle, self.kernel)
            if sample is not None:
                out.append(sample)
            elif not on_cpu:
                self.sampler.off_cpu += 1
        return out


def _next_event() -> tuple[int, int]:
    """One pending event of our tracees: (tid, status), or (0, 0) if none."""
    try:
        return abi.waitpid(-1, os.WNOHANG | abi.WNOTHREAD)
    except ChildProcessError:  # no tracee left at all
        return 0, 0


def _probe(tid: int) -> int | None:
    """The status of a ptrace-stop whose notification we never got, or None.

    A thread that is in a ptrace-stop answers PTRACE_GETSIGINFO; a running
    (or listening) one fails with ESRCH. Someone else's waitpid in this
    process can take our notification: without this the thread would
    stay stopped.
    """
    try:
        signo, code = abi.getsiginfo(tid)
    except OSError:
        return None
    event = (code >> 8) & 0xFF
    if event in (abi.PTRACE_EVENT_STOP, abi.PTRACE_EVENT_EXEC):
        return _status(code & 0x7F, event)
    return _status(signo, 0)


class _Handover:
    """What the tracer thread hands to the event loop: batches of samples for the sink,
    a maps hint, the run's outcome. A sink that fails stops the run (``stop``), and its
    error is the outcome."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sink: SampleSink,
        done: asyncio.Future[SamplerEnd],
        stats: SamplerStats,
        stop: threading.Event,
    ) -> None:
        self.loop = loop
        self.sink = sink
        self.done = done
        self.stats = stats
        self.stop = stop
        self.sink_error: Exception | None = None

    def post(self, callback: Callable[..., object], *args: object) -> bool:
        """Run ``callback(*args)`` on the event loop; False if the loop is gone."""
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.stop.set()
            return False
        return True

    def send(self, batch: list[Sample]) -> None:
        self.post(self._deliver, batch)

    def finish(self, outcome: SamplerEnd | BaseException) -> None:
        self.post(self._complete, outcome)

    def _deliver(self, batch: list[Sample]) -> None:
        if self.sink_error is not None:
            return  # the sink failed: run() is ending and re-raises that
        try:
            self.sink(batch)
        except Exception as e:  # handed back to run()'s caller after the detach
            self.sink_error = e
            self.stop.set()
            return
        self.stats.samples += len(batch)

    def _complete(self, outcome: SamplerEnd | BaseException) -> None:
        if self.done.done():
            return
        if self.sink_error is not None:
            self.done.set_exception(self.sink_error)
        elif isinstance(outcome, BaseException):
            self.done.set_exception(outcome)
        else:
            self.done.set_result(outcome)


class _Tracer:
    """One ``run``: the dedicated thread and everything it alone may touch."""

    def __init__(
        self,
        sampler: PtraceSampler,
        loop: asyncio.AbstractEventLoop,
        sink: SampleSink,
        maps_changed: MapsHint | None,
        done: asyncio.Future[SamplerEnd],
    ) -> None:
        self.sampler = sampler
        self.pid = sampler.pid
        self.stats = sampler.stats
        self.idle = sampler.idle
        self.period = 1.0 / sampler.rate_hz
        self.random = random.Random().random
        self.maps_changed = maps_changed
        self.stop = threading.Event()
        self.out = _Handover(loop, sink, done, self.stats, self.stop)
        self.traced: dict[int, _Traced] = {}
        self.batch: list[Sample] = []  # samples not yet handed to the event loop
        self.refused: set[int] = set()  # tids that could not be seized (error reported once)
        self.woke = 0.0  # when this tick's round began (see _decide)
        self.woke_cpu: int | None = None  # the CPU it began on
        self.taken: list[_Taken] | None = None  # the round's samples, while it runs
        self.states = ThreadStates(self.pid)
        self.stops = _Stops(sampler, self.states)
        self.thread = threading.Thread(
            target=self._main, name=f"livesym-ptrace-{self.pid}", daemon=True
        )

    # -- the tracer thread --------------------------------------------------------------

    def _main(self) -> None:
        # Process-directed signals (SIGINT, SIGTERM) go to threads that do not
        # block them: keep them on the main thread, where Python acts on them.
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        _raise_priority()
        outcome: SamplerEnd | BaseException = SamplerEnd.FAILED
        try:
            outcome = self._trace()
        except BaseException as e:  # re-raised by run() in the event loop
            outcome = e
        finally:
            self._flush()
            try:
                self._detach_all()
            except Exception as e:  # the thread's exit detaches the rest
                self.stats.error(f"detaching failed ({e}); the kernel detached the rest")
            self.states.close()
            _LIVE.discard(self)
            self.out.finish(outcome)

    def _trace(self) -> SamplerEnd:
        self._attach()
        self.sampler.attached()  # (a hook that only sends a signal: safe in this thread)
        next_tick = time.monotonic()
        next_scan = next_tick + RESCAN_INTERVAL
        while not self.stop.is_set():
            self.woke, self.woke_cpu = time.monotonic(), abi.current_cpu()
            self._pump()
            now = time.monotonic()
            if now >= next_scan:
                next_scan = now + RESCAN_INTERVAL
                if not self._rescan():
                    return SamplerEnd.TARGET_EXITED
            chosen = self._choose()
            if chosen is None and not self._rescan():
                return SamplerEnd.TARGET_EXITED
            self._round(chosen or [])
            self._flush()
            # A random quarter-period either way: ticks at a fixed period beat against
            # a target's own periodic work (spin's 10 ms cycle) and sample the same
            # phase of it for seconds; perf's cpu-clock counts CPU time and cannot.
            next_tick += self.period * (1.0 + JITTER * (2.0 * self.random() - 1.0))
            late = time.monotonic() - next_tick
            if late > self.period / 2:
                # Skip the ticks whose moment has passed rather than bursting.
                skipped = int((late - self.period / 2) // self.period) + 1
                next_tick += skipped * self.period
                self.stats.lost += skipped * len(chosen or [])
            self._wait_until(next_tick)
        return SamplerEnd.STOPPED

    def _wait_until(self, deadline: float) -> None:
        """Handle tracee events as they come until ``deadline`` or a stop request."""
        while (remaining := deadline - time.monotonic()) > 0 and not self.stop.is_set():
            _wait_for_sigchld(min(remaining, EVENT_POLL))
            self._pump()
        self._flush()  # samples of threads that stopped late

    # -- attaching ------------------------------------------------------------------------

    def _attach(self) -> None:
        if self.pid == os.getpid():
            raise TargetError(
                f"cannot attach to {self.pid}: that is livesym itself; give another PID"
            )
        tids = list_tids(self.pid)
        if not tids:
            raise TargetError(
                f"cannot attach to {self.pid}: no such process; check the PID with ps or pgrep"
            )
        for tid in sorted(tids):
            try:
                self._seize(tid)
            except OSError as e:
                if e.errno == errno.ESRCH or _dead(self.states.state(tid)):
                    continue  # exited meanwhile, or a zombie leader (pthread_exit)
                raise _attach_error(self.pid, tid, e) from None  # _main detaches the rest
        if not self.traced:
            raise TargetError(
                f"cannot attach to {self.pid}: no such process; check the PID with ps or pgrep"
            )

    def _seize(self, tid: int) -> None:
        abi.seize(tid, abi.PTRACE_O_TRACEEXEC)
        self.traced[tid] = _Traced(tid)

    def _rescan(self) -> bool:
        """Seize new threads; False when the target has no live thread left."""
        tids = list_tids(self.pid)
        if tids is None:
            return False
        for tid in tids - self.traced.keys() - self.refused:
            if _dead(self.states.state(tid)):
                continue  # a zombie cannot be seized, and needs no sampling
            try:
                self._seize(tid)
            except OSError as e:
                if e.errno != errno.ESRCH:
                    self.refused.add(tid)
                    self.stats.error(f"thread {tid}: {_attach_error(self.pid, tid, e)}")
        for tid in self.traced.keys() - tids:
            self._gone(tid)
        return not all(_dead(self.states.state(tid)) for tid in tids)

    def _gone(self, tid: int) -> None:
        t = self.traced.pop(tid, None)
        if t is not None:
            t.interrupted, t.pending = False, None  # no stop will come
        self.states.forget(tid)
        self.stops.kernel_share.forget(tid)
        self.stops.run_credit.forget(tid)

    # -- events -----------------------------------------------------------------------------

    def _pump(self) -> None:
        """Handle every pending event: signals, job control, exits, late stops."""
        while True:
            tid, status = _next_event()
            if tid == 0:
                return
            self._on_event(tid, status)

    def _on_event(self, tid: int, status: int) -> None:
        """Deal with one stop or exit of a tracee; a stopped thread is left running
        (or listening, in a group-stop), sampled first if it is our interrupt."""
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            if tid == self.pid:  # our own child's exit (-- CMD) reaped here: keep it
                self.sampler.exit_status = os.waitstatus_to_exitcode(status)
            self._gone(tid)
            return
        if not os.WIFSTOPPED(status):
            return
        t = self.traced.get(tid)
        sig, event = os.WSTOPSIG(status), abi.stop_event(status)
        try:
            if event == abi.PTRACE_EVENT_STOP and sig in abi.STOP_SIGNALS:
                # A group-stop (SIGSTOP, ^Z...): stay stopped as job control says,
                # but let SIGCONT through (PTRACE_CONT would resume the thread).
                abi.listen(tid)
                if t:
                    t.listening, t.interrupted, t.pending = True, False, None
                return
            if event == abi.PTRACE_EVENT_STOP:
                # Our interrupt (sampled if a round asked for it), or a listener
                # woken by SIGCONT.
                if t and t.pending:
                    # Held from when its stop is seen to its resume: short of the
                    # kernel's count by the notice's latency (4-10 % of it here);
                    # from the interrupt it was 17 % over (the thread runs on till
                    # it traps), and beside busy cores it would count the thread's
                    # wait for a CPU, which was not the tracer's doing.
                    seen = time.monotonic()
                    self._sample(t, t.pending)
                    abi.cont(tid)
                    self.sampler.held_s += time.monotonic() - seen
                else:
                    abi.cont(tid)
            elif event == abi.PTRACE_EVENT_EXEC:
                abi.cont(tid)
                if self.maps_changed is not None:
                    self.out.post(functools.partial(self.maps_changed, ()))
            elif event == 0:
                abi.cont(tid, sig)  # a signal for the target: pass it on
            else:
                abi.cont(tid)
            if t and not (event == 0 and t.interrupted):  # an interrupt is still to come
                t.listening, t.interrupted, t.pending = False, False, None
        except ProcessLookupError:
            self._gone(tid)  # killed while stopped; its exit is reaped later

    # -- sampling ---------------------------------------------------------------------------

    def _choose(self) -> list[tuple[_Traced, str]] | None:
        """The threads to sample now with their states; None if none is alive."""
        chosen: list[tuple[_Traced, str]] = []
        alive = False
        for tid, t in list(self.traced.items()):
            state = self.states.state(tid)
            if state is None:
                self._gone(tid)
                continue
            if _dead(state):
                continue  # its exit is reaped by the pump
            alive = True
            if t.listening or not (state == "R" or (self.idle and state in SAMPLEABLE)):
                continue
            if t.interrupted:
                self.stats.lost += 1  # still on its way to the last interrupt's stop
                continue
            chosen.append((t, state))
        return chosen if alive else None

    def _round(self, chosen: list[tuple[_Traced, str]]) -> None:
        """Interrupt the chosen threads together; each is sampled as it stops.

        Waits STOP_TIMEOUT at most: a thread slower than that (waiting for a
        CPU on a busy machine, or in uninterruptible sleep) is sampled by the
        event pump whenever it does stop.
        """
        waiting: list[_Traced] = []
        self.taken = []
        for t, state in chosen:
            # Counters from just before the interrupt: see _queued.
            pending = _Pending(
                state, self.states.schedstat(t.tid), self.woke,
                self.states.cpu(t.tid), self.woke_cpu,
            )  # fmt: skip
            try:
                abi.interrupt(t.tid)
            except ProcessLookupError:
                self._gone(t.tid)
                continue
            t.interrupted, t.pending = True, pending
            waiting.append(t)
        deadline = time.monotonic() + STOP_TIMEOUT
        delay = 50e-6
        while any(t.interrupted for t in waiting):
            tid, status = _next_event()
            if tid:
                self._on_event(tid, status)
                continue
            if time.monotonic() >= deadline:
                break
            # Sleep rather than spin: a busy poll takes the CPU the stopping
            # thread may need (measured: 10 ms median stops on 2 busy CPUs).
            _wait_for_sigchld(delay)
            delay = min(delay * 2, 1e-3)
        for t in waiting:
            if not t.interrupted or t.tid not in self.traced:
                continue
            probed = _probe(t.tid)
            if probed is not None:
                self.stats.error("a stop notification was taken by another waitpid() caller")
                self._on_event(t.tid, probed)
            else:
                self.stats.error(
                    f"some threads took over {STOP_TIMEOUT * 1000:g} ms to stop "
                    "(busy CPUs or uninterruptible sleep); their samples came late"
                )
        taken, self.taken = self.taken, None
        self._decide(taken)

    def _sample(self, t: _Traced, pending: _Pending) -> None:
        """Read ``t``, stopped for our interrupt: decided with the round's other stops,
        or at once where it stopped late, on its own."""
        taken = self.stops.read(t.tid, pending)
        if taken is None:
            return
        if self.taken is not None:
            self.taken.append(taken)  # decided when the round's stops are all in
        else:
            self._decide([taken])

    def _decide(self, taken: list[_Taken]) -> None:
        self.batch += self.stops.decide(taken)

    def _flush(self) -> None:
        if self.batch:
            batch, self.batch = self.batch, []
            self.out.send(batch)

    # -- detaching --------------------------------------------------------------------------

    def _detach_all(self) -> None:
        """Stop every seized thread and PTRACE_DETACH it; give up after DETACH_TIMEOUT.

        PTRACE_DETACH works only on a thread in ptrace-stop, so running (and
        listening) threads are interrupted first. A thread caught in a
        signal-delivery-stop gets its signal with the detach; one in a
        group-stop is put back into it by the kernel.
        """
        waiting: set[int] = set()
        for tid, t in list(self.traced.items()):
            if not t.interrupted:
                try:
                    abi.interrupt(tid)
                except ProcessLookupError:
                    self._gone(tid)  # already dead: nothing to detach
                    continue
                t.interrupted = True
            waiting.add(tid)
        deadline = time.monotonic() + DETACH_TIMEOUT
        delay = 50e-6
        while waiting:
            tid, status = _next_event()
            if tid == 0:
                if time.monotonic() >= deadline:
                    break
                _wait_for_sigchld(delay)
                delay = min(delay * 2, 1e-3)
                continue
            self._detach_one(tid, status)
            waiting.discard(tid)
        for tid in waiting:
            probed = _probe(tid)
            if probed is not None:
                self._detach_one(tid, probed)
            else:
                self.stats.error(
                    f"thread {tid} did not stop to be detached; "
                    "the kernel detached it when the tracer thread ended"
                )
        self.traced.clear()

    def _detach_one(self, tid: int, status: int) -> None:
        if os.WIFSTOPPED(status):
            signo = os.WSTOPSIG(status) if abi.stop_event(status) == 0 else 0
            with contextlib.suppress(ProcessLookupError):  # died meanwhile
                abi.detach(tid, signo)
        self._gone(tid)


# --- the sampler ---------------------------------------------------------------------------


class PtraceSampler(Sampler):
    """Samples the user stacks of running threads by stopping them with ptrace, 1/rate s apart.

    Each sample stops the sampled threads briefly (see the module docstring),
    so it runs at ``DEFAULT_RATE_HZ`` (49) where perf would use 99.
    """

    name = "ptrace"
    default_rate_hz = DEFAULT_RATE_HZ
    stops_target = True
    off_cpu_way = "ptrace (every thread at each tick, its state from /proc)"

    def __init__(self, pid: int, rate_hz: int = DEFAULT_RATE_HZ, idle: bool = False) -> None:
        super().__init__(pid, rate_hz, idle)
        self.stack_size = STACK_COPY
        self._tracer: _Tracer | None = None
        # Samples dropped because their thread, though runnable, was waiting for
        # a CPU (kept as IDLE with idle=True): not lost, perf would not take them.
        self.off_cpu = 0
        # Which on-CPU samples stood for kernel time (the last run's; see _Tracer._decide).
        self.kernel_share: SystemTimeShare | None = None
        self.run_credit: RunCredit | None = None
        self.kernel_mode = KernelMode.of(
            KernelSeen.FROM_SYSCALLS, "ptrace sees which; sized by system time"
        )
        self.kernel_accounted = True
        self.held_s = 0.0  # thread-seconds held stopped (added by the tracer thread)

    def held(self) -> float:
        return self.held_s

    def set_stack_size(self, size: int) -> None:
        if not 0 <= size <= MAX_STACK_COPY or size % 8:
            raise UsageError(
                f"--stack-size {size} is not possible: use a multiple of 8 from 0 to "
                f"{MAX_STACK_COPY} bytes"
            )
        self.stack_size = size

    @classmethod
    def available(cls) -> str | None:
        """None if ptrace sampling may work here, else why not (one line)."""
        try:
            abi.arch_for()
        except abi.UnsupportedMachine as e:
            return str(e.strerror)
        if ptrace_scope() == 3:
            return "ptrace is disabled on this machine (ptrace_scope=3); use --sampler perf"
        return None

    def traced_threads(self) -> frozenset[int]:
        """The tids seized now (empty outside ``run``)."""
        tracer = self._tracer
        # frozenset() copies the keys in C, holding the GIL: the tracer thread
        # cannot change the dict halfway through.
        return frozenset(tracer.traced) if tracer else frozenset()

    def rate_limit(self) -> tuple[int, str]:
        return (
            MAX_RATE_HZ,
            "the most for the ptrace sampler, which stops the threads for every sample",
        )

    def _check(self) -> None:
        self.check_rate()
        try:
            abi.arch_for()
        except abi.UnsupportedMachine as e:
            raise UsageError(str(e.strerror)) from None

    async def run(
        self, sink: SampleSink, stop: asyncio.Event, maps_changed: MapsHint | None = None
    ) -> SamplerEnd:
        self._check()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[SamplerEnd] = loop.create_future()
        tracer = self._tracer = _Tracer(self, loop, sink, maps_changed, done)
        stop_watch = loop.create_task(stop.wait())
        stop_watch.add_done_callback(lambda _: tracer.stop.set())
        _register_atexit()
        _LIVE.add(tracer)
        tracer.thread.start()
        closing = False
        try:
            # shield: a cancelled run() must not cancel ``done``, which still
            # tells below when the thread has detached.
            return await asyncio.shield(done)
        except GeneratorExit:
            closing = True  # closed unfinished (its loop abandoned): it may not await
            raise
        finally:
            tracer.stop.set()
            if closing:
                tracer.thread.join(DETACH_TIMEOUT + 1.0)
            else:
                stop_watch.cancel()
                await _join(tracer)
            self._tracer = None


async def _join(tracer: _Tracer) -> None:
    """Wait for the tracer thread to detach and end; never return while it traces."""
    try:
        await asyncio.wait({tracer.out.done})
    finally:
        # Also when cancelled again while waiting: block rather than leave attached.
        tracer.thread.join()
    if tracer.out.done.done() and not tracer.out.done.cancelled():
        tracer.out.done.exception()  # mark retrieved: run() has re-raised or superseded it
