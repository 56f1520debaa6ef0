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


RUNNING = "running"  # the file's word for a thread on a CPU (or woken, about to be)
OUTSIDE = "outside"  # blocked, but not in a system call ("-1 SP PC": a page fault's wait)
UNREADABLE = "unreadable"  # another user's thread, or one that ended


def read_call(pid: int, tid: int) -> BlockedCall | str:
    """The call thread ``tid`` is blocked in, or why none is known: RUNNING, OUTSIDE,
    UNREADABLE."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as f:
            fields = f.read(512).split()
    except OSError:
        return UNREADABLE
    if len(fields) == 3 and fields[0] == b"-1":
        return OUTSIDE
    if len(fields) != 9 or not fields[0].isdigit():
        return RUNNING
    try:
        return BlockedCall(int(fields[0]), int(fields[7], 16), int(fields[8], 16))
    except ValueError:
        return UNREADABLE


def blocked_call(pid: int, tid: int) -> BlockedCall | None:
    """The call thread ``tid`` is blocked in; None where it runs, is not in a call, or
    the file cannot be read (another user's thread, a thread that ended)."""
    call = read_call(pid, tid)
    return call if isinstance(call, BlockedCall) else None


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


# What called the scheduler where a thread was preempted (still runnable, its CPU
# taken): on the way back to user code (an interrupt's or a system call's return), or at
# a preemption point in the kernel. A kernel stack that starts there is not a wait.
PREEMPTED = ("irqentry_exit", "raw_irqentry_exit", "exit_to_user_mode",
             "syscall_exit_to_user_mode", "preempt_schedule", "__cond_resched",
             "_cond_resched")  # fmt: skip
MAX_KERNEL_FRAMES = 64  # of a kernel stack, at most (the kernel gives 64)
_KERNEL_STACK_BYTES = 1 << 13


def kernel_stack(pid: int, tid: int) -> tuple[tuple[str, int], ...] | None:
    """The kernel's frames of a blocked thread, leaf first, as (function, offset):
    /proc/PID/task/TID/stack (``[<0>] folio_wait_bit+0xd6/0x220``; the kernel leaves its
    scheduler's own functions out, and the addresses as zeros). None where this user may
    not read it (root only: CAP_SYS_ADMIN); empty for a thread on a CPU or one gone (one
    preempted shows where: ``PREEMPTED``)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stack", "rb") as f:
            text = f.read(_KERNEL_STACK_BYTES)
    except PermissionError:
        return None
    except OSError:
        return ()
    out: list[tuple[str, int]] = []
    for line in text.splitlines()[:MAX_KERNEL_FRAMES]:
        _, _, where = line.partition(b"] ")
        name, plus, rest = where.partition(b"+")
        offset = rest.split(b"/", 1)[0]
        if not name or not plus:
            continue
        try:
            out.append((name.decode("utf-8", "replace"), int(offset, 16)))
        except ValueError:
            continue
    return tuple(out)
