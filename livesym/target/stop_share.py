"""How much of the time the target sits stopped by a tracer: the cost a sampler that
stops threads (py-spy, ptrace) puts on it, seen from outside.

livesym cannot know how fast the target would run alone, but it can see where the
target is: each engine tick probes the state of the target's threads in
/proc/PID/task/TID/stat, and a thread in ``t`` (tracing stop) is not running
because of us. py-spy with native unwinding on a process with 40,000 mappings kept its
target stopped most of the time (a ninefold slowdown) without saying anything; this
is how livesym notices such a case, whatever its cause, and says so.
"""

from __future__ import annotations

import os

from livesym.target.threads import state_of

MAX_THREADS = 16  # threads probed per tick (a bounded cost on a target with thousands)
MIN_PROBES = 50  # thread probes before a share is worth reporting (5 s of one thread)
WARN_SHARE = 0.10  # a tenth of the time stopped: the target runs at most 90 % speed


class StopShare:
    """Counts, over probes, how often the target's threads were found stopped."""

    def __init__(self, pid: int, proc: str = "/proc") -> None:
        self._task_dir = f"{proc}/{pid}/task"
        self.probes = 0
        self.stopped = 0

    def probe(self) -> None:
        """Look at the state of (up to MAX_THREADS of) the target's threads once."""
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

    @property
    def share(self) -> float:
        return self.stopped / self.probes if self.probes else 0.0

    def too_high(self) -> bool:
        """Whether enough has been seen to say the target is stopped too often."""
        return self.probes >= MIN_PROBES and self.share > WARN_SHARE
