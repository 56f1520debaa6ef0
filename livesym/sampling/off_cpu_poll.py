"""Off-CPU time read from /proc, for threads that switch too often for an event at every
switch (and for every thread where the kernel's switches cannot be seen at all).

An event at each switch costs the target about two microseconds a switch (the clock's
record and the switching of two more events; ``bench/off_cpu.py``, the target pinned to
one CPU): a thread switching 200,000 times a second ran at half speed. So the perf
sampler keeps switch events (``off_cpu``) for the threads that switch less than
SWITCH_BUDGET times a second between them, and the rest are read here, at the session's
rate, as a wall-clock sampler reads them, without stopping them (nothing here costs the
target anything but the reads of its /proc files):

- **How long it slept**, exactly: a thread's scheduler counters (``schedstat``: time run,
  time runnable but waiting for a CPU) say what the rest of the time between two reads
  was. Time runnable is waiting for a CPU where the thread was preempted meanwhile
  (``nonvoluntary_ctxt_switches`` moved); else it was the time from its wake-ups to
  its CPU, which is part of its waits, as a switch event (and perf's switch records)
  counts it: from the switch out to the switch back in.
- **Where**: a thread asleep at a read (state S or D) has its blocked call's stack read
  (``target.blocked``: the call's registers from /proc, its stack from /proc/PID/mem, the
  kernel's part from /proc/PID/task/TID/stack where this user may read it, root). The
  time it slept since the last read is that stack's; a thread seen running at a read
  keeps its sleep for the next stack seen, so that each wait is found in proportion to
  its length, as a sampler at random moments finds it. A thread whose counters did not
  move since the last read slept all along in the same call: its stack is not read again.

What this does not give that switch events do: the kernel's frames of the scheduler
itself (/proc's kernel stack leaves ``.sched.text`` out: ``io_schedule``, ``do_nanosleep``;
disk waits are told by the D state instead), and the stack where a thread was preempted
(its time waiting for a CPU is ``[waiting for a CPU]`` alone).

The reads run in a thread of their own, each at a random point of its period (uniform
within it), so that neither a program's own cycle nor livesym's loop picks the moments:
in the loop they came when a ring of the on-CPU samples woke it, just after the thread
had been on a CPU, and dd's waits after its longest bursts of work read 4 to 8 points
more than perf's switches gave them. The samples wait for the loop to ``take`` them.
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from livesym.records import NOT_READ
from livesym.sampling.base import Sample, ThreadState
from livesym.sampling.kernel_estimate import Carry
from livesym.sampling.off_cpu import call_sample
from livesym.symbolize.kernel import KernelSymbols, shared_symbols
from livesym.target.blocked import (
    PREEMPTED,
    RUNNING,
    UNREADABLE,
    BlockedCall,
    kernel_stack,
    read_call,
)
from livesym.target.threads import ThreadStates

# Switches a second (of all the threads on switch events together) above which the
# fastest threads are read from /proc instead: at about 2 us a switch, 5,000 switches a
# second cost the target 1 % of a CPU, what the on-CPU sampler costs it at 99 Hz.
SWITCH_BUDGET = 5_000
BUDGET_VARIABLE = "LIVESYM_SWITCH_BUDGET"  # another budget, from the environment


def switch_budget() -> int:
    """The switches a second kept on switch events: SWITCH_BUDGET, or what
    ``LIVESYM_SWITCH_BUDGET`` says (a whole number; more is exact timing of every wait
    at about 2 us a switch of the target's time, 0 reads every thread from /proc)."""
    text = os.environ.get(BUDGET_VARIABLE, "")
    return int(text) if text.isdigit() else SWITCH_BUDGET


MAX_THREADS = 10_000  # threads read here, at most
MAX_PERIODS = 1 << 31  # periods one sample may stand for
# Reads of the call of a thread whose kernel stack showed it asleep, at most: one that
# woke between the two (dd: half the time) is asleep again within microseconds.
CALL_TRIES = 3
# Periods of one wait a thread was found in, read after read, given to its stack as one
# sample: a pool of 1,000 idle threads made 100,000 samples a second, each one unwound
# again, where its time is the same either way. (Reading such a thread less often was
# not: its wait's end came between two reads, and the time from there to the next read
# went to the next wait, 10 points of 67 in nanosleep.)
HOLD = 25
# A wait the thread has been in for QUIET_AFTER seconds is read again after QUIET_PART of
# the time it has lasted (QUIET_MOST seconds at most), not at every period: a pool of
# 1,000 idle threads read at 99 Hz took most of a core. When such a wait ends, the time
# until the next read goes to what the thread is found in then: at most a tenth of that
# long wait's time (a wait shorter than QUIET_AFTER is read at every period; reading
# every wait less often moved 10 points of 67 from a 20 ms nanosleep to the futex wait
# after it).
QUIET_AFTER = 0.1
QUIET_PART = 0.1
QUIET_MOST = 1.0
MAX_PENDING = 1 << 20  # samples read and not yet taken, at most (then counted as lost)
# Seconds of sleep a thread seen running at every read may owe before its last wait's
# stack takes them (a thread whose waits are too short to be found asleep at a read).
OWED_AT_MOST = 1.0
_ASLEEP = {b"S": ThreadState.SLEEPING, b"D": ThreadState.DISK}


@dataclass(slots=True)
class _Polled:
    """What the last read of one thread found."""

    when: float  # when it was read (s)
    run_ns: int  # its schedstat then
    wait_ns: int
    switches: int
    asleep: Sample | None = None  # its stack, if it was asleep then
    waited: Sample | None = None  # the last stack it was seen asleep in
    owed: float = 0.0  # seconds asleep not yet given to a stack
    preempted: int | None = None  # its switches while runnable, when last counted
    held: float = 0.0  # seconds of ``asleep``'s wait read and not yet given (``HOLD``)
    due: float = 0.0  # when to read it next (a long wait is read less often)


class WaitPoller:
    """The off-CPU time of the threads handed to it (``add``), read at each ``poll``."""

    def __init__(
        self,
        pid: int,
        rate_hz: int,
        stack_size: int,
        on_wait: Callable[[Sample], Sample] | None = None,
    ) -> None:
        self._pid = pid
        # What the sampler does with a wait's stack as it is read (the mixed sampler
        # reads the thread's Python frames then, in this thread): ``_asleep_now``.
        self._on_wait = on_wait
        self._period = 1.0 / rate_hz
        self._stack_size = stack_size
        self._states = ThreadStates(pid)
        self._kernel = _KernelStacks(pid)
        self._threads: dict[int, _Polled | None] = {}  # None: added, not read yet
        self._sleep = Carry()
        self._queue = Carry()
        self._last_state: dict[int, ThreadState] = {}  # tid -> S or D, as last read
        self.unread = 0  # stacks of sleeping threads that could not be read
        self.dropped = 0  # samples beyond MAX_PENDING (the loop did not take them)
        self.failure: str | None = None  # why the thread stopped, if it failed
        self._lock = threading.RLock()
        self._pending: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        """Whether threads may be handed over yet: the kernel's symbols, which name the
        kernel's part of their stacks, are read (where those can be read)."""
        return self._kernel.ready.is_set()

    def add(self, tid: int) -> None:
        with self._lock:
            if len(self._threads) < MAX_THREADS:
                self._threads.setdefault(tid, None)

    def follow(self, tids: frozenset[int] | set[int]) -> None:
        """Read exactly the threads in ``tids`` from now on."""
        with self._lock:
            for tid in [t for t in self._threads if t not in tids]:
                self.forget(tid)
            for tid in tids:
                self.add(tid)

    def forget(self, tid: int) -> None:
        with self._lock:
            self._threads.pop(tid, None)
            self._states.forget(tid)
            self._sleep.forget(tid)
            self._queue.forget(tid)
            self._last_state.pop(tid, None)

    def start(self) -> None:
        """Read every period from now on, in a thread of its own."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="livesym-waits", daemon=True)
            self._thread.start()

    def take(self) -> tuple[list[Sample], int]:
        """The samples read since the last take, and how many more were dropped meanwhile
        (the loop did not take them for MAX_PENDING of them)."""
        with self._lock:
            out, self._pending = self._pending, []
            dropped, self.dropped = self.dropped, 0
        return out, dropped

    def poll(self, now: float, final: bool = False) -> list[Sample]:
        """Each thread's time off the CPU since it was last read, as weighted samples;
        ``final``: the session ends, and the time held for one sample goes too."""
        out: list[Sample] = []
        with self._lock:
            for tid, th in list(self._threads.items()):
                if th is None or th.due <= now or final:
                    out += self._poll(tid, now)
            if final:
                for th in self._threads.values():
                    if th is not None:
                        out += self._give_held(th, now)
        return out

    def close(self) -> None:
        """Stop reading (the thread joined), and close the files kept open."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self._states.close()

    def _run(self) -> None:
        due = time.monotonic() + self._period * random.random()
        try:
            while not self._stop.wait(max(0.0, due - time.monotonic())):
                now = time.monotonic()
                got = self.poll(now)
                with self._lock:
                    room = MAX_PENDING - len(self._pending)
                    self.dropped += max(0, len(got) - room)
                    self._pending += got[: max(room, 0)]
                # The next read at a random point of the next period.
                due = now + self._period * (0.5 + random.random())
        except Exception as e:  # said by the session (take_waits); sampling goes on
            self.failure = f"off-CPU reads from /proc stopped: {e}"

    def _poll(self, tid: int, now: float) -> list[Sample]:
        sched = self._states.schedstat(tid)
        if sched is None:
            self.forget(tid)
            return []
        last = self._threads.get(tid)
        if last is None:
            th = _Polled(now, sched.run_ns, sched.wait_ns, sched.switches)
            th.preempted = self._states.preemptions(tid)
            th.asleep = self._asleep_now(tid, now)
            self._threads[tid] = th
            return []
        out: list[Sample] = []
        queued = max(0.0, (sched.wait_ns - last.wait_ns) / 1e9)
        ran = (sched.run_ns - last.run_ns) / 1e9
        slept = (now - last.when) - ran - queued
        moved = (sched.run_ns, sched.switches) != (last.run_ns, last.switches)
        last.when, last.run_ns, last.wait_ns = now, sched.run_ns, sched.wait_ns
        last.switches = sched.switches
        if not moved and last.asleep is not None:  # in the same wait since the last read
            last.held += slept
            if last.held >= HOLD * self._period:
                out += self._give_held(last, now)
            asleep_for = now - last.asleep.time
            if asleep_for >= QUIET_AFTER:  # a long wait: read it less often (QUIET_PART)
                last.due = now + min(QUIET_PART * asleep_for, QUIET_MOST)
            return out
        out += self._give_held(last, now)  # that wait's time held so far
        last.owed += slept
        if queued > 0:
            preempted = self._states.preemptions(tid)
            if preempted is not None and preempted == last.preempted:
                last.owed += queued  # runnable only after its wake-ups: part of its waits
            else:
                waiting = _waiting_for_cpu(self._pid, tid, now)
                if self._on_wait is not None:  # (mixed stacks: the Python frames it runs)
                    waiting = self._on_wait(waiting)
                out += self._weighed(self._queue, waiting, queued, now)
            last.preempted = preempted
        last.asleep = self._asleep_now(tid, now)
        last.due = 0.0
        stack = last.asleep
        if stack is not None:
            last.waited = stack
        elif last.owed > OWED_AT_MOST:
            stack = last.waited  # not seen asleep for long: its last wait's stack
        if stack is not None and last.owed > 0:
            out += self._weighed(self._sleep, stack, last.owed, now)
            last.owed = 0.0
        return out

    def _give_held(self, th: _Polled, now: float) -> list[Sample]:
        """The time held for the wait the thread was last found in (``HOLD``), given."""
        if th.held <= 0 or th.asleep is None:
            return []
        held, th.held = th.held, 0.0
        return self._weighed(self._sleep, th.asleep, held, now)

    def _asleep_now(self, tid: int, now: float) -> Sample | None:
        """The thread's wait if it is asleep now, or None where it runs.

        One read says whether and where it waits, as one moment of it: the kernel's
        stack where this user may read it (root; empty for a thread on a CPU), else the
        system call file (``running``, or the call and the registers it entered it
        with). The other reads (its state, S or D; its call's user stack) come after
        and may be of its next wait where the waits are shorter than the reads (dd's
        for its disk: tens of microseconds; of the same call then). Asking first whether
        it sleeps (its state) and only then where made the stack the one of the wait
        after: dd's shortest wait read 11 % against 28 in perf's switches; reading again
        until the thread had not run between the reads kept only waits longer than the
        reads (97 % in its longest)."""
        first = self._states.current_state(tid)
        if not self._kernel.refused:
            kernel = self._kernel.addresses(tid)
            if not kernel and not self._kernel.refused:
                return None
        else:
            kernel = ()
        call = read_call(self._pid, tid)
        if not kernel and call in (RUNNING, UNREADABLE):
            return None
        for _ in range(CALL_TRIES - 1):  # woke since the kernel's stack was read
            if call != RUNNING:
                break
            call = read_call(self._pid, tid)  # its next call: of the same kind, mostly
        state = self._state(tid, first, self._states.current_state(tid))
        if not isinstance(call, BlockedCall):
            if not kernel:  # asleep outside a call, without the kernel's stack
                self.unread += 1
                return Sample(now, self._pid, tid, (), state=state, frames=(NOT_READ,))
            return Sample(now, self._pid, tid, (), state=state, kernel_ips=kernel)
        sample = call_sample(self._pid, tid, now, call, self._stack_size, state)
        if sample is None:
            return Sample(now, self._pid, tid, (), state=state, kernel_ips=kernel,
                          syscall=call.nr)  # fmt: skip
        sample = dataclasses.replace(sample, kernel_ips=kernel)
        return sample if self._on_wait is None else self._on_wait(sample)

    def _state(self, tid: int, before: bytes | None, after: bytes | None) -> ThreadState:
        """Sleeping or in disk sleep (D), by the state letters read around the read of
        the wait; where both were R (it slept between them), the thread's last."""
        for letter in (after, before):
            state = _ASLEEP.get(letter or b"")
            if state is not None:
                self._last_state[tid] = state
                return state
        return self._last_state.get(tid, ThreadState.SLEEPING)

    def _weighed(self, carry: Carry, sample: Sample, seconds: float, now: float) -> list[Sample]:
        """``sample`` standing for ``seconds`` up to ``now``: timed at their start, as a
        switch event's wait is (fractions of a period carried)."""
        periods = min(carry.owed(sample.tid, seconds / self._period), MAX_PERIODS)
        if periods <= 0:
            return []
        return [dataclasses.replace(sample, time=now - seconds, weight=periods)]


class _KernelStacks:
    """The kernel's part of a blocked thread's stack, as addresses (the frames layer
    names them as it names a sampled kernel stack): /proc's names and offsets placed by
    kallsyms. Not tried again once refused (not root)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._symbols: KernelSymbols | None = None
        self.refused = kernel_stack(pid, pid) is None
        self.ready = threading.Event()  # the symbols read, and indexed by name
        if self.refused:
            self.ready.set()
        else:
            # Read now, in the background: read at the first stack, their 0.2 s held up
            # the reads, and that time's sleep went to one stack (``WaitPoller.ready``).
            self._symbols = shared_symbols()
            threading.Thread(target=self._index, name="livesym-kallsyms", daemon=True).start()

    def _index(self) -> None:
        try:
            if self._symbols is not None:
                self._symbols.address_of("")  # reads them, and indexes them by name
        finally:
            self.ready.set()

    def addresses(self, tid: int) -> tuple[int, ...]:
        if self.refused:
            return ()
        frames = kernel_stack(self._pid, tid)
        if frames is None:
            self.refused = True
            return ()
        if not frames or self._symbols is None or frames[0][0].startswith(PREEMPTED):
            return ()  # on a CPU, or preempted: runnable, not waiting
        out: list[int] = []
        for name, offset in frames:
            start = self._symbols.address_of(name)
            if start is None:
                break  # the rest would be named against nothing: the stack ends here
            out.append(start + offset)
        return tuple(out)


def _waiting_for_cpu(pid: int, tid: int, when: float) -> Sample:
    """Time runnable but not run: the frames layer puts ``[waiting for a CPU]`` there."""
    return Sample(when, pid, tid, (), state=ThreadState.RUNNABLE, frames=())
