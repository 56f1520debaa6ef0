"""How much of the time the target sits stopped by a tracer: the cost a sampler that
stops threads (py-spy, ptrace) puts on it.

livesym cannot know how fast the target would run alone, but it can see how long it
was held. A sampler that stops the threads itself (ptrace) counts each stop from its
moment to its resume (``Sampler.held``); that is set against the time the threads ran
(their CPU time from /proc/PID/stat): the share of the time they wanted to run that
they sat stopped. For one that stops them in another process (py-spy), each engine
tick probes the state of the target's threads in /proc/PID/task/TID/stat, and a thread
in ``t`` (tracing stop) is not running because of us. py-spy with native unwinding on a
process with 40,000 mappings kept its target stopped most of the time (a ninefold
slowdown) without saying anything; this is how livesym notices such a case, whatever
its cause, and says so.

Probes are not used for ptrace: its tracer is a thread of livesym's, and a probe in the
event loop runs when that thread lets go of the interpreter, mostly between its stops:
probes found 0-1 % of looks stopped where the stops took 8 % of the time.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from livesym.target.threads import STIME, UTIME, stat_fields, state_of

MAX_THREADS = 16  # threads probed per tick (a bounded cost on a target with thousands)
MIN_PROBES = 50  # thread probes before a share is worth reporting (5 s of one thread)
MIN_SECONDS = 2.0  # seconds run or held before a measured share is worth reporting
WARN_SHARE = 0.10  # a tenth of the time stopped: the target runs at most 90 % speed


class StopShare:
    """How often the target's threads were found stopped (``probe``), or, where the
    sampler counts its stops (``held`` gives a number), what share of their time they
    were held."""

    def __init__(
        self, pid: int, held: Callable[[], float | None] | None = None, proc: str = "/proc"
    ) -> None:
        self._task_dir = f"{proc}/{pid}/task"
        self._stat = f"{proc}/{pid}/stat"
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._cpu_from = self._cpu()
        self._held_from = held() if held is not None else None
        self._held = held if self._held_from is not None else None
        self.probes = 0
        self.stopped = 0
        self.ran = 0.0  # CPU seconds the threads ran since the start (measured)
        self.held = 0.0  # seconds they were held stopped meanwhile (measured)

    def probe(self) -> None:
        """Look once: the sampler's count, or the state of (up to MAX_THREADS of) the
        target's threads."""
        if self._held is not None:
            self._measure(self._held())
            return
        try:
            tids = os.listdir(self._task_dir)[:MAX_THREADS]
        except OSError:
            return
        for tid in tids:
            try:
                with open(f"{self._task_dir}/{tid}/stat", "rb") as f:
                    stat = f.read(4096)
            except OSError:
                continue
            state = state_of(stat)
            if state:
                self.probes += 1
                self.stopped += state == "t"  # a tracer's stop; T is job control

    def _measure(self, held: float | None) -> None:
        cpu = self._cpu()
        if held is None or self._held_from is None or cpu is None or self._cpu_from is None:
            return
        self.ran, self.held = cpu - self._cpu_from, held - self._held_from

    def _cpu(self) -> float | None:
        """The process's CPU seconds (all its threads, user and system), None if gone."""
        try:
            with open(self._stat, "rb") as f:
                fields = stat_fields(f.read(4096))
        except OSError:
            return None
        if len(fields) <= STIME or not (fields[UTIME].isdigit() and fields[STIME].isdigit()):
            return None
        return (int(fields[UTIME]) + int(fields[STIME])) / self._ticks

    @property
    def measured(self) -> bool:
        return self._held is not None

    @property
    def share(self) -> float:
        if self.measured:
            total = self.ran + self.held
            return self.held / total if total > 0 else 0.0
        return self.stopped / self.probes if self.probes else 0.0

    def too_high(self) -> bool:
        """Whether enough has been seen to say the target is stopped too often."""
        if self.measured:
            return self.ran + self.held >= MIN_SECONDS and self.share > WARN_SHARE
        return self.probes >= MIN_PROBES and self.share > WARN_SHARE

    def warning(self, sampler: str) -> str:
        """The line that says so."""
        if self.measured:
            seen = (
                f"the {sampler} sampler kept the target's threads stopped "
                f"{self.share:.0%} of the time they ran or were held"
            )
        else:
            seen = (
                f"the target was found stopped by the {sampler} sampler in "
                f"{self.share:.0%} of looks at its threads"
            )
        return (
            f"{seen}: it runs that much slower; lower --rate, or use --sampler perf "
            "(it never stops the target)"
        )
