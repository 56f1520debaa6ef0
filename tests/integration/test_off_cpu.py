"""Where a thread's time goes off the CPU (--mode wall and off-cpu), against how the
program was built and against the kernel's own accounting (schedstat): a thread that
computes, sleeps and waits on a futex, recorded, reported in each mode, scrubbed and
exported to pprof that go tool pprof reads; threads starved of a CPU; dd waiting on its
disk against perf's switches, timed; livesym without kernel mode; a Python thread."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from livesym.frames.waits import SCHEDULER
from livesym.sampling.off_cpu_poll import BUDGET_VARIABLE
from livesym.sampling.perf_event import kernel_refused
from tests.support.capture_json import capture_json
from tests.support.phase_log import read_log, spent_between

SECONDS = 4.0
RATE = 199
pytestmark = pytest.mark.skipif(
    kernel_refused() is not None,
    reason=f"perf's switch events need kernel mode: {kernel_refused()}",
)


def top(cli: Callable[..., Any], pid: int, *extra: str) -> dict[str, Any]:
    result = cli("top", str(pid), "--sampler", "perf", "--rate", str(RATE), "--duration",
                 str(SECONDS), "--json", *extra, timeout=120)  # fmt: skip
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(result.out)
    return doc


def shares(doc: dict[str, Any], kind: str = "total_pct") -> dict[str, float]:
    """Each function's share (of the samples of the document's mode), by name."""
    out: dict[str, float] = {}
    for f in doc["functions"]:
        name = f["symbol"] or f["demangled"]
        out[name] = out.get(name, 0.0) + f[kind]
    return out


def test_a_thread_that_computes_sleeps_and_waits_shows_each_part_of_its_wall_time(
    cli, run_target, tmp_path
):
    # GIVEN one thread repeating 10 ms of CPU, 20 ms in nanosleep, 10 ms in a futex wait,
    # each part's wall time measured by the program (a busy box stretches them: a
    # preempted cpu_part, a late wakeup; beside other work cpu_part took 30.5 % of the
    # wall time, not 25, in a CI run)
    times = tmp_path / "times"
    pid = run_target("waits", "--times", str(times)).pid
    # WHEN livesym records its wall time, and it is reported as wall time, off-CPU time
    # and CPU time (the capture keeps both kinds of sample and their weights)
    capture = tmp_path / "waits.json.gz"
    result = cli("record", str(pid), "-o", str(capture), "--sampler", "perf", "--rate",
                 str(RATE), "--duration", str(SECONDS), "--mode", "wall", timeout=120)  # fmt: skip
    assert result.code == 0, result.err
    spent = program_times(times, capture)
    wall = json.loads(cli("report", str(capture), "--json").out)
    off = json.loads(cli("report", str(capture), "--json", "--mode", "off-cpu").out)
    cpu = json.loads(cli("report", str(capture), "--json", "--mode", "cpu").out)
    # THEN wall time (the mode it was recorded in) splits as the program measured it over
    # about the same seconds (25 / 50 / 25 as built, on an idle box), within 5
    assert (wall["mode"], off["mode"], cpu["mode"]) == ("wall", "off-cpu", "cpu")
    assert wall["off_cpu"].startswith("perf context switches")
    got = shares(wall)
    measured = {f: 100 * part / sum(spent) for f, part in zip(("cpu_part", "sleep_part",
                "wait_part"), spent, strict=True)}  # fmt: skip
    for function, share in measured.items():
        assert abs(got.get(function, 0.0) - share) <= 5.0, (function, got, measured)
    # ... off-CPU time 67 / 33 (idle) as the program's sleeps and waits took it, beside
    # its preemptions in cpu_part; the waits named at the leaf: the kernel's wait
    # functions under the system calls that blocked, the scheduler's own frames left out
    got = shares(off)
    leaves = shares(off, "self_pct")
    # (its off-CPU time in cpu_part is its waits for a CPU there: preempted, no more)
    assert got.get("cpu_part", 0.0) <= leaves.get("[waiting for a CPU]", 0.0) + 0.5
    waited = 100.0 - got.get("cpu_part", 0.0)  # the sleeps' and the waits' share
    sleep_off = waited * spent[1] / (spent[1] + spent[2])
    wait_off = waited * spent[2] / (spent[1] + spent[2])
    assert abs(got.get("sleep_part", 0.0) - sleep_off) <= 5.0, (got, sleep_off)
    assert abs(got.get("wait_part", 0.0) - wait_off) <= 5.0, (got, wait_off)
    assert abs(leaves.get("do_nanosleep", 0.0) - sleep_off) <= 5.0, (leaves, sleep_off)
    futex = sum(v for k, v in leaves.items() if "futex" in k)
    assert abs(futex - wait_off) <= 5.0, (leaves, wait_off)
    assert got.get("__x64_sys_clock_nanosleep", 0.0) >= sleep_off - 7
    assert got.get("__x64_sys_futex", 0.0) >= wait_off - 5
    assert "schedule" not in leaves and "__schedule" not in leaves
    # ... and the CPU view is what it always was: cpu_part all of it
    assert shares(cpu).get("cpu_part", 0.0) >= 95.0
    # Each sample weighs its time: wall counts the thread's whole session at the rate
    (waiter,) = [t for t in wall["threads"] if t["tid"] == pid]
    assert 0.9 <= waiter["samples"] / (wall["duration_s"] * RATE) <= 1.1, waiter
    states = waiter["states"]
    on_cpu = 100 * states["on_cpu"] / waiter["samples"]
    asleep = 100 * states["sleeping"] / waiter["samples"]
    assert abs(on_cpu + asleep + 100 * states["waiting_for_cpu"] / waiter["samples"]
               - 100) <= 1.0, states  # fmt: skip
    # (on the CPU: cpu_part less its preemptions; asleep: the sleeps and the waits)
    assert abs(asleep - (measured["sleep_part"] + measured["wait_part"])) <= 5.0, (states, measured)
    # The capture: version 5, the mode, off-CPU rows with their weights; a scrub keeps them
    doc = capture_json(capture)
    assert doc["version"] == 6 and doc["sampler"]["mode"] == "wall"
    weighted = [row for row in doc["samples"] if len(row) == 5]
    assert weighted and all(row[3] & 1 and row[4] >= 1 for row in weighted)
    scrubbed = tmp_path / "scrubbed.json"
    assert cli("scrub", str(capture), "-o", str(scrubbed)).code == 0
    again = json.loads(cli("report", str(scrubbed), "--json").out)
    assert shares(again) == shares(wall) and again["samples"] == wall["samples"]
    # ... and a pprof export of the off-CPU time says so, in nanoseconds go tool pprof reads
    profile = tmp_path / "off.pb.gz"
    assert cli("export", str(capture), "--format", "pprof", "--mode", "off-cpu",
               "-o", str(profile)).code == 0  # fmt: skip
    go = shutil.which("go")
    if go is None:
        pytest.skip("go tool pprof (golang-go) is the reference for pprof files")
    top_text = subprocess.run([go, "tool", "pprof", "-top", "-sample_index=off_cpu",
                               str(profile)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "HOME": str(tmp_path)}).stdout  # fmt: skip
    assert "Type: off_cpu" in top_text, top_text
    total = off["samples"] / RATE  # seconds of off-CPU time in the capture
    shown = _pprof_total_seconds(top_text)
    assert abs(shown - total) <= 0.02 * total + 0.01, (shown, total)
    assert "do_nanosleep" in top_text


def _schedstat(pid: int, tid: int) -> tuple[int, int]:
    """A thread's time on a CPU and waiting on a run queue (ns), as the kernel counts."""
    run, wait, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
    return int(run), int(wait)


class _Schedstats:
    """Threads' schedstat counts (``_schedstat``) every 20 ms while the block runs, so
    that a window inside it can be read off (``at``)."""

    def __init__(self, pid: int, tids: list[int]) -> None:
        self._pid, self._tids = pid, tids
        self._readings: list[tuple[float, dict[int, tuple[int, int]]]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> _Schedstats:
        self._read_once()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _read(self) -> None:
        while not self._done.wait(0.02):
            self._read_once()

    def _read_once(self) -> None:
        counts = {tid: _schedstat(self._pid, tid) for tid in self._tids}
        self._readings.append((time.monotonic(), counts))

    def at(self, when: float) -> dict[int, tuple[int, int]]:
        """The counts read nearest to ``when`` (time.monotonic)."""
        return min(self._readings, key=lambda r: abs(r[0] - when))[1]


def test_threads_starved_of_a_cpu_wait_for_a_cpu_not_asleep_as_the_kernel_counts(cli, run_target):
    # GIVEN three threads spinning for ever beside the waiter, on two cores (and livesym)
    if (os.cpu_count() or 1) > 2:
        pytest.skip("needs more spinning threads than cores: written for 2 cores")
    proc = run_target("waits", "--busy", "3")
    busy = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")
            if Path(f"/proc/{proc.pid}/task/{t}/comm").read_text().strip() == "busy"]  # fmt: skip
    assert len(busy) == 3
    # WHEN livesym samples their wall time (the kernel's counts read all along)
    with _Schedstats(proc.pid, busy) as counts:
        began = time.monotonic()
        doc = top(cli, proc.pid, "--mode", "wall")
    # THEN each spinner's time off the CPU is waiting for one, none of it asleep, and its
    # split between running and waiting is the kernel's own (schedstat) over the window
    # livesym sampled, within 8 points. (Not over the whole command: while livesym
    # starts, a fourth busy thread on two cores, the spinners wait more. Over the window
    # the two agree within 0-2 points here, over the command 2-6 apart; CI run 121 failed
    # on the kernel's 25.8 % over the command against livesym's 16.3 %.)
    start = began + doc["started_after_s"]
    before, after = counts.at(start), counts.at(start + doc["duration_s"])
    threads = {t["tid"]: t for t in doc["threads"]}
    for tid in busy:
        states = threads[tid]["states"]
        off = states["waiting_for_cpu"] + states["sleeping"] + states["disk"]
        assert off > 0 and states["waiting_for_cpu"] >= 0.97 * off, states
        run = after[tid][0] - before[tid][0]
        queued = after[tid][1] - before[tid][1]
        kernel = 100 * queued / (run + queued)
        ours = 100 * states["waiting_for_cpu"] / (states["on_cpu"] + states["waiting_for_cpu"])
        assert abs(ours - kernel) <= 8.0, (tid, ours, kernel)
    # ... the table says it in words: waiting for a CPU is a frame of its own
    assert shares(doc, "self_pct").get("[waiting for a CPU]", 0.0) >= 20.0


def _pprof_total_seconds(text: str) -> float:
    """``Showing nodes accounting for 2.25s, 100% of 2.25s total`` -> 2.25."""
    for line in text.splitlines():
        if "total" in line and "of " in line:
            amount = line.rsplit("of ", 1)[1].split()[0]
            for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("mins", 60.0)):
                if amount.endswith(unit) and amount[: -len(unit)].replace(".", "").isdigit():
                    return float(amount[: -len(unit)]) * scale
    raise AssertionError(f"no total in {text!r}")


def test_a_short_session_s_open_waits_are_counted_while_they_last(cli, run_target):
    # GIVEN a thread asleep for a second at a time (longer than the session's deliveries)
    pid = run_target("waits", "--cycle-ms", "4000").pid  # 1 s CPU, 2 s sleep, 1 s wait
    time.sleep(1.2)  # into its sleep
    # WHEN livesym samples its wall time for 1.5 s
    result = cli("top", str(pid), "--sampler", "perf", "--rate", str(RATE), "--duration",
                 "1.5", "--json", "--mode", "wall", timeout=60)  # fmt: skip
    doc = json.loads(result.out)
    # THEN the time it spent waiting is there, not only the waits that ended: the thread
    # counts the session's seconds of wall time (the sleep it was in when the session
    # began included, as a wait whose stack was not seen until it woke), and the session's
    # seconds are the sampler's (not the 0.2 to 0.7 s of opening objects and events first)
    (waiter,) = [t for t in doc["threads"] if t["tid"] == pid]
    assert 0.9 <= waiter["samples"] / (doc["duration_s"] * RATE) <= 1.1, (waiter, doc["duration_s"])


def _sched_text() -> frozenset[str]:
    """The kernel's functions in .sched.text (``schedule``, ``io_schedule``,
    ``do_nanosleep``...), which /proc/PID/task/TID/stack leaves out."""
    with open("/proc/kallsyms", "rb") as f:
        rows = [line.split() for line in f.read().splitlines()]
    bounds = {
        r[2]: int(r[0], 16) for r in rows if len(r) >= 3 and r[2].startswith(b"__sched_text_")
    }
    start, end = bounds.get(b"__sched_text_start", 0), bounds.get(b"__sched_text_end", 0)
    return frozenset(r[2].decode() for r in rows
                     if len(r) >= 3 and start <= int(r[0], 16) < end)  # fmt: skip


def _leaves(
    capture: dict[str, Any], scheduler: frozenset[str], since: float = 0.0
) -> dict[str, float]:
    """A capture's off-CPU time (from ``since`` s into it) by the first frame of each
    stack that is not the scheduler's, in % (a sample's weight is its periods)."""
    names = {f["id"]: f["symbol"] or f["demangled"] or "" for f in capture["frames"]}
    out: dict[str, float] = {}
    for row, weight in _off_cpu(capture, since):
        stack = [names[i] for i in capture["stacks"][row[2]]]
        leaf = next((f for f in stack if f not in scheduler), "?")
        out[leaf] = out.get(leaf, 0.0) + weight
    total = sum(out.values()) or 1.0
    return {k: 100 * v / total for k, v in out.items()}


def _off_cpu(capture: dict[str, Any], since: float = 0.0) -> list[tuple[list[Any], float]]:
    """A capture's off-CPU samples, each with its periods from ``since`` s into it on (a
    wait is timed at its start; one that began before is cut)."""
    period = 1.0 / capture["sampler"]["rate_hz"]
    out = []
    for row in capture["samples"]:
        if row[3] & 1:  # off the CPU
            weight = row[4] if len(row) > 4 else 1
            inside = min(weight * period, row[0] + weight * period - since)
            if inside > 0:
                out.append((row, inside / period))
    return out


def _perf_switches(pid: int, data: Path) -> subprocess.Popen[bytes]:
    """perf recording ``pid``'s switches for SECONDS + 3 s: a sample at each switch out,
    the switch records for their ends; in CLOCK_MONOTONIC, livesym's clock."""
    return subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e",
                             "context-switches", "-c", "1", "-g", "--switch-events", "-p",
                             str(pid), "-o", str(data), "--", "sleep", str(SECONDS + 3)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


# A record's first line: the tid (right-aligned: a short one starts with spaces), then
# the time. A call chain's lines start with spaces too, then an address and a symbol.
_RECORD = re.compile(r"\s*\d+\s+\d+\.\d+:")


def _in_chain(line: str) -> bool:
    """Whether ``line`` of ``perf script`` goes on a call chain. A short tid's record
    starts with spaces too: once taken for a chain line, the shell's switch back in
    after its child's switch record was skipped, and its wait ran on to the next one
    (do_wait 83 % where the shell's own clock said 36, once pids had wrapped to four
    digits; CI runs 75, 77, 79 and 86)."""
    return bool(line.strip()) and _RECORD.match(line) is None


def _perf_waits(
    data: Path, start: float, end: float, tid: int | None = None
) -> tuple[dict[str, float], float, float, float]:
    """perf's off-CPU time from ``start`` to ``end`` (CLOCK_MONOTONIC seconds) by the
    kernel's wait function at the leaf (the first frame that is not the scheduler's: not
    in .sched.text, as /proc shows a blocked thread's kernel stack), each switch-out
    sample weighed by its part of the time to its thread's next switch-in
    (``--switch-events``); the share of it in io_schedule; its seconds; and when perf's
    first record came. ``tid``: that thread's alone (perf -p follows the children a
    process starts)."""
    scheduler, only, first = SCHEDULER | _sched_text(), tid, float("inf")
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,time,event,ip,sym",
                          "--show-switch-events"], capture_output=True, text=True,
                         check=True, timeout=300).stdout  # fmt: skip
    open_since: dict[int, tuple[float, list[str]]] = {}
    weights: dict[str, float] = {}
    disk = total = 0.0
    lines = out.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        head = line.split()
        if len(head) < 2 or not head[0].isdigit():
            continue
        tid, when = int(head[0]), float(head[1].rstrip(":"))
        first = min(first, when) if only is None or tid == only else first
        if only is not None and tid != only:
            while i < len(lines) and _in_chain(lines[i]):
                i += 1  # its call chain
            continue
        if "PERF_RECORD_SWITCH" in line:
            if " IN" in line.split("PERF_RECORD_SWITCH", 1)[1][:4] and tid in open_since:
                since, chain = open_since.pop(tid)
                leaf = next((f for f in chain if f not in scheduler), "?")
                part = max(0.0, min(when, end) - max(since, start))
                weights[leaf] = weights.get(leaf, 0.0) + part
                total += part
                disk += part * any(f.startswith("io_schedule") for f in chain)
            continue
        chain = []
        while i < len(lines) and _in_chain(lines[i]):
            parts = lines[i].split()
            if len(parts) >= 2:
                chain.append(parts[1].split("+", 1)[0])
            i += 1
        open_since[tid] = (when, chain)
    shares = {k: 100 * v / total for k, v in weights.items()}
    return shares, 100 * disk / max(total, 1e-9), total, first


class _Answerer:
    """Answers each line ``proc`` writes to ``asks`` with a line on its stdin 20 ms later,
    from a thread of this process, until ``proc`` ends."""

    DELAY = 0.02

    def __init__(self, asks: int, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        self._asks, self._answers = asks, proc.stdin.fileno()
        self.answered = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while os.read(self._asks, 1):  # (b"": the shell is gone)
                time.sleep(self.DELAY)
                os.write(self._answers, b"\n")
                self.answered += 1
        except OSError:
            pass
        finally:
            os.close(self._asks)

    def join(self) -> None:
        self._thread.join(timeout=5)


def _perf_counts(data: Path, tid: int) -> dict[str, object]:
    """What perf's data holds for ``tid``: its switch records each way and its samples,
    and the records perf lost (for a failing comparison's message)."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,time,event",
                          "--show-switch-events", "--show-lost-events"],
                         capture_output=True, text=True, timeout=300).stdout  # fmt: skip
    counts: Counter[str] = Counter()
    for line in out.splitlines():
        head = line.split()
        if "LOST" in line:
            counts["lost"] += 1
        elif head and head[0] == str(tid):
            counts["switch" if "PERF_RECORD_SWITCH" in line else "sample"] += 1
    return dict(counts)


def test_a_program_waiting_on_its_disk_shows_the_waits_perf_times_and_in_disk_state(cli, tmp_path):
    if shutil.which("perf") is None or shutil.which("dd") is None:
        pytest.skip("perf (the reference) and dd are needed")
    # GIVEN dd writing 4 KiB blocks with O_SYNC to a file on this machine's disk: its time
    # off the CPU waits for the disk (io_schedule) and for the file system's work; it
    # switches some 20,000 times a second, beyond what livesym keeps switch events for,
    # unless told to (LIVESYM_SWITCH_BUDGET): every wait timed exactly, here (read from
    # /proc instead, its shortest wait read 5 points under perf's: docs/performance.md)
    target = Path(tempfile.mkdtemp(prefix="livesym-dd-", dir=Path.home()))
    dd = subprocess.Popen(["dd", "if=/dev/urandom", f"of={target / 'out'}", "bs=4k",
                           "oflag=sync", "count=10000000"], stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        time.sleep(0.5)
        # WHEN perf records its switches (a sample at each switch out, the switch records
        # for their ends; in CLOCK_MONOTONIC, livesym's clock) and livesym its off-CPU time
        # (at 499 Hz: its three waits within a point or two of their sampling error); perf
        # is held to livesym's seconds (dd's mix of waits moves from one second to the next)
        data, capture = tmp_path / "perf.data", tmp_path / "dd.lsym"
        perf = _perf_switches(dd.pid, data)
        recorded = cli("record", str(dd.pid), "-o", str(capture), "--sampler", "perf",
                       "--rate", "499", "--duration", str(SECONDS), "--mode", "off-cpu",
                       timeout=120, env={BUDGET_VARIABLE: "1000000"})  # fmt: skip
        assert recorded.code == 0, recorded.err
        perf.wait(timeout=120)
    finally:
        dd.kill()
        dd.wait()
        shutil.rmtree(target, ignore_errors=True)
    session = capture_json(capture)["session"]
    reference, disk, _, _ = _perf_waits(data, session["start"], session["end"])
    doc = json.loads(cli("report", str(capture), "--json", "--limit", "1000").out)
    # THEN livesym names the waits perf's switches time: perf's three biggest are each a
    # leaf of livesym's, found the same way on both sides (livesym takes dd's first few
    # tenths of a second from switch events, whose stacks hold the scheduler's
    # io_schedule). Their shares are not held to perf's: a sampled wait of dd's is not
    # as long as its kind's average (the stack is copied before the thread sleeps, while
    # its disk goes on), so each reads 1-8 points off (docs/performance.md, "The
    # threads that switch most"); a shell loop's waits, every one sampled, agree within
    # a point (the next test).
    ours = _leaves(capture_json(capture), SCHEDULER | _sched_text())
    assert "read from /proc" not in doc["off_cpu"], doc["off_cpu"]
    assert doc["lost"] <= 0.01 * doc["samples"], doc["lost"]
    biggest = sorted(reference.items(), key=lambda kv: -kv[1])[:3]
    assert all(ours.get(function, 0.0) >= 5.0 for function, _ in biggest), (biggest, ours)
    # ... and the time in io_schedule is disk time, the rest sleep
    (thread,) = doc["threads"]
    states = thread["states"]
    ours_disk = 100 * states["disk"] / max(thread["samples"], 1)
    assert disk > 10 and abs(ours_disk - disk) <= 6.0, (ours_disk, disk, states)


def test_a_shell_loop_s_waits_and_their_total_agree_with_perf_s_switches(cli, tmp_path):
    if shutil.which("perf") is None or shutil.which("bash") is None:
        pytest.skip("perf (the reference) and bash are needed")
    # GIVEN a shell loop that asks this test for a line (a pipe write) and reads it from
    # its stdin, which the test answers 20 ms later (a pipe read), then runs a 10 ms
    # sleep (wait4): about 100 switches a second, every wait on events. The read waits
    # 20 ms however slowly the shell's children start and end: against a writer that
    # kept its own time (a line every 20 ms), a shell whose children took 20 ms to run
    # `sleep 0.01` (beside livesym's start and other work, by hand) fell 5 lines behind
    # and read at once from then on. (The reference misread short tids until
    # _in_chain: the failures of CI runs 75, 77, 79 and 86.)
    asks_r, asks_w = os.pipe()
    loop = f"while :; do echo >&{asks_w}; read x; sleep 0.01; done"
    shell = subprocess.Popen(["bash", "-c", loop], stdin=subprocess.PIPE, pass_fds=(asks_w,))
    os.close(asks_w)
    answering = _Answerer(asks_r, shell)
    try:
        time.sleep(0.5)
        # WHEN perf records its switches (as for dd; given a second to start) and
        # livesym its off-CPU time
        data, capture = tmp_path / "perf.data", tmp_path / "loop.lsym"
        perf = _perf_switches(shell.pid, data)
        time.sleep(1.0)
        recorded = cli("record", str(shell.pid), "-o", str(capture), "--sampler", "perf",
                       "--rate", str(RATE), "--duration", str(SECONDS), "--mode", "off-cpu",
                       timeout=120)  # fmt: skip
        assert recorded.code == 0, recorded.err
        perf.wait(timeout=120)
    finally:
        shell.kill()
        shell.wait()
        answering.join()
    doc = capture_json(capture)
    session = doc["session"]
    # Both held to the seconds both recorded: from livesym's first off-CPU sample (the
    # wait the shell was in as its events opened, 0.15 s into the session: its attach),
    # or perf's first record where that came later (beside a busy core, once in CI run
    # 75, perf's covered the last few milliseconds only: 98 % in one wait)
    since = min(r[0] for r, _ in _off_cpu(doc))
    *_, perf_first = _perf_waits(data, session["start"], session["end"], shell.pid)
    since = max(since, perf_first - session["start"])
    assert session["end"] - session["start"] - since >= 2.0, ("perf started late", since)
    reference, _, seconds, _ = _perf_waits(
        data, session["start"] + since, session["end"], shell.pid
    )
    told = (reference, _perf_counts(data, shell.pid), "lines answered", answering.answered)
    # THEN its waits at the leaf weigh what perf's switches say, each of the two within
    # 3 points (every wait timed and its stack taken, on both sides)
    ours = _leaves(doc, SCHEDULER | _sched_text(), since)
    waits = sorted(reference.items(), key=lambda kv: -kv[1])[:2]
    assert waits[1][1] >= 15, told  # both kinds of wait are there
    for function, share in waits:
        assert abs(ours.get(function, 0.0) - share) <= 3.0, (function, ours, reference)
    # ... and so does its whole time off the CPU (perf sched's total), within 3 %
    off = sum(weight for _, weight in _off_cpu(doc, since)) / RATE
    assert abs(off - seconds) <= 0.03 * seconds, (off, seconds)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
def test_without_kernel_mode_perf_reads_the_waits_from_proc(run_target):
    # GIVEN livesym without CAP_PERFMON and CAP_SYS_ADMIN (an unprivileged user's lot at
    # perf_event_paranoid 2, and root's in a container) and the thread of the first test
    if (level := Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()) in "-101":
        pytest.skip(f"perf_event_paranoid={level} lets everyone sample the kernel")
    drop = "-perfmon,-sys_admin"
    pid = run_target("waits").pid

    def unprivileged(*extra: str, seconds: float = SECONDS) -> dict[str, Any]:
        done = subprocess.run(
            ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", sys.executable, "-m",
             "livesym", "top", str(pid), "--duration", str(seconds), "--json", "--mode",
             "wall", *extra], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    # WHEN its wall time is asked for (auto's choice)
    auto = unprivileged()
    # THEN auto takes perf, which cannot see the kernel's switches and reads the waiting
    # threads from /proc instead, saying so: 25 / 50 / 25 within 10 points, the waits
    # named by their calls
    assert auto["sampler"] == "perf" and auto["off_cpu"].startswith("/proc"), auto["off_cpu"]
    got = shares(auto)
    for function, built in (("cpu_part", 25.0), ("sleep_part", 50.0), ("wait_part", 25.0)):
        assert abs(got.get(function, 0.0) - built) <= 10.0, (function, got.get(function))
    assert got.get("sys_clock_nanosleep", 0.0) >= 40 and got.get("sys_futex", 0.0) >= 15, got


PYWAITS = Path(__file__).resolve().parents[2] / "sample_targets" / "pywaits.py"


@pytest.mark.parametrize(
    ("sampler", "seconds", "rate", "budget"),
    [
        # auto: mixed stacks, each wait timed by perf's switch events and its Python
        # frames read while the thread is still in it (as it leaves the CPU). Its CPU
        # time is sampled: at 499 Hz, 4 s is 500 samples of compute, whose share moves
        # by a point from run to run (2 at 99 Hz: 5 points off now and then)
        pytest.param("auto", 4.0, 499, None, id="mixed-switches"),
        # ... every thread read from /proc (the switch events' budget 0): its Python
        # frames read by the /proc reads' thread as they find it waiting. Each read's
        # sleep goes to the wait it finds: at 99 Hz (400 reads) nap's share moved by
        # 2.5 points from run to run, and came out 5.4 under once in 15
        pytest.param("auto", 4.0, 499, "0", id="mixed-proc"),
        # py-spy, every thread at every tick: about 1,200 samples, as py-spy's own
        # shares of such a program move by 2 points from one run of 400 to the next,
        # alone too (at 199 Hz in 6 s: the program times its own parts, py-spy's stops
        # included)
        pytest.param("pyspy", 6.0, 199, None, id="pyspy"),
    ],
)
def test_a_python_thread_that_computes_sleeps_and_reads_a_pipe_shows_each_part(
    cli, tmp_path, sampler, seconds, rate, budget
):
    from livesym.sampling.mixed import MixedSampler
    from livesym.sampling.pyspy import PySpySampler

    wanted = MixedSampler if sampler == "auto" else PySpySampler
    if (why := wanted.available()) is not None:
        pytest.skip(why)
    # GIVEN a Python thread repeating 10 ms of CPU, a 20 ms sleep, a 10 ms read of a pipe
    times = tmp_path / "times"
    proc = subprocess.Popen([sys.executable, str(PYWAITS), "0", str(times)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        # WHEN its wall time is recorded
        capture = tmp_path / "pywaits.json"
        result = cli("record", str(proc.pid), "--sampler", sampler, "--mode", "wall",
                     "--rate", str(rate), "--duration", str(seconds), "-o", str(capture),
                     timeout=120, env={BUDGET_VARIABLE: budget} if budget else None)  # fmt: skip
        assert result.code == 0, result.err
        spent = program_times(times, capture)[:3]
    finally:
        proc.kill()
        proc.wait()
    report = cli("report", str(capture), "--json")
    assert report.code == 0, report.err
    doc = json.loads(report.out)
    # THEN each part has its share of the thread's wall time as the program measured it
    # over the capture's seconds (25 / 50 / 25 on an idle machine), within 5 points
    assert doc["mode"] == "wall"
    assert doc["sampler"] == ("mixed" if sampler == "auto" else "pyspy"), doc["sampler"]
    got = shares(doc)
    measured = {f: 100 * part / sum(spent) for f, part in zip(("compute", "nap", "read_pipe"),
                spent, strict=True)}  # fmt: skip
    ours = {f: got.get(f, 0.0) for f in measured}
    for function, share in measured.items():
        # (all three and the rest said: a miss in one CI run of many beside other load,
        # nap 5.4 under, is not yet explained)
        assert abs(ours[function] - share) <= 5.0, (function, measured, ours, got)
    if sampler == "auto":
        # AND its waits were had as asked: a thread switching 75 times a second stays
        # on switch events (livesym's own start preempts it in a burst: not its rate)
        way = doc["off_cpu"]
        assert ("read from /proc" in way) == (budget == "0"), way
        # AND with mixed stacks, each wait's kernel function under its Python caller
        waits = python_callers(capture, ("hrtimer_nanosleep", "anon_pipe_read"))
        assert waits["hrtimer_nanosleep"].most_common(1)[0][0] == "nap", waits
        assert waits["anon_pipe_read"].most_common(1)[0][0] == "read_pipe", waits


def program_times(log: Path, capture: Path) -> list[float]:
    """The totals a target logs of its parts (``tests.support.phase_log``), over the
    capture's session: the program's own measure of the seconds the profile covers."""
    session = capture_json(capture)["session"]
    deadline = time.monotonic() + 5.0  # its line for the cycle the session ended in
    while read_log(log)[-1][0] < session["end"] and time.monotonic() < deadline:
        time.sleep(0.05)
    return spent_between(read_log(log), session["start"], session["end"])


def python_callers(capture: Path, leaves: tuple[str, ...]) -> dict[str, Counter[str | None]]:
    """For each kernel function in ``leaves``: the Python functions its samples' stacks
    reach first, by weight."""
    doc = capture_json(capture)
    frames, stacks = doc["frames"], doc["stacks"]
    out: dict[str, Counter[str | None]] = {leaf: Counter() for leaf in leaves}
    for row in doc["samples"]:
        stack = [frames[i] for i in stacks[row[2]]]
        names = [f["symbol"] for f in stack]
        python = next((f["symbol"] for f in stack if f.get("kind") == "python"), None)
        for leaf in leaves:
            if leaf in names:
                out[leaf][python] += row[4] if len(row) > 4 else 1
    return out
