"""A command livesym starts itself (``record|top|attach -- CMD ARGS``), profiled from its
first instruction.

The command is started traced (PTRACE_TRACEME in the child, before execve), so the kernel
stops it right after the exec succeeded, before the first instruction of the new program:
its maps are the program's by then, not livesym's. It is then detached into an ordinary
SIGSTOP stop, so whichever sampler runs may attach to it as to any stopped process (perf
opens its events, ptrace seizes it, py-spy reads it), and ``resume`` sends SIGCONT once
the sampler is in place. Nothing runs between the exec and the sampler: no sample is
missed and none is of livesym's own code.

Written by hand: subprocess has no way to stop a child at its exec, and the exec failure
(a command not found, not executable) must be told apart from a command that started and
failed, which Popen does (it raises in the parent from the child's errno).

Stopped children are never left behind: the child stays in livesym's process group, so if
livesym dies while the child is stopped, the group is orphaned and the kernel sends the
stopped child SIGHUP and SIGCONT; and every exit path of livesym resumes it (``close``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import IO

from livesym.errors import EXIT_CANNOT_RUN, EXIT_NOT_FOUND, LaunchError

PTRACE_TRACEME = 0
PTRACE_DETACH = 17
START_TIMEOUT = 10.0  # seconds for the child to reach its exec


def _trace_me() -> None:  # pragma: no cover - runs in the child, between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace(PTRACE_TRACEME, 0, None, None)


class Launched:
    """One command started stopped at its first instruction; ``resume`` lets it run."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        stdin: int | IO[bytes] | None = None,
        stdout: int | IO[bytes] | None = None,
        stderr: int | IO[bytes] | None = None,
    ) -> None:
        if not argv:
            raise LaunchError("no command after --: give the command to run, e.g. -- ./app")
        self.argv = list(argv)
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=stdin, stdout=stdout, stderr=stderr, preexec_fn=_trace_me
            )
        except FileNotFoundError:
            raise LaunchError(
                f"cannot run {self.argv[0]!r}: no such command (check PATH, or give its path)",
                EXIT_NOT_FOUND,
            ) from None
        except PermissionError:
            raise LaunchError(
                f"cannot run {self.argv[0]!r}: permission denied (is it executable?)",
                EXIT_CANNOT_RUN,
            ) from None
        except OSError as e:
            raise LaunchError(
                f"cannot run {self.argv[0]!r}: {e.strerror}", EXIT_CANNOT_RUN
            ) from None
        self.pid = self.proc.pid
        self.resumed = False
        self._stop_at_exec()

    def _stop_at_exec(self) -> None:
        """Wait for the stop after the exec; leave the child in a plain SIGSTOP stop."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            raise LaunchError(f"{self.argv[0]!r} vanished as it started", EXIT_CANNOT_RUN) from None
        if not os.WIFSTOPPED(status):
            code = os.waitstatus_to_exitcode(status)
            self.proc.returncode = code
            raise LaunchError(
                f"{self.argv[0]!r} ended as it started (status {code})", EXIT_CANNOT_RUN
            )
        libc = ctypes.CDLL(None, use_errno=True)
        # Detach with SIGSTOP: the child goes on stopped, no longer traced, so any
        # sampler (ptrace's too) can attach to it.
        if libc.ptrace(PTRACE_DETACH, self.pid, None, signal.SIGSTOP) != 0:
            err = ctypes.get_errno()
            self.close()
            raise LaunchError(
                f"cannot start {self.argv[0]!r} stopped: {os.strerror(err)}", EXIT_CANNOT_RUN
            )
        # The SIGSTOP is taken as the child leaves the trace stop, before any instruction
        # of the program runs; wait until it has been (the samplers see a stopped process).
        try:
            _, status = os.waitpid(self.pid, os.WUNTRACED)
        except ChildProcessError:
            status = 0
        if not os.WIFSTOPPED(status):
            code = os.waitstatus_to_exitcode(status)
            self.proc.returncode = code
            why = f"{self.argv[0]!r} ended as it started (status {code})"
            raise LaunchError(why, EXIT_CANNOT_RUN)

    def resume(self) -> None:
        """Let the command run (the sampler is in place)."""
        if not self.resumed:
            self.resumed = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)

    def signal(self, signum: int) -> None:
        """Pass a signal on to the command (if it still runs)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def status(self, timeout: float | None = None) -> int | None:
        """The command's exit status as ``subprocess`` gives it (negative: killed by that
        signal); None while it runs, or when it cannot be known (a tracer reaped it)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        except ChildProcessError:
            return None

    def close(self) -> None:
        """On every way out: a command still stopped is resumed (never left stopped)."""
        self.resume()


def exit_code(status: int | None) -> int:
    """livesym's exit code for a command that ended with ``status``, as a shell gives it:
    the command's own code, 128 + N when signal N killed it."""
    if status is None:
        return 0
    return 128 - status if status < 0 else status


def describe(argv: Sequence[str], status: int | None) -> str:
    """How the command ended, for the summary line."""
    name = os.path.basename(argv[0]) if argv else "?"
    if status is None:
        return f"{name} ended (its exit status was not seen)"
    if status < 0:
        try:
            which = signal.Signals(-status).name
        except ValueError:
            which = f"signal {-status}"
        return f"{name} was killed by {which}"
    return f"{name} exited with status {status}"
