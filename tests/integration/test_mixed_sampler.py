"""Mixed stacks of real Python processes (the ``mixed`` sampler, auto's choice): perf's
samples, unwound by livesym, with the Python frames py-spy read without stopping the
target. A C extension's hot spot named down to its C function under the Python function
that called it; Python shares that hold; kernel time under its Python caller, against
perf over the same window; never a tracer stop; and a py-spy that is killed or cannot
read the target leaves the samples counted, marked and said once, with no py-spy left.
(Shares against ``py-spy record`` alone: test_pyspy_reference.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from livesym.sampling.mixed import PY_SPY_FRAMES, MixedSampler
from livesym.sampling.perf_event import WOKEN_PER_THREAD, kernel_refused
from tests.integration.test_kernel_time import perf_report
from tests.integration.test_off_cpu import PYWAITS
from tests.integration.test_pyspy_sampler import pyload
from tests.support.capture_json import capture_json
from tests.support.phase_log import read_log, spent_between
from tests.support.procs import running
from tests.support.spin import HOT

pytestmark = pytest.mark.skipif(
    MixedSampler.available() is not None,
    reason=f"the mixed sampler cannot run here: {MixedSampler.available()}",
)

HASH = {"SHA256_Update", "sha256_block_data_order_avx2", "sha256_block_data_order_shaext"}


def stacks_of(capture: Path) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """The capture, and each sample's stack as frames, leaf first."""
    doc = capture_json(capture)
    frames, stacks = doc["frames"], doc["stacks"]
    return doc, [[frames[i] for i in stacks[s[2]]] for s in doc["samples"]]


def names(stack: list[dict[str, Any]]) -> list[str | None]:
    return [f["symbol"] for f in stack]


class TracerWatch:
    """Whether any thread of ``pid`` was ever seen traced (TracerPid) while it ran."""

    def __init__(self, pid: int) -> None:
        self.pid, self.looks, self.traced = pid, 0, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                try:
                    status = Path(f"/proc/{self.pid}/task/{tid}/status").read_text()
                except OSError:
                    continue
                self.looks += 1
                self.traced += "\nTracerPid:\t0\n" not in status
            time.sleep(0.0005)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


@pytest.fixture(scope="module")
def pyload_capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, TracerWatch]]:
    """pyload recorded for 5 s by ``auto``, its threads watched for tracer stops. At
    199 Hz: beside a busy core py_hot_a and py_hot_b then get ~600 samples, and their
    2:1 ratio's bounds (1.5, 2.7) are 3.3 standard errors away (at 99 Hz, 2.4: a run
    gave 2.75)."""
    capture = tmp_path_factory.mktemp("mixed") / "pyload.json"
    with pyload() as proc:
        watch = TracerWatch(proc.pid)
        done = subprocess.run(
            [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(capture),
             "--duration", "5", "--rate", "199"], capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        watch.stop()
    assert done.returncode == 0, done.stderr
    yield capture, watch


def test_auto_takes_mixed_stacks_and_never_stops_the_target(pyload_capture):
    capture, watch = pyload_capture
    doc, _ = stacks_of(capture)
    assert doc["sampler"]["name"] == "mixed" and doc["sampler"]["kernel"]
    # py-spy --nonblocking and perf never trace; a blocking py-spy is caught at it
    assert watch.looks > 1000 and watch.traced == 0, (watch.looks, watch.traced)


def test_a_c_extension_hot_spot_is_named_down_to_its_c_function(pyload_capture):
    capture, _ = pyload_capture
    _, stacks = stacks_of(capture)
    hashing = [s for s in stacks if HASH & set(names(s))]
    assert len(hashing) >= 20, len(stacks)
    # OpenSSL's SHA-256 under _hashlib's entry point, under the Python function c_hash
    # that called hashlib.sha256, its callers, and the thread's root in libc
    with_caller = [s for s in hashing if "c_hash" in names(s)]
    assert len(with_caller) >= 0.7 * len(hashing), Counter(
        tuple(n for n in names(s) if n)[:8] for s in hashing
    ).most_common(3)
    stack = names(with_caller[0])
    assert stack.index("_hashlib_openssl_sha256") < stack.index("c_hash")
    assert stack.index("c_hash") < stack.index("_periodic") < stack.index("Thread._bootstrap")
    assert stack[-1] in ("clone3", "clone")
    kinds = {f["symbol"]: f["kind"] for f in with_caller[0]}
    assert kinds["c_hash"] == "python" and kinds["SHA256_Update"] == "native"


def test_the_interpreters_own_frames_are_left_out_and_python_shares_hold(pyload_capture):
    capture, _ = pyload_capture
    _, stacks = stacks_of(capture)
    everywhere = Counter(n for s in stacks for n in set(names(s)))
    assert not {n for n in everywhere if n and "EvalFrame" in n}, everywhere.most_common(20)
    # pyhot burns CPU 2:1 in py_hot_a and py_hot_b; perf counts on-CPU time only
    a, b = everywhere["py_hot_a"], everywhere["py_hot_b"]
    assert a + b >= 150, everywhere.most_common(10)
    assert 1.5 <= a / b <= 2.7, (a, b)
    # Samples whose Python frames no py-spy window saw are marked, and few
    unread = sum(any(f["reason"] == "python_unread" for f in s) for s in stacks)
    assert unread <= 0.05 * len(stacks), unread


KERNEL_LOOP = """
import os
def read_zero(fd):
    for _ in range(1000):
        os.read(fd, 1 << 16)
def main():
    fd = os.open("/dev/zero", os.O_RDONLY)
    print("ready", os.getpid(), flush=True)
    while True:
        read_zero(fd)
main()
"""


@pytest.mark.skipif(kernel_refused() is not None, reason=f"kernel mode: {kernel_refused()}")
@pytest.mark.parametrize("sampler", ["mixed", "pyspy"])
def test_kernel_time_of_a_python_loop_is_shown_under_its_python_caller(cli, tmp_path, sampler):
    """perf's kernel stacks (mixed); py-spy's samples sized by the thread's system time,
    which py-spy's own judgement (a thread at ``read`` waits) would leave out or count
    twice (pyspy)."""
    seconds, rate = 5, 199
    with running(Path(sys.executable), "-c", KERNEL_LOOP) as proc:
        data = tmp_path / "perf.data"
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(rate),
                                 "-p", str(proc.pid), "-o", str(data), "--", "sleep",
                                 str(seconds)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        done = cli("top", str(proc.pid), "--sampler", sampler, "--rate", str(rate), "--duration",
                   str(seconds), "--json", "--limit", "1000", timeout=120)  # fmt: skip
        assert perf.wait(timeout=120) == 0
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    kernel = sum(f["self"] for f in doc["functions"] if f["kind"] == "kernel")
    ours = 100 * kernel / doc["samples"]
    theirs = sum(share for share, dso in perf_report(data, "dso") if dso.startswith("[kernel"))
    assert theirs >= 30, theirs
    assert abs(ours - theirs) <= 6, (ours, theirs, sampler)
    rows = {f["symbol"]: f for f in doc["functions"]}
    # The kernel work sits under os.read's C function and the Python function calling it
    assert rows["read_zero"]["kind"] == "python"
    assert rows["read_zero"]["total_pct"] >= 90, rows["read_zero"]
    assert rows["os_read"]["total_pct"] >= ours - 6, rows["os_read"]


def test_a_python_thread_is_charged_its_own_cpu_time_not_livesym_s(cli, tmp_path):
    # GIVEN a Python thread repeating 10 ms of CPU, a 20 ms sleep and a 10 ms read of a
    # pipe, that logs its own CPU clock at the end of each cycle
    log = tmp_path / "times"
    capture = tmp_path / "pywaits.json"
    with running(Path(sys.executable), str(PYWAITS), "0", str(log)) as proc:
        # WHEN the mixed sampler records it at 499 Hz: livesym, woken at every sample to
        # read its Python frames, preempts it tens of microseconds after each one
        done = cli("record", str(proc.pid), "--sampler", "mixed", "--rate", "499",
                   "--duration", "4", "-o", str(capture), timeout=120)  # fmt: skip
    assert done.code == 0, done.err
    doc = capture_json(capture)
    # (events per CPU, whose next tick found the thread running again after livesym's
    # turn, charged it 14-21 % more CPU time than its own clock had)
    assert doc["sampler"]["scope"] == WOKEN_PER_THREAD, doc["sampler"]
    start = doc["session"]["start"]
    ticks = [start + row[0] for row in doc["samples"] if row[1] == proc.pid]
    clock = read_log(log)
    # THEN its samples over their span, times the period, are the CPU time its own clock
    # counted over that span, within 5 % (about 500 samples, one period of its own CPU
    # time apart)
    first, last = max(ticks[0], clock[0][0]), min(ticks[-1], clock[-1][0])
    sampled = sum(1 for t in ticks if first <= t <= last) / 499
    spent = spent_between(clock, first, last)[3]
    assert last - first >= 3.0 and spent >= 0.5, (first, last, spent)
    assert abs(sampled / spent - 1) <= 0.05, (sampled, spent)


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="livesym reads CPython 3.11 only")
def test_a_python_command_livesym_starts_has_its_frames_read_by_livesym(cli, tmp_path):
    # GIVEN a Python program that computes 10 ms, sleeps 20 and reads a pipe 10 in turn,
    # started by livesym (stopped before its first instruction: no libpython mapped yet
    # in a shared build, no interpreter set up in any)
    capture = tmp_path / "pywaits.json"
    # WHEN the mixed sampler records it from its start
    done = cli("record", "--sampler", "mixed", "--rate", "499", "--duration", "4", "-o",
               str(capture), "--", sys.executable, str(PYWAITS), "0", timeout=120)  # fmt: skip
    assert done.code == 0, done.err
    doc = capture_json(capture)
    # THEN livesym read its Python frames itself, once its interpreter was up, not
    # py-spy's windows (which joined a phase's samples to the one before: 70 % of
    # compute's CPU time went to nap)
    assert not any("py-spy" in e for e in doc["session"]["errors"]), doc["session"]["errors"]
    assert doc["sampler"]["scope"] == WOKEN_PER_THREAD, doc["sampler"]
    _, stacks = stacks_of(capture)
    python = Counter(
        next((f["symbol"] for f in stack if f.get("kind") == "python"), None) for stack in stacks
    )
    # AND its CPU time is compute's, but for the loop around it
    in_python = sum(n for name, n in python.items() if name is not None)
    assert in_python >= 300 and python["compute"] >= 0.9 * in_python, python.most_common(5)


WITH_A_NATIVE_THREAD = """
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
assert lib.start_worker() == 0
def python_work():
    while True:
        sum(range(9999))
print("ready", os.getpid(), flush=True)
python_work()
"""


def test_a_c_librarys_own_thread_keeps_its_native_stack_without_a_python_mark(built, tmp_path):
    # A Python program whose C library runs a thread of its own (OpenBLAS's workers):
    # py-spy never sees that thread, and it has no Python frames to miss
    capture = tmp_path / "worker.json"
    lib = built("libworker.so")
    with running(Path(sys.executable), "-c", WITH_A_NATIVE_THREAD, str(lib)) as proc:
        ran, began = _thread_cpu(proc.pid), time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(capture),
             "--sampler", "mixed", "--duration", "4"], capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        used, spent = _thread_cpu(proc.pid), time.monotonic() - began
    assert done.returncode == 0, done.stderr
    doc, stacks = stacks_of(capture)
    tids = [s[1] for s in doc["samples"]]
    worker = [st for st, tid in zip(stacks, tids, strict=True) if tid != proc.pid]
    main = [st for st, tid in zip(stacks, tids, strict=True) if tid == proc.pid]
    # Each thread a sample a period of its CPU time (the share of a CPU it got over the
    # run, over the seconds sampled): beside a busy core, less than 4 s of it each
    rate = doc["sampler"]["rate_hz"]
    seconds = doc["session"]["end"] - doc["session"]["start"]
    for tid, got in ((proc.pid, len(main)), (next(iter(set(used) - {proc.pid})), len(worker))):
        expected = rate * seconds * (used[tid] - ran.get(tid, 0.0)) / spent
        assert expected >= 100 and got >= 0.7 * expected, (tid, got, expected)
    for stack in worker:
        assert "worker_spin" in names(stack) and names(stack)[-1] in ("clone3", "clone")
        assert not any(f["reason"] == "python_unread" for f in stack), names(stack)
    # ... while the Python thread's samples carry its Python frames
    assert sum("python_work" in names(st) for st in main) >= 0.9 * len(main)


def _thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user and system) of each thread of ``pid``."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = (task / "stat").read_text().rpartition(") ")[2].split()
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def py_spy_children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid), "py-spy"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@pytest.mark.parametrize("sampler", ["mixed", "pyspy"])
def test_a_py_spy_killed_mid_session_leaves_marked_samples_and_no_py_spy(
    tmp_path, sampler, monkeypatch
):
    # Killed two seconds in: during the first hand-over, the running py-spy and the one
    # about to take over both (a blocking one may leave the target stopped: undone).
    # Mixed stacks of CPython 3.11 are read by livesym itself: py-spy's join is asked for.
    monkeypatch.setenv(PY_SPY_FRAMES, "1")
    capture = tmp_path / "killed.json"
    code = "import os\nprint('ready', os.getpid(), flush=True)\nwhile True: sum(range(9999))"
    with running(Path(sys.executable), "-c", code) as proc:
        rec = subprocess.Popen(
            [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(capture),
             "--sampler", sampler, "--duration", "6"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        killed = _kill_py_spy(rec.pid, after=2.0)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
        assert killed, "no py-spy was running"
        assert not subprocess.run(["pgrep", "-f", f"py-spy record --pid {proc.pid}"],
                                  capture_output=True).stdout  # fmt: skip
        alive = proc.poll() is None and "T" not in _state(proc.pid)
    assert alive  # never left stopped
    doc, stacks = stacks_of(capture)
    assert any("py-spy" in e and "killed" in e for e in doc["session"]["errors"]), doc["session"]
    # Every sample counted, before the kill and after it; those no window saw are marked
    times = [s[0] for s in doc["samples"]]
    assert min(times) < 2.0 and max(times) > 4.5, (min(times), max(times))
    unread = [t for t, st in zip(times, stacks, strict=True) if "<module>" not in names(st)]
    marked = [st for st in stacks if "<module>" not in names(st)]
    assert all(any(f["reason"] == "python_unread" for f in st) for st in marked), marked[:1]
    # ... and once py-spy was started again the samples have their Python frames: those
    # no window saw are the killed windows' (when those fell depends on the machine's
    # load), the longest run of them in time; after it, the relay went on (a sample at a
    # later hand-over between two windows may still go unseen, and is marked: 2 % at most)
    order = sorted(zip(times, ("<module>" in names(st) for st in stacks), strict=True))
    runs, start = [], None
    for k, (_, named) in enumerate(order):
        if not named and start is None:
            start = k
        if named and start is not None:
            runs.append((start, k))
            start = None
    if start is not None:
        runs.append((start, len(order)))
    # (py-spy alone delivers none of a killed window's samples: nothing unread there)
    _, end = max(runs, key=lambda r: r[1] - r[0], default=(0, 0))
    after = order[end:]
    resumed = order[end - 1][0] if end else order[0][0]
    assert len(after) >= 50 and order[-1][0] - resumed >= 1.0, (resumed, len(after))
    unseen = [t for t, named in after if not named]
    assert len(unseen) <= 0.02 * len(after), (unseen, len(after), resumed)
    assert len(unread) < 0.6 * len(times), (len(unread), len(times))


def test_a_target_that_exits_ends_the_session_with_its_python_frames_and_no_py_spy(cli):
    code = (
        "import os, time\nprint('ready', os.getpid(), flush=True)\nend = time.time() + 2.5\n"
        "def work():\n    while time.time() < end: sum(range(9999))\nwork()"
    )
    with running(Path(sys.executable), "-c", code) as proc:
        done = cli("top", str(proc.pid), "--sampler", "mixed", "--duration", "20", "--json")
        assert not subprocess.run(["pgrep", "-f", f"py-spy record --pid {proc.pid}"],
                                  capture_output=True).stdout  # fmt: skip
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    assert doc["state"] == "target exited" and doc["duration_s"] < 10, doc["state"]
    rows = {f["symbol"]: f for f in doc["functions"]}
    # Its last samples too: py-spy's last window ends with the target and covers them
    assert rows["work"]["total_pct"] >= 90, rows.get("work")


def _kill_py_spy(livesym: int, after: float) -> list[int]:
    """Kill livesym's py-spy ``after`` seconds after the first one started (on a busy
    machine livesym's start-up alone may take longer than a fixed wait)."""
    deadline = time.monotonic() + 30
    while not py_spy_children(livesym) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(after)
    found = py_spy_children(livesym)
    for pid in found:
        os.kill(pid, signal.SIGKILL)
    return found


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_a_program_py_spy_cannot_read_keeps_its_native_stacks_and_says_so_once(
    built: Callable[[str], Path], cli
):
    # spin is no Python program: py-spy fails on it, perf goes on
    with running(built("spin")) as proc:
        done = cli("top", str(proc.pid), "--sampler", "mixed", "--duration", "2.5", "--json")
        assert proc.poll() is None
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    said = [e for e in doc["errors"] if e.startswith("Python frames not read")]
    assert len(said) == 1 and "py-spy" in said[0], doc["errors"]
    assert doc["samples"] >= 100
    assert {f["symbol"] for f in doc["functions"]} >= HOT, doc["functions"][:5]
