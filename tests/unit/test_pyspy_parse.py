"""py-spy's raw output parsed into frames: recorded outputs of py-spy 0.4.3, and edge cases.

The files in tests/data/pyspy/ are py-spy's stdout (``record --format raw
--output /dev/stdout``, through a pipe) and stderr, verbatim, recorded against
sample_targets/pyload.py under CPython 3.11.7 (threads: MainThread, pyhot,
cext). No py-spy is needed to run these tests.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import livesym.sampling.pyspy as pyspy
from livesym.errors import TargetError
from livesym.records import KIND_PYTHON, FrameRecord
from livesym.sampling.pyspy import (
    PySpySampler,
    _first_error_line,
    _remedy,
    _Window,
    object_for_source,
    sample_frames,
)
from livesym.sampling.pyspy_parse import (
    NativeFrame,
    ParsedStack,
    PyFrame,
    RawParser,
    looks_idle,
    parse_frame,
    parse_raw,
    parse_stack_line,
    python_leaf_if_stopped_in_syscall,
)
from livesym.target.cpython_files import runs_cpython
from livesym.target.permissions import denied_remedy
from livesym.target.syscall_exits import SYSCALL_INSTRUCTIONS, SyscallExits

DATA = Path(__file__).resolve().parent.parent / "data" / "pyspy"
RECORDED = [
    "native_idle_threads.txt",  # --native --idle --threads, 20 Hz, 1 s
    "native_full_filenames.txt",  # --native --threads --full-filenames
    "python_only.txt",  # --threads --full-filenames
    "no_threads.txt",  # no --threads
    "target_exited.txt",  # pyload exited during the window
    "interrupted.txt",  # py-spy got SIGINT mid-window
]
THREADS = {"MainThread", "pyhot", "cext"}


def load(name: str) -> tuple[list[ParsedStack], str]:
    text = (DATA / name).read_text()
    stacks, _ = parse_raw(text)
    return stacks, text


def py_names(stack: ParsedStack) -> list[str]:
    return [f.function for f in stack.frames if isinstance(f, PyFrame)]


# --------------------------------------------------------------------- recorded output


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_output_parses_completely(name: str) -> None:
    stacks, summary = parse_raw((DATA / name).read_text())
    assert summary.garbage == 0, summary.garbage_examples
    assert summary.attached
    assert stacks
    # py-spy's own count of samples is what the lines add up to.
    assert summary.reported_samples == summary.samples == sum(s.count for s in stacks)
    assert summary.reported_errors == 0
    assert all(s.count >= 1 and s.frames for s in stacks)


@pytest.mark.parametrize("name", [n for n in RECORDED if n != "no_threads.txt"])
def test_threads_have_os_ids_and_names(name: str) -> None:
    stacks, _ = load(name)
    by_name: dict[str, set[int]] = {}
    for s in stacks:
        assert s.tid is not None and s.thread_name is not None
        by_name.setdefault(s.thread_name, set()).add(s.tid)
    assert set(by_name) <= THREADS
    assert all(len(tids) == 1 for tids in by_name.values())  # one OS tid per thread
    assert {"pyhot", "cext"} <= set(by_name)


def test_without_threads_there_is_no_thread_frame() -> None:
    stacks, _ = load("no_threads.txt")
    assert all(s.tid is None and s.thread_name is None for s in stacks)
    assert all(isinstance(s.frames[-1], PyFrame) for s in stacks)


@pytest.mark.parametrize("name", RECORDED)
def test_frames_are_leaf_first(name: str) -> None:
    stacks, _ = load(name)
    for s in stacks:
        names = py_names(s)
        if "py_hot_a" in names:
            assert names[0] == "py_hot_a"  # nothing Python below the hot function
            assert names.index("py_hot_a") < names.index("_periodic") < names.index("pyhot_main")
        if s.thread_name in ("pyhot", "cext") and "Thread._bootstrap" in names:
            assert names[-1] == "Thread._bootstrap"  # the thread's root, last


def test_python_frames_have_file_and_line() -> None:
    stacks, _ = load("python_only.txt")
    hot = [f for s in stacks for f in s.frames if isinstance(f, PyFrame)]
    assert hot and all(isinstance(f, PyFrame) for s in stacks for f in s.frames)
    a = next(f for f in hot if f.function == "py_hot_a")
    assert a.file.endswith("/sample_targets/pyload.py") and a.file.startswith("/")
    assert a.line is not None and a.line > 0
    boot = next(f for f in hot if f.function == "Thread._bootstrap")
    assert boot.file.endswith("/threading.py")


def test_native_frames_keep_raw_addresses_and_modules() -> None:
    stacks, _ = load("native_full_filenames.txt")
    native = [f for s in stacks for f in s.frames if isinstance(f, NativeFrame)]
    raw = [f for f in native if f.address is not None]
    assert raw
    for f in raw:
        assert f.name is None
        assert f.address is not None and f.address > 0x1000
        assert f.module is not None and (f.module.startswith("/") or f.module == "[vdso]")
    named = {f.name: f for f in native if f.name is not None}
    # A frame py-spy found in a module's symbols (no debug info): the module path.
    thread_run = named["thread_run"]
    assert thread_run.module is not None and "libpython3.11.so" in thread_run.module
    assert thread_run.address is None and thread_run.line is None
    # One with debug info: the source position instead of the module.
    json = [f for f in native if f.file is not None and f.file.endswith("_json.c")]
    assert json and all(f.line and f.module is None for f in json)


def test_c_extension_frames_sit_between_python_frames() -> None:
    stacks, _ = load("native_idle_threads.txt")
    hashing = [s for s in stacks if any(f.name == "SHA256_Update" for f in native_of(s))]
    assert hashing
    for s in hashing:
        kinds = [type(f).__name__ for f in s.frames]
        names = [f.function if isinstance(f, PyFrame) else f.name for f in s.frames]
        sha = names.index("SHA256_Update")
        c_hash = names.index("c_hash")
        assert sha < c_hash and kinds[c_hash] == "PyFrame"
        assert all(k == "NativeFrame" for k in kinds[:c_hash])  # libcrypto, _hashlib above


def native_of(stack: ParsedStack) -> list[NativeFrame]:
    return [f for f in stack.frames if isinstance(f, NativeFrame)]


def test_idle_stacks_are_recognised() -> None:
    stacks, _ = load("native_idle_threads.txt")
    main = [s for s in stacks if s.thread_name == "MainThread"]
    assert main and all(s.idle for s in main)  # sleeping in time.sleep
    running = [s for s in stacks if "py_hot_a" in py_names(s) and isinstance(s.frames[0], PyFrame)]
    assert running and not any(s.idle for s in running)
    sha = [s for s in stacks if any(f.name == "SHA256_Update" for f in native_of(s))]
    assert sha and not any(s.idle for s in sha)
    # Waiting for the GIL after hashing: pthread_cond_timedwait in _hashlib.
    gil = [
        s
        for s in stacks
        if any(f.name == "pthread_cond_timedwait" for f in native_of(s)) and "c_hash" in py_names(s)
    ]
    assert gil and all(s.idle for s in gil)


def test_end_messages() -> None:
    _, exited = parse_raw((DATA / "target_exited.txt").read_text())
    assert exited.target_exited and not exited.interrupted
    _, stopped = parse_raw((DATA / "interrupted.txt").read_text())
    assert stopped.interrupted and not stopped.target_exited
    _, full = parse_raw((DATA / "python_only.txt").read_text())
    assert not full.target_exited and not full.interrupted
    assert any(m.startswith("Sampling process 20 times a second") for m in full.messages)


# ------------------------------------------------------------------------ frames by hand


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("py_hot_a (/srv/app.py:12)", PyFrame("py_hot_a", "/srv/app.py", 12)),
        ("Thread.run (threading.py:982)", PyFrame("Thread.run", "threading.py", 982)),
        ("f (app.py)", PyFrame("f", "app.py", None)),  # line 0 is printed without a line
        ("<module> (<string>:1)", PyFrame("<module>", "<string>", 1)),
        (
            "_call_with_frames_removed (<frozen importlib._bootstrap>:241)",
            PyFrame("_call_with_frames_removed", "<frozen importlib._bootstrap>", 241),
        ),
        ("cy_func (pkg/mod.pyx:40)", PyFrame("cy_func", "pkg/mod.pyx", 40)),
        ("lambda_ (/a (old)/x.py:3)", PyFrame("lambda_", "/a (old)/x.py", 3)),
        ("<lambda> (x.py:7)", PyFrame("<lambda>", "x.py", 7)),
        ("no_file", PyFrame("no_file", "", None)),
        (
            "0x7f098ab278ec (/usr/lib/x86_64-linux-gnu/libc.so.6)",
            NativeFrame(None, 0x7F098AB278EC, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        ),
        ("0x7f098ab278ec (libc.so.6)", NativeFrame(None, 0x7F098AB278EC, "libc.so.6")),
        ("0x55d0c0ffee (?)", NativeFrame(None, 0x55D0C0FFEE, None)),
        ("0x7fff5a1be1 ([vdso])", NativeFrame(None, 0x7FFF5A1BE1, "[vdso]")),
        ("SHA256_Update (libcrypto.so.3)", NativeFrame("SHA256_Update", None, "libcrypto.so.3")),
        ("main (?)", NativeFrame("main", None, None)),
        (
            "encoder_call (_json.c:1305)",
            NativeFrame("encoder_call", None, None, file="_json.c", line=1305),
        ),
        (
            "(anonymous namespace)::run (libfoo.so)",
            NativeFrame("(anonymous namespace)::run", None, "libfoo.so"),
        ),
        (
            "std::vector<int>::push_back (/usr/include/c++/12/bits/stl_vector.h:1287)",
            NativeFrame(
                "std::vector<int>::push_back",
                None,
                None,
                file="/usr/include/c++/12/bits/stl_vector.h",
                line=1287,
            ),
        ),
        ("weird (lib (unbalanced.so)", NativeFrame("weird (lib", None, "unbalanced.so")),
    ],
)
def test_parse_frame(text: str, expected: object) -> None:
    assert parse_frame(text) == expected


def test_thread_frame_forms() -> None:
    s = parse_stack_line("thread (0x7F3A1C0FF640): worker;f (a.py:1) 2")
    assert s is not None
    assert (s.tid, s.thread_ident, s.thread_name) == (None, 0x7F3A1C0FF640, "worker")
    s = parse_stack_line("thread (4242);f (a.py:1) 1")
    assert s is not None and (s.tid, s.thread_name) == (4242, None)
    s = parse_stack_line("thread (4242): Thread-1 (work);f (a.py:1) 1")
    assert s is not None and (s.tid, s.thread_name) == (4242, "Thread-1 (work)")


def test_process_frames_with_semicolons_in_the_command_line() -> None:
    line = 'process 77:"python -c import a; a.run()";thread (78): MainThread;run (a.py:3) 5'
    s = parse_stack_line(line)
    assert s is not None
    assert (s.pid, s.tid, s.thread_name, s.count) == (77, 78, "MainThread", 5)
    assert s.frames == (PyFrame("run", "a.py", 3),)
    nested = 'process 1:"init";process 2:"child";thread (3): T;f (b.py:9) 1'
    s = parse_stack_line(nested)
    assert s is not None and s.pid == 2 and s.tid == 3


def test_a_thread_with_no_frames_is_kept() -> None:
    s = parse_stack_line("thread (9): starting 1")
    assert s is not None and s.tid == 9 and s.frames == () and not s.idle


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "garbage",
        "stack",
        "f (a.py:1)",  # no count
        "f (a.py:1) 0",  # py-spy never writes 0
        "f (a.py:1) -3",
        "f (a.py:1) x",
        "12",  # a count with no stack
        " 12",
        "f (a.py:1)\t7",
    ],
)
def test_garbage_lines_are_not_stacks(line: str) -> None:
    assert parse_stack_line(line) is None


def test_parser_counts_garbage_and_keeps_going() -> None:
    parser = RawParser()
    lines = [
        "py-spy> Sampling process 50 times a second for 1 seconds. Press Control-C to exit.",
        "",
        "\x00\x01 binary junk",
        "thread (5): pyhot;py_hot_a (/x/pyload.py:53) 4\r\n",
        "half a line without a count",
        "thread (5): pyhot;py_hot_b (/x/pyload.py:62) 2",
        "py-spy> 1.52s behind in sampling, results may be inaccurate. Try reducing the rate",
        "py-spy> Wrote raw flamegraph data to '/dev/stdout'. Samples: 6 Errors: 1",
    ]
    stacks = [s for s in map(parser.feed, lines) if s is not None]
    assert [s.count for s in stacks] == [4, 2]
    summary = parser.summary
    assert summary.garbage == 2 and len(summary.garbage_examples) == 2
    assert summary.attached and summary.late
    assert (summary.reported_samples, summary.reported_errors, summary.samples) == (6, 1, 6)


def test_messages_without_the_lede() -> None:
    # py-spy drops the "py-spy> " prefix when its stdout is a terminal.
    stacks, summary = parse_raw(
        "Sampling process 100 times a second. Press Control-C to exit.\n"
        "f (a.py:1) 3\n"
        "Stopped sampling because process exited\n"
        "Wrote raw flamegraph data to 'out.txt'. Samples: 3 Errors: 0\n"
    )
    assert [s.count for s in stacks] == [3]
    assert summary.garbage == 0 and summary.attached and summary.target_exited
    assert summary.reported_samples == 3


def test_long_garbage_is_shortened_in_examples() -> None:
    parser = RawParser()
    parser.feed("x" * 10_000)
    assert parser.summary.garbage == 1
    assert len(parser.summary.garbage_examples[0]) == 120


@settings(max_examples=300, database=None, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=300))
def test_parser_never_raises(text: str) -> None:
    stacks, summary = parse_raw(text)
    assert summary.samples == sum(s.count for s in stacks)


@settings(max_examples=200, database=None, deadline=None)
@given(
    st.lists(st.sampled_from(["f", " (", ")", ":", ";", "0x1f", "7", " ", "thread", "?", "py"])),
    st.integers(min_value=1, max_value=10**6),
)
def test_pieces_of_frames_never_raise(pieces: list[str], count: int) -> None:
    stack = parse_stack_line("".join(pieces) + f" {count}")
    if stack is not None:
        assert stack.count == count


# -------------------------------------------------------------------------- idle heuristic


@pytest.mark.parametrize(
    ("frames", "idle"),
    [
        ((NativeFrame(None, 0x1, "libc.so.6"), NativeFrame("clock_nanosleep", None, "libc")), True),
        ((NativeFrame("epoll_wait", None, "libc.so.6"),), True),
        ((NativeFrame("time_sleep", None, "libpython3.11.so"),), True),
        ((NativeFrame("SHA256_Update", None, "libcrypto.so.3"),), False),
        (
            (NativeFrame(None, 0x1, "libcrypto.so.3"), NativeFrame("SHA256_Update", None, None)),
            False,
        ),
        ((PyFrame("py_hot_a", "pyload.py", 53),), False),
        ((PyFrame("Condition.wait", "/usr/lib/python3.11/threading.py", 320),), True),
        ((PyFrame("EpollSelector.select", "selectors.py", 468),), True),
        ((PyFrame("wait", "mine.py", 1),), False),
        ((), False),
        ((NativeFrame(None, 0x1, None),), False),
    ],
)
def test_looks_idle(frames: tuple[NativeFrame | PyFrame, ...], idle: bool) -> None:
    assert looks_idle(frames) is idle


# ------------------------------------------------------------- py-spy's errors, one line


@pytest.mark.parametrize(
    ("name", "first", "remedy"),
    [
        (
            "stderr_not_python.txt",
            "Failed to find python version from target process",
            "is 123 a Python program? use --sampler perf for native programs",
        ),
        (
            "stderr_no_process.txt",
            "Failed to get process executable name. Check that the process is running.",
            "check that process 123 is running",
        ),
        (
            "stderr_permission.txt",
            "Permission Denied: Try running again with elevated permissions by going "
            "'sudo env \"PATH=$PATH\" !!'",
            denied_remedy(123, attach=True),  # what fits who runs the tests
        ),
    ],
)
def test_error_lines_and_remedies(name: str, first: str, remedy: str) -> None:
    line = _first_error_line((DATA / name).read_text())
    assert line == first
    assert _remedy(line, 123) == remedy


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "stderr_not_python.txt",
            "cannot attach to 123: py-spy: Failed to find python version from target process; "
            "is 123 a Python program? use --sampler perf for native programs",
        ),
        (
            "stderr_permission.txt",
            f"cannot attach to 123: py-spy: Permission Denied; {denied_remedy(123, attach=True)}",
        ),
    ],
)
def test_failure_messages(name: str, message: str) -> None:
    window = _Window(PySpySampler(123, 50), "/x/py-spy", "/nonexistent/w.json")
    window.stderr = (DATA / name).read_bytes()
    window.returncode = 1
    assert window.failure_message() == message


def test_failure_without_stderr() -> None:
    window = _Window(PySpySampler(123, 50), "/x/py-spy", "/nonexistent/w.json")
    window.returncode = -9
    assert window.failure_message() == (
        "cannot attach to 123: py-spy was killed by signal 9 without a message; "
        "check that py-spy can attach: py-spy dump --pid 123"
    )
    window = _Window(PySpySampler(123, 50), "/x/py-spy", "/nonexistent/w.json")
    window.spawn_error = FileNotFoundError(2, "No such file or directory")
    assert window.failure_message() == (
        "cannot attach to 123: cannot run /x/py-spy (No such file or directory); "
        "pip install py-spy, or use --sampler perf"
    )


def test_no_error_line_in_empty_stderr() -> None:
    assert _first_error_line("\n \n") is None


# ------------------------------------------------------------ failing before py-spy runs


def test_missing_py_spy_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyspy, "find_py_spy", lambda: None)
    assert PySpySampler.available() == (
        "py-spy is not installed; pip install py-spy, or use --sampler perf"
    )
    sampler = PySpySampler(os.getpid(), 50)
    with pytest.raises(TargetError) as err:
        asyncio.run(sampler.run(lambda batch: None, asyncio.Event()))
    message = str(err.value)
    assert message == (
        f"cannot attach to {os.getpid()}: py-spy is not installed; "
        "pip install py-spy, or use --sampler perf"
    )
    assert "\n" not in message


def test_window_must_be_whole_seconds() -> None:
    with pytest.raises(ValueError, match="at least 1 second"):
        PySpySampler(os.getpid(), 50, window=0)


def test_command_line() -> None:
    cmd = PySpySampler(42, 50, idle=True, window=2).command("/x/py-spy", "/tmp/d/w1.json")
    assert cmd[:2] == ["/x/py-spy", "record"]
    joined = " ".join(cmd)
    for part in (
        "--pid 42",
        "--rate 50",
        "--duration 5",  # the window, 2 s, and BACKSTOP: the relay halts a run at its window
        "--format speedscope",
        "--output /tmp/d/w1.json",
        "--threads",
        "--full-filenames",
        "--native",
        "--idle",
    ):
        assert part in joined
    plain = PySpySampler(42, 50, native=False).command("py-spy", "w.json")
    # --idle always: every thread in every interval is what times the samples
    assert "--native" not in plain and "--idle" in plain


def test_this_interpreter_is_python() -> None:
    assert runs_cpython(os.getpid())


# --- stops that landed on a system call, and what py-spy named -------------------------

VDSO_STACK = (
    "thread (7): pyhot;Thread.run (/usr/lib/python3.11/threading.py:982);"
    "py_hot_a (/srv/pyload.py:63);clock_gettime (/usr/lib/x86_64-linux-gnu/libc.so.6);"
    "0x7f4852efabe1 ([vdso]) 41"
)


def test_vdso_leaf_is_cut_back_to_the_innermost_python_frame() -> None:
    stack = parse_stack_line(VDSO_STACK)
    assert stack is not None
    kept = python_leaf_if_stopped_in_syscall(stack.frames)
    assert isinstance(kept[0], PyFrame) and kept[0].function == "py_hot_a"
    assert len(kept) == 2


def test_native_leaf_outside_the_vdso_is_kept() -> None:
    stack = parse_stack_line(
        "thread (7): cext;c_hash (/srv/pyload.py:83);"
        "SHA256_Update (/usr/lib/x86_64-linux-gnu/libcrypto.so.3) 3"
    )
    assert stack is not None
    assert python_leaf_if_stopped_in_syscall(stack.frames) == stack.frames


def test_vdso_leaf_without_python_frames_is_kept() -> None:
    stack = parse_stack_line("thread (7): main;0x7f4852efabe1 ([vdso]) 1")
    assert stack is not None
    assert python_leaf_if_stopped_in_syscall(stack.frames) == stack.frames


OBJECTS = (
    "/usr/bin/python3.11",
    "/usr/lib/libpython3.11.so.1.0",
    "/usr/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
)


def test_source_file_of_an_extension_module_maps_to_its_shared_object() -> None:
    assert object_for_source("/build/Python-3.11.7/Modules/_json.c", OBJECTS) == OBJECTS[2]


def test_cpython_source_maps_to_libpython_or_else_the_executable() -> None:
    assert object_for_source("/build/Python-3.11.7/Include/object.h", OBJECTS) == OBJECTS[1]
    static = (OBJECTS[0], OBJECTS[3])
    assert object_for_source("/build/Python-3.11.7/Python/ceval.c", static) == OBJECTS[0]
    assert object_for_source("/src/other/thing.c", OBJECTS) is None


def test_named_frames_are_their_own_demangled_name_and_keep_the_source_line() -> None:
    stack = parse_stack_line(
        "thread (7): cext;c_json (/srv/pyload.py:92);"
        "encoder_call (/build/Python-3.11.7/Modules/_json.c:1309);"
        "PyObject_Free (/usr/lib/libpython3.11.so.1.0) 1"
    )
    assert stack is not None
    leaf, encoder, py = sample_frames(stack.frames, OBJECTS)
    assert isinstance(leaf, FrameRecord) and isinstance(encoder, FrameRecord)
    assert isinstance(py, FrameRecord)
    assert (leaf.symbol, leaf.demangled, leaf.module) == (
        "PyObject_Free",
        "PyObject_Free",
        OBJECTS[1],
    )
    assert encoder.demangled == "encoder_call"
    assert encoder.module == OBJECTS[2]
    assert (encoder.source_file, encoder.line) == ("/build/Python-3.11.7/Modules/_json.c", 1309)
    assert (py.kind, py.symbol, py.demangled) == (KIND_PYTHON, "c_json", "c_json")
    assert py.frame().demangled == "c_json"


def test_a_leaf_at_a_system_calls_exit_counts_at_its_python_frame():
    # A futex wake in a GIL hand-over, left unnamed by py-spy: its address follows a
    # syscall instruction, so py-spy's stop was taken at the call's exit.
    wake = NativeFrame(None, 0x7F00_0000_1234, "/usr/lib/x86_64-linux-gnu/libc.so.6")
    caller = NativeFrame("take_gil", None, "libpython3.11.so.1.0")
    py = PyFrame("work", "/srv/app.py", 7)
    stack = (wake, caller, py, PyFrame("main", "/srv/app.py", 20))
    assert python_leaf_if_stopped_in_syscall(stack, lambda a: a == wake.address) == stack[2:]
    assert python_leaf_if_stopped_in_syscall(stack, lambda a: False) == stack
    assert python_leaf_if_stopped_in_syscall(stack) == stack
    assert python_leaf_if_stopped_in_syscall((wake, caller), lambda a: True) == (wake, caller)


def _executable_bytes() -> tuple[int, bytes]:
    """This process's libc code: (start address, the first MiB of it)."""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if fields[1] == "r-xp" and len(fields) > 5 and "libc.so" in fields[5]:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                with open("/proc/self/mem", "rb") as mem:
                    mem.seek(start)
                    return start, mem.read(min(end - start, 1 << 20))
    pytest.skip("no libc mapping in this process")


def test_syscall_exits_are_read_from_the_process_memory():
    insn = SYSCALL_INSTRUCTIONS.get(os.uname().machine)
    if insn is None:
        pytest.skip(f"no system-call instruction known for {os.uname().machine}")
    start, code = _executable_bytes()
    at = code.find(insn)
    assert at >= 0, "libc makes system calls"
    after = start + at + len(insn)
    other = next(start + i for i in range(len(insn), len(code)) if code[i - len(insn) : i] != insn)
    with SyscallExits(os.getpid()) as exits:
        assert exits(after) and not exits(other)
        assert not exits(0) and not exits(1 << 64)  # unmapped, out of range: not a call
    with SyscallExits(os.getpid(), machine="sparc") as exits:
        assert not exits(after)  # a machine it does not know: never claimed
