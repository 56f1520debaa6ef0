"""Mixed stacks for Python programs: perf's samples, each with the Python frames its
thread ran at that sample, without stopping the target.

py-spy's own mixed stacks (``record --native``) stop the target for every sample:
3.6-13 % slower at 99 Hz (docs/performance.md). Here perf (``PerfSampler``) takes every
sample -- on-CPU time only, exact times, the kernel's call chain, the user registers and a
copy of the stack, which livesym unwinds by CFI like any native target's: that names the
C function under a hot Python line (zlib's ``deflate_slow``, numpy's loops) and the
kernel work under it -- and the Python frames come from one of two readers, neither of
which stops anything:

- **livesym's own read** (CPython 3.11, ``livesym.target.cpython``): perf wakes livesym
  at each sample (``PerfSampler.on_sample``), and the thread's Python stack is read then,
  0.2-0.5 ms later, from the frame the sample's evaluation loop ran at the sample (its
  ``_PyCFrame``, in the sample's stack copy). The engine checks it against the sample
  (``livesym.frames.python_splice.checked``: the loop's instruction pointer must point
  into the function's bytecode) and marks what the sample cannot settle
  (``PYTHON_MOVED``). A command livesym started is stopped before its first
  instruction, when there is no interpreter to read yet (a shared build's libpython is
  not even mapped): it is looked for as its samples come (``LateInterpreter``), and
  read from then on; py-spy's windows there gave 70 % of a function's CPU time to the
  one before it. Its events are per thread (``perf_event.WOKEN_PER_THREAD``).
  Why not py-spy: a stack py-spy writes only when it sees it change,
  one of its intervals late, and on a program switching phases every 5-40 ms 15 % of the
  samples went under the wrong Python function (bench/python_join.py); read here none do.
- **py-spy** ``--nonblocking`` (``PySpyTimeline``) for other versions (or with
  ``LIVESYM_MIXED_PY_SPY=1``): the relay of windows of the py-spy sampler, written as
  chrometrace, each thread's Python stack with the microsecond it was seen to change
  (``pyspy_chrometrace``). A thread's Python stack at a perf sample's moment is the last
  one py-spy saw at or before it in a window that ran then. Each perf sample waits until
  py-spy's windows cover its moment (samples come to the session a window later, as with
  the py-spy sampler); a sample whose moment no window saw gets ``PYTHON_UNREAD``:
  counted and shown, never guessed.

Either way the engine puts the frames (``Sample.python``, leaf first) in place of the
interpreter's once it has unwound the native stack (``livesym.frames.python_splice``).
Counting is perf's: samples, lost records, on-CPU time (a thread waiting for the GIL is
not running, unlike in py-spy's counts).

Off-CPU time (``--mode wall``, ``off-cpu``) is perf's too (``off_cpu``, ``off_cpu_poll``):
each wait's length from the switch events or /proc, its native stack as the thread
waits, and its Python frames read the same two ways: livesym's reader while the thread
is still in the wait (at its switch out, which then wakes livesym at once; as /proc's
reads find it), or py-spy's stack one of its intervals into the wait (``_moment``).
A wait that is a marker alone (``[waiting for a CPU]`` read from /proc, a wait whose
stack could not be read) has no Python frames: there is no stack to check them by.

Written here: no library joins two samplers' streams; the parts are perf's, py-spy's and
livesym's reader of CPython's frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from livesym.errors import LivesymError
from livesym.records import (
    PYTHON_UNREAD,
    FrameRecord,
    Reason,
    TimeMode,
    Unresolved,
    python_frame_record,
)
from livesym.sampling.base import (
    Batch,
    MapsHint,
    PythonCheck,
    Sample,
    Sampler,
    SamplerEnd,
    SamplerStats,
    SampleSink,
    ThreadState,
)
from livesym.sampling.perf_event import PerfSampler
from livesym.sampling.pyspy import BACKSTOP, DEFAULT_WINDOW, PySpySampler
from livesym.sampling.pyspy_chrometrace import ChrometraceError, Timelines, read_chrometrace
from livesym.sampling.pyspy_parse import Frame, PyFrame
from livesym.target.cpython import CPython, PyCode, interpreter_to_come, open_interpreter
from livesym.target.process import TargetProcess
from livesym.target.threads import task_state

if TYPE_CHECKING:
    from livesym.sampling.pyspy import _Window
    from livesym.sampling.pyspy_speedscope import ThreadRun

__all__ = ["MixedSampler", "PySpyTimeline", "PythonStacks"]

# py-spy looks this many times as often as perf samples: a phase of a thread shorter
# than its interval is missed, and the samples in it get the Python frames seen before
# (a 1 ms JSON call between 2 ms of hashing: docs/performance.md). Without stopping the
# target a look costs it nothing, and py-spy ~1 % of a core per 100 Hz.
PYTHON_RATE_FACTOR = 2
# Seconds a perf sample waits for py-spy, at most: a window can run BACKSTOP seconds long.
HOLD_LIMIT = DEFAULT_WINDOW + BACKSTOP + 2.0
# Stack copies waiting for py-spy at once: a window's worth of 16 threads busy at 99 Hz
# is about 60 MiB. Past this the oldest go on without their Python frames (said once).
MAX_HELD_BYTES = 128 << 20
KEPT_WINDOWS = 8  # py-spy windows whose timelines are kept for lookups
# Set to 1: Python frames from py-spy's windows even where livesym reads them itself.
PY_SPY_FRAMES = "LIVESYM_MIXED_PY_SPY"


class PythonStacks:
    """Each thread's Python stack over time, from py-spy's windows (monotonic seconds)."""

    def __init__(self) -> None:
        self._windows: deque[tuple[float, float, dict[int, _Thread]]] = deque(maxlen=KEPT_WINDOWS)
        self.covered = float("-inf")  # py-spy's windows have ended up to here
        self._records: dict[Frame, FrameRecord] = {}

    def add(self, anchor: float, timelines: Timelines) -> None:
        """A window's timelines, its times counted from ``anchor`` (when its py-spy
        started)."""
        if timelines.first is None or timelines.end is None:
            return
        threads: dict[int, _Thread] = {}
        for timeline in timelines.threads:
            if timeline.tid is None or not timeline.times:
                continue  # no OS thread id (py-spy had only the pthread id): unpairable
            stacks = [self._records_of(s) for s in timeline.stacks]
            times = [anchor + t for t in timeline.times]
            threads[timeline.tid] = _Thread(timeline.name, times, stacks)
        start, end = anchor + timelines.first, anchor + timelines.end
        self._windows.append((start, end, threads))
        self.covered = max(self.covered, end)

    def at(self, tid: int, when: float) -> tuple[tuple[FrameRecord, ...], str | None] | None:
        """The thread's Python stack (leaf first) and threading name at ``when``; None
        where no window saw the thread at or shortly before then."""
        best: tuple[float, tuple[FrameRecord, ...], str | None] | None = None
        for start, end, threads in self._windows:
            thread = threads.get(tid)
            if thread is None or not start <= when <= end:
                continue
            i = bisect_right(thread.times, when) - 1
            if i < 0:
                continue
            seen = thread.times[i]
            # Unchanged since ``seen``: py-spy writes nothing while a stack holds, so
            # its window's later intervals saw the same one.
            if best is None or seen > best[0]:
                best = (seen, thread.stacks[i], thread.name)
        if best is None:
            return None
        return best[1], best[2]

    def _records_of(self, stack: tuple[Frame, ...]) -> tuple[FrameRecord, ...]:
        records = self._records
        if len(records) > 1 << 16:
            records.clear()
        out = []
        for frame in stack:
            record = records.get(frame)
            if record is None:
                record = records[frame] = _record(frame)
            out.append(record)
        return tuple(out)


@dataclasses.dataclass(frozen=True)
class _Thread:
    name: str | None
    times: list[float]
    stacks: list[tuple[FrameRecord, ...]]


def _record(frame: Frame) -> FrameRecord:
    if isinstance(frame, PyFrame):
        return python_frame_record(frame.function, frame.file or None, frame.line)
    # --nonblocking leaves native frames out; one that came anyway keeps py-spy's name.
    name = frame.name or (f"{frame.address:#x}" if frame.address is not None else "?")
    return python_frame_record(name, frame.module or None, frame.line)


class PySpyTimeline(PySpySampler):
    """py-spy's relay of windows (``PySpySampler``) without stopping the target,
    written as chrometrace: the threads' Python stacks over time, into ``stacks``;
    it delivers no samples of its own."""

    name = "pyspy-timeline"

    def __init__(self, pid: int, rate_hz: int, stacks: PythonStacks, py_spy: str | None = None):
        super().__init__(pid, rate_hz, idle=True, nonblocking=True, py_spy=py_spy)
        self.stacks = stacks
        self.arrived = asyncio.Event()  # set when a window's timelines arrive

    def command(self, exe: str, output: str) -> list[str]:
        args = super().command(exe, output)
        args[args.index("speedscope")] = "chrometrace"
        return args

    def _read_runs(self, data: bytes) -> list[ThreadRun]:
        return []  # read in ``_deliver``, as chrometrace

    def _deliver(self, window: _Window, sink: SampleSink) -> None:
        if not window.data or window.spawned is None:
            return
        try:
            timelines = read_chrometrace(window.data)
        except ChrometraceError as e:
            self.stats.error(f"py-spy's output could not be read: {e}")
            return
        if timelines.unbalanced:
            self.stats.error("py-spy's chrometrace ended frames it had not begun")
        anchor = clock_start(window.spawned, window.interrupted, timelines.end)
        self.stacks.add(anchor, timelines)
        self.arrived.set()

    def _check_written(self, window: _Window) -> None:
        pass  # chrometrace keeps the changes, not each sample: nothing to count


def clock_start(spawned: float, interrupted: float | None, end: float | None) -> float:
    """When a window's py-spy started the clock its times count from (monotonic): after
    its spawn by its exec and start-up (a few milliseconds idle, a tenth of a second and
    more on a saturated box). A window told to stop (SIGINT at ``interrupted``) wrote
    its end -- the last event's time (``end``, py-spy's seconds): stacks still open are
    ended then -- after it was told, so its clock started no earlier than ``end`` before
    that. Both are lower bounds, so a window's times are never put later than they were:
    at a hand-over the next window's first sample precedes the current one's SIGINT, so
    the two windows' spans meet (the spawn alone left a window's end 6-10 ms before its
    SIGINT beside two busy cores, where the hand-overs overlapped by 6-15 ms)."""
    if interrupted is None or end is None:
        return spawned
    return max(spawned, interrupted - end)


# A command livesym started is sampled from its first instruction, before there is an
# interpreter to read: a shared build's libpython is not mapped yet, and no thread state
# exists until Python has set itself up. It is looked for again as the samples come,
# LATE_LOOK seconds apart at most, for LATE_WAIT seconds.
LATE_LOOK = 0.02
LATE_WAIT = 10.0


class LateInterpreter:
    """The interpreter of a command livesym started, found once it is there."""

    def __init__(self, find: Callable[[], CPython | Unresolved], stats: SamplerStats) -> None:
        self._find = find
        self._stats = stats
        self._since = time.monotonic()
        self._looked = float("-inf")
        self._given_up = False

    def get(self) -> CPython | None:
        """The interpreter if it is there now (looked for at most every LATE_LOOK s)."""
        now = time.monotonic()
        if self._given_up or now - self._looked < LATE_LOOK:
            return None
        self._looked = now
        found = self._find()
        if isinstance(found, CPython):
            return found
        if now - self._since >= LATE_WAIT:
            self._given_up = True
            self._stats.error(
                f"Python frames not read: the command's CPython 3.11 interpreter could not "
                f"be read {LATE_WAIT:g} s after it started ({found.detail})"
            )
        return None


class MixedSampler(Sampler):
    """perf's samples with py-spy's Python frames (see the module doc)."""

    name = "mixed"
    max_rate_hz = PySpySampler.max_rate_hz

    def __init__(
        self, pid: int, rate_hz: int, idle: bool = False, *, py_spy: str | None = None
    ) -> None:
        self.native = PerfSampler(pid, rate_hz, idle)
        super().__init__(pid, rate_hz, idle)
        python_rate = min(rate_hz * PYTHON_RATE_FACTOR, PySpySampler.max_rate_hz)
        self.stacks = PythonStacks()
        self.python = PySpyTimeline(pid, python_rate, self.stacks, py_spy=py_spy)
        self.stats = self.python.stats = self.native.stats
        self._held: deque[Sample] = deque()
        self._held_bytes = 0
        self._sink: SampleSink = lambda batch: None
        self._python_failed = False
        self._records: dict[tuple[PyCode, int | None], FrameRecord] = {}
        self._interpreter_read: CPython | None = None  # livesym's reader of its stacks
        # The reader is used from the loop, the engine's thread (``_code_at``) and the
        # /proc reads of waits (``off_cpu_poll``): one at a time.
        self._reading = threading.Lock()
        self.set_kernel(True)

    @property
    def off_cpu_source(self) -> str:
        """perf's way (switch events, /proc), decided as its events open."""
        return self.native.off_cpu_source

    @off_cpu_source.setter
    def off_cpu_source(self, value: str) -> None:
        pass  # perf says its own

    def set_mode(self, mode: TimeMode) -> None:
        super().set_mode(mode)
        self.native.set_mode(mode)

    @classmethod
    def available(cls) -> str | None:
        return PerfSampler.available() or PySpySampler.available()

    def set_stack_size(self, size: int) -> None:
        self.native.set_stack_size(size)
        self.stack_size = size

    def stack_cut_short(self, tid: int) -> None:
        self.native.stack_cut_short(tid)

    def pace(self, tick: float) -> None:
        self.native.pace(tick)

    def keep_per_thread(self) -> None:
        self.native.keep_per_thread()
        self.scope = self.native.scope

    def _native_attached(self) -> None:
        self.scope = self.native.scope  # (decided as perf's events opened)
        self.attached()

    def set_kernel(self, wanted: bool) -> None:
        self.native.set_kernel(wanted)
        self.kernel = wanted
        self.kernel_mode = self.native.kernel_mode
        self.kernel_accounted = self.native.kernel_accounted

    def rate_limit(self) -> tuple[int, str]:
        return min(self.native.rate_limit(), self.python.rate_limit())

    async def run(
        self, sink: SampleSink, stop: asyncio.Event, maps_changed: MapsHint | None = None
    ) -> SamplerEnd:
        self.check_rate()
        interpreter = self._interpreter()
        if interpreter is not None:
            return await self._run_reading(interpreter, sink, stop, maps_changed)
        self._sink = sink
        self.native.on_attached = self._native_attached
        python_stop = asyncio.Event()
        python = asyncio.create_task(self._python(python_stop))
        try:
            end = await self.native.run(self._hold, stop, maps_changed)
            self.exit_status = self.native.exit_status
        finally:
            # py-spy's last window covers perf's last samples: its file comes when it ends.
            python_stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await python
            self._release(final=True)
        return end

    def _interpreter(self) -> CPython | LateInterpreter | None:
        """The target's interpreter, where livesym reads its stacks itself (CPython
        3.11): found now, or, in a command livesym started, once it has set itself up;
        None where py-spy reads them (the session's notes say why)."""
        if os.environ.get(PY_SPY_FRAMES) == "1":
            self.stats.error(f"Python frames from py-spy's windows ({PY_SPY_FRAMES}=1)")
            return None
        found = self._open_interpreter()
        if isinstance(found, CPython):
            return found
        # A command livesym started waits, stopped before its first instruction, for
        # the sampler to be in place (``on_attached`` resumes it).
        if task_state(self.pid, self.pid) in (b"T", b"t") and self._interpreter_to_come():
            return LateInterpreter(self._open_interpreter, self.stats)
        self.stats.error(
            "Python frames from py-spy's windows, joined to the samples up to a few "
            f"milliseconds late where a thread changes function (livesym reads CPython "
            f"3.11's itself: {found.detail})"
        )
        return None

    def _open_interpreter(self) -> CPython | Unresolved:
        try:
            target = TargetProcess(self.pid)
            return open_interpreter(self.pid, target.read_maps(), target.root)
        except LivesymError as e:
            return Unresolved(Reason.UNREADABLE, str(e))

    def _interpreter_to_come(self) -> bool:
        try:
            target = TargetProcess(self.pid)
            return interpreter_to_come(target.read_maps(), target.root)
        except LivesymError:
            return False

    async def _run_reading(
        self,
        interpreter: CPython | LateInterpreter,
        sink: SampleSink,
        stop: asyncio.Event,
        maps_changed: MapsHint | None,
    ) -> SamplerEnd:
        """perf's samples, each with its thread's Python frames read as it arrives."""
        late = interpreter if isinstance(interpreter, LateInterpreter) else None
        self.native.on_attached = self._native_attached
        self._interpreter_read = interpreter if isinstance(interpreter, CPython) else None
        self.native.on_sample = lambda sample: self._read_python(late, sample)
        try:
            end = await self.native.run(sink, stop, maps_changed)
            self.exit_status = self.native.exit_status
        finally:
            self.native.on_sample = None
            if self._interpreter_read is not None:
                self._interpreter_read.close()
        return end

    def _code_at(self, address: int) -> FrameRecord | None:
        """The frame of the function whose bytecode holds ``address``, among those read."""
        interpreter = self._interpreter_read
        if interpreter is None:
            return None
        with self._reading:
            found = interpreter.code_at(address)
            return self._record_of(found) if found is not None else None

    def _record_of(self, key: tuple[PyCode, int | None]) -> FrameRecord:
        records = self._records
        record = records.get(key)
        if record is None:
            if len(records) > 1 << 16:
                records.clear()
            code, line = key
            record = records[key] = python_frame_record(code.name, code.filename, line)
        return record

    def _read_python(self, late: LateInterpreter | None, sample: Sample) -> Sample:
        """``sample`` with its thread's Python frames as they are now, to be checked by
        the engine against the sample (``Sample.python_check``): an on-CPU sample as it
        arrives, a wait while the thread is still in it (at its switch out, or as /proc
        found it). A marker without a stack copy (a wait not read) has nothing to check
        them by: it is left as it is. Time waiting for a CPU read from /proc (no stack:
        the thread was not in a call) gets the frames the thread runs at the read, as
        the /proc reads give any time since the last read to what they find (beside a
        busy core, a Python function's wall time is partly that: its share read 8
        points under without them)."""
        interpreter = self._interpreter_read
        if interpreter is None and late is not None:
            with self._reading:  # (the /proc reads' thread comes here too: one opens it)
                if self._interpreter_read is None:
                    self._interpreter_read = late.get()
                interpreter = self._interpreter_read
        if interpreter is None:
            return sample  # not set up yet: the loader's, the interpreter's own start
        copy = sample.stack_copy()
        if copy is None and sample.state is not ThreadState.RUNNABLE:
            return sample
        with self._reading:
            read = interpreter.stack(sample.tid, copy)
            if read is None or (not read.frames and not read.failed):
                return sample  # a thread Python does not know, or not in Python code now
            if read.failed:
                return dataclasses.replace(sample, python=(PYTHON_UNREAD,))
            frames = [self._record_of(key) for key in read.frames]
        if copy is None:
            return dataclasses.replace(sample, python=tuple(frames))
        check = PythonCheck(
            *interpreter.eval_range, read.codes, self._code_at, read.anchored, read.loops
        )
        return dataclasses.replace(sample, python=tuple(frames), python_check=check)

    async def _python(self, stop: asyncio.Event) -> None:
        """py-spy's windows until ``stop``; a py-spy that fails leaves the samples
        without Python frames, said once."""
        watch = asyncio.create_task(self._release_on_arrival())
        try:
            await self.python.run(lambda batch: None, stop)
        except LivesymError as e:
            self._python_failed = True
            self.stats.error(f"Python frames not read: {e}")
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

    async def _release_on_arrival(self) -> None:
        while True:
            await self.python.arrived.wait()
            self.python.arrived.clear()
            self._release()

    def _hold(self, batch: Batch) -> None:
        """perf's samples, kept until py-spy's windows cover their moment."""
        if not isinstance(batch, list):
            return
        self._held.extend(batch)
        self._held_bytes += sum(len(s.user_stack or b"") for s in batch)
        self._release()

    def _release(self, final: bool = False) -> None:
        held, stacks = self._held, self.stacks
        if not held:
            return
        newest = held[-1].time
        out: list[Sample] = []
        while held:
            sample = held[0]
            crowded = self._held_bytes > MAX_HELD_BYTES
            moment = self._moment(sample)
            if not (final or self._python_failed or moment <= stacks.covered or crowded
                    or newest - sample.time > HOLD_LIMIT):  # fmt: skip
                break
            if crowded and moment > stacks.covered:
                self.stats.error(
                    f"more than {MAX_HELD_BYTES >> 20} MiB of stacks waited for py-spy; "
                    "the oldest went on without their Python frames: lower --rate"
                )
            self._held_bytes -= len(sample.user_stack or b"")
            out.append(self._with_python(held.popleft()))
        if out:
            self._sink(out)

    def _moment(self, sample: Sample) -> float:
        """When py-spy's stack for ``sample`` is looked up: its time on the CPU. A wait
        is timed at its start, and py-spy sees a new stack up to one of its intervals
        later: one interval into the wait (its end where it is shorter)."""
        if sample.state is ThreadState.RUNNING:
            return sample.time
        return sample.time + min(sample.weight / self.rate_hz, 1 / self.python.rate_hz)

    def _with_python(self, sample: Sample) -> Sample:
        found = self.stacks.at(sample.tid, self._moment(sample))
        if found is None:
            return dataclasses.replace(sample, python=(PYTHON_UNREAD,))
        frames, name = found
        return dataclasses.replace(sample, python=frames, thread_name=name or sample.thread_name)
