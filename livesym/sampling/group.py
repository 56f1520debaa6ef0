"""Several processes sampled as one session: one sampler per process, one sink.

Every process of a name, a command's children (``--children``), a pre-fork
server's workers: each process gets a sampler of its own (the kind chosen for it:
mixed stacks for a Python one under ``auto``), all feeding the engine's sink; their
counters are one ``SamplerStats``. Processes found while the session runs are
added with ``add`` and start sampling at once. The group ends when it is asked to,
or when every process it samples has exited and no follower may bring more.

Bounds: at most ``limit`` processes sampled at once (--max-processes), at most
MAX_EVER in a session (each one's maps and conversions are kept for its samples), and
never so many that the session runs out of file descriptors (perf takes one per
thread); a process left out is said once, with what to do, and counted. A process that
exited before it could be joined (a child living less than the time between scans) is
not an error: it is said once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import resource
import time
from collections.abc import Callable

from livesym.records import KernelMode, KernelSeen
from livesym.sampling.base import (
    MapsHint,
    Sampler,
    SamplerEnd,
    SampleSink,
)
from livesym.sampling.registry import DEFAULT_MAX_PROCESSES
from livesym.target.children import FOLLOW_PERIOD, ChildFollower
from livesym.target.maps_watcher import MappingEvent

FD_RESERVE = 256  # descriptors kept free for files, sockets and the terminal
MAX_EVER = 4096  # processes one session samples in all (make -j starts thousands)
EXITED_EARLY = (
    "processes that exited before they could be sampled were left out (they lived less than "
    "the half second between looks for new children)"
)

# Called when a process joins: (pid, its sampler, its parent pid or 0). It may raise
# to refuse the process (it exited already): the process is then left out.
MemberHook = Callable[[int, Sampler, int], None]


class SamplerGroup(Sampler):
    """Samples each of several processes with its own sampler."""

    def __init__(
        self,
        first: list[Sampler],
        make: Callable[[int], Sampler],
        *,
        limit: int = DEFAULT_MAX_PROCESSES,
        follower: ChildFollower | None = None,
    ) -> None:
        if not first:
            raise ValueError("a sampler group needs at least one process")
        self.root = first[0]
        super().__init__(self.root.pid, self.root.rate_hz, self.root.idle)
        self.mode = self.root.mode
        self._make = make
        self.limit = limit
        self.follower = follower
        self.members: dict[int, Sampler] = {}
        self.parents: dict[int, int] = {}
        self.left_out = 0  # processes not sampled: a bound was hit
        self.running: set[int] = set()  # pids whose sampler runs now
        # pid -> when (time.monotonic) its sampler ended because the process exited
        self.exited: dict[int, float] = {}
        self.on_member: MemberHook | None = None
        self._pending: list[Sampler] = []  # joined, not running yet
        self._tick: float | None = None  # the engine's pace, for members joining later
        for sampler in first:
            self._join(sampler, 0)
        self.scope = self.root.scope

    # -- what the engine reads of a sampler: the root's, or all members' -------------

    @property
    def name(self) -> str:  # type: ignore[override]
        return "+".join(dict.fromkeys(m.name for m in self.members.values())) or self.root.name

    @property
    def kernel_mode(self) -> KernelMode:
        """The members' way of seeing kernel time; each sampler's where they differ."""
        modes = {m.name: m.kernel_mode for m in self.members.values()} or {
            self.root.name: self.root.kernel_mode
        }
        if len(set(modes.values())) == 1:
            return next(iter(modes.values()))
        text = "; ".join(f"{name}: {mode}" for name, mode in modes.items())
        return KernelMode(KernelSeen.PER_SAMPLER, text)

    @kernel_mode.setter
    def kernel_mode(self, value: KernelMode) -> None:
        pass  # each member says its own; the getter puts them together

    @property
    def off_cpu_source(self) -> str:
        """How the members had off-CPU time; each sampler's where they differ."""
        ways = {m.name: m.off_cpu_source for m in self.members.values()} or {
            self.root.name: self.root.off_cpu_source
        }
        if len(set(ways.values())) == 1:
            return next(iter(ways.values()))
        return "; ".join(f"{name}: {way}" for name, way in ways.items() if way)

    @off_cpu_source.setter
    def off_cpu_source(self, value: str) -> None:
        pass  # each member says its own; the getter puts them together

    @property
    def exit_status(self) -> int | None:
        return self.root.exit_status

    @exit_status.setter
    def exit_status(self, value: int | None) -> None:
        pass

    @property
    def on_attached(self) -> Callable[[], None] | None:
        return self.root.on_attached

    @on_attached.setter
    def on_attached(self, hook: Callable[[], None] | None) -> None:
        if hasattr(self, "root"):
            self.root.on_attached = hook  # a started command is the root: resumed by its sampler

    @classmethod
    def available(cls) -> str | None:
        return None

    # -- joining -------------------------------------------------------------------

    def add(self, pid: int, parent: int = 0) -> bool:
        """Sample ``pid`` too (found while running); False when it was left out."""
        if pid in self.members:
            return False
        why = self._bound_hit()
        if why is not None:
            self.left_out += 1
            self.stats.error(f"{why}: processes found after that are not sampled")
            return False
        try:
            sampler = self._make(pid)
        except Exception as e:  # gone already, or no sampler may sample it
            return self._refused(pid, e)
        return self._join(sampler, parent)

    def pace(self, tick: float) -> None:
        self._tick = tick
        for sampler in self.members.values():
            sampler.pace(tick)

    def drop(self, pid: int, why: Exception) -> None:
        """Leave out a process that joined before it started (its side could not be made:
        it exited), as ``add`` leaves out one it cannot join."""
        sampler = self.members.pop(pid, None)
        self.parents.pop(pid, None)
        self._pending = [s for s in self._pending if s is not sampler]
        self._refused(pid, why)

    def _refused(self, pid: int, why: Exception) -> bool:
        if os.path.isdir(f"/proc/{pid}"):
            self.stats.error(f"process {pid} is not sampled: {why}")
        else:
            self.stats.error(EXITED_EARLY)
        return False

    def _join(self, sampler: Sampler, parent: int) -> bool:
        if self.on_member is not None:
            try:
                self.on_member(sampler.pid, sampler, parent)
            except Exception as e:
                return self._refused(sampler.pid, e)
        sampler.stats = self.stats
        if self._tick is not None:
            sampler.pace(self._tick)
        self.members[sampler.pid] = sampler
        self.parents[sampler.pid] = parent
        self._pending.append(sampler)
        return True

    def _bound_hit(self) -> str | None:
        if len(self.running) + len(self._pending) >= self.limit:
            return (
                f"{self.limit} processes sampled at once, the most a session takes "
                "(--max-processes)"
            )
        if len(self.members) >= MAX_EVER:
            return f"{MAX_EVER} processes sampled, the most one session keeps"
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            used = len(os.listdir("/proc/self/fd"))
        except OSError:
            return None
        if soft != resource.RLIM_INFINITY and used > soft - FD_RESERVE:
            return (
                f"{used} of {soft} file descriptors in use: the session takes no more processes "
                "(raise 'ulimit -n')"
            )
        return None

    # -- running -------------------------------------------------------------------

    async def run(
        self, sink: SampleSink, stop: asyncio.Event, maps_changed: MapsHint | None = None
    ) -> SamplerEnd:
        _raise_fd_limit()
        tasks: dict[asyncio.Task[SamplerEnd], int] = {}
        ends: list[SamplerEnd] = []
        loop = asyncio.get_running_loop()
        next_scan = loop.time()
        try:
            while True:
                for sampler in self._pending:
                    hint = _tagged(maps_changed, sampler.pid)
                    tasks[asyncio.create_task(sampler.run(sink, stop, hint))] = sampler.pid
                    self.running.add(sampler.pid)
                self._pending = []
                if not tasks:
                    break
                done, _ = await asyncio.wait(
                    tasks, timeout=FOLLOW_PERIOD, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    pid = tasks.pop(task)
                    self.running.discard(pid)
                    ends.append(self._ended(task, pid))
                    if ends[-1] is SamplerEnd.TARGET_EXITED:
                        self.exited[pid] = time.monotonic()
                if stop.is_set():
                    continue  # the members see it too: each drains and ends
                if self.follower is not None and loop.time() >= next_scan:
                    next_scan = loop.time() + FOLLOW_PERIOD
                    for pid, parent in await asyncio.to_thread(self.follower.scan):
                        self.add(pid, parent)
        except BaseException:
            for task in tasks:
                task.cancel()  # each resumes and detaches its process on the way out
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if stop.is_set():
            return SamplerEnd.STOPPED
        if SamplerEnd.FAILED in ends and SamplerEnd.TARGET_EXITED not in ends:
            return SamplerEnd.FAILED
        return SamplerEnd.TARGET_EXITED

    def _ended(self, task: asyncio.Task[SamplerEnd], pid: int) -> SamplerEnd:
        """A member's end: its process exited (the others go on), or it failed (said)."""
        try:
            return task.result()
        except Exception as e:
            if len(self.members) == 1:
                raise  # one process: its sampler's failure is the session's
            self.stats.error(f"sampling process {pid} failed: {e}")
            return SamplerEnd.FAILED


def _tagged(hint: MapsHint | None, pid: int) -> MapsHint | None:
    """The engine's maps hint, with each event saying whose mapping it is."""
    if hint is None:
        return None

    def tagged(events: tuple[MappingEvent, ...]) -> None:
        hint(tuple(dataclasses.replace(e, pid=pid) for e in events))

    return tagged


def _raise_fd_limit() -> None:
    """Take the hard limit of file descriptors as the soft one (as perf does): each
    thread of each process costs perf one."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
