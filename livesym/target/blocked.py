"""Where a blocked thread waits, read without stopping it: /proc/PID/task/TID/syscall.

The kernel keeps a thread's user registers at its system call's entry; for a thread
blocked in a call the file says the call's number, its six arguments, and the stack
pointer and instruction pointer it entered with (``"202 0x... ... SP PC"``), or
``running`` (then nothing is known: it may be anywhere). With the stack copied from that
stack pointer (``/proc/PID/mem``), call-frame information unwinds the callers of the
blocking call from two registers alone: the libc wrapper and the code that called it
keep their frames relative to the stack pointer. What needs another register (a
frame-pointer-based frame further out) ends the stack there, saying so.

Reading the file needs the access ptrace needs (the same user, or root); nothing here
stops or slows the thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MAX_COPY = 1 << 16  # bytes of stack copied, at most


@dataclass(frozen=True, slots=True)
class BlockedCall:
    """A thread blocked in system call ``nr``, entered with these registers."""

    nr: int
    sp: int
    pc: int


def blocked_call(pid: int, tid: int) -> BlockedCall | None:
    """The call thread ``tid`` is blocked in; None where it runs, is not in a call, or
    the file cannot be read (another user's thread, a thread that ended)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as f:
            fields = f.read(512).split()
    except OSError:
        return None
    if len(fields) != 9 or not fields[0].isdigit():
        return None  # "running", or "-1 SP PC": not in a call
    try:
        return BlockedCall(int(fields[0]), int(fields[7], 16), int(fields[8], 16))
    except ValueError:
        return None


def stack_copy(pid: int, sp: int, size: int) -> tuple[bytes, bool] | None:
    """Up to ``size`` bytes of the thread's stack from ``sp`` (at most MAX_COPY), and
    whether the copy reached the stack's end (the read came back short); None where the
    memory cannot be read."""
    size = max(0, min(size, MAX_COPY))
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = _read_up_to(fd, sp, size)
    finally:
        os.close(fd)
    if data is None:
        return None
    return data, len(data) < size


def _read_up_to(fd: int, address: int, size: int) -> bytes | None:
    """What can be read of [address, address + size): a read that crosses the end of the
    stack's mapping stops there (pread reads up to it, then fails past it)."""
    out = b""
    while len(out) < size:
        try:
            chunk = os.pread(fd, size - len(out), address + len(out))
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out if out or size == 0 else None
