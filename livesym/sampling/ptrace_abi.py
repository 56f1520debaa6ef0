"""ctypes bindings for the ptrace sampler: ptrace(2), process_vm_readv(2), waitpid(2).

Kept apart from the sampler so the kernel ABI (request numbers, struct
layouts) can be checked on its own. Every call checks errno and raises
``OSError`` (so ESRCH arrives as ``ProcessLookupError`` and EPERM as
``PermissionError``); nothing here retries or hides a failure.

Register layouts are the kernel's ``struct user_regs_struct``
(arch/x86/include/asm/user_64.h) and ``struct user_pt_regs``
(arch/arm64/include/uapi/asm/ptrace.h), picked by ``platform.machine()``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass

from livesym.records import UserRegisters

# --- request numbers (include/uapi/linux/ptrace.h) ------------------------------------

PTRACE_CONT = 7
PTRACE_GETREGS = 12  # x86 only; arm64 has GETREGSET alone
PTRACE_DETACH = 17
PTRACE_GETSIGINFO = 0x4202
PTRACE_GETREGSET = 0x4204
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_LISTEN = 0x4208

# Options for PTRACE_SEIZE (its ``data``).
PTRACE_O_TRACEEXEC = 0x10

# Events, in bits 16-23 of a wait status.
PTRACE_EVENT_EXEC = 4
PTRACE_EVENT_STOP = 128

NT_PRSTATUS = 1  # the general-purpose register set, for PTRACE_GETREGSET

# waitpid options glibc does not export through os.
WALL = 0x40000000  # __WALL: clone children (non-leader threads) as well
WNOTHREAD = 0x20000000  # __WNOTHREAD: only the calling thread's children and tracees

# Signals that stop a process (a group-stop), as opposed to every other signal.
STOP_SIGNALS = frozenset({19, 20, 21, 22})  # SIGSTOP SIGTSTP SIGTTIN SIGTTOU (x86, arm64)


class UnsupportedMachine(OSError):
    """No register layout is known for this machine."""


# --- register sets ---------------------------------------------------------------------

X86_64_REGS = (
    *("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx"),
    *("rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base"),
    *("gs_base", "ds", "es", "fs", "gs"),
)


class UserRegsX86_64(ctypes.Structure):
    """``struct user_regs_struct`` on x86-64: 27 u64 in kernel order, 216 bytes."""

    _fields_ = [(name, ctypes.c_uint64) for name in X86_64_REGS]


class UserRegsAarch64(ctypes.Structure):
    """``struct user_pt_regs`` on arm64: x0..x30, sp, pc, pstate; 272 bytes."""

    _fields_ = [
        ("regs", ctypes.c_uint64 * 31),
        ("sp", ctypes.c_uint64),
        ("pc", ctypes.c_uint64),
        ("pstate", ctypes.c_uint64),
    ]


Regs = UserRegsX86_64 | UserRegsAarch64

# x86-64 code segment selector of a 32-bit (compat) process; its registers come
# zero-extended in the 64-bit struct, and its stack words are 4 bytes.
X86_COMPAT_CS = 0x23


@dataclass(frozen=True)
class WalkStart:
    """Where the stack walk starts: the executing address, frame pointer, word size."""

    pc: int
    fp: int
    word: int  # bytes per stack word (8, or 4 for a 32-bit process on x86-64)


@dataclass(frozen=True)
class Arch:
    """What the sampler needs to know about one machine's registers and frames."""

    machine: str
    regs_type: type[Regs]
    frame_align: int  # a frame pointer not aligned to this is garbage

    def frame(self, regs: Regs) -> WalkStart:
        if isinstance(regs, UserRegsX86_64):
            word = 4 if regs.cs == X86_COMPAT_CS else 8
            return WalkStart(regs.rip, regs.rbp, word)
        return WalkStart(regs.pc, regs.regs[29], 8)  # x29 is the frame pointer (AAPCS64)


# DWARF register numbers of x86-64, in order: 0..15, then 16 the return address column
# (which holds rip at a sample).
_X86_64_DWARF = (
    *("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"),
    *("r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"),
)


def dwarf_registers(regs: Regs) -> UserRegisters:
    """A thread's registers as the unwinder takes them: DWARF numbering (x86-64: rax..r15,
    rip at 16; AArch64: x0..x30, sp at 31, pc at 32)."""
    if isinstance(regs, UserRegsX86_64):
        if regs.cs == X86_COMPAT_CS:  # a 32-bit process: i386 numbering is another table
            return UserRegisters("EM_386", ())
        return UserRegisters("EM_X86_64", tuple(getattr(regs, n) for n in _X86_64_DWARF))
    return UserRegisters("EM_AARCH64", (*regs.regs, regs.sp, regs.pc))


_ARCHES = {
    # The SysV ABI keeps rbp 16-aligned in every frame, but -mno-red-zone or
    # hand-written code may not: 8 (a word) is the alignment we can insist on.
    "x86_64": Arch("x86_64", UserRegsX86_64, 8),
    # AAPCS64 frame records live on the 16-aligned stack.
    "aarch64": Arch("aarch64", UserRegsAarch64, 16),
}
_ARCHES["amd64"] = _ARCHES["x86_64"]
_ARCHES["arm64"] = _ARCHES["aarch64"]


def arch_for(machine: str | None = None) -> Arch:
    """The register layout of ``machine`` (default: this one), or UnsupportedMachine."""
    name = machine if machine is not None else platform.machine()
    arch = _ARCHES.get(name.lower())
    if arch is None:
        raise UnsupportedMachine(
            errno.ENOSYS,
            f"ptrace sampling is not supported on {name or 'this machine'}; use --sampler perf",
        )
    return arch


# --- libc --------------------------------------------------------------------------------


class Iovec(ctypes.Structure):
    """``struct iovec``."""

    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)

# long ptrace(enum __ptrace_request, pid_t, void *addr, void *data). glibc
# declares it variadic; on x86-64 and arm64 Linux integer arguments travel in
# the same registers either way, and the wrapper reads exactly these four.
_ptrace = _libc.ptrace
_ptrace.restype = ctypes.c_long
_ptrace.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

_process_vm_readv = _libc.process_vm_readv
_process_vm_readv.restype = ctypes.c_ssize_t
_process_vm_readv.argtypes = (
    ctypes.c_int,
    ctypes.POINTER(Iovec),
    ctypes.c_ulong,
    ctypes.POINTER(Iovec),
    ctypes.c_ulong,
    ctypes.c_ulong,
)

# int sched_getcpu(void): the CPU the calling thread runs on (glibc and musl; a vDSO
# read on x86-64, no system call).
_sched_getcpu = getattr(_libc, "sched_getcpu", None)
if _sched_getcpu is not None:
    _sched_getcpu.restype = ctypes.c_int
    _sched_getcpu.argtypes = ()


def current_cpu() -> int | None:
    """The CPU this thread is running on, or None where the C library cannot say."""
    if _sched_getcpu is None:
        return None
    cpu: int = _sched_getcpu()
    return cpu if cpu >= 0 else None


def _raise_errno() -> None:
    err = ctypes.get_errno()
    # OSError(errno, text) builds the subclass (ProcessLookupError for ESRCH...).
    raise OSError(err, os.strerror(err))


def ptrace(request: int, pid: int, addr: int = 0, data: int = 0) -> int:
    """ptrace(2); raises OSError with the errno on failure.

    Only for requests whose -1 return means failure (not PTRACE_PEEK*, where -1
    can be the word read): errno is reset first, so a failure never reports an
    errno left behind by an earlier call.
    """
    ctypes.set_errno(0)
    result: int = _ptrace(request, pid, addr or None, data or None)
    if result == -1:
        _raise_errno()
    return result


def seize(tid: int, options: int = 0) -> None:
    """PTRACE_SEIZE: trace ``tid`` without stopping it or sending it a signal."""
    ptrace(PTRACE_SEIZE, tid, 0, options)


def interrupt(tid: int) -> None:
    """PTRACE_INTERRUPT: make a seized thread enter a PTRACE_EVENT_STOP soon."""
    ptrace(PTRACE_INTERRUPT, tid)


def cont(tid: int, signal: int = 0) -> None:
    """PTRACE_CONT from a ptrace-stop, delivering ``signal`` if not 0."""
    ptrace(PTRACE_CONT, tid, 0, signal)


def listen(tid: int) -> None:
    """PTRACE_LISTEN: leave a thread in its group-stop, but report when it changes."""
    ptrace(PTRACE_LISTEN, tid)


def detach(tid: int, signal: int = 0) -> None:
    """PTRACE_DETACH from a ptrace-stop, delivering ``signal`` if not 0."""
    ptrace(PTRACE_DETACH, tid, 0, signal)


def getregs(tid: int, arch: Arch) -> Regs:
    """The general registers of a thread in ptrace-stop.

    x86-64 uses PTRACE_GETREGS, which fills the 64-bit struct even for a 32-bit
    process (GETREGSET would hand back the 68-byte i386 layout then); arm64
    has only PTRACE_GETREGSET, whose iovec says how much the kernel wrote.
    """
    regs = arch.regs_type()
    if isinstance(regs, UserRegsX86_64):
        ptrace(PTRACE_GETREGS, tid, 0, ctypes.addressof(regs))
        return regs
    iov = Iovec(ctypes.addressof(regs), ctypes.sizeof(regs))
    ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, ctypes.addressof(iov))
    if iov.iov_len != ctypes.sizeof(regs):  # a 32-bit (AArch32) process
        raise OSError(errno.EINVAL, f"register set of {iov.iov_len} bytes, not AArch64")
    return regs


SIGINFO_SIZE = 128  # sizeof(siginfo_t) on every Linux ABI


def getsiginfo(tid: int) -> tuple[int, int]:
    """(si_signo, si_code) of the stop a thread is in; ESRCH if it is not in a ptrace-stop.

    For a PTRACE_EVENT stop the kernel makes si_code ``signal | event << 8``,
    which tells an event stop from a signal-delivery-stop without its wait status.
    """
    info = (ctypes.c_int * (SIGINFO_SIZE // 4))()
    ptrace(PTRACE_GETSIGINFO, tid, 0, ctypes.addressof(info))
    return info[0], info[2]  # si_signo, si_errno, si_code are the first three ints


def process_vm_readv(pid: int, address: int, length: int, page: int = 4096) -> bytes:
    """Up to ``length`` bytes of ``pid``'s memory at ``address``: the readable prefix.

    The remote range is split at page boundaries: the kernel transfers whole
    iovec elements only, so one element running into an unmapped page would
    fail as a whole, while per-page elements give back every page before it.
    Raises OSError (EFAULT: nothing readable; ESRCH: the process is gone).
    """
    if length <= 0:
        return b""
    buf = ctypes.create_string_buffer(length)
    remote: list[tuple[int, int]] = []
    at, end = address, address + length
    while at < end:
        stop = min(end, (at // page + 1) * page)
        remote.append((at, stop - at))
        at = stop
    local = Iovec(ctypes.addressof(buf), length)
    remote_iov = (Iovec * len(remote))(*(Iovec(a, n) for a, n in remote))
    ctypes.set_errno(0)
    got: int = _process_vm_readv(pid, ctypes.byref(local), 1, remote_iov, len(remote), 0)
    if got == -1:
        _raise_errno()
    return buf.raw[:got]


def waitpid(pid: int, options: int) -> tuple[int, int]:
    """waitpid(2) with __WALL added: (pid, status), or (0, 0) under WNOHANG.

    __WALL is needed to see threads other than the leader (they are clone
    children that send no SIGCHLD). Raises ChildProcessError (ECHILD) when
    there is nothing to wait for.
    """
    return os.waitpid(pid, options | WALL)


def stop_event(status: int) -> int:
    """The PTRACE_EVENT_* of a stop status (0 for a signal-delivery-stop)."""
    return (status >> 16) & 0xFF
