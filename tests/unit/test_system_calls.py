"""System calls named from the machine's kernel headers, against the numbers a C
program compiled here sees; and the split of on-CPU samples by system time."""

from __future__ import annotations

import dataclasses
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from livesym.records import KIND_KERNEL, KIND_NATIVE, Reason
from livesym.symbolize.syscalls import (
    at_call_exit_record,
    syscall_frame_record,
    syscall_name,
    syscall_names,
)
from livesym.target.system_share import BACKLOG, CLOCK_TICKS, MAX_OWED_SECONDS, SystemTimeShare

CALLS = ("read", "write", "futex", "clock_nanosleep", "epoll_pwait", "restart_syscall")


def test_names_agree_with_the_numbers_a_compiled_program_sees(tmp_path: Path):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (install gcc)")
    if not syscall_names():
        pytest.skip(f"no kernel headers for {platform.machine()} (install linux-libc-dev)")
    source = tmp_path / "nr.c"
    source.write_text("#include <stdio.h>\n#include <sys/syscall.h>\nint main(void) {\n"
                      + "".join(f'printf("%d {c}\\n", SYS_{c});\n' for c in CALLS)
                      + "return 0;\n}\n")  # fmt: skip
    exe = tmp_path / "nr"
    subprocess.run(["cc", "-o", str(exe), str(source)], check=True, timeout=60)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        nr, name = line.split()
        assert syscall_name(int(nr)) == name


def test_a_call_no_table_names_is_shown_by_its_number():
    assert syscall_name(1 << 40) == f"system call {1 << 40}"
    record = syscall_frame_record(-5)
    assert record.demangled == "system call -5 (system call)" and record.kind == KIND_KERNEL
    # two calls are two frames, though neither has an address
    assert syscall_frame_record(0).key != syscall_frame_record(1).key
    assert syscall_frame_record(0).frame() != syscall_frame_record(1).frame()


def test_a_machine_without_headers_has_an_empty_table():
    assert syscall_names("no-such-machine") == {}


def ticks(seconds: float) -> int:
    return round(seconds * CLOCK_TICKS)


def test_samples_stand_for_kernel_time_in_the_share_of_system_time():
    # GIVEN a thread sampled at 100 Hz that spends 60 % of its time in the kernel
    share = SystemTimeShare(100)
    system, kernel = 0.0, 0
    share.is_kernel(7, ticks(system), True)  # the first sample starts the count
    for _ in range(1000):
        system += 0.006  # 60 % of each 10 ms
        kernel += share.is_kernel(7, ticks(system), True)
    # THEN 60 % of its samples are kernel time (ticks round system time: within 1 %)
    assert abs(kernel - 600) <= 10, kernel
    assert share.taken == kernel


def test_without_system_time_nothing_is_kernel_and_the_backlog_is_bounded():
    share = SystemTimeShare(100)
    assert not any(share.is_kernel(1, 0, True) for _ in range(100))
    assert not any(share.is_kernel(2, None, True) for _ in range(100))
    # a thread that gained 10 s of system time unsampled owes at most MAX_OWED_SECONDS
    share.is_kernel(3, 0, False)
    owed = [share.is_kernel(3, ticks(10), False) for _ in range(1000)]
    assert sum(owed) == int(MAX_OWED_SECONDS * 100 - BACKLOG) + 1


def test_stops_outside_a_system_call_wait_for_a_backlog():
    share = SystemTimeShare(100)
    share.is_kernel(4, 0, False)
    # one sample's worth owed: a stop in a call takes it, one outside does not
    assert not share.is_kernel(4, ticks(0.01), False)
    assert share.is_kernel(4, ticks(0.01), True)
    share.is_kernel(5, 0, False)
    assert share.is_kernel(5, ticks(BACKLOG / 100), False)


def test_the_details_of_a_system_call_say_what_it_is_not_an_address():
    from livesym.ui.chain import chain_lines

    lines = dict(chain_lines(syscall_frame_record(0), None))
    assert lines["system call"] == f"{syscall_name(0)} (system call)"
    assert "address" not in lines and "ptrace" in lines["note"]


def test_a_stop_at_a_call_s_exit_is_its_own_frame_saying_so():
    from livesym.ui.chain import chain_lines

    record = at_call_exit_record()
    frame = record.frame()
    assert frame.label == "[stopped at a system call's exit]" and not frame.resolved
    # not the frame of an unmapped address 0 (whose key is its address)
    unmapped = dataclasses.replace(record, kind=KIND_NATIVE, reason=Reason.UNMAPPED)
    assert record.key != unmapped.key and frame != unmapped.frame()
    lines = dict(chain_lines(record, None))
    assert lines["unknown"] == "stopped at a system call's exit" and "ptrace" in lines["note"]
