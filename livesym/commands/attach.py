"""``livesym attach PID|NAME`` (or ``-- CMD``): the live dashboard on a process.

The sampler is chosen and started exactly as ``top`` does (same errors, one
line each); the dashboard then runs the engine until q, Ctrl+C or SIGTERM,
which stop the sampler (it detaches) before the terminal is given back. With
``--record FILE`` the session is also written to a capture, complete at exit. A command
started with ``-- CMD`` has stdin from /dev/null and its output in a log file (the
dashboard has the terminal); livesym exits with its status once the dashboard is quit.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import IO

from livesym.engine import Engine, tick_for
from livesym.errors import FileError, UsageError
from livesym.interrupts import held
from livesym.printable import printable


def has_terminal() -> bool:
    """Whether the dashboard can run: Textual reads keys from stdin and draws on stderr."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def require_terminal(command: str, instead: str) -> None:
    """The dashboard draws on a terminal; say what to use without one."""
    if not has_terminal():
        raise UsageError(
            f"{command} needs a terminal on stdin and stderr (the dashboard draws on stderr); "
            f"without one use {instead}"
        )


def run(args: argparse.Namespace) -> int:
    from livesym.commands.profiled import profiled

    instead = "'livesym top' or 'livesym record'"
    if args.launch is not None:
        require_terminal("attach", instead)  # before a command is started for nothing
    log_path, log = _command_log(args.launch) if args.launch is not None else ("", None)
    started = False  # whether the command was started (else its log is removed)
    try:
        with profiled(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log) as prof:
            started = True
            require_terminal("attach", instead)  # (after the target and sampler's checks)
            engine = Engine(prof.target, prof.sampler)
            if args.record:
                engine.captures.record_to(args.record)

            with held():  # Textual's class set-up does not survive an interrupt
                from livesym.ui.app import run_dashboard

            engine.tick = tick_for(args.refresh)
            code = run_dashboard(engine, pid=prof.pid, refresh=args.refresh)
            ending = prof.ending()
    finally:
        kept = log is not None and _close_log(log, log_path, started)
    if ending is None:
        return code
    line, status = ending
    where = f"; its output is in {log_path}" if kept else ""
    print(f"livesym: {printable(line + where)}", file=sys.stderr)
    return status if code == 0 else code


def _close_log(log: IO[bytes], path: str, started: bool) -> bool:
    """Close the command's log; remove it when the command never started or wrote
    nothing (no empty file left behind). Whether it is kept."""
    log.close()
    try:
        if started and os.path.getsize(path) > 0:
            return True
        os.unlink(path)
    except OSError:
        pass
    return False


def _command_log(argv: list[str]) -> tuple[str, IO[bytes]]:
    """Where a command started under the dashboard writes (the dashboard has the
    terminal): a new file in the current directory, readable by the user only."""
    name = os.path.basename(argv[0]) if argv else "command"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40] or "command"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = f"livesym-{safe}-{stamp}.log"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise FileError(f"cannot create {path} for the command's output: {e.strerror}") from None
    return path, os.fdopen(fd, "wb")
