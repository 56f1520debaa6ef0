"""Where a full stack copy ended, told from /proc/PID/maps (livesym.target.stack_extent),
on this process's own threads: a pthread blocked deep in C calls, one blocked near the
top of its stack, the heap, a library."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from livesym.target.stack_extent import (
    MAPS_AGE,
    TOP_SLACK,
    Mappings,
    StackExtents,
    ends_inside,
    main_stack,
)

COPY = 16 * 1024  # perf's first copy


def _stack_pointer(tid: int) -> int:
    """A thread's stack pointer while it blocks in a system call (/proc's ``syscall``:
    number, six arguments, stack pointer, program counter)."""
    with open(f"/proc/self/task/{tid}/syscall") as f:
        fields = f.read().split()
    assert len(fields) == 9, fields  # "running" for a thread not in a system call
    return int(fields[7], 16)


@contextmanager
def _blocked(depth: int) -> Iterator[int]:
    """A thread blocked in a wait under ``depth`` levels of C calling back into Python
    (each ``map`` step runs a new evaluation loop: about 1 KiB of C stack a level);
    yields its stack pointer."""
    ready, release = threading.Event(), threading.Event()
    tid: list[int] = []

    def down(n: int) -> None:
        if n:
            list(map(down, [n - 1]))
            return
        tid.append(threading.get_native_id())
        ready.set()
        release.wait()

    worker = threading.Thread(target=down, args=(depth,), daemon=True)
    worker.start()
    try:
        assert ready.wait(10)
        sp = _until(lambda: _stack_pointer(tid[0]))
        yield sp
    finally:
        release.set()
        worker.join(10)


def _until(read: Callable[[], int]) -> int:
    """``read()`` once the thread is in its wait's system call (it may still be on its
    way there)."""
    for _ in range(1000):
        try:
            return read()
        except AssertionError:
            threading.Event().wait(0.001)
    return read()


def test_a_thread_deep_in_c_calls_is_deeper_than_a_full_copy():
    with _blocked(100) as sp:
        stack = Mappings.read(os.getpid()).thread_stack(sp)
        assert stack is not None, "a pthread's stack: read-write, anonymous, above a guard"
        start, end = stack
        assert start <= sp < end and end - sp > COPY + TOP_SLACK
        assert ends_inside(stack, sp, COPY, main=False)
        # ... and a copy as long as the whole stack above the pointer is not short
        assert not ends_inside(stack, sp, end - sp, main=False)


def test_a_full_copy_of_a_shallow_thread_ran_on_past_its_stack():
    with _blocked(0) as sp:
        stack = Mappings.read(os.getpid()).thread_stack(sp)
        assert stack is not None
        assert stack[1] - sp < COPY  # its frames are fewer than a copy holds
        assert not ends_inside(stack, sp, COPY, main=False)


def test_the_heap_a_library_and_the_main_stack_are_no_thread_s_stack():
    pid = os.getpid()
    maps = Mappings.read(pid)
    heap = ctypes.addressof(ctypes.create_string_buffer(1 << 20))  # malloc: heap or mmap
    assert maps.thread_stack(heap) is None
    libc = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value
    assert libc is not None and maps.thread_stack(libc) is None
    main = main_stack(pid)
    assert main is not None and main[0] < main[1]
    assert maps.thread_stack(main[1] - 8) is None  # [stack] is named: not anonymous
    assert ends_inside(main, main[1] - 64, COPY, main=True)
    assert not ends_inside(main, main[1] + 64, COPY, main=True)
    assert not ends_inside(None, main[1] - 64, COPY, main=True)


def test_a_session_s_extents_place_each_thread_s_full_copies():
    """One session's view: each thread's stack found at its first full copy (the ids
    only key what was found); a stack the maps did not hold when read is looked for
    again once they are MAPS_AGE old."""
    extents = StackExtents(os.getpid())
    with _blocked(100) as deep:
        assert extents.ended_inside(1 << 30, deep, COPY)
        assert not extents.ended_inside(1 << 30, None, COPY)
        with _blocked(100) as later, _blocked(0) as shallow:
            time.sleep(MAPS_AGE)
            assert extents.ended_inside((1 << 30) + 1, later, COPY)
            assert not extents.ended_inside((1 << 30) + 2, shallow, COPY)
