"""What a view of the session gets: everything frozen at one moment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from livesym.profile import ProfileView
from livesym.records import KERNEL_UNSAID, KernelMode, ProcessRecord, ProcessStat, TimeMode
from livesym.target.stats import TargetInfo

NO_TARGET = TargetInfo(0, (), None, None)


@dataclass(frozen=True)
class TimelineData:
    """The session over time: samples on a CPU in each second from its start, the
    moments (in seconds from its start) where something changed, the range the view
    holds (None: all of it), and the sampling periods spent off a CPU in each second
    (None: off-CPU time was not collected). ``threads``: whose samples, where not
    every thread's (a thread or process chosen)."""

    per_second: tuple[int, ...] = ()
    marks: tuple[tuple[float, str], ...] = ()
    between: tuple[float, float] | None = None
    off_cpu: tuple[int, ...] | None = None
    threads: str = ""


Source = Literal["live", "replay"]  # a running target, or a capture replayed


@dataclass(frozen=True)
class EngineSnapshot:
    """Everything a view of the session needs, frozen at one moment."""

    view: ProfileView
    samples: int
    lost: int
    errors: tuple[str, ...]
    sampler: str
    rate_hz: int
    elapsed: float
    state: str  # "live", "stopped", "target exited", "failed"; "replay" while replaying
    maps_generation: int
    target: TargetInfo = NO_TARGET
    process: tuple[ProcessStat, ...] = ()  # the latest readings, oldest first
    rate_history: tuple[int, ...] = ()  # samples per second over the last minute
    progress: float | None = None  # replay: share of the capture fed so far (0..1)
    source: Source = "live"
    recent_window: float = 5.0  # seconds the recent view looks back
    # Of the samples counted since the last reset, those whose stack ended early
    # (its outermost frame is a truncated one), and all of them.
    stacks_cut: int = 0
    stacks_counted: int = 0
    # How the session sees kernel time: "sampled", "not sampled: why", "left out ...".
    kernel: KernelMode = KERNEL_UNSAID
    # What the sampler's events watch: perf's "per CPU" or "per thread (why)"; or "".
    scope: str = ""
    priority: str = ""  # livesym's own while it samples (livesym.priority); "" in a replay
    # Seconds from livesym's own start to its sampler's being in place: set by the
    # command that started it (``commands.top``); None in a replay, an engine run inside
    # another program, or where /proc could not say.
    started_after: float | None = None
    fetching: int = 0  # debug files being fetched from debuginfod now
    # Every process of the session by pid, as first seen (one: the target), and how
    # many were left out because a bound was hit (--max-processes, descriptors).
    processes: dict[int, ProcessRecord] = field(default_factory=dict)
    processes_left_out: int = 0
    selected_process: int | None = None  # the view holds only this process's samples
    # Which time the view counts (--mode, or the dashboard's key), whether the session
    # collected off-CPU time (else only cpu shows anything), and how it had it.
    mode: TimeMode = TimeMode.CPU
    off_cpu_collected: bool = False
    off_cpu: str = ""
    timeline: TimelineData = TimelineData()

    def all_processes(self) -> list[tuple[int, str, int, float | None]]:
        """Every process of the session as (pid, name, samples, share %): those with
        samples in the view, busiest first, then those sampled without one (a shell that
        only waited; share None)."""
        rows: list[tuple[int, str, int, float | None]] = [
            (r.pid, r.name, r.samples, r.pct) for r in self.view.processes
        ]
        shown = {r.pid for r in self.view.processes}
        rows += [(pid, p.name, 0, None) for pid, p in sorted(self.processes.items())
                 if pid not in shown]  # fmt: skip
        return rows
