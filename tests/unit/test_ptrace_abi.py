"""The ptrace bindings: kernel struct layouts, errno handling, and the frame-pointer walk.

Layouts are checked against the kernel headers' offsets (asm/user_64.h,
asm/ptrace.h for arm64); the walk runs on a fake memory so every stop rule
is exercised without a traced process.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import struct
import threading
import time

import pytest

from livesym.sampling import ptrace as sampler_mod
from livesym.sampling import ptrace_abi as abi
from livesym.target.threads import syscall_of


def test_x86_64_user_regs_struct_layout() -> None:
    regs = abi.UserRegsX86_64
    assert ctypes.sizeof(regs) == 216
    assert [field[0] for field in regs._fields_] == list(abi.X86_64_REGS)
    assert len(abi.X86_64_REGS) == 27
    assert regs.r15.offset == 0
    assert regs.rbp.offset == 32
    assert regs.orig_rax.offset == 120
    assert regs.rip.offset == 128
    assert regs.cs.offset == 136
    assert regs.rsp.offset == 152
    assert regs.gs.offset == 208


def test_aarch64_user_pt_regs_layout() -> None:
    regs = abi.UserRegsAarch64
    assert ctypes.sizeof(regs) == 272
    assert regs.regs.offset == 0
    assert regs.sp.offset == 248
    assert regs.pc.offset == 256
    assert regs.pstate.offset == 264


def test_iovec_and_request_numbers() -> None:
    assert ctypes.sizeof(abi.Iovec) == 16
    assert abi.Iovec.iov_len.offset == 8
    assert (abi.PTRACE_SEIZE, abi.PTRACE_INTERRUPT, abi.PTRACE_LISTEN) == (0x4206, 0x4207, 0x4208)
    assert (abi.PTRACE_DETACH, abi.PTRACE_GETREGS, abi.PTRACE_CONT) == (17, 12, 7)
    assert (abi.PTRACE_GETREGSET, abi.PTRACE_GETSIGINFO, abi.NT_PRSTATUS) == (0x4204, 0x4202, 1)
    assert (abi.WALL, abi.WNOTHREAD) == (0x40000000, 0x20000000)


def test_arch_selection() -> None:
    assert abi.arch_for("x86_64").regs_type is abi.UserRegsX86_64
    assert abi.arch_for("aarch64").regs_type is abi.UserRegsAarch64
    assert abi.arch_for("arm64") is abi.arch_for("aarch64")
    with pytest.raises(abi.UnsupportedMachine) as info:
        abi.arch_for("riscv64")
    assert info.value.strerror == (
        "ptrace sampling is not supported on riscv64; use --sampler perf"
    )


def test_frame_start_per_arch() -> None:
    x86 = abi.UserRegsX86_64(rip=0x401000, rbp=0x7FFC0000, cs=0x33)
    assert abi.arch_for("x86_64").frame(x86) == abi.WalkStart(0x401000, 0x7FFC0000, 8)
    compat = abi.UserRegsX86_64(rip=0x8048000, rbp=0xFFFF0000, cs=abi.X86_COMPAT_CS)
    assert abi.arch_for("x86_64").frame(compat).word == 4
    arm = abi.UserRegsAarch64(pc=0x400000)
    arm.regs[29] = 0xFFFFF000
    assert abi.arch_for("aarch64").frame(arm) == abi.WalkStart(0x400000, 0xFFFFF000, 8)


def test_stop_event_decoding() -> None:
    # waitpid status of a PTRACE_EVENT_STOP from PTRACE_INTERRUPT: SIGTRAP | 128 << 8.
    status = 0x7F | ((5 | abi.PTRACE_EVENT_STOP << 8) << 8)
    assert os.WIFSTOPPED(status)
    assert os.WSTOPSIG(status) == 5
    assert abi.stop_event(status) == abi.PTRACE_EVENT_STOP
    assert abi.stop_event(0x7F | (10 << 8)) == 0  # a signal-delivery-stop (SIGUSR1)


def test_ptrace_errors_raise_with_errno() -> None:
    # Nobody traces this process for us: every request on it is ESRCH.
    with pytest.raises(ProcessLookupError) as info:
        abi.cont(os.getpid())
    assert info.value.errno == errno.ESRCH
    with pytest.raises(ProcessLookupError):
        abi.getsiginfo(os.getpid())


def test_waitpid_without_tracees_is_echild() -> None:
    # From a fresh thread with __WNOTHREAD: no children, no tracees of its own.
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            abi.waitpid(-1, os.WNOHANG | abi.WNOTHREAD)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=wait)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], ChildProcessError)


def test_process_vm_readv_reads_the_readable_prefix() -> None:
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, 2 * page)
    region[:page] = bytes(range(256)) * (page // 256)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    assert abi.process_vm_readv(os.getpid(), base + 10, 6) == bytes(range(10, 16))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0  # PROT_NONE
    try:
        # Crosses into the protected page: the first page comes back, not EFAULT.
        got = abi.process_vm_readv(os.getpid(), base + page - 8, 64, page)
        assert got == region[page - 8 : page]
        with pytest.raises(OSError) as info:
            abi.process_vm_readv(os.getpid(), base + page, 16, page)
        assert info.value.errno == errno.EFAULT
    finally:
        libc.mprotect(ctypes.c_void_p(base + page), page, 3)
        del got
    region.close()


# --- the frame-pointer walk on a fake stack --------------------------------------------------


class FakeMemory:
    """A stack mapped at [MAPPED), zero but for ``words``; stands in for process_vm_readv."""

    MAPPED = range(0x7000, 0x20000)

    def __init__(self, words: dict[int, int]) -> None:
        self.words = words
        self.reads = 0

    def read(self, pid: int, address: int, length: int, page: int = 4096) -> bytes:
        self.reads += 1
        end = min(address + length, self.MAPPED.stop)
        if address not in self.MAPPED or end <= address:
            raise OSError(errno.EFAULT, "Bad address")
        return b"".join(struct.pack("<Q", self.words.get(at, 0)) for at in range(address, end, 8))


def chain(frames: list[tuple[int, int, int]]) -> dict[int, int]:
    """Words for frames given as (fp, next fp, return address)."""
    words: dict[int, int] = {}
    for fp, next_fp, ret in frames:
        words[fp], words[fp + 8] = next_fp, ret
    return words


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> FakeMemory:
    mem = FakeMemory({})
    monkeypatch.setattr(abi, "process_vm_readv", mem.read)
    return mem


def walk(fp: int, max_frames: int = sampler_mod.MAX_FRAMES) -> tuple[tuple[int, ...], bool]:
    return sampler_mod.walk_stack(1, abi.WalkStart(0x1000, fp, 8), 8, max_frames)


def test_walk_follows_the_chain_to_fp_zero(memory: FakeMemory) -> None:
    memory.words = chain([(0x7000, 0x7040, 0xA1), (0x7040, 0x7100, 0xA2), (0x7100, 0, 0xA3)])
    assert walk(0x7000) == ((0x1000, 0xA1, 0xA2, 0xA3), False)
    assert memory.reads == 1  # the whole chain was in one window


def test_walk_stops_when_fp_does_not_grow(memory: FakeMemory) -> None:
    memory.words = chain([(0x7000, 0x7040, 0xA1), (0x7040, 0x7040, 0xA2), (0x7100, 0, 0xA3)])
    assert walk(0x7000) == ((0x1000, 0xA1, 0xA2), False)
    memory.words = chain([(0x7000, 0x6F00, 0xA1)])
    assert walk(0x7000) == ((0x1000, 0xA1), False)


def test_walk_stops_at_misaligned_fp_and_zero_return(memory: FakeMemory) -> None:
    memory.words = chain([(0x7000, 0x7044, 0xA1)])
    assert walk(0x7000) == ((0x1000, 0xA1), False)
    assert walk(0x7004) == ((0x1000,), False)
    memory.words = chain([(0x7000, 0x7040, 0), (0x7040, 0, 0xA2)])
    assert walk(0x7000) == ((0x1000,), False)


def test_walk_reports_an_unreadable_frame(memory: FakeMemory) -> None:
    memory.words = chain([(0x7000, 0x900000, 0xA1)])  # the next frame is not mapped
    assert walk(0x7000) == ((0x1000, 0xA1), True)
    assert walk(0xDEAD000) == ((0x1000,), True)


def test_walk_reads_a_new_window_beyond_the_first(memory: FakeMemory) -> None:
    far = 0x7000 + 3 * sampler_mod.STACK_WINDOW
    memory.words = chain([(0x7000, far, 0xA1), (far, 0, 0xA2)])
    assert walk(0x7000) == ((0x1000, 0xA1, 0xA2), False)
    assert memory.reads == 2


def test_walk_is_bounded(memory: FakeMemory) -> None:
    memory.words = chain([(0x7000 + 16 * i, 0x7000 + 16 * (i + 1), 0xA0 + i) for i in range(200)])
    ips, cut = walk(0x7000)
    assert len(ips) == sampler_mod.MAX_FRAMES and not cut
    assert len(walk(0x7000, max_frames=5)[0]) == 5


def test_walk_32_bit_frames(memory: FakeMemory) -> None:
    # A 32-bit process's frame is two 4-byte words: [ebp] = caller's ebp, [ebp+4] = return.
    memory.words = {0x7000: 0x7010 | (0xB1 << 32), 0x7010: 0 | (0xB2 << 32)}
    assert sampler_mod.walk_stack(1, abi.WalkStart(0x8000, 0x7000, 4), 8) == (
        (0x8000, 0xB1, 0xB2),
        False,
    )


def test_orig_rax_minus_one_means_no_system_call() -> None:
    regs = abi.UserRegsX86_64()
    regs.orig_rax = (1 << 64) - 1  # what every non-syscall kernel entry stores
    assert sampler_mod._in_syscall(0, 0, regs) is None
    regs.orig_rax = 228  # clock_gettime
    assert sampler_mod._in_syscall(0, 0, regs) == 228


def test_syscall_file_names_the_call_a_sleeping_thread_is_in() -> None:
    import subprocess

    with subprocess.Popen(["sleep", "30"]) as child:
        try:
            deadline = time.monotonic() + 5.0
            nr = None
            while nr is None and time.monotonic() < deadline:
                nr = syscall_of(child.pid, child.pid)
                time.sleep(0.01)
            assert nr is not None and nr >= 0  # clock_nanosleep (or nanosleep)
        finally:
            child.kill()
    assert syscall_of(2**22 + 7, 1) is None  # no such process


def test_current_cpu_is_one_this_thread_may_run_on() -> None:
    cpu = abi.current_cpu()
    assert cpu is not None and cpu in os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        assert abi.current_cpu() == cpu
    finally:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))


def _taken(tid: int, queued: float | None, cpu: int | None, tracer_cpu: int | None):
    pending = sampler_mod._Pending("R", None, 10.0, cpu, tracer_cpu)
    return sampler_mod._Taken(tid, pending, None, 10.001, queued, None, None, None)  # type: ignore[arg-type]


def test_the_displaced_thread_was_queued_as_the_round_began_on_the_tracers_cpu() -> None:
    on_ours = _taken(1, 10.0, 0, 0)
    elsewhere = _taken(2, 10.0003, 1, 0)  # queued later, but on the other CPU
    assert sampler_mod._displaced([on_ours, elsewhere]) is on_ours
    assert sampler_mod._displaced([elsewhere]) is None
    waited = _taken(3, 9.99, 0, 0)  # queued well before the round: it was waiting
    assert sampler_mod._displaced([waited]) is None
    ran = _taken(4, None, 0, 0)  # never switched in before its stop: it was running
    assert sampler_mod._displaced([ran]) is None
    # Where a CPU is unknown, the time alone decides: the latest queued
    unknown = [_taken(5, 10.0001, None, 0), _taken(6, 10.0002, 1, None)]
    assert sampler_mod._displaced(unknown) is unknown[1]


def test_thread_states_say_which_cpu_a_running_thread_is_on() -> None:
    from livesym.target.threads import ThreadStates

    cpus = sorted(os.sched_getaffinity(0))
    pinned, stop, tids = cpus[-1], threading.Event(), []

    def spin() -> None:
        os.sched_setaffinity(0, {pinned})  # (0: the calling thread)
        tids.append(threading.get_native_id())
        while not stop.is_set():
            pass

    worker = threading.Thread(target=spin)
    worker.start()
    states = ThreadStates(os.getpid())
    try:
        deadline = time.monotonic() + 5.0
        while not tids and time.monotonic() < deadline:
            time.sleep(0.01)
        while states.state(tids[0]) != "R" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert states.cpu(tids[0]) == pinned
    finally:
        stop.set()
        worker.join()
        states.close()
