"""Kernel time no sample saw, as estimated kernel samples: the one estimate.

Where the kernel's own stacks are not sampled (ptrace, py-spy, perf without kernel
mode), a thread's system time over a look (``target.system_time``, or the kernel's
accounting of a py-spy window) times the rate is how many samples its kernel time
would have had. They are added as samples of the estimated kernel frame
(``Sample.in_kernel`` with no stack of its own), so a process busy in system calls is
never shown idle, and counted as samples, as they are shown. Fractions of a sample
carry to the thread's next look (``Carry``), so short looks lose nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from livesym.sampling.base import Sample

MAX_ESTIMATED = 100_000  # estimated kernel samples per thread per look
MAX_THREADS = 100_000  # threads whose carried fractions are kept


class Carry:
    """Per thread, the fraction of a sample carried from one look to the next."""

    def __init__(self) -> None:
        self._carry: dict[int, float] = {}

    def owed(self, tid: int, samples: float) -> int:
        """The whole samples of ``samples`` plus what ``tid`` carried; the rest carried."""
        due = samples + self._carry.get(tid, 0.0)
        whole = int(due)
        if len(self._carry) < MAX_THREADS or tid in self._carry:
            self._carry[tid] = due - whole
        return whole

    def forget(self, tid: int) -> None:
        self._carry.pop(tid, None)


def estimated_samples(pid: int, owed: Mapping[int, int], first: float, last: float) -> list[Sample]:
    """``owed[tid]`` estimated kernel samples of each thread, spread evenly over the look
    from ``first`` to ``last`` (from one step in: the previous look ended at ``first``),
    at most MAX_ESTIMATED a thread."""
    out: list[Sample] = []
    for tid, n in owed.items():
        n = min(n, MAX_ESTIMATED)
        step = (last - first) / n if n > 0 else 0.0
        out += [Sample(first + (j + 1) * step, pid, tid, (), frames=(), in_kernel=True)
                for j in range(n)]  # fmt: skip
    return out
