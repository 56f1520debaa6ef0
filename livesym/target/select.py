"""What a command's target names: a process id, or a process name as ``pidof`` takes it.

A name selects every process whose name is exactly it: its ``comm`` (the kernel's 15
characters) or the basename of its ``argv[0]``. None matching is a one-line error that
names the closest names running (difflib's ratio, as a spelling suggestion). /proc is
read as hostile: every file is bounded, a process that exits meanwhile is skipped.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from livesym.errors import TargetError

MAX_PROCESSES = 100_000  # /proc entries looked at
MAX_CMDLINE = 4096  # bytes of a cmdline read for its argv[0]
COMM_LENGTH = 15  # the kernel keeps this many bytes of a name in comm


@dataclass(frozen=True, slots=True)
class Named:
    """One process and the names it answers to."""

    pid: int
    comm: str
    argv0: str  # basename of argv[0] ("" when unreadable, e.g. a kernel thread)


def _read(path: str, size: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def processes(proc: str = "/proc") -> list[Named]:
    """Every process /proc lists, with its names (livesym's own process left out)."""
    me = os.getpid()
    out: list[Named] = []
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()][:MAX_PROCESSES]
    except OSError:
        return out
    for entry in entries:
        pid = int(entry)
        if pid == me:
            continue
        comm = _read(f"{proc}/{entry}/comm", 64).rstrip(b"\n").decode("utf-8", "replace")
        first = _read(f"{proc}/{entry}/cmdline", MAX_CMDLINE).split(b"\0", 1)[0]
        argv0 = os.path.basename(first.decode("utf-8", "replace"))
        if comm or argv0:
            out.append(Named(pid, comm, argv0))
    return out


def matching(name: str, found: list[Named]) -> list[int]:
    """The pids whose comm or argv[0] basename is exactly ``name`` (a name longer than
    comm keeps matches comm's first 15 characters only through argv[0])."""
    return sorted(p.pid for p in found if name in (p.comm, p.argv0))


def by_name(name: str, proc: str = "/proc") -> list[int]:
    """Every pid named ``name``; TargetError naming close matches when there is none."""
    found = processes(proc)
    pids = matching(name, found)
    if pids:
        return pids
    names = sorted({n for p in found for n in (p.comm, p.argv0) if n})
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"; close: {', '.join(close)}" if close else ""
    raise TargetError(
        f"no process is named {name!r}{hint} (a name is matched exactly, as pidof does; "
        "give a PID, or -- CMD to start one)"
    )
