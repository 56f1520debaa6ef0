"""The processes a sampling command profiles: a PID, a name (every process of it), or a
command it starts (``-- CMD ARGS``), and with ``--children`` their descendants; with
the target, the sampler (a ``SamplerGroup`` for several processes), and for a started
command how it ends.

A started command is stopped at its first instruction until the sampler is in place
(``Sampler.on_attached`` resumes it). If the session cannot start (no sampler permitted,
say), the command, which never ran an instruction, is killed: nothing the user asked to
profile runs unprofiled behind their back. Once it ran, livesym waits for it as ``time``
does; if the session ends first (``--duration``, a second Ctrl-C, ``q``, SIGTERM), livesym
stops it and everything it started, as ``py-spy record -- CMD`` does: left running they
would hold livesym's output open (target/ending.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from livesym.printable import printable
from livesym.records import TimeMode
from livesym.sampling.base import Sampler
from livesym.sampling.choice import Choice, choose_sampler
from livesym.sampling.group import SamplerGroup
from livesym.sampling.registry import DEFAULT_MAX_PROCESSES
from livesym.symbolize.sources import checked_debug_dirs
from livesym.target.children import ChildFollower
from livesym.target.ending import STOP_GRACE, Stopped
from livesym.target.launch import Launched, describe, exit_code
from livesym.target.process import TargetProcess
from livesym.target.select import by_name

EXIT_WAIT = 5.0  # seconds to wait for a started command's exit status once sampling ended


@dataclass
class Profiled:
    """The processes under a sampler, and the command livesym started, if it did.
    ``pid`` is the first process (the started command, or the lowest pid of a name)."""

    pid: int
    target: TargetProcess
    sampler: Sampler
    launched: Launched | None
    pids: tuple[int, ...] = ()

    def status(self) -> int | None:
        """The started command's exit status (None: not started here, or not seen)."""
        if self.launched is None:
            return None
        if self.sampler.exit_status is not None:
            return self.sampler.exit_status  # the ptrace tracer reaped it
        return self.launched.status(EXIT_WAIT)

    def ending(self) -> tuple[str, int] | None:
        """For a started command: how it ended (a line) and livesym's exit code. The
        command owns nothing past the session: what it still runs then, itself or what it
        started, is stopped (target/ending.py), and livesym exits 0 when it stopped the
        command itself (sampling was asked to end first), else with the command's code."""
        launched = self.launched
        if launched is None:
            return None
        still = self.sampler.exit_status is None and launched.running()
        stopped = launched.stop()
        if still:
            name = os.path.basename(launched.argv[0])
            others = len(stopped.pids) - (launched.pid in stopped.pids)
            what = f"it and {others} process{'es' * (others != 1)} it started" if others else "it"
            return f"{name} still ran when sampling ended: stopped {what} ({_how(stopped)})", 0
        status = self.status()
        line = describe(launched.argv, status)
        if stopped.pids:
            n = len(stopped.pids)
            line += f"; stopped {n} process{'es' * (n != 1)} it left running ({_how(stopped)})"
        return line, exit_code(status)


def _how(stopped: Stopped) -> str:
    """How the processes were stopped, for the ending line."""
    if not stopped.killed:
        return "SIGTERM"
    return f"SIGTERM, then SIGKILL for {len(stopped.killed)} after {STOP_GRACE:g} s"


def said(made: Choice) -> Sampler:
    """The sampler chosen (``livesym.sampling.choice``), once why ``auto`` did not take
    its first choice, if it did not, is on stderr."""
    if made.note is not None:
        print(f"livesym: {printable(made.note)}", file=sys.stderr)
    return made.sampler


def resolve_pids(target: int | str) -> list[int]:
    """Every process ``target`` names: a PID, or each process of a name."""
    return [target] if isinstance(target, int) else by_name(target)


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
        pids = [launched.pid] if launched is not None else resolve_pids(args.target)
        target = TargetProcess(pids[0], debug_dirs=checked_debug_dirs(args.debug_dir))
        sampler = _sampler_for(args, pids)
    except BaseException:
        if launched is not None:
            _kill_unstarted(launched)
        raise
    if launched is not None:
        sampler.on_attached = launched.resume
    try:
        yield Profiled(pids[0], target, sampler, launched, tuple(pids))
    finally:
        if launched is not None and not launched.resumed:
            _kill_unstarted(launched)


def _sampler_for(args: argparse.Namespace, pids: list[int]) -> Sampler:
    """One process's sampler, or a group of one per process (several processes, or
    ``--children``: those found later join it). Under ``auto`` each process gets the
    best sampler for it (mixed stacks for a Python one); what ``auto`` has to say is said for
    the first processes only, never over a dashboard."""
    children = getattr(args, "children", False)
    limit = getattr(args, "max_processes", DEFAULT_MAX_PROCESSES)

    def make(pid: int, say: bool = False) -> Sampler:
        nonblocking = getattr(args, "nonblocking", False)
        mode = TimeMode.parse(args.mode or "cpu")
        made = choose_sampler(args.sampler, pid, args.rate, mode, args.stack_size,
                              kernel=args.kernel, nonblocking=nonblocking)  # fmt: skip
        return said(made) if say else made.sampler

    if len(pids) == 1 and not children:
        return make(pids[0], say=True)

    def member(pid: int, say: bool = False) -> Sampler:
        # Events per CPU see every process: one set per member would each see them all.
        made = make(pid, say)
        made.keep_per_thread()
        return made

    first = [member(pid, say=True) for pid in pids[:limit]]
    group = SamplerGroup(first, member, limit=limit,
                         follower=ChildFollower(pids) if children else None)  # fmt: skip
    if len(pids) > limit:
        group.left_out = len(pids) - limit
        group.stats.error(
            f"{len(pids)} processes match, {limit} are sampled (--max-processes); "
            f"{len(pids) - limit} are left out"
        )
    return group


def _kill_unstarted(launched: Launched) -> None:
    """A started command the session never let run: it never ran an instruction."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(launched.pid, signal.SIGKILL)
    launched.resume()  # (a stopped process takes SIGKILL too; this is belt and braces)
    launched.status(EXIT_WAIT)
