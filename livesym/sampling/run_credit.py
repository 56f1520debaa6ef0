"""How many of a sampler's on-CPU samples a thread's CPU time allows, where the sampler
cannot see exactly who was on a CPU at its tick (ptrace).

ptrace's sampler takes a thread as on a CPU from its state at the tick (R) and from
whether the scheduler switched it in between the interrupt and its stop; a thread that
was runnable but waiting for a CPU is still taken for one on it now and then. On a
busy machine that is often: spin's workers were sampled 12-20 % more often than their
CPU time at 199 Hz, and since kernel samples are sized by system time
(``system_share``), the extra user samples drowned dd's kernel share by 8 points.

The kernel accounts each thread's time on a CPU (schedstat's run time), so each tick
credits a thread the sampling rate times the CPU time it gained since the previous
tick, and a sample taken for on a CPU spends one: one with no credit left (it ran less
than half a sampling period since its last sample) was waiting, not running; a thread's
first tick only starts its count (a sleeper that woke for a moment is no sample). The
credit is capped at MAX_CREDIT samples, so time a thread was not sampled (its stop came
late, say) never turns into a burst of samples later. A sampler that has no scheduler
statistics keeps every sample, as before.
"""

from __future__ import annotations

MAX_CREDIT = 5.0  # samples a thread may be owed
KEEP_AT = 0.5  # credit a sample needs: it ran at least half a sampling period


class RunCredit:
    """Per thread, the on-CPU samples its CPU time allows."""

    def __init__(self, rate_hz: int) -> None:
        self.rate_hz = rate_hz
        self._run: dict[int, int] = {}  # tid -> its run time at the previous tick (ns)
        self._credit: dict[int, float] = {}
        self.refused = 0  # samples taken for on a CPU that its CPU time did not allow

    def tick(self, tid: int, run_ns: int | None) -> None:
        """The thread's run time at this tick (None: unknown): credit what it ran since."""
        if run_ns is None:
            return
        last = self._run.get(tid)
        self._run[tid] = run_ns
        if last is None:
            self._credit[tid] = 0.0  # first seen: what it ran before is not this run's
        elif run_ns > last:
            credit = self._credit.get(tid, 0.0) + (run_ns - last) / 1e9 * self.rate_hz
            self._credit[tid] = min(credit, MAX_CREDIT)

    def allows(self, tid: int) -> bool:
        """Whether an on-CPU sample of ``tid`` is allowed now; one allowed is spent."""
        credit = self._credit.get(tid)
        if credit is None:
            return True  # no scheduler statistics for it
        if credit < KEEP_AT:
            self.refused += 1
            return False
        self._credit[tid] = credit - 1.0
        return True

    def forget(self, tid: int) -> None:
        self._run.pop(tid, None)
        self._credit.pop(tid, None)
