"""A thread pool and a box on fire (pool.c): events per CPU count CPU time wherever it
is spent, and livesym keeps itself runnable.

1,000 threads each running 0.03 ms every 50 ms (60 % of a core in all): events per
thread waited for 10 ms of each thread's own CPU time and counted nothing in 8 s;
events per CPU (as root) count the pool's samples as ``perf record -a`` does, within
10 %. Against its CPU time (from /proc) times the rate both fall short, by 4-9 % here
and by up to 17 % beside a busy core (the time in the scheduler's paths with
interrupts off, which a timer interrupt can only sample once the next task runs):
the kernel's bias, the reference's too, so the reference is perf. The same pool
asking for 20 cores (load in the hundreds on two):
``livesym top --duration 8``, started at nice -20 (the interpreter's own start cannot
be helped: livesym.priority), samples for 8 s of wall time with samples within 20 % of
the expected, what it could not read counted as lost, and ends promptly; before its
window it takes little more than the import of itself takes on that box.

Rates: 199 Hz, under this kernel's tick (CONFIG_HZ=250). Above it the CPU-clock timer
of an event per CPU misses short bursts: at 299 and 499 Hz 20 % and 52 % of the
pool's time went unsampled, by ``perf record -a`` too (37 % at 499 Hz); at 99 and 199
Hz 4-9 %, as perf's 2-5 %: time in the scheduler's paths with interrupts off, which a
timer interrupt can only sample once the next task runs. At 199 Hz the pool's ~1,300
samples in 8 s have a sampling error of 2.2 %."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from livesym.sampling.perf_event import PerfSampler
from tests.support.capture_json import capture_json
from tests.support.procs import running

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="events per CPU and nice -20 need root"),
    pytest.mark.skipif(PerfSampler.available() is not None, reason="no perf_event_open here"),
]

RATE = 199


def _cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


@contextlib.contextmanager
def _at_nice(nice: int) -> Iterator[None]:
    """This process at ``nice`` (and what it starts): on a box on fire, a test at nice 0
    waits seconds to be told its child ended, which is no time of livesym's."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def _timed(pid: int, *argv: str) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """``livesym ARGV`` started at this process's nice: how it ended, its wall time, and
    the target's CPU seconds a second over that time."""
    target = psutil.Process(pid)
    cpu, started = _cpu_seconds(target), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "livesym", *argv],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    wall = time.monotonic() - started
    return done, wall, (_cpu_seconds(target) - cpu) / wall


def _session(pid: int, *args: str) -> tuple[dict[str, object], float, float]:
    """``livesym top PID --duration 8 --json --rate RATE ARGS`` (``_timed``): its
    document, its wall time, and the target's CPU seconds a second."""
    done, wall, rate = _timed(
        pid, "top", str(pid), "--duration", "8", "--json", "--rate", str(RATE), *args
    )
    assert done.returncode == 0, done.stderr
    doc: dict[str, object] = json.loads(done.stdout)
    return doc, wall, rate


@pytest.fixture
def pool(built) -> Iterator[subprocess.Popen[bytes]]:
    with running(built("pool"), timeout=30) as proc:
        time.sleep(0.5)  # every thread past its first sleep
        yield proc


def _perf_rate(data: Path, pid: int) -> float:
    """``perf record -a``'s samples a second of ``pid``: its samples over the span from
    its first sample to its last (of any process: on every CPU the ticks go on)."""
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "pid,time"],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    times, mine = [], 0
    for line in script.splitlines():
        fields = line.replace(":", " ").split()
        if len(fields) >= 2 and fields[0].isdigit():
            times.append(float(fields[1]))
            mine += int(fields[0]) == pid
    assert len(times) > 100, script[:500]
    return mine / (max(times) - min(times))


def _perf_events(pid: int) -> int:
    """How many perf events ``pid`` holds open (0 once it has gone)."""
    count = 0
    with contextlib.suppress(OSError):
        for name in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                count += os.readlink(f"/proc/{pid}/fd/{name}") == "anon_inode:[perf_event]"
    return count


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf record -a is the reference")
def test_a_pool_of_1000_threads_each_too_idle_for_its_own_event_is_counted(
    pool, tmp_path: Path
) -> None:
    """Counted as ``perf record -a`` counts it, with the same fixed period over a window
    inside livesym's, and near its CPU time (from /proc) over that window times the rate:
    per-thread events gave it no sample at all. Within 15 % of perf's rate either way
    (sampling error alone: 3.5 %): over perf's window livesym read 0.95 to 1.10 of perf's
    in three runs alone, 0.93 to 1.00 in five beside a busy core, each of the two 0.91 to
    1.02 of the CPU time times the rate. That needs the pool's sleeps to
    end when they are due (pool.c: timer slack 1 ns): with a thread's default 50 us of
    slack, its wakeups ran at the samplers' own timer interrupts on an otherwise idle CPU,
    each sampler's count followed its timer's phase, and livesym read 0.72 to 1.35 of the
    pool's CPU time times the rate, perf 0.84 to 1.15. (Woken by its rings at a quarter
    full, livesym got 0.82 to 1.07 of perf's beside a busy core: ``perf_event._watermark``.)

    perf runs inside livesym's sampling, not around it: the pool needs a core of the two,
    and while livesym starts (raised to nice -20) and writes its capture the pool gets
    less of the box; perf's window, holding those, read 0.75 of livesym's in CI run 125.
    """
    data = tmp_path / "perf.data"
    capture = tmp_path / "pool.json"
    livesym = subprocess.Popen(
        [sys.executable, "-m", "livesym", "record", str(pool.pid), "--duration", "10",
         "--rate", str(RATE), "-o", str(capture)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while _perf_events(livesym.pid) == 0 and livesym.poll() is None:
            assert time.monotonic() < deadline, "livesym opened no perf event in 30 s"
            time.sleep(0.05)
        time.sleep(0.5)  # its events enabled, its reading steady
        target = psutil.Process(pool.pid)
        cpu, started = _cpu_seconds(target), time.monotonic()
        perf = subprocess.run(
            ["perf", "record", "-q", "-a", "-e", "cpu-clock", "-c", str(round(1e9 / RATE)),
             "-o", str(data), "--", "sleep", "6"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
        )  # fmt: skip
        cpu_rate = (_cpu_seconds(target) - cpu) / (time.monotonic() - started)
        assert perf.returncode == 0
        assert livesym.poll() is None, "livesym ended before perf did"
    finally:
        _, stderr = livesym.communicate(timeout=60)
    assert livesym.returncode == 0, stderr
    assert 0.3 < cpu_rate < 1.3, cpu_rate  # (the pool's own CPU: a core or so)
    # Each rate over its own samples' span: perf's from its first sample to its last,
    # livesym's the same (its session's duration also holds its attach, before its
    # events were enabled: 1-2.5 % of the 10 s).
    times = [row[0] for row in capture_json(capture)["samples"]]
    assert len(times) > 100, len(times)
    ours, theirs = len(times) / (max(times) - min(times)), _perf_rate(data, pool.pid)
    assert 0.85 * theirs <= ours <= 1.15 * theirs, (ours, theirs)
    # Below it by the time in the scheduler's paths with interrupts off (module docstring);
    # above it by sampling error (2.2 % at 2,000 samples) and, beside a busy core, the
    # pool's wakeups against the 250 Hz tick: up to 1.07 of it in twenty runs there.
    assert 0.75 * cpu_rate * RATE <= ours <= 1.15 * cpu_rate * RATE, (ours, cpu_rate * RATE)
    report = subprocess.run(
        [sys.executable, "-m", "livesym", "report", str(capture), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert doc["scope"] == "per CPU"
    totals = {f["symbol"]: f["total_pct"] for f in doc["functions"] if f["symbol"]}
    assert totals.get("pool_work", 0) >= 50, totals


def test_per_thread_events_are_what_a_session_of_several_processes_uses(pool, built) -> None:
    """Several processes (a name that matches two): events per thread, said so."""
    with running(built("pool"), "--threads", "2", timeout=30):
        name = Path(built("pool")).name
        several = subprocess.run(
            [sys.executable, "-m", "livesym", "top", name, "--duration", "1", "--json"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert several.returncode == 0, several.stderr
    assert json.loads(several.stdout)["scope"].startswith("per thread"), several.stdout[:300]


def test_a_box_on_fire_still_runs_livesym_on_time(built) -> None:
    """``--duration`` holds in wall time on a box on fire, the end is prompt, and before
    its sampler is in place livesym takes little more than its interpreter takes to import
    it there (the reference: the same interpreter at the same priority importing
    ``livesym.commands.top``, the slower of a run before and one after). That import was
    1.7-2.6 s of the 10.2-11.4 s of the whole under this fire (0.25 s idle): an absolute
    bound on the whole (11 s) failed on its variance alone."""
    # The test itself at nice -20 once the pool runs (the pool keeps its 0): at nice 0
    # on that box every millisecond of its own CPU (reading the pool's threads, parsing
    # the document) cost it a second of waiting, 15 s in all on some runs.
    with running(built("pool"), "--busy-us", "1000", timeout=60) as proc, _at_nice(-20):
        time.sleep(1)  # the run queues fill
        assert len(os.listdir(f"/proc/{proc.pid}/task")) == 1001
        imported = _import_wall()
        doc, wall, cpu_rate = _session(proc.pid)
        imported = max(imported, _import_wall())
    started_after, duration = float(doc["started_after_s"]), float(doc["duration_s"])
    assert 8 <= duration < 8.3, duration
    # From the window's end to the exit: the last drain, the document, the interpreter's
    # exit (0.13-0.22 s here).
    assert wall - started_after - duration < 0.75, (wall, started_after, duration)
    # Before the window, beyond the import: the target's processes, the sampler, the
    # engine, the events opened (-0.2 to 0.8 s against the reference here).
    assert started_after < imported + 1.5, (started_after, imported)
    assert cpu_rate > 1.5, cpu_rate  # (the pool took most of both cores)
    expected = cpu_rate * duration * RATE
    # Samples the rings could not hold are counted as lost, never dropped unsaid.
    counted = doc["samples"] + doc["lost"]
    assert abs(counted - expected) <= 0.20 * expected, (doc["samples"], doc["lost"], expected)
    assert abs(doc["samples"] - expected) <= 0.20 * expected, (doc["samples"], expected)
    assert doc["priority"] == "nice -20 already", doc["priority"]


def _import_wall() -> float:
    """Seconds this interpreter takes to start and import ``livesym.commands.top`` at
    this process's nice, as a sampling command does before anything of its own."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "import livesym.commands.top"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started


def test_livesym_raises_itself_and_a_command_it_starts_keeps_its_nice(cli, tmp_path) -> None:
    """Started at nice 0: a sampling command runs at nice -20 (said in its document),
    a command it starts at 0; --no-priority leaves it alone."""
    out = tmp_path / "nice"
    started = cli("top", "--duration", "1", "--json", "--", "sh", "-c",
                  f"cut -d' ' -f19 /proc/self/stat > {out}; sleep 0.5")  # fmt: skip
    assert started.code == 0, started.err
    assert json.loads(started.out)["priority"].startswith("raised: nice -20")
    assert out.read_text().strip() == "0"
    left = cli("top", "--duration", "0.5", "--json", "--no-priority", "--", "sleep", "1")
    assert left.code == 0, left.err
    assert json.loads(left.out)["priority"] == "not raised (--no-priority)"
