"""Which of a py-spy window's samples of one thread ran, and which stood for kernel
time: sized by the kernel's own accounting of the thread's CPU time over the window.

py-spy cannot see into the kernel, and tells a running thread from a waiting one by
its /proc state at the moment and (here) by its leaf (``pyspy_parse.looks_idle``):
a thread that lives in cheap system calls (``os.read`` of a pipe that is never
empty) is judged waiting at every call, and one that faults pages in (zlib's fresh
buffers) is sampled running in its user code while the kernel works for it. Its
system time added on top as estimated samples (what is right for perf without
kernel mode, which sees user time only) then counts that kernel time twice, or
stands alone for a thread whose user time was judged waiting.

The kernel counts each thread's CPU time (schedstat) and how much of it was system
time (stat). Over a window a thread that was on a CPU for a fraction ``on_cpu`` of
it ran in that share of its samples, and was in the kernel in ``in_kernel`` of them:

1. samples judged waiting in a call that returns at once when data is there (``read``,
   ``recv``) are taken as running, evenly spread, until ``on_cpu`` of the thread's
   samples run; a sleep, a lock or a poll is waiting whatever the thread did between
   them; and a running sample is never taken for waiting (py-spy's own ptrace stops
   wake sleepers, and its reference run counts them as it does);
2. of the running samples, ``in_kernel``'s share stands for kernel time: first those
   in a system call (reading, or stopped at a call's exit), evenly spread, then
   others, evenly spread;
3. kernel time the running samples cannot hold is left to the caller to add as
   estimated samples (a thread py-spy did not see: a C library's own thread).

Fractions of a sample carry to the thread's next window. Pure: no /proc here.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from livesym.sampling.kernel_estimate import Carry


class Seen(enum.Enum):
    """What a sample's stack says of its thread."""

    RUNNING = "running"  # in user code
    AT_CALL = "at_call"  # running, stopped at a system call's exit
    READING = "reading"  # in a read or recv: blocked, or on a CPU with data there
    WAITING = "waiting"  # blocked: a sleep, a lock, a poll

    @property
    def idle(self) -> bool:
        return self in (Seen.READING, Seen.WAITING)


class Verdict(enum.Enum):
    IDLE = "idle"  # waiting: dropped, or kept as idle with --idle
    USER = "user"  # running its user code
    KERNEL = "kernel"  # on a CPU, in the kernel


def spread(candidates: Sequence[int], k: int) -> list[int]:
    """``k`` of ``candidates`` (all of them at most), evenly spaced among them."""
    n = len(candidates)
    if k >= n:
        return list(candidates)
    if k <= 0:
        return []
    return [candidates[(2 * j + 1) * n // (2 * k)] for j in range(k)]


class CpuSplit:
    """Per thread, the fractions of a sample carried from one window to the next."""

    def __init__(self) -> None:
        self._carry = Carry()

    def verdicts(
        self, tid: int, seen: Sequence[Seen], on_cpu: float, in_kernel: float
    ) -> tuple[list[Verdict], int]:
        """The verdict on each of a thread's samples of a window (in time order), and
        how many kernel samples they could not hold; ``on_cpu``/``in_kernel``: the
        window's fractions of CPU and of system time."""
        n = len(seen)
        on_cpu = min(max(on_cpu, 0.0), 1.0)
        in_kernel = min(max(in_kernel, 0.0), on_cpu)
        out = [Verdict.IDLE if s.idle else Verdict.USER for s in seen]
        promote = round(on_cpu * n) - out.count(Verdict.USER)
        if promote > 0:
            reading = [i for i in range(n) if seen[i] is Seen.READING]
            for i in spread(reading, promote):
                out[i] = Verdict.USER
        whole = self._carry.owed(tid, in_kernel * n)
        ran = [i for i in range(n) if out[i] is Verdict.USER]
        calls = [i for i in ran if seen[i] is not Seen.RUNNING]
        chosen = spread(calls, whole)
        rest = [i for i in ran if seen[i] is Seen.RUNNING]
        chosen += spread(rest, whole - len(chosen))
        for i in chosen:
            out[i] = Verdict.KERNEL
        return out, whole - len(chosen)

    def unseen(self, tid: int, kernel_samples: float) -> int:
        """Whole kernel samples owed by a thread that had no samples in the window."""
        return self._carry.owed(tid, kernel_samples)

    def forget(self, tid: int) -> None:
        self._carry.forget(tid)
