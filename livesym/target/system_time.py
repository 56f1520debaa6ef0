"""The target's threads' system time: how much of their CPU time the kernel spent for
them, where no sampler can see inside the kernel (an unprivileged user, the ptrace
and py-spy samplers). The engine turns it into estimated kernel samples, so a
process busy in system calls is never shown idle.

Read through psutil (/proc/PID/task/TID/stat), the same library as the process
readings.
"""

from __future__ import annotations

from typing import Any

MAX_THREADS = 100_000


class SystemTime:
    """Seconds of system time per thread since the previous ``poll``."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._proc: Any = None
        self._seen: dict[int, float] = {}
        self._gone = False

    def poll(self) -> dict[int, float]:
        """{tid: system seconds since the last poll}; the first poll only starts the
        count (its threads' time before the session is not the session's)."""
        if self._gone:
            return {}
        import psutil

        try:
            if self._proc is None:
                self._proc = psutil.Process(self._pid)
            threads = self._proc.threads()[:MAX_THREADS]
        except (psutil.Error, OSError):
            self._gone = True
            return {}
        first = not self._seen
        now = {int(t.id): float(t.system_time) for t in threads}
        deltas = {} if first else {
            tid: max(0.0, seconds - self._seen.get(tid, 0.0)) for tid, seconds in now.items()
        }  # fmt: skip
        self._seen = now or {0: 0.0}
        return {tid: d for tid, d in deltas.items() if d > 0}
