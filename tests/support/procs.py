"""Run a sample target for the length of a ``with`` block.

    with running(build("spin")) as proc:
        ...  # proc.pid is running and has printed "ready <pid>"

The program is always killed and reaped when the block ends, however it ends.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, NoReturn

__all__ = ["running", "stop", "thread_names"]

_READY = re.compile(rb"ready (\d+)")
TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL


@contextmanager
def running(
    path: Path, *args: str, timeout: float = 10.0, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``path args...``, wait for its ``ready <pid>`` line, yield the Popen.

    Raises RuntimeError (with the program's stderr) when it exits, prints something
    else, or is not ready within ``timeout`` seconds.  On leaving the block the
    program gets SIGTERM, then SIGKILL after TERM_GRACE seconds, and is waited for.
    """
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [os.fspath(path), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,  # a file, so a chatty program can never block on a full pipe
            env=env,
        )
        try:
            _wait_ready(proc, path, timeout, stderr)
            yield proc
        finally:
            stop(proc)
            if proc.stdout is not None:
                proc.stdout.close()


def stop(proc: subprocess.Popen[bytes], grace: float = TERM_GRACE) -> int:
    """SIGTERM, then SIGKILL after ``grace`` seconds; reap and return the exit status."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        proc.kill()
    return proc.wait()


def _wait_ready(
    proc: subprocess.Popen[bytes], path: Path, timeout: float, stderr: IO[bytes]
) -> None:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _fail(proc, path, f"not ready after {timeout:g} s", stderr, buf)
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            continue  # loop re-checks the deadline
        chunk = os.read(fd, 4096)
        if not chunk:
            stop(proc)
            _fail(proc, path, f"exited with status {proc.returncode} before ready", stderr, buf)
        buf += chunk
    line = buf.split(b"\n", 1)[0]
    match = _READY.fullmatch(line)
    if match is None:
        _fail(proc, path, f"printed {line!r} instead of 'ready <pid>'", stderr, buf)
    if int(match.group(1)) != proc.pid:
        _fail(
            proc,
            path,
            f"says ready {match.group(1).decode()} but its pid is {proc.pid}",
            stderr,
            buf,
        )


def _fail(
    proc: subprocess.Popen[bytes], path: Path, what: str, stderr: IO[bytes], stdout: bytes
) -> NoReturn:
    stop(proc)
    stderr.seek(0)
    err = stderr.read().decode(errors="replace").strip()
    out = stdout.decode(errors="replace").strip()
    detail = f"; stderr: {err}" if err else "; stderr: (empty)"
    if out:
        detail += f"; stdout: {out}"
    raise RuntimeError(f"{path}: {what}{detail}")


def thread_names(pid: int) -> dict[int, str]:
    """Each thread of ``pid`` by tid, with its name (comm)."""
    names = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            names[int(tid)] = f.read().strip()
    return names


# On two CPUs spin's three threads wait ~25 % of their runnable time by themselves;
# beyond this share another process is loading the machine.
BUSY_WAITING = 0.35


def sched_ns(pid: int) -> dict[int, tuple[int, int]]:
    """(time on a CPU, time runnable but waiting for one) of each thread so far, in ns
    (/proc/.../schedstat); threads that end meanwhile are left out."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run, wait, _ = f.read().split()
        except OSError:
            continue
        out[int(tid)] = (int(run), int(wait))
    return out


def thread_waits(pid: int) -> tuple[int, int]:
    """(ns on a CPU, ns runnable but waiting for one), summed over pid's threads."""
    times = sched_ns(pid).values()
    return sum(run for run, _ in times), sum(wait for _, wait in times)


def waiting_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Of the runnable time between two ``thread_waits`` readings, the share spent
    waiting for a CPU."""
    ran, waited = (b - a for a, b in zip(before, after, strict=True))
    return waited / (ran + waited) if ran + waited > 0 else 0.0
