"""What the OS says about the target: who runs it, and its CPU, memory and threads.

psutil is imported on first use: the short commands never need it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from livesym.records import ProcessRecord, ProcessStat


@dataclass(frozen=True)
class TargetInfo:
    """The process being profiled, as the dashboard's header names it."""

    pid: int
    argv: tuple[str, ...]
    user: str | None
    exe: str | None

    @property
    def command_line(self) -> str:
        return " ".join(self.argv)

    @property
    def name(self) -> str:
        """As a process row names it: argv[0]'s basename, else the pid."""
        return os.path.basename(self.argv[0]) if self.argv and self.argv[0] else str(self.pid)

    def record(self, parent: int = 0, started: float = 0.0) -> ProcessRecord:
        return ProcessRecord(self.pid, self.name, self.argv, parent, started)

    def as_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "cmdline": list(self.argv),
            "user": self.user,
            "exe": self.exe,
        }

    @classmethod
    def from_json(cls, target: dict[str, object]) -> TargetInfo:
        """From a capture's ``target`` object, whatever survived of it (scrubbing drops some)."""
        pid = target.get("pid")
        cmdline = target.get("cmdline")
        user = target.get("user")
        exe = target.get("exe")
        return cls(
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else 0,
            argv=tuple(str(a) for a in cmdline) if isinstance(cmdline, list) else (),
            user=user if isinstance(user, str) else None,
            exe=exe if isinstance(exe, str) else None,
        )


def target_info(pid: int, command_line: list[str]) -> TargetInfo:
    """Who runs ``pid`` and from which file; what cannot be read stays None."""
    import psutil

    user = exe = None
    try:
        proc = psutil.Process(pid)
        user = proc.username()
        exe = proc.exe() or None
    except (psutil.Error, OSError, KeyError):
        pass
    return TargetInfo(pid, tuple(command_line), user, exe)


class StatsPoller:
    """Samples the target's CPU%, RSS and thread count; quiet once the process is gone."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._proc: Any = None
        self._gone = False

    def poll(self, when: float) -> ProcessStat | None:
        if self._gone:
            return None
        import psutil

        try:
            if self._proc is None:
                self._proc = psutil.Process(self._pid)
                self._proc.cpu_percent(None)  # the first call only starts the interval
                return None
            with self._proc.oneshot():
                if self._proc.status() == psutil.STATUS_ZOMBIE:
                    raise psutil.ZombieProcess(self._pid)  # exited: nothing resident, no CPU
                cpu = self._proc.cpu_percent(None)
                rss = self._proc.memory_info().rss
                threads = self._proc.num_threads()
        except (psutil.Error, OSError):
            self._gone = True
            return None
        return ProcessStat(when, float(cpu), int(rss), int(threads))
