"""Sampling Python processes with py-spy, run as a subprocess (never imported).

py-spy reads the interpreter's own structures, so it sees Python functions,
files and lines that a native sampler cannot; with ``--native`` it merges in
the native frames of C extensions.

How the samples get here: py-spy 0.4 has no streaming output. ``record``
keeps every format in memory and writes it once, when it stops (``--duration``
over, Control-C, or the target gone); ``dump`` prints one sample per run and
costs a fresh attach each time (~10 ms, ~60 ms with ``--native``: too slow for
50 Hz, and no symbol cache between runs). So this sampler runs ``record`` in
**windows** of ``window`` whole seconds (py-spy's ``--duration`` takes whole
seconds only), each writing its samples to a file of a private directory::

    py-spy record --pid PID --rate HZ --duration 2 --format speedscope --output FILE
                  --threads --full-filenames --idle [--native]

**A relay, not a queue.** Between two runs py-spy exits and attaches again (30-100 ms
with ``--native`` on an idle machine, seconds on a saturated one: it re-reads the
target's binaries); back to back, 6-9 % of the intervals went unsampled. So the next
run is started RELAY_LEAD seconds (plus what the last one took to attach) before the
current one's end is due, and as soon as it says it samples, the current one gets
SIGINT (py-spy then writes what it has and exits). The two overlap by the few
intervals of the hand-over; a sample both took is counted once. The baton is handed
over, never dropped: a run's own ``--duration`` is BACKSTOP seconds beyond its window,
so a successor slow to attach (beside busy cores, 0.05-0.25 s, now and then more than
the lead) finds the current run still sampling; a successor that fails is retried
while the current one goes on.

**Sample times.** Speedscope keeps each thread's samples in order, and with
``--idle`` py-spy takes every thread in every interval it samples, so a thread's
i-th sample is the window's i-th interval: counted back from the run's exit (its
last interval is one period before), each sample gets its time to within a period
or two (``pyspy_speedscope``). A sample the previous run already covered in time is
dropped; intervals no run covered (py-spy's failed or late intervals, a hand-over
that came late) are counted in ``stats.lost``, their time in ``uncovered``. A window
ends at once when the session stops (SIGINT); its ``--duration`` bounds how long an
orphaned py-spy could stay attached if livesym itself were killed.

``--threads`` gives each stack its OS thread id and the ``threading`` name;
``--full-filenames`` gives module paths for native frames. Each stack becomes
a ``Sample`` whose ``frames`` mix what py-spy named -- Python frames
(function, file, line) and the native functions it symbolized itself -- as
frame records, with the raw addresses of the native frames it could not name,
for livesym to resolve from the maps and ELF symbols (those are ``ips`` too).
The threading name goes into ``Sample.thread_name``: every OS thread of a
Python program is called "python".

Running and idle: py-spy's own judgement (the thread's /proc state, which its ptrace
stops make noisy anyway) does not reach the file, and ``--idle`` is on for the times.
``pyspy_parse.looks_idle`` judges each stack by its leaf (a blocking libc call,
``time_sleep``, a libpython lock wait, a ``threading`` wait; reliable with ``--native``,
Python-level only without). That judgement is then sized by the kernel's accounting of
each thread's CPU time over the window (``cpu_split``, ``thread_cpu``): stacks found in
a read or a receive count as running until the thread's CPU share is reached (a loop of
reads that never block is not waiting), and the system share of the running ones stands
for kernel time (``Sample.in_kernel``: the estimated kernel frame above the stack; the
engine adds no estimate of its own). Without ``idle`` the stacks left waiting are
dropped (counted in ``idle_dropped``); with ``idle`` (``--idle``) they are delivered as
``ThreadState.IDLE``.

py-spy stops the target for each sample (PTRACE_ATTACH). If py-spy dies of a
signal, a stop it may have left pending is undone with SIGCONT (unless the
target was already stopped when sampling began).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from livesym import priority
from livesym.errors import TargetError
from livesym.records import (
    FrameRecord,
    KernelMode,
    KernelSeen,
    named_frame_record,
    python_frame_record,
)
from livesym.sampling.base import (
    MapsHint,
    Sample,
    Sampler,
    SamplerEnd,
    SampleSink,
    ThreadState,
)
from livesym.sampling.cpu_split import CpuSplit, Seen, Verdict
from livesym.sampling.kernel_estimate import estimated_samples
from livesym.sampling.pyspy_parse import (
    Frame,
    NativeFrame,
    ParsedStack,
    PyFrame,
    RawParser,
    python_leaf_if_stopped_in_syscall,
    reads_data,
)
from livesym.sampling.pyspy_speedscope import SpeedscopeError, ThreadRun, read_speedscope
from livesym.target.cpython_files import LIBPYTHON
from livesym.target.permissions import CAP_SYS_PTRACE, denied_remedy, has_cap, ptrace_scope
from livesym.target.process import TargetProcess
from livesym.target.syscall_exits import SyscallExits
from livesym.target.thread_cpu import ThreadCpu
from livesym.target.threads import GONE, list_tids, task_state

__all__ = ["PySpySampler", "find_py_spy", "mapped_objects", "object_for_source", "sample_frames"]

KILL_GRACE = 1.0  # seconds between SIGINT and SIGKILL when stopping py-spy
DEFAULT_WINDOW = 2  # seconds per py-spy run (its --duration: whole seconds)
RELAY_LEAD = 0.4  # seconds before a run's end is due that the next one is started
BACKSTOP = 3  # whole seconds a run samples past its window while its successor attaches
INITIAL_ATTACH = 0.3  # seconds a py-spy run is taken to need to start sampling, at first
MAX_FAILURES = 3  # consecutive failed windows (target alive) before giving up
RETRY_DELAY = 0.2  # seconds before retrying after a failed window
STDERR_LIMIT = 64 * 1024  # bytes of py-spy's stderr kept
LINE_LIMIT = 16 * 1024 * 1024  # longest stdout line accepted
MAX_OUTPUT = 512 << 20  # bytes of one window's speedscope file read, at most

# Above this many mappings py-spy's --native costs the target most of its speed.
NATIVE_MAPPINGS_LIMIT = 10_000
# How the session sees kernel time: py-spy does not see into it (the header's words).
KERNEL_MODE = KernelMode.of(
    KernelSeen.ESTIMATED, "py-spy's samples sized by each thread's CPU time"
)
_NOT_INSTALLED = "py-spy is not installed; pip install py-spy, or use --sampler perf"


def _mapping_count(pid: int) -> int:
    """How many mappings ``pid`` has (its maps file's lines), 0 when unreadable."""
    try:
        return TargetProcess(pid).read_maps_text().count("\n")
    except TargetError:
        return 0


def find_py_spy() -> str | None:
    """py-spy next to the running interpreter (the one installed with livesym), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def _target_alive(pid: int) -> bool:
    """Whether the target still runs: some task of /proc/PID that is not a zombie.

    An exited but unreaped process keeps /proc/PID with a zombie leader; a
    leader that called pthread_exit is a zombie too while its threads run.
    """
    return any(task_state(pid, t) not in GONE for t in list_tids(pid) or ())


def _job_stopped(pid: int) -> bool:
    """Whether any task of ``pid`` is in a job-control stop (state T)."""
    return any(task_state(pid, t) == b"T" for t in list_tids(pid) or ())


def _wait_exited(pid: int, timeout: float) -> None:
    """Wait (blocking, briefly) until process ``pid`` has exited: gone or a zombie."""
    deadline = time.monotonic() + timeout
    while task_state(pid, pid) not in GONE and time.monotonic() < deadline:
        time.sleep(0.005)


def _first_error_line(stderr: str) -> str | None:
    """py-spy's own first error line, without its ``Error: `` prefix."""
    for line in stderr.splitlines():
        text = line.strip()
        if text:
            return text.removeprefix("Error:").strip() or text
    return None


def _remedy(first_line: str, pid: int) -> str:
    low = first_line.lower()
    if "permission denied" in low or "operation not permitted" in low:
        return denied_remedy(pid, attach=True)
    if "python version" in low or "python interpreter" in low or "libpython" in low:
        return f"is {pid} a Python program? use --sampler perf for native programs"
    if "unsupported version" in low:
        return "upgrade py-spy (pip install -U py-spy), or use --sampler perf"
    if "check that the process is running" in low or "no such process" in low:
        return f"check that process {pid} is running"
    return f"check that py-spy can attach: py-spy dump --pid {pid}"


class PySpySampler(Sampler):
    """Python stacks from py-spy, in windows of ``window`` seconds (see the module doc)."""

    name = "pyspy"
    max_rate_hz = 1000  # py-spy stops the target for every sample
    off_cpu_way = "py-spy --idle (every thread at each tick)"
    stops_target = True

    def __init__(
        self,
        pid: int,
        rate_hz: int,
        idle: bool = False,
        *,
        native: bool = True,
        window: int = DEFAULT_WINDOW,
        py_spy: str | None = None,
        nonblocking: bool = False,
    ) -> None:
        super().__init__(pid, rate_hz, idle)
        if window < 1:
            raise ValueError(f"window must be at least 1 second, not {window}")
        # --nonblocking: py-spy reads the target's memory without stopping it (no
        # slowdown; a stack read while it changes may come out torn), and cannot
        # unwind native frames then: Python frames only.
        self.nonblocking = nonblocking
        self.native = native and not nonblocking
        self.window = window
        self.py_spy = py_spy
        self.windows = 0  # py-spy runs that delivered
        self.uncovered = 0.0  # seconds between windows in which nothing was sampled
        # stats.lost in two parts: intervals py-spy itself failed to sample (its Errors,
        # outside the hand-over), and the intervals of ``uncovered``.
        self.failed_intervals = 0
        self.uncovered_intervals = 0
        self.idle_dropped = 0  # samples py-spy called running whose leaf waits (not idle mode)
        self.py_spy_pids: deque[int] = deque(maxlen=64)  # py-spy runs started, latest last
        self.attached_at: float | None = None  # when the latest run began sampling (monotonic)
        self._target_was_stopped = False
        self._tid_fallback_noted = False
        self._threads_seen: set[int | None] = set()  # the last window's threads
        self._covered: float | None = None  # the time of the last interval delivered
        self._cpu = ThreadCpu(pid)  # the threads' CPU time between windows
        self._split = CpuSplit()
        self.kernel_mode = KERNEL_MODE
        self.kernel_accounted = True  # _accounted sizes it; the engine adds none

    def _spare_a_big_address_space(self) -> None:
        """Leave out --native where it would cripple the target, and say so.

        py-spy's native unwinding reads the target's maps for every sample while the
        target is stopped: with 40,000 mappings a CPU-bound Python target ran at a fifth
        of its speed (one continuous ``py-spy record --native``; without --native, no
        slowdown measured). Above NATIVE_MAPPINGS_LIMIT mappings the Python frames come
        alone: the cost is native frames under C extensions, not the target's speed.
        """
        if not self.native:
            return
        count = _mapping_count(self.pid)
        if count > NATIVE_MAPPINGS_LIMIT:
            self.native = False
            self.stats.error(
                f"pid {self.pid} has {count} mappings: py-spy runs without --native (its "
                "native unwinding would stop the target for most of its time); Python "
                "frames only, native frames under them are left out"
            )

    # --- what the CLI asks before choosing a sampler ---------------------------------

    @classmethod
    def available(cls) -> str | None:
        """None if py-spy is installed and may attach to other processes, else why not."""
        if find_py_spy() is None:
            return _NOT_INSTALLED
        scope = ptrace_scope()
        if scope == 3:
            return "ptrace is disabled (kernel.yama.ptrace_scope=3); use --sampler perf"
        if has_cap(CAP_SYS_PTRACE):
            return None
        if scope is None or scope == 0:
            return None  # the same user's processes
        return (
            f"py-spy cannot attach: kernel.yama.ptrace_scope={scope} allows tracing children "
            "only; run as root or with CAP_SYS_PTRACE, or use --sampler perf"
        )

    # --- sampling ---------------------------------------------------------------------

    def command(self, exe: str, output: str) -> list[str]:
        """The py-spy command line for one window, writing its samples to ``output``.

        ``--idle`` always: every thread in every interval is what gives each sample its
        time (``pyspy_speedscope``); the waiting ones are told apart by their leaf."""
        args = [
            exe,
            "record",
            "--pid",
            str(self.pid),
            "--rate",
            str(self.rate_hz),
            "--duration",
            str(self.window + BACKSTOP),  # the relay halts it; this only if nothing does
            "--format",
            "speedscope",
            "--output",
            output,
            "--threads",
            "--full-filenames",
            "--idle",
        ]
        if self.native:
            args.append("--native")
        if self.nonblocking:
            args.append("--nonblocking")
        return args

    async def run(
        self, sink: SampleSink, stop: asyncio.Event, maps_changed: MapsHint | None = None
    ) -> SamplerEnd:
        self.check_rate()
        exe = self.py_spy or find_py_spy()
        if exe is None:
            raise TargetError(f"cannot attach to {self.pid}: {_NOT_INSTALLED}")
        if not os.path.isdir(f"/proc/{self.pid}"):
            raise TargetError(
                f"cannot attach to {self.pid}: no such process; check the PID with ps or pgrep"
            )
        # A command livesym started goes on first: py-spy finds no interpreter in a
        # process stopped at its first instruction (its first samples come at once).
        self.attached()
        self._target_was_stopped = _job_stopped(self.pid)
        self._spare_a_big_address_space()
        self._cpu.look()  # the first window's CPU time counts from here
        with tempfile.TemporaryDirectory(prefix="livesym-pyspy-") as scratch:
            return await self._windows(sink, stop, exe, scratch)

    async def _windows(
        self, sink: SampleSink, stop: asyncio.Event, exe: str, scratch: str
    ) -> SamplerEnd:
        """py-spy window after window, each writing into the private ``scratch``, in a
        relay: the next run starts before the current one ends, and once it samples the
        current one is told to stop (SIGINT: it writes what it has). No interval goes
        unsampled but the one or two of the hand-over; a sample two runs took is
        counted once (``_deliver``)."""
        relay = _Relay(self, exe, scratch, stop)
        relay.sink = sink
        try:
            while True:
                end = await relay.step()
                if end is not None:
                    return end
        finally:
            await relay.close()

    def _resume_target(self, py_spy_pid: int | None) -> None:
        """After py-spy died of a signal: undo a stop it may have left behind.

        py-spy stops the target's threads with PTRACE_ATTACH for every sample.
        If it dies between an attach and the wait that consumes the SIGSTOP
        (a signal before its Control-C handler is set, SIGKILL, a crash), the
        kernel detaches the threads with that SIGSTOP still pending and the
        target stops. A target that was not stopped when sampling began gets
        SIGCONT.
        """
        if py_spy_pid is not None:
            _wait_exited(py_spy_pid, KILL_GRACE)  # its exit detaches the tracees
        if self._target_was_stopped or not _job_stopped(self.pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)
        self.stats.error(
            "py-spy was ended while it had the target stopped; livesym resumed it (SIGCONT)"
        )

    def _deliver(self, window: _Window, sink: SampleSink) -> None:
        """The window's samples the session has not had yet, to the sink. Lost: the
        intervals py-spy failed to sample (its ``Errors``) outside the hand-over, and the
        time between the last run's last interval and this run's first, when no run
        sampled (a hand-over that came late), at the rate."""
        batch = self._samples(window)
        errors = window.parser.summary.reported_errors or 0
        covered = self._covered
        if window.first is None or window.last is None:
            self.stats.lost += errors
            self.failed_intervals += errors
            return
        # Failures in the hand-over, while the two runs took turns at stopping the
        # target, were intervals the previous run sampled: not lost.
        overlap = max(0.0, covered - window.first) if covered is not None else 0.0
        failed = max(0, errors - round(overlap * self.rate_hz))
        self.stats.lost += failed
        self.failed_intervals += failed
        if covered is not None:
            batch = [s for s in batch if s.time > covered]  # the previous run took those
            gap = window.first - covered - 1.0 / self.rate_hz
            if gap > 0:
                self.stats.lost += round(gap * self.rate_hz)
                self.uncovered_intervals += round(gap * self.rate_hz)
                self.uncovered += gap
        if covered is None or window.last > covered:
            self._covered = window.last
        if batch:
            self.stats.samples += len(batch)
            sink(batch)

    def _read_runs(self, data: bytes) -> list[ThreadRun]:
        """A window's output read as speedscope (nothing from an empty one)."""
        if not data:
            return []
        try:
            return read_speedscope(data)
        except SpeedscopeError as e:
            self.stats.error(f"py-spy's output could not be read: {e}")
            return []

    def _samples(self, window: _Window) -> list[Sample]:
        with SyscallExits(self.pid) as after_syscall:
            seen = self._window_samples(window, after_syscall)
        return self._accounted(window, seen)

    def _window_samples(self, window: _Window, after_syscall: SyscallExits) -> list[_Seen]:
        """The window's stacks in time order, judged by their leaves (not yet sized by
        the threads' CPU time: ``_accounted``)."""
        out: list[_Seen] = []
        for when, stack in self._timed(window):
            tid = stack.tid
            if tid is None:
                tid = self.pid
                if not self._tid_fallback_noted:
                    self._tid_fallback_noted = True
                    self.stats.error(
                        "py-spy gave no OS thread ids; its samples are counted on the main thread"
                    )
            kept = python_leaf_if_stopped_in_syscall(stack.frames, after_syscall)
            if stack.idle:
                seen = Seen.READING if reads_data(stack.frames) else Seen.WAITING
            else:
                seen = Seen.AT_CALL if kept is not stack.frames else Seen.RUNNING
            out.append(_Seen(when, tid, stack.thread_name, kept, seen))
        out.sort(key=lambda s: s.time)
        return out

    def _accounted(self, window: _Window, seen: list[_Seen]) -> list[Sample]:
        """Samples of what the window saw, each thread's sized by the CPU and system
        time the kernel accounted for it meanwhile (``cpu_split``): the ones that ran,
        those of them that stood for kernel time, and kernel time beyond them."""
        span, times = self._cpu.look()
        by_tid: dict[int, list[int]] = {}
        for i, s in enumerate(seen):
            by_tid.setdefault(s.tid, []).append(i)
        verdicts = [Verdict.IDLE] * len(seen)
        extra: dict[int, int] = {}
        for tid, t in times.items():
            on_cpu, system = (t.on_cpu / span, t.system / span) if span > 0 else (0.0, 0.0)
            mine = by_tid.get(tid)
            if mine is None:  # not a thread py-spy saw (a C library's own)
                extra[tid] = self._split.unseen(tid, t.system * self.rate_hz)
                continue
            found, beyond = self._split.verdicts(tid, [seen[i].seen for i in mine], on_cpu, system)
            for i, verdict in zip(mine, found, strict=True):
                verdicts[i] = verdict
            extra[tid] = beyond
        for tid in by_tid.keys() - times.keys():  # gone before the look: as py-spy judged
            self._split.forget(tid)
            for i in by_tid[tid]:
                verdicts[i] = Verdict.IDLE if seen[i].seen.idle else Verdict.USER
        return self._built(window, seen, verdicts, extra)

    def _built(
        self, window: _Window, seen: list[_Seen], verdicts: list[Verdict], extra: dict[int, int]
    ) -> list[Sample]:
        out: list[Sample] = []
        objects: tuple[str, ...] | None = None  # read once, when a frame needs it
        for s, verdict in zip(seen, verdicts, strict=True):
            if verdict is Verdict.IDLE and not self.idle:
                self.idle_dropped += 1
                continue
            if verdict is Verdict.KERNEL and not self.kernel:
                continue  # --no-kernel: left out, as perf leaves kernel mode out
            if objects is None and any(isinstance(f, NativeFrame) and f.file for f in s.frames):
                objects = mapped_objects(self.pid)
            frames = sample_frames(s.frames, objects or ())
            out.append(Sample(
                time=s.time, pid=self.pid, tid=s.tid,
                ips=tuple(f for f in frames if isinstance(f, int)),
                state=ThreadState.IDLE if verdict is Verdict.IDLE else ThreadState.RUNNING,
                frames=frames, thread_name=s.thread_name, in_kernel=verdict is Verdict.KERNEL,
            ))  # fmt: skip
        if self.kernel and window.first is not None and window.last is not None:
            start = max(window.first, self._covered or window.first)  # after the last window's
            out += estimated_samples(self.pid, extra, start, window.last)
        out.sort(key=_time_of)
        return out

    def _timed(self, window: _Window) -> Iterator[tuple[float, ParsedStack]]:
        """Each sample of the window with its time.

        With ``--idle`` py-spy takes every thread in every interval it samples, so the
        longest run holds every interval: from when py-spy said it samples to one period
        before it exited, or half a period before it was told to stop where it was (its
        last interval came then; writing its output took a while: timed to its exit, its
        samples were stretched over that, and a successor's first ones were dropped as
        taken already, 3.5 % of all, most of them of the work the target did as the
        successor's attach released it). py-spy spaces its intervals at random
        (exponentially, against aliasing; 1/rate on average), so they are spread evenly
        between those two ends: a sample's time is then off by a few periods at most,
        mid-window. A thread seen in the last window started with this one (it may have
        ended early); a new one ended with it."""
        runs = window.runs
        if not runs:
            return
        period = 1.0 / self.rate_hz
        intervals = max(len(r.stacks) for r in runs)
        last = (window.ended if window.ended is not None else time.monotonic()) - period
        if window.interrupted is not None:
            last = min(last, window.interrupted - period / 2)
        first = last - (intervals - 1) * period  # py-spy never said it samples: at the rate
        if window.started is not None and window.started < last:
            first = window.started
        step = (last - first) / (intervals - 1) if intervals > 1 else 0.0
        window.first, window.last, window.intervals = first, last, intervals
        seen = self._threads_seen
        for run in runs:
            n = len(run.stacks)
            offset = 0 if run.tid in seen or n == intervals else intervals - n
            for i, stack in enumerate(run.stacks):
                yield first + (offset + i) * step, stack
        self._threads_seen = {r.tid for r in runs}

    def _note_garbage(self, window: _Window) -> None:
        summary = window.parser.summary
        if summary.garbage:
            example = summary.garbage_examples[0] if summary.garbage_examples else ""
            self.stats.error(f"py-spy printed lines livesym cannot read, e.g. {example!r}")
        self._check_written(window)

    def _check_written(self, window: _Window) -> None:
        """Whether py-spy wrote as many samples as it said it took (speedscope keeps each)."""
        summary = window.parser.summary
        written = sum(len(r.stacks) for r in window.runs)
        if (
            window.ok
            and summary.reported_samples is not None
            and summary.reported_samples != written
        ):
            self.stats.error(
                f"py-spy reported {summary.reported_samples} samples in a window "
                f"but wrote {written}"
            )


@dataclass
class _Running:
    """A window under way: its py-spy run, the event that halts it, when it was spawned."""

    window: _Window
    task: asyncio.Task[None]
    halt: asyncio.Event
    spawned: float
    sampling: asyncio.Task[bool]


class _Relay:
    """Windows one after another without a gap: the next py-spy is started RELAY_LEAD
    seconds (plus what the last one took to attach) before the current one's end is
    due, and the current one is halted as soon as the next samples."""

    def __init__(self, sampler: PySpySampler, exe: str, scratch: str, stop: asyncio.Event):
        self.sampler = sampler
        self.exe = exe
        self.scratch = scratch
        self.stop = stop
        self.sink: SampleSink = lambda batch: None
        self.current: _Running | None = None
        self.next: _Running | None = None
        self.failures = 0
        self.count = 0
        self.attach = INITIAL_ATTACH  # seconds the latest py-spy took to start sampling
        self.retry_at = 0.0  # no successor is started before this (monotonic)
        self._stop_watch = asyncio.create_task(stop.wait())

    def _start(self) -> _Running:
        self.count += 1
        halt = asyncio.Event()
        if self.stop.is_set():
            halt.set()
        path = os.path.join(self.scratch, f"window-{self.count}.json")
        window = _Window(self.sampler, self.exe, path)
        return _Running(window, asyncio.create_task(window.run(halt)), halt, time.monotonic(),
                        asyncio.create_task(window.sampling.wait()))  # fmt: skip

    async def step(self) -> SamplerEnd | None:
        """Wait for the next thing to do, and do it; the session's end, once it ended."""
        sampler = self.sampler
        if self.current is None:
            if self.stop.is_set():
                return SamplerEnd.STOPPED
            if not _target_alive(sampler.pid):
                return SamplerEnd.TARGET_EXITED
            self.current = self._start()
        current, nxt = self.current, self.next
        if nxt is not None and nxt.task.done() and not nxt.window.sampling.is_set():
            self.next = None
            await self._successor_failed(nxt)
            return None
        relay_at = max(current.spawned + sampler.window - self.attach - RELAY_LEAD,
                       self.retry_at)  # fmt: skip
        waits: set[asyncio.Future[Any]] = {current.task, self._stop_watch}
        if nxt is not None:
            waits.add(nxt.task)
            if not nxt.window.sampling.is_set():  # once it is, the current was halted below
                waits.add(nxt.sampling)
        timeout = None if nxt is not None else max(0.0, relay_at - time.monotonic())
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if self.stop.is_set():
            for running in (current, nxt):
                if running is not None:
                    running.halt.set()
        elif (
            nxt is None
            and time.monotonic() >= relay_at
            and not current.task.done()
            and _target_alive(sampler.pid)
        ):
            self.next = nxt = self._start()
        if nxt is not None and nxt.window.sampling.is_set():
            current.halt.set()  # the baton: the next run samples; this one writes and ends
        if not current.task.done():
            return None
        self.current, self.next = nxt, None
        return await self._finished(current)

    async def _finished(self, running: _Running) -> SamplerEnd | None:
        sampler, window = self.sampler, running.window
        running.sampling.cancel()
        await running.task
        if window.started is not None:
            self.attach = window.started - running.spawned
        sampler._deliver(window, self.sink)
        sampler._note_garbage(window)
        summary = window.parser.summary
        if summary.late:
            sampler.stats.error(
                "py-spy fell behind the sampling rate; lower --rate for accurate results"
            )
        if self.stop.is_set():
            return SamplerEnd.STOPPED
        if window.ok:
            self.failures = 0
            sampler.windows += 1
            if summary.target_exited or not _target_alive(sampler.pid):
                return SamplerEnd.TARGET_EXITED
            return None
        if not _target_alive(sampler.pid):
            return SamplerEnd.TARGET_EXITED
        message = window.failure_message()
        self.failures += 1
        # A py-spy that never attached to a target with no window yet cannot read it
        # (permissions, no interpreter): said at once. One that attached and then died
        # (killed, a crash) is retried like any failed window, MAX_FAILURES in a row.
        never_read = sampler.windows == 0 and not summary.attached
        if never_read or self.failures >= MAX_FAILURES:
            raise TargetError(message)
        sampler.stats.error(message)
        if self.current is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), RETRY_DELAY)
        return None

    async def _successor_failed(self, running: _Running) -> None:
        """A successor that ended before it sampled, while the current run samples on:
        said, and retried after RETRY_DELAY; after MAX_FAILURES in a row the current run
        is left to end at its ``--duration``, where a failed next window ends the session
        (``_finished``)."""
        running.sampling.cancel()
        await running.task
        self.sampler._note_garbage(running.window)
        if self.stop.is_set() or not _target_alive(self.sampler.pid):
            return
        self.failures += 1
        self.sampler.stats.error(running.window.failure_message())
        wait = RETRY_DELAY if self.failures < MAX_FAILURES else self.sampler.window + BACKSTOP
        self.retry_at = time.monotonic() + wait

    async def close(self) -> None:
        """Halt what still runs, wait for it (each run reaps its py-spy), and deliver
        what it sampled."""
        self._stop_watch.cancel()
        left = [r for r in (self.current, self.next) if r is not None]
        self.current = self.next = None
        for running in left:
            running.halt.set()
            running.sampling.cancel()
        done, pending = await asyncio.wait([r.task for r in left] or [self._stop_watch],
                                           timeout=3 * KILL_GRACE)  # fmt: skip
        for task in pending:
            task.cancel()
        await asyncio.gather(self._stop_watch, *(r.task for r in left), return_exceptions=True)
        for running in left:
            if running.task in done and not running.task.cancelled():
                self.sampler._deliver(running.window, self.sink)


class _Window:
    """One py-spy run: start it, read its output, stop it on request, always reap it."""

    def __init__(self, sampler: PySpySampler, exe: str, output: str) -> None:
        self.sampler = sampler
        self.exe = exe
        self.output = output  # where py-spy writes the window's samples
        self.parser = RawParser()  # py-spy's messages (the samples go to a file)
        self.data = b""  # what py-spy wrote to ``output``, read when it ended
        self.runs: list[ThreadRun] = []  # ``data`` read as speedscope (``PySpySampler``)
        self.spawned: float | None = None  # when py-spy was started (monotonic)
        self.stderr = b""
        self.returncode: int | None = None
        self.spawn_error: OSError | None = None
        self.started: float | None = None  # when py-spy said it is sampling
        self.sampling = asyncio.Event()  # set then
        # The window's samples in time (``PySpySampler._timed``): the first and last
        # interval's, and how many intervals it sampled.
        self.first: float | None = None
        self.last: float | None = None
        self.intervals = 0
        self.ended: float | None = None  # when its output was complete
        # When it was told to stop (SIGINT): it samples no more from then, and then
        # writes its output, which takes a while (``ended`` is later by that much).
        self.interrupted: float | None = None
        self.stopped_by_us = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 or (self.stopped_by_us and self.parser.summary.attached)

    async def run(self, stop: asyncio.Event) -> None:
        env = {
            **os.environ,
            "RUST_BACKTRACE": "0",  # errors in one line, and no backtrace capture cost
            "RUST_LIB_BACKTRACE": "0",
            "NO_COLOR": "1",
        }
        try:
            proc = await self._spawn(env)
        except OSError as e:
            self.spawn_error = e
            return
        self.sampler.py_spy_pids.append(proc.pid)
        try:
            await self._talk(proc, stop)
        finally:
            try:
                await _reap(proc)
            finally:
                self.returncode = proc.returncode
                if proc.returncode is None or proc.returncode < 0:
                    self.sampler._resume_target(proc.pid)
        self.data = self._read_output()
        self.runs = self.sampler._read_runs(self.data)

    def _read_output(self) -> bytes:
        """What py-spy wrote (nothing when it wrote none: it failed, or was killed)."""
        try:
            with open(self.output, "rb") as f:
                data = f.read(MAX_OUTPUT + 1)
        except OSError:
            return b""
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.output)
        if len(data) > MAX_OUTPUT:
            self.sampler.stats.error(f"py-spy wrote more than {MAX_OUTPUT >> 20} MiB in a "
                                     "window; its samples are left out: lower --rate")  # fmt: skip
            return b""
        return data

    async def _spawn(self, env: dict[str, str]) -> asyncio.subprocess.Process:
        self.spawned = time.monotonic()
        try:
            return await asyncio.create_subprocess_exec(
                *self.sampler.command(self.exe, self.output),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                limit=LINE_LIMIT,
                start_new_session=True,  # the terminal's Ctrl-C is livesym's to pass on
                preexec_fn=_at_nice(priority.original()),
            )
        except OSError:
            raise
        except BaseException:
            # Cancelled while starting: asyncio has killed and reaped the new py-spy.
            self.sampler._resume_target(None)
            raise

    async def _talk(self, proc: asyncio.subprocess.Process, stop: asyncio.Event) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        reader = asyncio.create_task(self._read_stdout(proc.stdout))
        errors = asyncio.create_task(self._read_stderr(proc.stderr))
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if not reader.done():
                # Asked to stop mid-window: SIGINT makes py-spy write what it has.
                self.stopped_by_us = True
                self.interrupted = time.monotonic()
                _signal(proc, signal.SIGINT)
                done, _ = await asyncio.wait({reader}, timeout=KILL_GRACE)
                if not done:
                    _signal(proc, signal.SIGKILL)
                    if self.parser.summary.attached:
                        self.sampler.stats.error(
                            f"py-spy did not stop within {KILL_GRACE:g} s of SIGINT (stalled on "
                            "a busy machine?); it was killed and its last window is lost"
                        )
            await reader
            await errors
            with contextlib.suppress(TimeoutError):  # else _reap ends it
                await asyncio.wait_for(proc.wait(), KILL_GRACE)
        finally:
            for task in (reader, errors, stopper):
                task.cancel()
            await asyncio.gather(reader, errors, stopper, return_exceptions=True)
        self.ended = time.monotonic()

    async def _read_stdout(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line beyond LINE_LIMIT: skip it, count it
                self.parser.feed("<line too long>")
                continue
            if not raw:
                return
            self.parser.feed(raw.decode("utf-8", "replace"))
            if self.started is None and self.parser.summary.attached:
                self.started = self.sampler.attached_at = time.monotonic()
                self.sampling.set()

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            if len(self.stderr) < STDERR_LIMIT:
                self.stderr += chunk[: STDERR_LIMIT - len(self.stderr)]

    def failure_message(self) -> str:
        pid = self.sampler.pid
        if self.spawn_error is not None:
            return (
                f"cannot attach to {pid}: cannot run {self.exe} ({self.spawn_error.strerror}); "
                "pip install py-spy, or use --sampler perf"
            )
        first = _first_error_line(self.stderr.decode("utf-8", "replace"))
        if first is None:
            code = self.returncode
            how = f"was killed by signal {-code}" if code and code < 0 else f"exited with {code}"
            first = f"py-spy {how} without a message"
            return f"cannot attach to {pid}: {first}; {_remedy('', pid)}"
        if first.lower().startswith("permission denied"):
            first = "Permission Denied"  # py-spy's own advice (sudo) is replaced by ours
        return f"cannot attach to {pid}: py-spy: {first}; {_remedy(first, pid)}"


def sample_frames(
    frames: tuple[Frame, ...], objects: tuple[str, ...] = ()
) -> tuple[int | FrameRecord, ...]:
    """py-spy's frames as a ``Sample`` carries them: records for what it named,
    raw addresses for what it could not (leaf first, as given).

    A name py-spy gave is already readable (Python names are not mangled, and
    py-spy demangles native ones), so it is the record's ``demangled`` too.
    A native frame's ``module`` is its ELF object: py-spy's own when it printed
    one, else (it printed a C source file instead) the one of ``objects``, the
    target's mapped ELF files, that ``object_for_source`` picks; the source
    file and line go to ``source_file``/``line``.
    """
    out: list[int | FrameRecord] = []
    for f in frames:
        if isinstance(f, PyFrame):
            record = python_frame_record(f.function, f.file, f.line)
            out.append(replace(record, demangled=f.function))
        elif f.address is not None:
            out.append(f.address)
        else:
            name = f.name or "?"
            module = f.module or (object_for_source(f.file, objects) if f.file else None)
            record = named_frame_record(name, module, f.line)
            out.append(replace(record, demangled=name, source_file=f.file))
    return tuple(out)


# Top-level folders of CPython's source tree: code compiled from them lives in
# libpython, or in the python executable when it was linked statically.
_CPYTHON_DIRS = ("/Include/", "/Python/", "/Objects/", "/Parser/", "/Modules/", "/Programs/")


def object_for_source(source: str, objects: tuple[str, ...]) -> str | None:
    """The mapped ELF object (of ``objects``) that a function from ``source`` is in, or None.

    An extension module is named after its source (``Modules/_json.c`` ->
    ``_json.cpython-311-x86_64-linux-gnu.so``); the rest of CPython's tree is
    libpython, or the executable when no libpython is mapped (``objects[0]``
    is the executable). Anything else is not guessed.
    """
    stem = os.path.basename(source).split(".", 1)[0]
    if stem:
        for path in objects:
            base = os.path.basename(path)
            if base.startswith(stem + ".") and ".so" in base:
                return path
    if any(d in source for d in _CPYTHON_DIRS):
        for path in objects:
            if LIBPYTHON.search(path):
                return path
        return objects[0] if objects else None
    return None


def mapped_objects(pid: int) -> tuple[str, ...]:
    """The target's executable first, then every file it maps executable, once each."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        exe = ""
    seen = [exe] if exe else []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
                    path = fields[5].rstrip("\n").removesuffix(" (deleted)")
                    if path not in seen:
                        seen.append(path)
    except OSError:
        pass
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class _Seen:
    """One stack of a window, before the threads' CPU time sized it."""

    time: float
    tid: int
    thread_name: str | None
    frames: tuple[Frame, ...]  # leaf first; cut to the Python leaf at a call's exit
    seen: Seen  # what its leaf says: running, at a call's exit, reading, waiting


def _time_of(sample: Sample) -> float:
    return sample.time


def _signal(proc: asyncio.subprocess.Process, sig: int) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """End py-spy if it still runs (SIGINT, SIGKILL after KILL_GRACE) and wait for it.

    If this task is cancelled meanwhile, py-spy gets SIGKILL at once; asyncio's
    child watcher still reaps it.
    """
    if proc.returncode is not None:
        return
    try:
        _signal(proc, signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE)
        except TimeoutError:
            _signal(proc, signal.SIGKILL)
            await proc.wait()
    except BaseException:
        _signal(proc, signal.SIGKILL)
        raise


def _at_nice(nice: int | None) -> Callable[[], None] | None:
    """What py-spy runs before its exec: the nice livesym was started with, where livesym
    raised its own (livesym.priority). py-spy stops the target for each sample; at
    nice -20 the shares of its samples drifted from those of py-spy run alone (the
    reference) by up to 5.6 points on the C-extension workload, beyond their sampling
    error, where at the same nice they agree."""
    if nice is None:
        return None

    def run() -> None:  # pragma: no cover - runs in the child, between fork and exec
        os.setpriority(os.PRIO_PROCESS, 0, nice)

    return run
