"""System calls as frames: the kernel's part of a stack where a sampler sees only
which call a thread was in (ptrace reads its number, not the kernel's stack).

The numbers are named from the kernel headers' tables where they are installed
(linux-libc-dev, which gcc's libc6-dev brings): ``unistd_64.h`` on x86-64, the
generic table on arm64. Written by hand: Python's standard library has no such
table, and a PyPI package of them would lag the kernel; the headers are the
machine's own. Without them a call is shown by its number.
"""

from __future__ import annotations

import functools
import platform
import re

from livesym.addr.kinds import Vma
from livesym.records import KIND_KERNEL, KIND_UNKNOWN, FrameRecord, Reason

MAX_HEADER = 1 << 20  # bytes read of a header (unistd_64.h: about 15 kB)
MAX_SYSCALL = 1 << 16  # numbers above this are not system calls of any table
_HEADERS = {
    "x86_64": (
        "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
        "/usr/include/asm/unistd_64.h",
    ),
    "aarch64": ("/usr/include/asm-generic/unistd.h",),
}
_DEFINE = re.compile(rb"^#define __NR(?:3264)?_(\w{1,64})\s+(\d{1,5})\s*$", re.M)

SYSCALL_DETAIL = (
    "the system call the thread was in when stopped (ptrace reads its number from the "
    "registers; the kernel's own stack is not visible to it). On a CPU, its share is "
    "sized from the thread's system time (/proc/PID/task/TID/stat); with --idle, a "
    "thread blocked in it"
)


@functools.cache
def syscall_names(machine: str | None = None) -> dict[int, str]:
    """{number: name} of this machine's system calls, empty where no header says."""
    for path in _HEADERS.get(machine or platform.machine(), ()):
        try:
            with open(path, "rb") as f:
                text = f.read(MAX_HEADER)
        except OSError:
            continue
        names = {int(nr): name.decode("ascii") for name, nr in _DEFINE.findall(text)}
        if names:
            return names
    return {}


def syscall_name(nr: int) -> str:
    """The call's name, or its number where the tables are not installed."""
    return syscall_names().get(nr) or f"system call {nr}"


def syscall_frame_record(nr: int) -> FrameRecord:
    """The kernel frame of a sample taken inside system call ``nr``."""
    name = syscall_name(nr) if 0 <= nr <= MAX_SYSCALL else f"system call {nr}"
    return FrameRecord(
        id=-1, generation=0, vma=Vma(0), module="[kernel]", object=None, mapping=None,
        base=None, segment=None, elf_vaddr=None, elf_offset=None, symbol=f"sys_{name}",
        demangled=f"{name} (system call)", symbol_vaddr=None, symbol_size=None,
        symbol_offset=None, reason=None, detail=SYSCALL_DETAIL, steps=(), problems=(),
        kind=KIND_KERNEL,
    )  # fmt: skip


AT_CALL_EXIT_DETAIL = (
    "ptrace stopped the thread at the exit of a system call made after the interrupt was "
    "sent (it takes 0.1-0.4 ms to reach a running thread), and the thread's system time "
    "does not account for the sample: it was running the user code below this call, "
    "where exactly is not known"
)


def at_call_exit_record() -> FrameRecord:
    """The leaf of a user-time sample whose stop came at a system call's exit."""
    return FrameRecord(
        id=-1, generation=0, vma=Vma(0), module=None, object=None, mapping=None, base=None,
        segment=None, elf_vaddr=None, elf_offset=None, symbol=None, demangled=None,
        symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=Reason.AT_CALL_EXIT,
        detail=AT_CALL_EXIT_DETAIL, steps=(), problems=(), kind=KIND_UNKNOWN,
    )  # fmt: skip
