"""Processes a test left running: found by their parent chain, ended after the test.

One failed test must not load every test after it: a job it started and never stopped
(a sample target spinning, a recorder waiting for it) takes a core for the rest of the
suite, and tests of sampling rates and shares then fail for a reason that is not theirs.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

MAX_DEPTH = 64  # parent links followed from one process


def descendants(root: int) -> dict[int, tuple[str, int]]:
    """Every live process below ``root`` (by its parent chain): its command name, and
    its parent."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        name, _, rest = stat.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        if len(fields) < 2 or fields[0] == "Z":  # a zombie holds no core
            continue
        parents[int(entry.name)] = int(fields[1])
        names[int(entry.name)] = name
    found: dict[int, tuple[str, int]] = {}
    for pid in parents:
        up = pid
        for _ in range(MAX_DEPTH):
            up = parents.get(up, 0)
            if up == root:
                found[pid] = (names[pid], parents[pid])
                break
            if up <= 1:
                break
    return found


def left_running(root: int, before: dict[int, tuple[str, int]]) -> dict[int, str]:
    """The processes below ``root`` that were not there ``before`` and that no process
    from before started (a server a fixture keeps may start workers of its own)."""
    now = descendants(root)
    left: dict[int, str] = {}
    for pid, (name, parent) in now.items():
        if pid in before:
            continue
        up = parent
        for _ in range(MAX_DEPTH):
            if up == root or up in before:
                break
            up = now[up][1] if up in now else root
        if up == root:
            left[pid] = name
    return left


def end(pids: dict[int, str]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
