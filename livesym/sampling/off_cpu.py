"""Off-CPU time from perf's context-switch events: where a thread waited, for how long,
and (with the kernel's frames) why.

Each thread of the target has two events that fire as it leaves a CPU (the software
event PERF_COUNT_SW_CONTEXT_SWITCHES, as ``perf record -e context-switches`` uses):

- its **clock**, at every switch: the moment, and the event's enabled time
  (PERF_SAMPLE_READ), which for a thread's software event runs only while the thread is
  on a CPU. Between two switch-outs, the time that passed less the time it ran is the
  time it spent off the CPU after the first: every wait's exact length. 40 bytes a switch,
  read in bulk (``perf_switches.clock_records``).
- its **stacks**, at one switch in P (P = 1 unless the thread switches faster than
  eight times the session's rate; then about four times the rate a second, P a prime so
  that no shorter cycle of the program's own waits keeps one kind unsampled:
  ``periods``): the thread's user registers, a copy of its user stack and the kernel's
  call chain, the blocking system call and the kernel's wait function in it.

A sampled wait weighs its own length times the waits it stands for (those since the
thread's previous sampled one: P on average), in sampling periods (1/rate s, the unit of
an on-CPU sample), so that CPU, off-CPU and wall time are shares of one stream and a
long wait weighs more than a short one however often each happens. With P = 1 (most
threads) that is every wait, exactly. Fractions of a period carry to the thread's next
wait (``kernel_estimate.Carry``). With P > 1 one long wait sampled among short ones
weighs a great deal: a thread's samples never stand for more than the time its clocks
timed it off the CPU so far, by a quarter more and 0.1 s (``_capped``).

A wait still going on is counted as it goes: a thread asleep now whose sampled wait
began OPEN_AFTER ago or more has its time so far counted (``open_waits``), the rest when
it ends. A thread already blocked in a system call when the session began has its stack
read then without stopping it (``blocked_at``: the call's registers from /proc, its
stack copied); its wait until it first leaves a CPU again is that stack's. One that
waited unseen is counted under ``NOT_SEEN`` rather than dropped.

Written here: perf's own --off-cpu needs BPF (a compiled program and libbpf), which this
project cannot ship; these events need only perf_event_open.
"""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Callable
from dataclasses import dataclass, field

from livesym.records import WAITING_BEFORE, UserRegisters
from livesym.sampling.base import Sample, ThreadState
from livesym.sampling.kernel_estimate import Carry
from livesym.target.blocked import BlockedCall, blocked_call, stack_copy
from livesym.target.threads import task_state
from livesym.unwind.walk import MACHINES

MAX_THREADS = 100_000  # threads whose waits are kept, at most (a thread's state is small)
MAX_CLOCKS = 1 << 17  # switch-outs kept per thread between two stack samples
MATCH = 50e-6  # seconds between a stack sample and its clock record (the same switch)
# A wait is counted up to now once it is this old (seconds), and again each time as
# long: short waits are counted once, when they end; long ones show while they last.
OPEN_AFTER = 1.0
MAX_PERIODS = 1 << 31  # periods one sample may stand for (68 years at 1 Hz: a bound)
MAX_EVERY = 1 << 20  # a stack event fires at one switch in this many, at most
# A thread's stacks come at most this many times the rate a second: a sampled wait
# stands for the P - 1 unsampled ones around it by its own length, and waits' lengths
# are heavy-tailed (dd's syncs: some 20 us, some 10 ms), so each stack weighs much; at
# the rate itself, dd's share in io_schedule read 56 to 67 % over the phases of P where
# every wait timed said 64, at four times the rate 62 to 65 %. Costs: a stack copy and
# its unwinding each (bench/off_cpu.py).
STACK_BUDGET = 4
JUDGE_SAMPLES = 16  # a thread's period is looked at again after this many stack samples
JUDGE_AFTER = 1.0  # ... or this many seconds
# ... or, for a thread sampled at one switch in P > 1, this many: its JUDGE_SAMPLES come
# in 40 ms while it switches as fast as when P was set. A thread preempted 1,700 times
# in 0.1 s (by livesym's own start) then back to its 50 switches a second had one stack
# in 257 for a second, each weighing 257 waits: its two waits came out 7 points off.
QUIETER_AFTER = 0.1
# Seconds of a thread's switches its rate for the budget is counted over (at least):
# the thread is handed over to /proc when the threads on events switch faster together.
BUDGET_WINDOW = 0.5

# A thread's samples stand for no more of its time off the CPU than its clocks timed
# (exactly) so far, by this part more and CAP_SECONDS: ``_capped``.
CAP_SLACK = 0.25
CAP_SECONDS = 0.1

NOT_SEEN = WAITING_BEFORE
Clock = tuple[float, int]  # a switch-out: when (s), and the time run before it (ns)


@dataclass(slots=True)
class _Thread:
    """One thread's switch-outs not yet accounted for, and its stacks waiting for the
    ends of their waits."""

    opened: float  # when its events were enabled (s)
    first: Sample | None  # its wait from ``opened`` to its first switch-out (blocked_at)
    clocks: list[Clock] = field(default_factory=list)
    stacks: list[Sample] = field(default_factory=list)
    since_stack: int = 0  # waits since its last sampled one, before ``clocks[0]``
    counted: float = 0.0  # seconds of its current wait counted ahead (open_waits)
    last: Sample | None = None  # its last stack sample
    begun: bool = False  # its first switch-out seen
    judged: float = 0.0  # when its stack period was last looked at (``periods``)
    given: float = 0.0  # seconds of waits its samples have stood for (``_capped``)


class OffCpuIntervals:
    """The switch-outs and stack samples of one session's threads, made into weighted
    off-CPU samples. ``rate_hz`` sets the period they are measured in."""

    def __init__(self, pid: int, rate_hz: int) -> None:
        self._pid = pid
        self._rate = rate_hz
        self._period = 1.0 / rate_hz
        self._threads: dict[int, _Thread] = {}
        self._carry = Carry()
        self._seen: dict[int, int] = {}  # tid -> stack samples since its period was set
        self._every: dict[int, int] = {}  # tid -> its stack event's period, where not 1
        self._rates: dict[int, float] = {}  # tid -> its switches a second (``_for_budget``)
        self._window: dict[int, tuple[float, int]] = {}  # tid -> (since, switches since)
        self.unmatched = 0  # stack samples whose switch's clock record was lost
        # Switches a second kept on events (``over_budget``), read once a session.
        self.budget: float = float("inf")

    def opened(self, tid: int, when: float, blocked: Sample | None = None) -> None:
        """Thread ``tid``'s events were enabled at ``when``; ``blocked``: where it waits
        already (``blocked_at``)."""
        if len(self._threads) < MAX_THREADS or tid in self._threads:
            self._threads[tid] = _Thread(when, blocked, judged=when)

    def first_every(self, tid: int, switches_per_second: float | None) -> int:
        """A new thread's stack period from its switches a second so far (its life's,
        before its events show one): a thread that switched 15,000 times a second fills
        a ring with stacks in milliseconds, before its first period is set."""
        budget = STACK_BUDGET * self._rate
        if switches_per_second is None or switches_per_second <= 2 * budget:
            return 1
        return self._set(tid, _prime_near(round(switches_per_second / budget)))

    def clocked(self, tid: int, clocks: list[Clock]) -> list[Sample]:
        """Thread ``tid``'s switch-outs, in order: the waits they end are counted."""
        th = self._threads.get(tid)
        if th is None or not clocks:
            return []
        out: list[Sample] = []
        if not th.begun:
            th.begun = True
            out += self._before(tid, th, clocks[0])
        th.clocks += clocks
        if len(th.clocks) > MAX_CLOCKS:  # no stack sample for long: keep the count
            cut = len(th.clocks) - MAX_CLOCKS
            th.since_stack += cut
            del th.clocks[:cut]
        return out + self._settle(th)

    def switched_out(self, sample: Sample) -> list[Sample]:
        """A stack sample of a switch-out: counted once its wait has ended."""
        th = self._threads.get(sample.tid)
        if th is None:
            return []
        self._seen[sample.tid] = self._seen.get(sample.tid, 0) + 1
        th.stacks.append(sample)
        return self._settle(th)

    def _before(self, tid: int, th: _Thread, first: Clock) -> list[Sample]:
        """The thread's time off the CPU from its events' start to its first switch-out."""
        exact = (first[0] - th.opened) - first[1] / 1e9
        off = exact - th.counted
        th.counted = 0.0
        sample = th.first if th.first is not None else _not_seen(self._pid, tid, th.opened)
        th.first = None
        return self._weighed(sample, th.opened, _capped(th, off, exact))

    def _settle(self, th: _Thread) -> list[Sample]:
        """The stack samples whose waits have ended: each its wait's length times the
        waits since the previous one."""
        out: list[Sample] = []
        clocks = th.clocks
        while th.stacks:
            sample = th.stacks[0]
            i = _match(clocks, sample.time)
            if i is None:
                if clocks and clocks[-1][0] > sample.time + MATCH:
                    th.stacks.pop(0)  # its clock record was lost (a full ring)
                    self.unmatched += 1
                    continue
                break  # its clock record is still to be read
            if i + 1 >= len(clocks):
                break  # still waiting
            (left, ran), (back, ran_next) = clocks[i], clocks[i + 1]
            off = (back - left) - (ran_next - ran) / 1e9
            waits = th.since_stack + i + 1
            th.stacks.pop(0)
            exact = (back - th.opened) - ran_next / 1e9  # its time off the CPU so far
            out += self._weighed(sample, left, _capped(th, off * waits - th.counted, exact))
            th.counted = 0.0
            th.last = sample
            del clocks[: i + 1]
            th.since_stack = 0
        return out

    def open_waits(self, now: float, asleep: Callable[[int], bool]) -> list[Sample]:
        """Sampled waits OPEN_AFTER old or more since last counted, of threads ``asleep``
        now: counted up to ``now`` (taken off what they weigh when they end)."""
        out: list[Sample] = []
        for tid, th in self._threads.items():
            out += self._open_wait(tid, th, now, asleep, OPEN_AFTER)
        return out

    def finish(self, now: float, asleep: Callable[[int], bool]) -> list[Sample]:
        """The session ends at ``now``: the waits of the threads asleep now counted to
        it (one whose switch was not sampled takes the thread's last stack)."""
        out: list[Sample] = []
        for tid, th in self._threads.items():
            out += self._open_wait(tid, th, now, asleep, 0.0, last=True)
        return out

    def _open_wait(self, tid: int, th: _Thread, now: float, asleep: Callable[[int], bool],
                   after: float, last: bool = False) -> list[Sample]:  # fmt: skip
        if not th.begun:  # no switch-out yet: waiting since its events opened, or running
            if th.first is None and not last:
                return []
            since, sample = th.opened, th.first or _not_seen(self._pid, tid, th.opened)
            waits = 1
        else:
            since, _ran = th.clocks[-1]
            sampled = th.stacks and _match(th.clocks, th.stacks[-1].time) == len(th.clocks) - 1
            if sampled:
                sample, waits = th.stacks[-1], th.since_stack + len(th.clocks)
            elif last and th.last is not None:
                sample, waits = th.last, 1
            else:
                return []
        if now - since - th.counted < after or now <= since or not asleep(tid):
            return []
        ran = th.clocks[-1][1] if th.clocks else 0  # (asleep: it has not run since)
        more = _capped(th, (now - since) * waits - th.counted, (now - th.opened) - ran / 1e9)
        th.counted += more
        return self._weighed(sample, since, more)

    def periods(self, now: float) -> dict[int, int]:
        """The threads whose stack event's period changes now, and to what: from each
        one's switches since it was last looked at (its stack samples times its period;
        looked at once it has JUDGE_SAMPLES of them, or JUDGE_AFTER seconds passed,
        QUIETER_AFTER where P > 1: a thread gone quiet comes back soon), one
        switch in P fires where P is its switches a second over the rate, a prime
        (``_prime_near``), changed only when the rate moved by more than half or double:
        setting a period starts it afresh, so the next switch is sampled, and a period set
        every few milliseconds made the samples follow livesym's own timer (dd's longest
        wait, the likeliest at any moment, was followed by the switch sampled: 53 % of its
        off-CPU time in io_schedule where perf's switch times said 70). A prime P walks
        through any shorter cycle of the program's waits."""
        out: dict[int, int] = {}
        for tid, th in self._threads.items():
            n = self._seen.get(tid, 0)
            elapsed = now - th.judged
            every = self._every.get(tid, 1)
            quieter = every > 1 and elapsed >= QUIETER_AFTER  # its JUDGE_SAMPLES did not come
            if n < JUDGE_SAMPLES and elapsed < JUDGE_AFTER and not quieter:
                continue
            self._seen[tid] = 0
            rate = n * every / max(elapsed, 1e-6)
            self._for_budget(tid, th.judged, now, n * every)
            th.judged = now
            want = rate / (STACK_BUDGET * self._rate)
            if want <= 2 and every == 1:
                continue
            if every > 1 and every / 2 <= want <= every * 2:
                continue
            new = self._set(tid, _prime_near(round(want)))
            if new != every:
                out[tid] = new
        return out

    def _for_budget(self, tid: int, start: float, now: float, switches: int) -> None:
        """Count ``switches`` (from ``start`` to ``now``) to the thread's rate for the
        budget, set once its window is BUDGET_WINDOW long: a thread is handed over for
        the rest of the session, so a burst does not decide it (as livesym attached to
        a Python program, its own threads' wake-ups preempted the target 1,700 times in
        0.1 s: 16 stack samples in 6 ms read as 35,000 switches a second, in a program
        that switches 50 times a second)."""
        since, counted = self._window.get(tid, (start, 0))
        counted += switches
        if now - since >= BUDGET_WINDOW:
            self._rates[tid] = counted / (now - since)
            since, counted = now, 0
        self._window[tid] = (since, counted)

    def over_budget(self, budget: float) -> list[int]:
        """The threads to take off switch events, fastest first, until the others
        switch no more than ``budget`` times a second between them."""
        total = sum(self._rates.values())
        out: list[int] = []
        for tid, rate in sorted(self._rates.items(), key=lambda kv: -kv[1]):
            if total <= budget:
                break
            out.append(tid)
            total -= rate
        return out

    def _set(self, tid: int, every: int) -> int:
        if every > 1:
            self._every[tid] = every
        else:
            self._every.pop(tid, None)
        return every

    def forget(self, tid: int) -> None:
        """The thread ended: what it left open is over (it ran to exit)."""
        self._threads.pop(tid, None)
        self._every.pop(tid, None)
        self._rates.pop(tid, None)
        self._window.pop(tid, None)
        self._seen.pop(tid, None)
        self._carry.forget(tid)

    def _weighed(self, sample: Sample, since: float, seconds: float) -> list[Sample]:
        """``sample`` standing for ``seconds`` off the CPU from ``since``: one sample of
        that many whole periods (none while under one: carried)."""
        if seconds <= 0:
            return []
        periods = min(self._carry.owed(sample.tid, seconds / self._period), MAX_PERIODS)
        if periods <= 0:
            return []
        state = sample.state if sample.state is not ThreadState.RUNNING else ThreadState.SLEEPING
        return [dataclasses.replace(sample, time=since, state=state, weight=periods)]


def _capped(th: _Thread, seconds: float, exact: float) -> float:
    """``seconds`` as far as the thread's time off the CPU so far allows (``exact``, as
    its clocks timed it), by CAP_SLACK of it more and CAP_SECONDS. A sampled wait stands
    for the waits since the last sampled one by its own length: unbiased, and right over
    many, but one long wait sampled among short ones weighs a great deal. livesym's own
    start preempted a thread switching 50,000 times a second for a long moment, and that
    wait, standing for the ~60 around it, read 24.7 s of waiting for a CPU in a 4 s
    session. The clocks bound the sum; a sample's share of it is still its own."""
    room = exact * (1 + CAP_SLACK) + CAP_SECONDS - th.given
    seconds = max(0.0, min(seconds, room))
    th.given += seconds
    return seconds


def _prime_near(n: int) -> int:
    """The smallest prime at or above ``n`` (1 below 2), at most MAX_EVERY."""
    if n < 2:
        return 1
    n = min(n, MAX_EVERY)
    while any(n % d == 0 for d in range(2, int(n**0.5) + 1)):
        n += 1
    return n


def _match(clocks: list[Clock], when: float) -> int | None:
    """The index of the switch-out at ``when`` (the nearest within MATCH) in ``clocks``,
    which are in order."""
    lo, hi = 0, len(clocks)
    while lo < hi:
        mid = (lo + hi) // 2
        if clocks[mid][0] < when - MATCH:
            lo = mid + 1
        else:
            hi = mid
    # The nearest (two switch-outs of one thread may come a few microseconds apart;
    # a switch's two events' times differ by less than one).
    near = [i for i in (lo, lo + 1) if i < len(clocks) and abs(clocks[i][0] - when) <= MATCH]
    return min(near, key=lambda i: abs(clocks[i][0] - when)) if near else None


def _not_seen(pid: int, tid: int, when: float) -> Sample:
    return Sample(when, pid, tid, (), frames=(NOT_SEEN,), state=ThreadState.IDLE)


def blocked_at(pid: int, tid: int, when: float, stack_size: int) -> Sample | None:
    """Thread ``tid`` blocked in a system call now, as a sample of its wait: the call,
    its stack copied from the call's stack pointer (``target.blocked``); None where it
    is not blocked in one, or its registers cannot be read."""
    call = blocked_call(pid, tid)
    if call is None:
        return None
    state = ThreadState.DISK if task_state(pid, tid) == b"D" else ThreadState.SLEEPING
    return call_sample(pid, tid, when, call, stack_size, state)


def call_sample(
    pid: int, tid: int, when: float, call: BlockedCall, stack_size: int, state: ThreadState
) -> Sample | None:
    """A sample of thread ``tid``'s wait in ``call``: its registers at the call, its
    stack copied from there; None where the machine's or the memory cannot be read."""
    machine = _MACHINE.get(platform.machine().lower())
    if machine is None:
        return None
    copied = stack_copy(pid, call.sp, stack_size)
    if copied is None:
        return None
    name, layout = machine
    values: list[int | None] = [None] * (max(layout.pc, layout.sp) + 1)
    values[layout.pc], values[layout.sp] = call.pc, call.sp
    return Sample(
        when, pid, tid, (call.pc,), state, user_regs=UserRegisters(name, tuple(values)),
        user_stack=copied[0], user_stack_complete=copied[1], syscall=call.nr,
    )  # fmt: skip


_MACHINE = {
    "x86_64": ("EM_X86_64", MACHINES["EM_X86_64"]),
    "aarch64": ("EM_AARCH64", MACHINES["EM_AARCH64"]),
}
