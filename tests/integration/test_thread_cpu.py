"""Threads' CPU and system time between looks, read from /proc of real processes: a
loop in system calls, a loop in user code and a sleeper, against what the kernel
says of the whole process over the same span."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from livesym.sampling.thread_cpu import ThreadCpu, read_ticks
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


@pytest.mark.parametrize("kind", ["kernel", "user"])
def test_cpu_and_system_time_of_each_thread(kind: str) -> None:
    with running(Path(sys.executable), "-c", LOOPS, kind) as proc:
        cpu = ThreadCpu(proc.pid)
        assert cpu.look() == (0.0, {})  # the first look starts the count
        time.sleep(1.5)
        span, times = cpu.look()
    assert 1.4 <= span <= 3.0
    busy, sleeper = times[proc.pid], [t for tid, t in times.items() if tid != proc.pid]
    assert len(sleeper) == 1 and sleeper[0].on_cpu < 0.05, sleeper
    # A busy thread on a 2-core machine beside the test: on a CPU most of the span
    assert 0.6 * span <= busy.on_cpu <= span + 0.05, (busy, span)
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
