"""The descendants of the profiled processes, found by their parents in /proc.

``--children`` follows every process descended from the targets, whether it was
forked before livesym attached or after, and whatever it exec'd. One scan reads
each process's parent from /proc/PID/stat (a few milliseconds for a thousand
processes) and walks down from the processes already followed; the engine scans
every FOLLOW_PERIOD seconds, so a child is picked up within that.

Why /proc and not the samplers' own events: it works the same for every sampler
(perf, ptrace, py-spy), needs no privilege beyond reading /proc, and sees children
of children whatever they exec'd. A descendant whose parent exited before the
scan found it is reparented to init and is not followed (it is orphaned out of the
tree the scan walks); processes once found stay followed after their parent exits.

livesym itself is never followed, nor anything it started (py-spy): following the
shell livesym runs in would otherwise sample livesym, and a tracer cannot trace itself.

A child found still running its parent's program (forked, not yet exec'd) is reported
one scan later, unless it is still that program then: a shell's child execs within a
millisecond of its fork, and the sampler chosen for it (py-spy for a Python one) must
be chosen for what it runs, not for the shell it was a moment before. A pre-fork
server's workers, which never exec, are reported at their second scan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

FOLLOW_PERIOD = 0.5  # seconds between scans
MAX_SCANNED = 1 << 20  # /proc entries read in one scan, at most
STAT_BYTES = 4096  # /proc/PID/stat is one short line; its comm is at most 16 bytes


def parent_of(pid: int, proc: str = "/proc") -> int | None:
    """``pid``'s parent pid from /proc/PID/stat, or None when it cannot be read."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            text = f.read(STAT_BYTES)
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the
    # fields are counted from the last ')'.
    fields = text[text.rfind(b")") + 1 :].split()
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1])


def parents(proc: str = "/proc") -> dict[int, int]:
    """Every process's parent, as /proc says now (bounded by MAX_SCANNED entries)."""
    out: dict[int, int] = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return out
    for name in names[:MAX_SCANNED]:
        if name.isdigit():
            parent = parent_of(int(name), proc)
            if parent is not None:
                out[int(name)] = parent
    return out


class ChildFollower:
    """Finds processes descended from the ones followed so far."""

    def __init__(
        self, roots: Iterable[int], proc: str = "/proc", exclude: Iterable[int] = ()
    ) -> None:
        self.followed: set[int] = set(roots)
        self._proc = proc
        self._excluded = {os.getpid(), *exclude}  # never entered: nor what is below them
        self._unsettled: set[int] = set()  # seen once running their parent's program

    def scan(self) -> list[tuple[int, int]]:
        """New descendants as (pid, parent), parents before their children; each is
        followed from now on."""
        children: dict[int, list[int]] = {}
        for pid, parent in parents(self._proc).items():
            children.setdefault(parent, []).append(pid)
        found: list[tuple[int, int]] = []
        unsettled: set[int] = set()
        todo = [p for p in self.followed if p in children]
        while todo:
            parent = todo.pop()
            for pid in sorted(children.get(parent, ())):
                if pid in self.followed or pid in self._excluded:
                    continue
                if pid not in self._unsettled and self._forked_only(pid, parent):
                    unsettled.add(pid)  # may exec next: looked at again next scan
                    continue
                self.followed.add(pid)
                found.append((pid, parent))
                todo.append(pid)
        self._unsettled = unsettled
        return found

    def _forked_only(self, pid: int, parent: int) -> bool:
        """Whether ``pid`` runs its parent's program still (unknown: no)."""
        try:
            exe = os.readlink(f"{self._proc}/{pid}/exe")
            return exe == os.readlink(f"{self._proc}/{parent}/exe")
        except OSError:
            return False
