"""py-spy's speedscope output, as the py-spy sampler reads it: each thread's samples in
order, frames told apart as in the raw format, and hostile files refused in one line.
The documents have the shape py-spy 0.4 writes (``record --format speedscope --threads
--idle --native``: a ``thread (TID): NAME`` frame at each sample's root)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from livesym.sampling.pyspy_parse import NativeFrame, PyFrame
from livesym.sampling.pyspy_speedscope import SpeedscopeError, read_speedscope

FRAMES = [
    {"name": "thread (9170): crunch-0", "file": "", "line": 0, "col": None},
    {"name": "0x7f71cf7278ec", "file": "/usr/lib/x86_64-linux-gnu/libc.so.6", "line": 0},
    {"name": "Thread.run", "file": "/usr/lib/python3.11/threading.py", "line": 982},
    {"name": "crunch_work", "file": "/srv/pycrunch.py", "line": 29},
    {"name": "pthread_cond_timedwait", "file": "/usr/lib/x86_64-linux-gnu/libc.so.6",
     "line": 0},
    {"name": "thread (0x7f00deadbeef): helper", "file": "", "line": 0},
    {"name": 'process 42:"python app.py"', "file": "", "line": 0},
]  # fmt: skip


def document(profiles: list[list[list[int]]]) -> dict[str, Any]:
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": FRAMES},
        "profiles": [
            {"type": "sampled", "name": f"Thread {i}", "unit": "seconds", "startValue": 0,
             "endValue": len(p) / 99, "samples": p, "weights": [1 / 99] * len(p)}
            for i, p in enumerate(profiles)
        ],
    }  # fmt: skip


def test_each_threads_samples_come_in_order_leaf_first():
    running, waiting = [0, 1, 2, 3], [0, 1, 4]
    (run,) = read_speedscope(json.dumps(document([[running, running, waiting]])).encode())
    assert (run.tid, run.thread_name, run.thread_ident) == (9170, "crunch-0", None)
    assert [s.idle for s in run.stacks] == [False, False, True]
    assert run.stacks[0] is run.stacks[1]  # one object per distinct stack
    leaf, caller, native = run.stacks[0].frames
    assert leaf == PyFrame("crunch_work", "/srv/pycrunch.py", 29)
    assert caller == PyFrame("Thread.run", "/usr/lib/python3.11/threading.py", 982)
    assert native == NativeFrame(None, 0x7F71CF7278EC, "/usr/lib/x86_64-linux-gnu/libc.so.6")
    # The waiting stack's leaf is named: a libc wait (py-spy's line 0 is no line)
    assert run.stacks[2].frames[0] == NativeFrame(
        "pthread_cond_timedwait", None, "/usr/lib/x86_64-linux-gnu/libc.so.6"
    )


def test_a_pthread_id_and_a_process_frame_are_not_code():
    (run,) = read_speedscope(json.dumps(document([[[6, 5, 3]]])).encode())
    assert (run.tid, run.thread_ident, run.thread_name) == (None, 0x7F00DEADBEEF, "helper")
    (stack,) = run.stacks
    assert stack.pid == 42 and stack.frames == (PyFrame("crunch_work", "/srv/pycrunch.py", 29),)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "not JSON"),
        (b"[]", "top level"),
        (json.dumps({"shared": {}, "profiles": []}).encode(), "frame table"),
        (json.dumps(document([[[0, 99]]])).encode(), "does not exist"),
        (json.dumps(document([[[0, True]]])).encode(), "does not exist"),
        (json.dumps(document([[[0, -1]]])).encode(), "does not exist"),
        (json.dumps({"shared": {"frames": [{"name": 1}]}, "profiles": []}).encode(), "string"),
        (json.dumps({"shared": {"frames": FRAMES}, "profiles": [{"samples": 3}]}).encode(),
         "without samples"),
    ],
)  # fmt: skip
def test_what_is_not_pyspys_output_is_one_error(data: bytes, why: str):
    with pytest.raises(SpeedscopeError, match=why) as e:
        read_speedscope(data)
    assert "\n" not in str(e.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=30,
)  # fmt: skip


@given(doc=JSON, samples=st.lists(st.lists(st.integers(-2, 9), max_size=6), max_size=6))
def test_any_document_reads_or_is_refused_as_speedscope(doc: Any, samples: list[list[int]]):
    for candidate in (doc, document([samples]), {"shared": {"frames": doc}, "profiles": [doc]}):
        try:
            runs = read_speedscope(json.dumps(candidate).encode())
        except SpeedscopeError:
            continue
        assert all(isinstance(s.frames, tuple) for run in runs for s in run.stacks)
