"""py-spy's chrometrace output, as the mixed sampler reads it: each thread's Python stack
at every time py-spy saw it change, the thread's OS id and name from its root frame, the
closing events py-spy adds when it writes the file told apart from real changes, and
hostile files refused in one line. The events have the shape py-spy 0.4 writes
(``record --format chrometrace --threads --idle --nonblocking``); the integration tests
read real py-spy output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from livesym.sampling.pyspy_chrometrace import (
    MAX_DEPTH,
    ChrometraceError,
    read_chrometrace,
)
from livesym.sampling.pyspy_parse import PyFrame

PTHREAD = 140184588908224


def event(ph: str, ts: int, name: str, file: str = "", line: int = 0, tid: int = PTHREAD):
    return {"args": {"filename": file, "line": line}, "cat": "py-spy", "name": name,
            "ph": ph, "pid": 15357, "tid": tid, "ts": ts}  # fmt: skip


ROOT = "thread (15399): worker"
LOOP = ("loop", "/tmp/cz.py", 9)
COMP = ("comp", "/tmp/cz.py", 4)
HASH = ("hsh", "/tmp/cz.py", 6)


def trace(*events: dict[str, Any]) -> bytes:
    return json.dumps(list(events)).encode()


def frames(*names: tuple[str, str, int]) -> tuple[PyFrame, ...]:
    return tuple(PyFrame(n, f, line) for n, f, line in names)


def test_a_threads_stack_at_each_change_leaf_first_with_its_os_id_and_name():
    got = read_chrometrace(trace(
        event("B", 50023, ROOT), event("B", 50023, *LOOP), event("B", 50023, *COMP),
        # 15 ms later: comp returned, hsh called (ends leaf first, then begins)
        event("E", 64918, *COMP), event("B", 64918, *HASH),
        # back in loop alone, then py-spy writes the file: everything closed at 0.9 s
        event("E", 80000, *HASH),
        event("E", 900000, *LOOP), event("E", 900000, ROOT),
    ))  # fmt: skip
    (thread,) = got.threads
    assert (thread.key, thread.tid, thread.name) == (PTHREAD, 15399, "worker")
    assert thread.times == [0.050023, 0.064918, 0.08]
    assert thread.stacks == [frames(COMP, LOOP), frames(HASH, LOOP), frames(LOOP)]
    # The closing events say when py-spy stopped, not that the stack went away
    assert (got.first, got.end, got.unbalanced) == (0.050023, 0.9, 0)


def test_threads_interleave_and_each_keeps_its_own_stack():
    other = 7777
    got = read_chrometrace(trace(
        event("B", 10, ROOT), event("B", 10, *LOOP),
        event("B", 12, "thread (15357): MainThread", tid=other),
        event("B", 12, "<module>", "/tmp/cz.py", 13, tid=other),
        event("B", 20, *COMP),
        event("E", 30, "<module>", "/tmp/cz.py", 13, tid=other),
        event("E", 40, *COMP), event("B", 40, *HASH),
        event("E", 90, *HASH), event("E", 90, *LOOP), event("E", 90, ROOT),
        event("E", 90, "thread (15357): MainThread", tid=other),
    ))  # fmt: skip
    worker, main = got.threads
    assert worker.times == [10e-6, 20e-6, 40e-6]
    assert worker.stacks == [frames(LOOP), frames(COMP, LOOP), frames(HASH, LOOP)]
    assert (main.tid, main.name, main.times) == (15357, "MainThread", [12e-6, 30e-6])
    assert main.stacks == [frames(("<module>", "/tmp/cz.py", 13)), ()]


def test_a_last_change_that_only_ends_frames_is_taken_for_the_closing_one():
    # py-spy's own closing events cannot be told from a final "return" at that same
    # time; a change at an earlier time is never mistaken for them
    got = read_chrometrace(trace(
        event("B", 10, ROOT), event("B", 10, *LOOP), event("B", 10, *COMP),
        event("E", 20, *COMP), event("E", 30, *LOOP), event("E", 30, ROOT),
    ))  # fmt: skip
    assert got.threads[0].stacks == [frames(COMP, LOOP), frames(LOOP)]
    assert got.end == 30e-6


def test_ends_without_a_begin_are_counted_and_skipped():
    got = read_chrometrace(trace(event("E", 5, *COMP), event("B", 10, ROOT)))
    assert got.unbalanced == 1
    assert got.threads[0].tid == 15399


def test_a_thread_py_spy_knew_only_by_its_pthread_id_has_no_os_id():
    got = read_chrometrace(trace(event("B", 1, "thread (0x7f00deadbeef)"), event("B", 1, *LOOP),
                                 event("B", 2, *COMP)))  # fmt: skip
    assert (got.threads[0].tid, got.threads[0].name) == (None, None)


def test_an_empty_trace_has_no_threads_and_no_times():
    got = read_chrometrace(b"[]")
    assert (got.threads, got.first, got.end) == ((), None, None)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"{", "not JSON"),
        (b'{"traceEvents": []}', "not a list of events"),
        (b"[1]", "an event is not an object"),
        (json.dumps([{"ph": "B", "ts": 1, "tid": 1}]).encode(), "without a time"),
        (json.dumps([{"ph": "X", "ts": 1, "tid": 1, "name": "f"}]).encode(), "without a time"),
        (json.dumps([{"ph": "B", "ts": "1", "tid": 1, "name": "f"}]).encode(), "without a time"),
        (json.dumps([event("B", 1, "f", 5, 3)]).encode(), "file or line"),  # type: ignore[arg-type]
        (json.dumps([event("B", 1, "f", "x.py", "3")]).encode(), "file or line"),  # type: ignore[arg-type]
    ],
)
def test_anything_else_is_one_error(data: bytes, message: str):
    with pytest.raises(ChrometraceError, match=message):
        read_chrometrace(data)


def test_a_stack_deeper_than_the_bound_is_refused():
    deep = [event("B", 1, f"f{i}", "/x.py", i + 1) for i in range(MAX_DEPTH + 1)]
    with pytest.raises(ChrometraceError, match="deeper than"):
        read_chrometrace(trace(*deep))


@given(st.lists(st.tuples(st.sampled_from("BE"), st.integers(0, 50), st.integers(1, 3),
                          st.sampled_from(["f", "g", ROOT])), max_size=60))  # fmt: skip
def test_any_sequence_of_well_formed_events_reads_without_error(spec):
    events = [event(ph, ts, name, "" if name == ROOT else "/a.py", 1, tid=tid)
              for ph, ts, tid, name in sorted(spec, key=lambda e: e[1])]  # fmt: skip
    got = read_chrometrace(trace(*events))
    for thread in got.threads:
        assert thread.times == sorted(set(thread.times))
        assert len(thread.times) == len(thread.stacks)
