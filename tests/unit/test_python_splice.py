"""Mixed stacks: a thread's Python frames put in place of the interpreter's evaluation
loop frames, as py-spy merges its own ``--native`` stacks, and the Python stack of a
perf sample's moment looked up in py-spy's timelines. The native frames are the names
an unwound CPython 3.11 stack has (``perf record --call-graph dwarf`` on python3.11
shows the same chain); the integration tests run the whole thing on real processes."""

from __future__ import annotations

import pytest

from livesym.frames.python_splice import Role, role_of, splice
from livesym.records import PYTHON_UNREAD
from livesym.sampling.mixed import PythonStacks, clock_start
from livesym.sampling.pyspy_chrometrace import ThreadTimeline, Timelines
from livesym.sampling.pyspy_parse import PyFrame

PY = "/usr/bin/python3.11"
LIBPY = "/opt/py/lib/libpython3.11.so.1.0"
ZLIB = "/usr/lib/python3.11/lib-dynload/zlib.cpython-311-x86_64-linux-gnu.so"
LIBZ = "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


@pytest.mark.parametrize(
    "symbol, path, role",
    [
        ("_PyEval_EvalFrameDefault", PY, Role.EVAL),
        ("_PyEval_EvalFrameDefault.cold", LIBPY, Role.EVAL),
        ("PyEval_EvalFrameEx", LIBPY, Role.EVAL),
        ("PyEval_EvalCode", LIBPY, Role.INTERPRETER),
        ("_PyObject_MakeTpCall", PY, Role.INTERPRETER),
        ("cfunction_vectorcall_FASTCALL_KEYWORDS", LIBPY, Role.INTERPRETER),
        (None, LIBPY, Role.INTERPRETER),  # unnamed interpreter code
        ("time_sleep", PY, Role.OTHER),  # what the program waits for: kept (py-spy's list)
        ("thread_run", LIBPY, Role.OTHER),
        ("PyThread_acquire_lock_timed", LIBPY, Role.OTHER),
        ("take_gil", LIBPY, Role.OTHER),  # waiting for the GIL: kept, as a lock is
        ("PyEval_RestoreThread", PY, Role.OTHER),
        ("PyEval_SaveThread", PY, Role.INTERPRETER),
        ("sre_ucs1_search", PY, Role.OTHER),
        ("zlib_compress", ZLIB, Role.OTHER),  # an extension module is not the interpreter
        ("_PyEval_EvalFrameDefault", LIBZ, Role.OTHER),  # nor is a name alone
        ("deflate", LIBZ, Role.OTHER),
        ("main", "/usr/bin/python3.11-config", Role.OTHER),
    ],
)
def test_the_role_of_a_native_frame(symbol, path, role):
    assert role_of(symbol, path) is role


EV, IN, OT = Role.EVAL, Role.INTERPRETER, Role.OTHER


def test_a_c_extension_under_one_loop_frame_gets_every_python_frame_there():
    native = [
        "deflate_slow",
        "deflate",
        "zlib_compress",
        "cfunction_vectorcall",
        "_PyEval",
        "PyEval_EvalCode",
        "Py_RunMain",
        "main",
        "__libc_start_main",
        "_start",
    ]
    roles = [OT, OT, OT, IN, EV, IN, IN, OT, OT, OT]
    python = ["pack_it", "<module>"]
    assert splice(native, roles, python, "?") == [
        "deflate_slow", "deflate", "zlib_compress", "pack_it", "<module>", "main",
        "__libc_start_main", "_start",
    ]  # fmt: skip


def test_several_loop_frames_inner_ones_take_one_frame_the_outermost_the_rest():
    # A thread: thread_run -> (eval: _bootstrap .. run) -> PyObject_Call -> (eval: loop ..
    # comp) -> zlib. The calls between loop frames are the interpreter's: left out, so
    # where the Python frames split does not show.
    native = [
        "deflate",
        "zlib_compress",
        "_PyEval",
        "PyObject_Call",
        "_PyEval",
        "thread_run",
        "start_thread",
        "clone3",
    ]
    roles = [OT, OT, EV, IN, EV, OT, OT, OT]
    python = ["comp", "loop", "Thread.run", "_bootstrap_inner", "_bootstrap"]
    assert splice(native, roles, python, "?") == [
        "deflate", "zlib_compress", "comp", "loop", "Thread.run", "_bootstrap_inner",
        "_bootstrap", "thread_run", "start_thread", "clone3",
    ]  # fmt: skip


def test_a_c_extension_between_loop_frames_stays_between_them():
    native = ["callback_leaf", "_PyEval", "ffi_closure", "_PyEval", "main"]
    roles = [OT, EV, OT, EV, OT]
    assert splice(native, roles, ["cb", "caller", "<module>"], "?") == [
        "callback_leaf", "cb", "ffi_closure", "caller", "<module>", "main",
    ]  # fmt: skip


def test_fewer_python_frames_than_loop_frames_leave_the_outermost_one():
    native = ["leaf", "_PyEval", "_PyEval", "_PyEval", "main"]
    assert splice(native, [OT, EV, EV, EV, OT], ["only"], "?") == ["leaf", "only", "main"]
    assert splice(native, [OT, EV, EV, EV, OT], ["a", "b"], "?") == ["leaf", "a", "b", "main"]


def test_loop_frames_without_python_frames_get_the_unread_mark_once():
    native = ["leaf", "_PyEval", "PyObject_Call", "_PyEval", "main"]
    assert splice(native, [OT, EV, IN, EV, OT], [], "unread") == ["leaf", "unread", "main"]


def test_a_stack_cut_before_any_loop_frame_keeps_its_python_frames_after_it():
    # py-spy's rule: nothing is lost where the native stack ends early
    native = ["hot_c", "[stack ends early]"]
    assert splice(native, [OT, OT], ["f", "<module>"], "?") == [
        "hot_c", "[stack ends early]", "f", "<module>",
    ]  # fmt: skip


def test_a_thread_that_runs_no_python_gets_no_mark():
    # a C library's own thread: py-spy never saw it, and it has no loop frame to stand for
    native = ["worker_loop", "start_thread", "clone3"]
    assert splice(native, [OT, OT, OT], ["unread"], "unread") == native


def test_the_unread_mark_is_a_place_not_known_with_its_reason():
    frame = PYTHON_UNREAD.frame()
    assert frame.kind == "unknown" and frame.reason is not None
    assert frame.reason.value == "python_unread"


# -- the Python stack of a moment ------------------------------------------------------


def timelines(first: float, end: float, *threads: ThreadTimeline) -> Timelines:
    return Timelines(threads, first, end)


def thread(tid: int | None, times: list[float], *stacks: tuple[str, ...], name: str = "w"):
    frames = [tuple(PyFrame(f, "/a.py", 1) for f in stack) for stack in stacks]
    return ThreadTimeline(key=1, tid=tid, name=name, times=times, stacks=frames)


def names(found):
    assert found is not None
    return [r.symbol for r in found[0]]


def test_a_moment_gets_the_last_stack_seen_at_or_before_it_in_a_window_that_ran_then():
    stacks = PythonStacks()
    # py-spy started at 100.0 s; it first looked 0.02 s later and wrote at 102.0 s
    stacks.add(100.0, timelines(0.02, 2.0, thread(7, [0.02, 0.5], ("a", "main"), ("b", "main"))))
    assert stacks.covered == 102.0
    assert stacks.at(7, 100.01) is None  # before it looked
    assert names(stacks.at(7, 100.02)) == ["a", "main"]
    assert names(stacks.at(7, 100.49)) == ["a", "main"]
    assert names(stacks.at(7, 101.9)) == ["b", "main"]  # unchanged since 100.5
    assert stacks.at(7, 102.1) is None  # after it ended
    assert stacks.at(8, 101.0) is None  # a thread it never saw
    assert stacks.at(7, 101.0)[1] == "w"  # the threading name


def test_overlapping_windows_give_the_latest_sighting():
    stacks = PythonStacks()
    stacks.add(100.0, timelines(0.0, 2.0, thread(7, [0.0, 1.0], ("a",), ("b",))))
    # the next run starts during the hand-over and sees "c" at 101.8
    stacks.add(101.5, timelines(0.1, 2.0, thread(7, [0.1, 0.3], ("b",), ("c",))))
    assert names(stacks.at(7, 101.7)) == ["b"]
    assert names(stacks.at(7, 101.9)) == ["c"]  # the new run's sighting is the later one
    assert stacks.covered == 103.5


def test_a_windows_clock_starts_no_earlier_than_its_spawn_nor_its_end_before_its_sigint():
    assert clock_start(100.0, None, 1.5) == 100.0  # not told to stop: the spawn is all
    assert clock_start(100.0, 101.6, None) == 100.0  # nothing written
    # ended 1.5 s into its clock, after the SIGINT at 101.6: started at 100.1 at the earliest
    assert clock_start(100.0, 101.6, 1.5) == pytest.approx(100.1)
    assert clock_start(100.0, 101.4, 1.5) == 100.0  # a later write says nothing more


def test_a_hand_over_after_a_slow_start_leaves_no_moment_unseen():
    # Window A, spawned at 100.0, started its clock at 100.1 (a saturated box); window B,
    # spawned at 101.6, at 101.605, looked from 0.025 on its clock (101.63) and said it
    # samples at 101.65; A, told to stop at 101.66, wrote at 1.57 on its clock (101.67).
    # Anchored at its spawn, A's span would end at 101.57 and B's begin at 101.625: the
    # moments between them no window saw.
    stacks = PythonStacks()
    a = timelines(0.02, 1.57, thread(7, [0.02], ("a",)))
    b = timelines(0.025, 2.0, thread(7, [0.025], ("b",)))
    stacks.add(clock_start(100.0, 101.66, a.end), a)
    stacks.add(clock_start(101.6, None, b.end), b)
    for moment in (101.0, 101.56, 101.58, 101.6, 101.62, 101.64, 101.66, 102.0):
        assert stacks.at(7, moment) is not None, moment
    assert names(stacks.at(7, 101.6)) == ["a"]
    assert names(stacks.at(7, 101.64)) == ["b"]


def test_a_thread_without_an_os_id_cannot_be_paired():
    stacks = PythonStacks()
    stacks.add(0.0, timelines(0.0, 1.0, thread(None, [0.0], ("a",))))
    assert stacks.at(0, 0.5) is None


# -- perf's samples held until py-spy's windows cover them ---------------------------


def held_sampler(collected: list):
    import os

    from livesym.sampling.mixed import MixedSampler

    sampler = MixedSampler(os.getpid(), 99)
    sampler._sink = collected.extend
    return sampler


def perf_sample(when: float, tid: int = 7, stack: int = 4096):
    from livesym.sampling.base import Sample

    return Sample(time=when, pid=1, tid=tid, ips=(0x1000,), user_stack=bytes(stack))


def test_perf_samples_wait_for_the_window_that_covers_them_then_get_its_python_frames():
    collected: list = []
    sampler = held_sampler(collected)
    sampler._hold([perf_sample(100.5), perf_sample(101.5), perf_sample(102.5)])
    assert collected == []  # no window has ended yet
    sampler.stacks.add(100.0, timelines(0.0, 2.0, thread(7, [0.0, 1.0], ("a",), ("b",))))
    sampler._release()
    assert [[r.symbol for r in s.python] for s in collected] == [["a"], ["b"]]
    assert collected[0].thread_name == "w"
    sampler._release(final=True)  # the session ended: the last one goes on, unread
    assert collected[-1].python == (PYTHON_UNREAD,)


def test_too_many_stack_bytes_waiting_send_the_oldest_on_unread_and_say_so(monkeypatch):
    import livesym.sampling.mixed as mixed

    monkeypatch.setattr(mixed, "MAX_HELD_BYTES", 3 * 4096)
    collected: list = []
    sampler = held_sampler(collected)
    sampler._hold([perf_sample(100.0 + i / 100) for i in range(5)])
    assert len(collected) == 2 and all(s.python == (PYTHON_UNREAD,) for s in collected)
    assert sampler._held_bytes == 3 * 4096
    assert sum("MiB of stacks waited for py-spy" in e for e in sampler.stats.errors) == 1
