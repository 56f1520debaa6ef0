"""Whether a thread was stopped at a system call's exit: the instruction before its
leaf address is the one that enters the kernel (``syscall`` on x86-64, ``svc #0`` on
AArch64), read from the target's memory. The py-spy sampler cuts such a stack to its
Python leaf (``pyspy_parse.python_leaf_if_stopped_in_syscall``).
"""

from __future__ import annotations

import os
import platform

__all__ = ["SYSCALL_INSTRUCTIONS", "SyscallExits"]

# The instruction that enters the kernel, by machine: a thread whose leaf address
# comes right after one was stopped at a system call's exit.
SYSCALL_INSTRUCTIONS = {"x86_64": b"\x0f\x05", "aarch64": b"\x01\x00\x00\xd4"}


class SyscallExits:
    """Whether an address of the target follows a system-call instruction, read from
    its memory (/proc/PID/mem: py-spy's ptrace access allows it) once per address.
    Unknown (False) where the machine has no entry or the memory cannot be read."""

    def __init__(self, pid: int, machine: str | None = None) -> None:
        self._pid = pid
        self._insn = SYSCALL_INSTRUCTIONS.get(machine or platform.machine())
        self._fd: int | None = None
        self._failed = False
        self._known: dict[int, bool] = {}

    def __enter__(self) -> SyscallExits:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __call__(self, address: int) -> bool:
        if self._insn is None or self._failed:
            return False
        found = self._known.get(address)
        if found is None:
            found = self._known[address] = self._read(address - len(self._insn)) == self._insn
        return found

    def _read(self, at: int) -> bytes:
        assert self._insn is not None
        if not 0 <= at < 1 << 63:
            return b""
        try:
            if self._fd is None:
                self._fd = os.open(f"/proc/{self._pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            return os.pread(self._fd, len(self._insn), at)
        except PermissionError:
            self._failed = True  # no access at all: do not try for every sample
            return b""
        except OSError:
            return b""  # unmapped: no instruction there
