"""The process a sampling command profiles: a PID, a name, or a command it starts
(``-- CMD ARGS``), with its target, its sampler, and for a started command how it ends.

A started command is stopped at its first instruction until the sampler is in place
(``Sampler.on_attached`` resumes it). If the session cannot start (no sampler permitted,
say), the command, which never ran an instruction, is killed: nothing the user asked to
profile runs unprofiled behind their back. Once it ran, it is the user's: livesym never
kills it, and waits for it as ``time`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from livesym.commands.top import choose_sampler
from livesym.errors import TargetError
from livesym.sampling.base import Sampler
from livesym.symbolize.sources import checked_debug_dirs
from livesym.target.launch import Launched, describe, exit_code
from livesym.target.process import TargetProcess
from livesym.target.select import by_name

EXIT_WAIT = 5.0  # seconds to wait for a started command's exit status once sampling ended


@dataclass
class Profiled:
    """One process under a sampler, and the command livesym started, if it did."""

    pid: int
    target: TargetProcess
    sampler: Sampler
    launched: Launched | None

    def status(self) -> int | None:
        """The started command's exit status (None: not started here, or not seen)."""
        if self.launched is None:
            return None
        if self.sampler.exit_status is not None:
            return self.sampler.exit_status  # the ptrace tracer reaped it
        return self.launched.status(EXIT_WAIT)

    def ending(self) -> tuple[str, int] | None:
        """For a started command: how it ended (a line) and livesym's exit code (its own;
        0 for one that still runs: sampling was stopped under it, a second Ctrl-C)."""
        launched = self.launched
        if launched is None:
            return None
        still = self.sampler.exit_status is None and launched.running()
        if still and launched.status(0.5) is None:
            name = os.path.basename(launched.argv[0])
            return f"{name} still runs as pid {launched.pid}; sampling was stopped", 0
        status = self.status()
        return describe(launched.argv, status), exit_code(status)


def resolve_pid(target: int | str) -> int:
    """The one process ``target`` names (several of one name: say which, in one line)."""
    if isinstance(target, int):
        return target
    pids = by_name(target)
    if len(pids) > 1:
        shown = ", ".join(map(str, pids[:8])) + (", ..." if len(pids) > 8 else "")
        raise TargetError(
            f"{len(pids)} processes are named {target!r} (pids {shown}); livesym profiles one "
            "process at a time: give one of their PIDs"
        )
    return pids[0]


@contextlib.contextmanager
def profiled(
    args: argparse.Namespace, *, stdin: int | IO[bytes] | None = None,
    stdout: int | IO[bytes] | None = None, stderr: int | IO[bytes] | None = None,
) -> Iterator[Profiled]:  # fmt: skip
    """The target and sampler ``args`` ask for; a command it starts is never left stopped
    (killed if the session never began, as it never ran)."""
    launched = (
        Launched(args.launch, stdin=stdin, stdout=stdout, stderr=stderr)
        if getattr(args, "launch", None) is not None
        else None
    )
    try:
        pid = launched.pid if launched is not None else resolve_pid(args.target)
        target = TargetProcess(pid, debug_dirs=checked_debug_dirs(args.debug_dir))
        sampler = choose_sampler(args.sampler, pid, args.rate, args.idle, args.stack_size,
                                 kernel=args.kernel)  # fmt: skip
    except BaseException:
        if launched is not None:
            _kill_unstarted(launched)
        raise
    if launched is not None:
        sampler.on_attached = launched.resume
    try:
        yield Profiled(pid, target, sampler, launched)
    finally:
        if launched is not None and not launched.resumed:
            _kill_unstarted(launched)


def _kill_unstarted(launched: Launched) -> None:
    """A started command the session never let run: it never ran an instruction."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(launched.pid, signal.SIGKILL)
    launched.resume()  # (a stopped process takes SIGKILL too; this is belt and braces)
    launched.status(EXIT_WAIT)
