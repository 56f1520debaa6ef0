"""``livesym attach PID``: the live dashboard on a running process.

The sampler is chosen and started exactly as ``top`` does (same errors, one
line each); the dashboard then runs the engine until q, Ctrl+C or SIGTERM,
which stop the sampler (it detaches) before the terminal is given back. With
``--record FILE`` the session is also written to a capture, complete at exit.
"""

from __future__ import annotations

import argparse
import sys

from livesym.commands.top import choose_sampler
from livesym.engine import Engine
from livesym.errors import UsageError
from livesym.symbolize.sources import checked_debug_dirs
from livesym.target.process import TargetProcess


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
    target = TargetProcess(args.pid, debug_dirs=checked_debug_dirs(args.debug_dir))
    sampler = choose_sampler(
        args.sampler, args.pid, args.rate, args.idle, args.stack_size, kernel=args.kernel
    )
    require_terminal("attach", "'livesym top' or 'livesym record'")
    engine = Engine(target, sampler)
    if args.record:
        engine.record_to(args.record)

    from livesym.ui.app import run_dashboard

    return run_dashboard(engine, pid=args.pid, include_idle=args.idle)
