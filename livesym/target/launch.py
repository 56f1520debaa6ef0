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

Stopped children are never left behind: a command the session never resumed is killed
(``commands.profiled``), and if livesym dies (SIGKILL) the child gets SIGCONT from the
kernel (PR_SET_PDEATHSIG, kept across the exec): a traced child is let go by the kernel
anyway, and one in the SIGSTOP stop goes on. When the session ends while the command, or
anything it started, still runs, ``stop`` ends them (target/ending.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import IO

from livesym import priority
from livesym.errors import EXIT_CANNOT_RUN, EXIT_NOT_FOUND, LaunchError
from livesym.interrupts import STOP_SIGNALS
from livesym.target.ending import LAUNCH_TAG, Stopped, alive, stop_launched

PTRACE_TRACEME = 0
PTRACE_DETACH = 17
PTRACE_SETSIGMASK = 0x420B
PR_SET_PDEATHSIG = 1


def _stop_at_exec(parent: int) -> Callable[[], None]:
    """What the child runs between fork and exec: SIGCONT if livesym dies (a command
    stopped for a sampler that never came goes on), then stop at the exec (traced).

    Every signal but the exec's SIGTRAP (the stop the parent waits for) is blocked from
    here to the exec. A signal delivered to the traced child before its exec would stop
    it there, while the parent's Popen waits for the exec: neither would go on. Delivered
    to it before it is traced, it would reach the handlers livesym's Python set (inherited
    by the fork), which would swallow a Ctrl-C or raise inside this function. Blocked, a
    signal waits for the exec stop, where the parent gives the command back the mask
    livesym had (``Launched._stop_at_exec``)."""

    nice = priority.original()  # the command runs at the nice livesym had before

    def run() -> None:  # pragma: no cover - runs in the child, between fork and exec
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - {signal.SIGTRAP})
        if nice is not None:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGCONT, 0, 0, 0)
        if os.getppid() == parent:  # (else livesym died already: just run)
            libc.ptrace(PTRACE_TRACEME, 0, None, None)

    return run


def _sigset(signals: set[int | signal.Signals]) -> ctypes.c_uint64:
    """A kernel sigset_t (64 signals, bit N - 1 for signal N)."""
    bits = 0
    for sig in signals:
        if 0 < int(sig) <= 64:
            bits |= 1 << (int(sig) - 1)
    return ctypes.c_uint64(bits)


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
        # The session's tag, inherited by everything the command starts: what it leaves
        # running when the session ends is found by it (target/ending.py).
        self.tag = f"{os.getpid()}.{secrets.token_hex(8)}"
        env = {k: v for k, v in os.environ.items() if k != LAUNCH_TAG}
        # Stop signals wait until the command is stopped at its first instruction: one
        # that came meanwhile is then taken here, and the command does not outlive it.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            self.proc = self._start({LAUNCH_TAG: self.tag, **env}, stdin, stdout, stderr)
            self.pid = self.proc.pid
            self.resumed = False
            self._stop_at_exec(mask)
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except BaseException:  # interrupted before anything ran: the command never runs
            self._kill_stopped()
            raise

    def _start(
        self,
        env: dict[str, str],
        stdin: int | IO[bytes] | None,
        stdout: int | IO[bytes] | None,
        stderr: int | IO[bytes] | None,
    ) -> subprocess.Popen[bytes]:
        """The child, made to stop at its exec; a command that cannot be run is said as
        a shell says it."""
        try:
            return subprocess.Popen(
                self.argv,
                env=env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                preexec_fn=_stop_at_exec(os.getpid()),
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
            why = e.strerror
            if e.errno == errno.ENOEXEC:
                why = "not a program this system runs (no #! line, or another machine's binary)"
            raise LaunchError(f"cannot run {self.argv[0]!r}: {why}", EXIT_CANNOT_RUN) from None

    def _kill_stopped(self) -> None:
        """End the command still stopped before its first instruction, and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self.proc.returncode = -signal.SIGKILL

    def _stop_at_exec(self, mask: set[int | signal.Signals]) -> None:
        """Wait for the stop after the exec; give the command ``mask`` (livesym's own
        before the start: the child blocked every signal); leave it in a plain SIGSTOP
        stop. A signal that came meanwhile is then delivered as it would have been."""
        libc = ctypes.CDLL(None, use_errno=True)
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
        if os.WSTOPSIG(status) != signal.SIGTRAP:  # (only SIGSTOP is not blocked before it)
            self._kill_stopped()
            raise LaunchError(f"{self.argv[0]!r} was stopped before its start", EXIT_CANNOT_RUN)
        wanted = _sigset(mask)
        size = ctypes.sizeof(wanted)
        if libc.ptrace(PTRACE_SETSIGMASK, self.pid, size, ctypes.byref(wanted)) != 0:
            err = ctypes.get_errno()
            self._kill_stopped()  # it would run with every signal blocked
            raise LaunchError(
                f"cannot start {self.argv[0]!r}: {os.strerror(err)} (PTRACE_SETSIGMASK)",
                EXIT_CANNOT_RUN,
            )
        # Detach with SIGSTOP: the child goes on stopped, no longer traced, so any
        # sampler (ptrace's too) can attach to it.
        if libc.ptrace(PTRACE_DETACH, self.pid, None, signal.SIGSTOP) != 0:
            err = ctypes.get_errno()
            self.resume()
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

    def status(self, timeout: float = 0.0) -> int | None:
        """The command's exit status as ``subprocess`` gives it (negative: killed by that
        signal), waiting up to ``timeout`` seconds; None while it runs, or when it cannot
        be known (a tracer in this process reaped it: Popen would say 0)."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        deadline = time.monotonic() + timeout
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                return self.proc.returncode
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)

    def stop(self) -> Stopped:
        """Stop the command and everything it started that still runs (the session
        ended): SIGTERM, then SIGKILL after a grace; its exit status is collected."""
        return stop_launched(self.pid, self.tag, reap=lambda: self.status(0))

    def running(self) -> bool:
        """Whether the command still runs (read from /proc: a waitpid here could take a
        stop meant for the ptrace sampler)."""
        return alive(self.pid)


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
