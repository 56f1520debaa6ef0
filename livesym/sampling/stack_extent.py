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

Written here: the facts are glibc's and the kernel's layout, read from /proc/PID/maps.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["MAX_MAIN_STACK", "TOP_SLACK", "Mappings", "ends_inside", "main_stack"]

# Linux keeps other mappings at least this far below the top of the main thread's stack
# (mmap_base's gap, 128 MiB at the least): a stack pointer nearer is on that stack.
MAX_MAIN_STACK = 128 << 20
# Bytes at the top of a pthread's stack mapping that are not frames: glibc's struct
# pthread (2.3 KiB on x86-64) and the static TLS blocks (libc's and the program's).
TOP_SLACK = 8 * 1024
MAX_MAPS = 64 << 20  # bytes of /proc/PID/maps read, at most

Mapping = tuple[int, int, bytes, bytes]  # start, end, perms, name


@dataclass(frozen=True)
class Mappings:
    """A process's mappings as read once (sorted by address), with when."""

    entries: tuple[Mapping, ...]
    starts: tuple[int, ...]
    read_at: float  # time.monotonic()

    @classmethod
    def read(cls, pid: int) -> Mappings:
        entries = tuple(_maps(pid))
        return cls(entries, tuple(e[0] for e in entries), time.monotonic())

    def _at(self, address: int) -> int | None:
        i = bisect_right(self.starts, address) - 1
        return i if i >= 0 and address < self.entries[i][1] else None

    def holds(self, address: int) -> bool:
        return self._at(address) is not None

    def thread_stack(self, sp: int) -> tuple[int, int] | None:
        """The mapping holding ``sp`` where it is a thread's stack as ``pthread_create``
        makes one (read-write, anonymous, right above a ``---p`` guard); else None."""
        i = self._at(sp)
        if i is None or i == 0:
            return None
        start, end, perms, name = self.entries[i]
        below = self.entries[i - 1]
        guarded = below[1] == start and below[2] == b"---p"
        return (start, end) if guarded and perms.startswith(b"rw") and not name else None


def main_stack(pid: int) -> tuple[int, int] | None:
    """The main thread's stack mapping (``[stack]`` in /proc/PID/maps), or None."""
    for start, end, _perms, name in _maps(pid):
        if name == b"[stack]":
            return start, end
    return None


def ends_inside(stack: tuple[int, int] | None, sp: int, size: int, main: bool) -> bool:
    """Whether a copy of ``size`` bytes from ``sp`` ended inside ``stack``'s frames."""
    if stack is None:
        return False
    start, end = stack
    if main:
        return end - MAX_MAIN_STACK <= sp < end
    return start <= sp and sp + size <= end - TOP_SLACK


def _maps(pid: int) -> list[Mapping]:
    """(start, end, perms, name) of each mapping, in address order; [] when unreadable."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            data = f.read(MAX_MAPS)
    except OSError:
        return []
    out = []
    for line in data.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 5:
            continue
        start, _, end = fields[0].partition(b"-")
        try:
            out.append((int(start, 16), int(end, 16), fields[1],
                        fields[5].strip() if len(fields) > 5 else b""))  # fmt: skip
        except ValueError:
            continue
    out.sort()
    return out
