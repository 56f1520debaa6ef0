"""Ending what livesym started: a command run with ``-- CMD`` and every process it started.

A profiler that started a command owns its end, as ``py-spy record -- CMD`` and
``timeout`` do: when the session ends (``--duration``, a second Ctrl-C, ``q``, SIGTERM,
SIGHUP) whatever the command left running is stopped, SIGTERM first, then SIGKILL after
STOP_GRACE seconds. Left running, those processes would keep livesym's stdout and stderr
open, and a script reading livesym's output (``$(livesym ...)``, ``subprocess.run(...,
capture_output=True)``) would hang until they exited. Processes livesym only attached to
are never touched.

What counts as started by the command, found in /proc:
- every process whose parent chain leads to the command (a shell's jobs, their children);
- every process carrying the session's tag in its environment (``LAUNCH_TAG``, set by
  ``Launched`` for the command and inherited by what it starts): a background job whose
  shell exited was reparented to init, out of the chain, and still carries it.
A process that both left the chain and replaced its environment (a daemon started with
``env -i``) is not found; nothing else livesym can read says it was the command's.

Processes are found again after each signal, so one forked while the first were being
stopped is stopped too; every loop and read is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from livesym.target.children import parents

LAUNCH_TAG = "LIVESYM_LAUNCHED"  # environment variable naming the session that started it
STOP_GRACE = 1.0  # seconds the processes have between SIGTERM and SIGKILL
ENVIRON_BYTES = 1 << 21  # an environment is at most ARG_MAX (2 MiB by default)
POLL = 0.02  # seconds between checks that the processes are gone
MAX_ROUNDS = 20  # signal rounds at most: a process that forks without end is not chased forever


@dataclass(frozen=True)
class Stopped:
    """What stopping a launched tree did: the processes found, and those that needed
    SIGKILL (they outlived SIGTERM by STOP_GRACE seconds)."""

    pids: tuple[int, ...]
    killed: tuple[int, ...]


def tagged(pid: int, marker: bytes, proc: str = "/proc") -> bool:
    """Whether ``pid``'s environment holds ``marker`` (``NAME=value``); False when it
    cannot be read (another user's process: not ours to stop anyway)."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            data = f.read(ENVIRON_BYTES)
    except OSError:
        return False
    # NAME=value entries, each ended by a NUL (the last one's may be cut off)
    return b"\0" + marker + b"\0" in b"\0" + data + b"\0"


def launched_tree(root: int, tag: str, proc: str = "/proc") -> set[int]:
    """The live processes ``root`` started, itself included: its descendants by parent,
    every process carrying ``tag``, and their descendants. livesym is never in it."""
    family = parents(proc)
    marker = f"{LAUNCH_TAG}={tag}".encode()
    own = os.getpid()
    found = {pid for pid in family if pid != own and tagged(pid, marker, proc)}
    if root in family:
        found.add(root)
    children: dict[int, list[int]] = {}
    for pid, parent in family.items():
        children.setdefault(parent, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found and child != own:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if alive(pid, proc)}


def alive(pid: int, proc: str = "/proc") -> bool:
    """Whether ``pid`` exists and is not a zombie (a zombie holds no file open)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            stat = f.read(4096)
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X", b"")


def _send(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
            if signum == signal.SIGTERM:
                os.kill(pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only once resumed


def stop_launched(
    root: int, tag: str, grace: float = STOP_GRACE, reap: Callable[[], object] | None = None
) -> Stopped:
    """Stop ``root`` and what it started: SIGTERM, up to ``grace`` seconds for them to
    go, then SIGKILL. ``reap`` (a callable) is called while waiting, for the caller to
    collect its own child's exit status (a zombie child of livesym is gone already)."""
    seen: set[int] = set()
    deadline = time.monotonic() + grace
    for _ in range(MAX_ROUNDS):
        tree = launched_tree(root, tag)
        if not tree:
            return Stopped(tuple(sorted(seen)), ())
        _send(tree - seen, signal.SIGTERM)
        seen |= tree
        if time.monotonic() >= deadline:
            break
        _wait_gone(tree, deadline, reap)
    killed: set[int] = set()
    for _ in range(MAX_ROUNDS):
        tree = launched_tree(root, tag)
        if not tree:
            break
        _send(tree, signal.SIGKILL)
        seen |= tree
        killed |= tree
        _wait_gone(tree, time.monotonic() + grace, reap)
    return Stopped(tuple(sorted(seen)), tuple(sorted(killed)))


def _wait_gone(pids: set[int], deadline: float, reap: Callable[[], object] | None) -> None:
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not any(alive(pid) for pid in pids):
            return
        time.sleep(POLL)
