"""Off-CPU time read from /proc (``sampling.off_cpu_poll``): a blocked thread's call and
kernel stack as the kernel shows them (its wait channel); the reads' count of a thread's
time asleep against the kernel's own accounting (schedstat); threads that switch too
often for switch events handed over to the reads, and their waits still counted in full."""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from livesym.sampling.off_cpu_poll import WaitPoller
from livesym.sampling.perf_event import kernel_refused
from livesym.symbolize.kernel import KernelSymbols
from livesym.symbolize.syscalls import syscall_name
from livesym.target.blocked import PREEMPTED, BlockedCall, kernel_stack, read_call
from tests.support.capture_json import capture_json
from tests.support.phase_log import read_log, spent_between

RATE = 199


def schedstat(pid: int, tid: int) -> tuple[float, float]:
    """The thread's time run and time runnable, in seconds."""
    fields = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
    return int(fields[0]) / 1e9, int(fields[1]) / 1e9


def test_a_sleeping_program_s_call_and_kernel_stack_are_those_the_kernel_shows() -> None:
    # GIVEN sleep(1), asleep in its system call
    proc = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.3)
        # WHEN its call and kernel stack are read from /proc
        call = read_call(proc.pid, proc.pid)
        frames = kernel_stack(proc.pid, proc.pid)
        wchan = Path(f"/proc/{proc.pid}/wchan").read_text().strip()
    finally:
        proc.kill()
        proc.wait()
    # THEN the call is clock_nanosleep, entered from the stack pointer and address libc
    # called it with (not zero: a real call site)
    assert isinstance(call, BlockedCall), call
    assert syscall_name(call.nr) in ("clock_nanosleep", "nanosleep"), call
    assert call.sp > 0 and call.pc > 0
    if frames is None:
        pytest.skip("this user may not read a thread's kernel stack (root only)")
    # ... and its kernel stack's leaf is its wait channel (the kernel's first function
    # outside the scheduler), each frame placed by kallsyms at an address it names back
    assert frames and frames[0][0] == wchan, (frames, wchan)
    symbols = KernelSymbols()
    for name, offset in frames[:6]:
        start = symbols.address_of(name)
        assert start is not None, name
        found = symbols.lookup(start + offset)
        assert getattr(found, "name", None) == name, (name, found)


def test_a_running_thread_shows_no_call_and_a_preempted_one_where_it_was_preempted(
    run_target,
) -> None:
    # GIVEN three threads spinning in user code on two CPUs (crunch: no system calls)
    pid = run_target("crunch", "3", "1000000", "0").pid
    time.sleep(0.3)
    tids = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if int(t.name) != pid]
    assert len(tids) == 3
    # THEN none is in a call; a thread on a CPU has no kernel stack, and one waiting for
    # a CPU shows its way back to user code, where it was preempted: not a wait
    for _ in range(50):
        for tid in tids:
            assert read_call(pid, tid) == "running"
            frames = kernel_stack(pid, tid)
            assert not frames or frames[0][0].startswith(PREEMPTED), frames


def test_the_reads_count_a_thread_s_time_off_the_cpu_as_the_kernel_does(
    run_target, tmp_path
) -> None:
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"no register layout for {platform.machine()}")
    # GIVEN a thread that computes 10 ms, sleeps 20 ms in nanosleep, waits 10 ms on a
    # futex, each part's wall time measured by the program
    times = tmp_path / "times"
    pid = run_target("waits", "--times", str(times)).pid
    time.sleep(0.3)
    # WHEN it is read from /proc at 199 Hz for four seconds (a wait's end comes between
    # two reads, and the time from the last read to it goes to the wait found next: over
    # two seconds the nanosleep's share of the waits read 58.6-69.6 % where the program
    # measured 66.6 each time, 62.8-67.9 over four)
    poller = WaitPoller(pid, RATE, 16384)
    poller.follow({pid})
    start, (ran0, queued0) = time.monotonic(), schedstat(pid, pid)
    poller.start()
    time.sleep(4.0)
    poller.close()
    end, (ran1, queued1) = time.monotonic(), schedstat(pid, pid)
    taken, dropped = poller.take()
    samples = taken + poller.poll(time.monotonic(), final=True)
    assert dropped == 0
    # THEN its time off the CPU (asleep, and runnable) is what its schedstat leaves of the
    # wall time, within 3 % (the reads start once the thread has been read once)
    counted = sum(s.weight for s in samples) / RATE
    off = (end - start) - (ran1 - ran0)
    assert abs(counted - off) <= 0.03 * (end - start), (counted, off, queued1 - queued0)
    # ... and each sleep has its call's stack, nanosleep and the futex in the shares the
    # program measured over those seconds (two thirds and a third on an idle box), within
    # 8 points, none unread
    by_call: dict[str, int] = {}
    for s in samples:
        name = syscall_name(s.syscall) if s.syscall is not None else str(s.state.value)
        by_call[name] = by_call.get(name, 0) + s.weight
    asleep = sum(v for k, v in by_call.items() if k in ("clock_nanosleep", "futex"))
    assert asleep >= 0.9 * sum(by_call.values()), by_call
    time.sleep(0.1)  # (the cycle after ``end`` logged)
    _cpu, slept, waited = spent_between(read_log(times), start, end)
    measured = 100 * slept / (slept + waited)
    assert abs(100 * by_call.get("clock_nanosleep", 0) / asleep - measured) <= 5, (
        by_call,
        measured,
    )
    assert poller.unread == 0
    assert all(s.user_stack and s.user_regs for s in samples if s.syscall is not None)


@pytest.mark.skipif(kernel_refused() is not None, reason=f"switch events: {kernel_refused()}")
def test_threads_switching_too_often_for_events_are_read_and_their_waits_count_in_full(
    built, tmp_path
) -> None:
    # GIVEN two threads passing a byte through pipes with 2 us of work a turn: each
    # switches tens of thousands of times a second
    proc = subprocess.Popen([str(built("pingpong")), "100000000", "100", "2000"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    capture = tmp_path / "pp.lsym"
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        tids = [int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir()]
        # WHEN livesym records its wall time, and the kernel's counters are read over
        # two seconds of the session (its start and end left out: on a busy box they
        # change how the target runs)
        record = subprocess.Popen(
            [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(capture),
             "--sampler", "perf", "--mode", "wall", "--rate", str(RATE), "--duration", "4"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(1.5)
        t0, before = time.monotonic(), {tid: schedstat(proc.pid, tid) for tid in tids}
        time.sleep(2.0)
        t1, after = time.monotonic(), {tid: schedstat(proc.pid, tid) for tid in tids}
        _, err = record.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert record.returncode == 0, err
    doc: dict[str, Any] = capture_json(capture)
    # THEN both are read from /proc, and the header says so
    off_cpu = doc["sampler"]["off_cpu"]
    assert "2 threads switching faster read from /proc" in off_cpu, off_cpu
    # ... and each one's time off the CPU over those seconds (each off-CPU sample's span
    # cut to them) is what its schedstat leaves of them, within 5 points
    start = doc["session"]["start"]
    for tid in tids:
        off = 0.0
        for row in doc["samples"]:
            if row[1] == tid and row[3] & 1:  # off the CPU
                begins = start + row[0]
                ends = begins + (row[4] if len(row) > 4 else 1) / RATE
                off += max(0.0, min(ends, t1) - max(begins, t0))
        ran = after[tid][0] - before[tid][0]
        assert abs(off / (t1 - t0) - (1 - ran / (t1 - t0))) <= 0.05, (tid, off, ran, t1 - t0)
    # ... and their sleeps are the pipe's: read, in the kernel's pipe_read (on a busy box
    # much of their time off the CPU is waiting for one: counted apart, runnable)
    frames = {f["id"]: f["symbol"] or "" for f in doc["frames"]}
    leaves: dict[str, int] = {}
    for row in doc["samples"]:
        if row[3] & 1 and (row[3] >> 1) & 3 == 2:  # asleep (docs/capture-format.md)
            leaf = frames[doc["stacks"][row[2]][0]]
            leaves[leaf] = leaves.get(leaf, 0) + (row[4] if len(row) > 4 else 1)
    pipe = sum(v for k, v in leaves.items() if "pipe_read" in k)
    assert pipe >= 0.6 * sum(leaves.values()), sorted(leaves.items(), key=lambda kv: -kv[1])[:5]
