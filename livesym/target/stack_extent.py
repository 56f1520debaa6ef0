"""Whether a full stack copy ended short of its thread's frames, told by where the
stack lies in the target's address space.

perf copies a thread's stack from the sample's stack pointer up, as far as asked or to
the first unmapped byte. A copy that got every byte asked for may have ended inside
the stack (the stack is deeper than the copy: raise the thread's copies) or run on into
whatever is mapped above the stack (it is not). Two stacks tell the two apart at the
first sample, before any unwinding:

- the main thread's ``[stack]``: nothing is mapped above it, so a full copy from a
  stack pointer in it ended inside it;
- a thread's stack as ``pthread_create`` makes it: one read-write anonymous mapping
  right above its guard page (``---p``), with the thread's descriptor and static TLS at
  the top (``TOP_SLACK`` at most, here) and the frames under them down to the stack
  pointer. A full copy that ends more than ``TOP_SLACK`` below the mapping's top ended
  among the frames.

Elsewhere (a runtime's own stacks, Go's goroutines in its heap; a coroutine's) the
engine's unwinding says whether a stack went on past its copy
(``PerfSampler.stack_cut_short``), a batch or two later.

Written here: the facts are glibc's and the kernel's layout; the maps are read and
parsed by ``target.process`` and ``addr.maps``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from livesym.addr.maps import MapKind, MapsParseError, MapsSnapshot, parse_maps_line
from livesym.errors import TargetError
from livesym.target.process import TargetProcess

__all__ = [
    "MAPS_AGE",
    "MAX_MAIN_STACK",
    "TOP_SLACK",
    "Mappings",
    "StackExtents",
    "ends_inside",
    "main_stack",
]

# Linux keeps other mappings at least this far below the top of the main thread's stack
# (mmap_base's gap, 128 MiB at the least): a stack pointer nearer is on that stack.
MAX_MAIN_STACK = 128 << 20
# Bytes at the top of a pthread's stack mapping that are not frames: glibc's struct
# pthread (2.3 KiB on x86-64) and the static TLS blocks (libc's and the program's).
TOP_SLACK = 8 * 1024
MAX_THREAD_STACKS = 4096  # threads whose stack mappings are remembered
MAPS_AGE = 0.2  # seconds before maps that do not hold a stack pointer are read again


@dataclass(frozen=True)
class Mappings:
    """A process's mappings as read once, with when."""

    snapshot: MapsSnapshot
    read_at: float  # time.monotonic()

    @classmethod
    def read(cls, pid: int) -> Mappings:
        return cls(_snapshot(pid), time.monotonic())

    def holds(self, address: int) -> bool:
        return self.snapshot.find(address) is not None

    def thread_stack(self, sp: int) -> tuple[int, int] | None:
        """The mapping holding ``sp`` where it is a thread's stack as ``pthread_create``
        makes one (read-write, anonymous, right above a ``---p`` guard); else None."""
        entry = self.snapshot.find(sp)
        if entry is None or entry.kind is not MapKind.ANON or not entry.perms.startswith("rw"):
            return None
        below = self.snapshot.find(entry.start - 1)
        guarded = below is not None and below.perms == "---p"
        return (entry.start, entry.end) if guarded else None


class StackExtents:
    """A session's stacks of one process, for its samples' full copies: the main
    thread's [stack] as first read, each thread's pthread stack as found at its first
    full copy."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.main = main_stack(pid)
        self._threads: dict[int, tuple[int, int] | None] = {}  # tid -> its pthread stack
        self._maps: Mappings | None = None  # the maps those were found in

    def ended_inside(self, tid: int, sp: int | None, size: int) -> bool:
        """Whether a full copy of ``size`` bytes from ``sp`` ended inside the thread's
        frames: on the main thread's stack, or in a thread stack well below its top."""
        if sp is None:
            return False
        if tid == self.pid and ends_inside(self.main, sp, size, main=True):
            return True
        return ends_inside(self._thread_stack(tid, sp), sp, size, main=False)

    def _thread_stack(self, tid: int, sp: int) -> tuple[int, int] | None:
        """The pthread stack ``sp`` is on, from the maps as last read: read again where
        they do not hold ``sp`` (a thread started since), once in MAPS_AGE."""
        threads = self._threads
        if tid in threads:
            return threads[tid]
        maps = self._maps
        if maps is None or (not maps.holds(sp) and time.monotonic() - maps.read_at >= MAPS_AGE):
            maps = self._maps = Mappings.read(self.pid)
        if not maps.holds(sp):
            return None  # looked at again with the maps' next read
        if len(threads) >= MAX_THREAD_STACKS:
            threads.clear()
        found = threads[tid] = maps.thread_stack(sp)
        return found


def main_stack(pid: int) -> tuple[int, int] | None:
    """The main thread's stack mapping (``[stack]`` in /proc/PID/maps), or None. Its line
    alone is parsed: the session's start is no place to parse 40,000 (0.1 s)."""
    try:
        text = TargetProcess(pid).read_maps_text()
    except TargetError:
        return None
    for line in text.splitlines():
        if line.endswith("[stack]"):
            try:
                entry = parse_maps_line(line)
            except MapsParseError:
                return None
            return entry.start, entry.end
    return None


def ends_inside(stack: tuple[int, int] | None, sp: int, size: int, main: bool) -> bool:
    """Whether a copy of ``size`` bytes from ``sp`` ended inside ``stack``'s frames."""
    if stack is None:
        return False
    start, end = stack
    if main:
        return end - MAX_MAIN_STACK <= sp < end
    return start <= sp and sp + size <= end - TOP_SLACK


def _snapshot(pid: int) -> MapsSnapshot:
    """The maps of ``pid`` now; none where they cannot be read (the target went away)."""
    try:
        return TargetProcess(pid).read_maps()
    except TargetError:
        return MapsSnapshot(())
