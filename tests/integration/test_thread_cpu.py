"""Threads' CPU and system time between looks, read from /proc of real processes: a
loop in system calls, a loop in user code and a sleeper, against what the kernel
says of the whole process over the same span."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from livesym.target.thread_cpu import ThreadCpu, read_ticks
from tests.support.procs import running

LOOPS = """
import os, sys, threading, time
def in_the_kernel():
    fd = os.open("/dev/zero", os.O_RDONLY)
    while True:
        os.read(fd, 1 << 16)
def sleeper():
    while True:
        time.sleep(1)
threading.Thread(target=sleeper, daemon=True).start()
kind = sys.argv[1]
print("ready", os.getpid(), flush=True)
if kind == "kernel":
    in_the_kernel()
while True:
    sum(range(10000))
"""


def process_times(pid: int) -> tuple[float, float]:
    """(user, system) seconds of the whole process, as its /proc/PID/stat says."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks  # utime, stime


@pytest.mark.parametrize("kind", ["kernel", "user"])
def test_cpu_and_system_time_of_each_thread(kind: str) -> None:
    with running(Path(sys.executable), "-c", LOOPS, kind) as proc:
        cpu = ThreadCpu(proc.pid)
        before = process_times(proc.pid)
        assert cpu.look() == (0.0, {})  # the first look starts the count
        time.sleep(1.5)
        span, times = cpu.look()
        after = process_times(proc.pid)
    assert 1.4 <= span <= 3.0
    busy, sleeper = times[proc.pid], [t for tid, t in times.items() if tid != proc.pid]
    assert len(sleeper) == 1 and sleeper[0].on_cpu < 0.05, sleeper
    # The threads' times add up to what the kernel says of the whole process over the
    # same span (its user and system ticks: a tick each side per thread, and the reads
    # a few milliseconds apart), whatever CPU the busy thread got beside other load
    user, system = (b - a for a, b in zip(before, after, strict=True))
    slack = 2 * len(times) * 0.01 + 0.05
    on_cpu = sum(t.on_cpu for t in times.values())
    assert abs(on_cpu - (user + system)) <= slack, (times, user, system)
    assert abs(sum(t.system for t in times.values()) - system) <= slack, (times, system)
    assert busy.on_cpu >= 0.2 * span, (busy, span)  # it ran (on a CPU of two, beside load)
    share = busy.system / busy.on_cpu
    if kind == "kernel":
        assert share >= 0.5, busy  # /dev/zero's 64 KiB reads are the kernel's work
    else:
        assert share <= 0.1, busy


def test_a_thread_that_is_gone_has_no_counters() -> None:
    with running(Path(sys.executable), "-c", LOOPS, "user") as proc:
        pid = proc.pid
        cpu = ThreadCpu(pid)
        cpu.look()
        assert read_ticks(pid, pid) is not None
    assert read_ticks(pid, pid) is None
    span, times = cpu.look()
    assert span > 0 and times == {}
