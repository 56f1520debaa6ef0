"""Which of a sampler's on-CPU samples stand for kernel time, where the sampler cannot
see into the kernel (ptrace): sized from each thread's system time.

A stop alone cannot tell. A thread in a system call stops at its exit; but so does
one running user code that makes a call before the interrupt reaches it (the IPI
takes 0.1-0.4 ms on a VM; dd bs=1 makes a call every microsecond, and every one of
its stops lands at a call's exit, against 58 % system time). The kernel accounts
each thread's system time, though. So each sample of a thread owes the sampling
rate times the system time the thread gained since its previous sample, and a
sample is kernel time while a whole one is owed: first the stops inside a system
call, and where the backlog grows without them (page faults, interrupts) the next
stops, whatever they are. A backlog is capped at MAX_OWED_SECONDS: time a thread was
not sampled must not turn a later second of its user code into kernel time.
"""

from __future__ import annotations

import os

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # /proc's unit of system time
MAX_OWED_SECONDS = 1.0  # of system time a thread's samples may owe
BACKLOG = 2.0  # samples owed before a stop outside a system call stands for kernel time


class SystemTimeShare:
    """Per thread, the samples of kernel time owed; one sampler's, one thread's use."""

    def __init__(self, rate_hz: int) -> None:
        self.rate_hz = rate_hz
        self._owed: dict[int, float] = {}
        self._ticks: dict[int, int] = {}  # tid -> its system time at its last sample
        self.taken = 0  # samples that stood for kernel time

    def is_kernel(self, tid: int, system_ticks: int | None, in_syscall: bool) -> bool:
        """Whether this on-CPU sample of ``tid``, taken with the thread's system time at
        ``system_ticks`` (None: unknown), stands for kernel time; it is counted so."""
        owed = self._owed.get(tid, 0.0)
        if system_ticks is not None:
            last = self._ticks.get(tid)
            self._ticks[tid] = system_ticks
            if last is not None and system_ticks > last:
                gained = (system_ticks - last) / CLOCK_TICKS * self.rate_hz
                owed = min(owed + gained, MAX_OWED_SECONDS * self.rate_hz)
        kernel = owed >= (1.0 if in_syscall else BACKLOG)
        self._owed[tid] = owed - kernel
        self.taken += kernel
        return kernel

    def forget(self, tid: int) -> None:
        self._owed.pop(tid, None)
        self._ticks.pop(tid, None)
