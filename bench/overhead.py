"""Profiler overhead: a fixed amount of CPU work with and without livesym attached.

The target is sample_targets/crunch.c (or, with ``--target pycrunch``, its
Python twin pycrunch.py, for the py-spy sampler): it waits DELAY ms after printing
"ready" (so the profiler can attach), runs a fixed number of iterations on
THREADS threads, and prints the wall-clock time the work took. The reference
is the same run with nothing attached; runs alternate. The slowdown is the
ratio of median work times. livesym's own CPU use comes from the rusage of
its `livesym record` process (user + system time over its wall time, its start and
its final write included), and its capture says how many samples were lost. The
steady share is read from /proc while the work runs: the CPU time of `livesym record`
and of its children (py-spy runs, reaped or still running) from two seconds after
the work began to its end, over that time.

    .venv/bin/python bench/overhead.py [--rate 99] [--threads 4] [--work 400] [--runs 5]
    .venv/bin/python bench/overhead.py --target pycrunch --sampler pyspy --threads 1 --work 20
    .venv/bin/python bench/overhead.py --target pycrunch --sampler auto --threads 1 --work 20 \
        --mappings 40000
    .venv/bin/python bench/overhead.py --processes 8 --threads 1 --work 300

With ``--processes N`` (N > 1), N copies of the target run at once under one name, and
livesym records them all by that name with ``--children`` (a server's workers, with the
scan for their descendants running); the work time is the mean over the N processes. The
targets then wait 2 s before the work (``--delay``): livesym's start (imports, a sampler
and the maps of each process, about a second of CPU for eight) is not the steady cost
the slowdown measures; its CPU share still counts it.

With ``--steady`` the slowdown is the steady one, and the reference is the same
process: crunch reports its progress every 100 ms; livesym records it for
``--window`` seconds from the middle of its work on; the rate of the work while livesym
runs (from two seconds after its start, once its imports, its attach and its first
loading of the target's files are done, to its end) is held against the rate of the
same threads before livesym started and after it ended. What livesym costs when it
starts is said apart (its CPU seconds to its first sample's batch) rather than spread
over a work time that a longer run would shrink; a VM's drift between runs cancels, as
each run is its own reference.

    .venv/bin/python bench/overhead.py --steady [--runs 5] [--depth 2000]

The issue's bars: <= 2 % slowdown at 99 Hz with perf; livesym's CPU < 5 % of one
core at 99 Hz on a 4-thread target; no lost samples at 999 Hz.

With ``--mode wall`` (or ``off-cpu``) livesym records off-CPU time too. The target that
tests it is ``--target pingpong`` (sample_targets/pingpong.c: two threads passing a byte
through pipes, ``--work`` thousand round trips, ``--work-ns`` of CPU work a turn: tens of
thousands of context switches a second, the switches a second of the plain runs
reported). ``--pin`` runs the target on the first CPU and livesym on the others: a target
that does nothing but wake its other thread is otherwise faster beside anything that
keeps the CPUs out of their idle states (bench/off_cpu.py), and the slowdown says
nothing.

    .venv/bin/python bench/overhead.py --target pingpong --work 300 --pin --mode wall
    .venv/bin/python bench/overhead.py --target pingpong --work 300 --pin --mode cpu
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _benchlib as bl

BENCH = "overhead"
ATTACH_DELAY_MS = 700


MAPPINGS = 0  # pycrunch only: extra mappings the target makes first (--mappings)
DEPTH = 0  # crunch only: frames of recursion each thread works under (--depth)


PINGPONG = False  # the target is pingpong (--target pingpong)
WORK_NS = 0  # pingpong: each thread's CPU work a turn (--work-ns)
PIN = False  # the target on the first CPU, livesym on the others (--pin)
SWITCHES: list[float] = []  # the plain runs' context switches a second


def _start_crunch(exe: list[str], threads: int, work: int) -> subprocess.Popen[str]:
    extra = [str(MAPPINGS)] if MAPPINGS else [str(DEPTH)] if DEPTH else []
    args = [str(threads), str(work), str(ATTACH_DELAY_MS), *extra]
    if PINGPONG:
        args = [str(work * 1000), str(ATTACH_DELAY_MS), str(WORK_NS)]
    proc = subprocess.Popen(
        [*exe, *args],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=bl.on_first_cpu if PIN else None,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 10)
    if not ready or not proc.stdout.readline().startswith("ready"):
        proc.kill()
        raise bl.BenchError("crunch did not start")
    return proc


def _elapsed(proc: subprocess.Popen[str], plain: bool = False) -> float:
    assert proc.stdout is not None
    out = proc.stdout.read()
    if plain:  # its switches a second too (rusage: all its threads')
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    else:
        proc.wait(timeout=600)
    for line in out.splitlines():
        if line.startswith("elapsed "):
            seconds = float(line.split()[1])
            if plain:
                SWITCHES.append((usage.ru_nvcsw + usage.ru_nivcsw) / seconds)
            return seconds
    raise bl.BenchError(f"crunch printed no elapsed time: {out!r}")


PROCESSES = 1  # copies of the target run at once (--processes)


def _start_all(exe: list[str], threads: int, work: int) -> list[subprocess.Popen[str]]:
    return [_start_crunch(exe, threads, work) for _ in range(PROCESSES)]


def _mean_elapsed(procs: list[subprocess.Popen[str]]) -> float:
    return statistics.mean(_elapsed(p) for p in procs)


def plain_run(exe: list[str], threads: int, work: int) -> float:
    return statistics.mean(_elapsed(p, plain=True) for p in _start_all(exe, threads, work))


def profiled_run(
    exe: list[str],
    threads: int,
    work: int,
    rate: int,
    sampler: str,
    capture: Path,
    extra: tuple[str, ...] = (),
) -> tuple[float, float, float | None, int, int]:
    """(work seconds, livesym CPU fraction of one core over its run and while the work
    ran (None when too short to tell), samples, lost)."""
    crunches = _start_all(exe, threads, work)
    started = time.monotonic()
    # Several: every process of the copy's name, their descendants followed too.
    target = [Path(exe[-1]).name, "--children"] if PROCESSES > 1 else [str(crunches[0].pid)]
    rec = subprocess.Popen(
        [str(bl.livesym_script() or "livesym"), "record", *target, "-o", str(capture),
         "--rate", str(rate), "--sampler", sampler, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=bl.on_other_cpus if PIN else None,
    )  # fmt: skip
    meter = _SteadyCpu(rec.pid, started + ATTACH_DELAY_MS / 1000 + 2.0)
    try:
        elapsed = _mean_elapsed(crunches)
    finally:
        meter.stop()
    _pid, status, usage = os.wait4(rec.pid, 0)
    wall = time.monotonic() - started
    rec.returncode = os.waitstatus_to_exitcode(status)
    if rec.returncode != 0:
        err = rec.stderr.read().decode() if rec.stderr else ""
        raise bl.BenchError(f"livesym record failed: {err.strip()[-200:]}")
    doc = json.loads(capture.read_text())
    cpu = (usage.ru_utime + usage.ru_stime) / wall
    return elapsed, cpu, meter.share(), len(doc["samples"]), int(doc["session"]["lost"])


TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float | None:
    """CPU time of ``pid``, its reaped children and its living ones (py-spy runs)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    total = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            child = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(child[1]) == pid:
            total += int(child[11]) + int(child[12])
    return total / TICK


class _SteadyCpu:
    """livesym's CPU share while the work runs, from ``since`` (its start left out) to
    ``until``."""

    def __init__(self, pid: int, since: float, until: float = float("inf")) -> None:
        self.pid, self.since, self.until = pid, since, until
        self.readings: list[tuple[float, float]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._done.wait(0.25):
            now = time.monotonic()
            cpu = _cpu_seconds(self.pid)
            if self.since <= now <= self.until and cpu is not None:
                self.readings.append((now, cpu))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def share(self) -> float | None:
        if len(self.readings) < 2 or self.readings[-1][0] - self.readings[0][0] < 1.0:
            return None
        (t0, c0), (t1, c1) = self.readings[0], self.readings[-1]
        return (c1 - c0) / (t1 - t0)


def _target(name: str, as_json: bool) -> list[str]:
    """The command that runs the work: crunch built from source, or pycrunch.py."""
    try:
        from livesym.sample_targets import BuildError, build
    except ImportError as e:
        bl.skip(BENCH, f"livesym is not importable: {e}", as_json)
    if name == "pycrunch":
        import livesym.sample_targets as targets

        return [sys.executable, str(Path(targets.__file__).resolve().parent / "pycrunch.py")]
    try:
        exe = build(name)
    except BuildError as e:
        bl.skip(BENCH, f"cannot build crunch: {e}", as_json)
    if PROCESSES > 1:  # a name of their own, that no other process has
        import shutil

        copy = Path(tempfile.mkdtemp(prefix="livesym-bench-")) / "lsymbenchwork"
        shutil.copy2(exe, copy)
        return [str(copy)]
    return [str(exe)]


STEADY_BEFORE = 3.0  # seconds of work alone before livesym starts
STEADY_WARM = 2.0  # seconds after livesym's start left out of its window
STEADY_EDGE = 0.5  # seconds left out beside each edge of a window


def _rate(points: list[tuple[float, int]], start: float, end: float) -> float | None:
    """Iterations a second between the first and the last progress report inside
    [start, end], or None when fewer than a second of them are there."""
    inside = [(t, n) for t, n in points if start <= t <= end]
    if len(inside) < 2 or inside[-1][0] - inside[0][0] < 1.0:
        return None
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    return (n1 - n0) / (t1 - t0)


def steady_run(
    exe: list[str], threads: int, work: int, rate: int, sampler: str, window: float,
    capture: Path, extra: tuple[str, ...],
) -> tuple[float, float | None, float | None]:  # fmt: skip
    """(steady slowdown, livesym's CPU share while measured, its CPU seconds by then):
    one process, its rate with livesym running held against its rate alone."""
    proc = subprocess.Popen(
        [*exe, str(threads), str(work), "0", str(DEPTH), "100"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    points: list[tuple[float, int]] = []
    rec: subprocess.Popen[bytes] | None = None
    meter: _SteadyCpu | None = None
    started = ended = 0.0
    try:
        for line in proc.stdout:
            if not line.startswith("progress "):
                continue
            _, t, n = line.split()
            points.append((float(t), int(n)))
            if rec is None and points[-1][0] - points[0][0] >= STEADY_BEFORE:
                started = time.monotonic()
                rec = subprocess.Popen(
                    [str(bl.livesym_script() or "livesym"), "record", str(proc.pid),
                     "-o", str(capture), "--rate", str(rate), "--sampler", sampler,
                     "--duration", str(window), *extra],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                )  # fmt: skip
                meter = _SteadyCpu(rec.pid, started + STEADY_WARM, started + window)
            elif rec is not None and meter is not None and not ended and rec.poll() is not None:
                ended = time.monotonic()
                meter.stop()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if rec is None or meter is None or not ended:
        raise bl.BenchError("the work ended before livesym did: raise --work")
    if rec.returncode != 0:
        err = rec.stderr.read().decode() if rec.stderr else ""
        raise bl.BenchError(f"livesym record failed: {err.strip()[-200:]}")
    windows = ((points[0][0], started), (ended, points[-1][0]))
    alone = [r for lo, hi in windows
             if (r := _rate(points, lo + STEADY_EDGE, hi - STEADY_EDGE)) is not None]  # fmt: skip
    # To the end of its --duration: its final write is not its steady cost either.
    profiled = _rate(points, started + STEADY_WARM, started + window)
    if not alone or profiled is None:
        raise bl.BenchError("too few progress reports around livesym's window: raise --work")
    first = meter.readings[0][1] if meter.readings else None
    return statistics.mean(alone) / profiled - 1, meter.share(), first


def main() -> int:
    p = bl.parser("Profiler overhead on a fixed amount of CPU work (crunch).")
    p.add_argument("--rate", type=int, default=99, help="sampling rate in Hz (default 99)")
    p.add_argument("--sampler", default="perf", help="sampler to measure (default perf)")
    p.add_argument("--threads", type=int, default=4, help="crunch threads (default 4)")
    p.add_argument(
        "--work", type=int, default=None,
        help="million iterations per thread (default 400; 6000 with --steady)",
    )  # fmt: skip
    p.add_argument(
        "--target", choices=("crunch", "pycrunch", "pingpong"), default="crunch",
        help="the work to run",
    )  # fmt: skip
    p.add_argument(
        "--mode", choices=("cpu", "wall", "off-cpu"), default="cpu",
        help="the time livesym records (default cpu)",
    )  # fmt: skip
    p.add_argument("--work-ns", type=int, default=0, help="pingpong: CPU work a turn, ns")
    p.add_argument(
        "--pin", action="store_true", help="the target on the first CPU, livesym on the others"
    )
    p.add_argument("--no-kernel", action="store_true", help="record with --no-kernel")
    p.add_argument("--nonblocking", action="store_true", help="record with --nonblocking (py-spy)")
    p.add_argument(
        "--mappings",
        type=int,
        default=0,
        help="pycrunch: map this many regions first (a big service's address space)",
    )
    p.add_argument(
        "--depth", type=int, default=0, help="crunch: each thread works this many frames "
        "down a recursion (2000: a 32 KiB stack, copies raised to 64 KiB)",
    )  # fmt: skip
    p.add_argument(
        "--processes", type=int, default=1, help="copies of the target at once (default 1)"
    )
    p.add_argument(
        "--delay", type=int, default=None, help="ms the target waits before its work "
        "(default 700; 2000 with --processes)",
    )  # fmt: skip
    p.add_argument(
        "--steady", action="store_true", help="the steady slowdown: the work's rate while "
        "livesym runs against its rate before and after, in the same process (crunch)",
    )  # fmt: skip
    p.add_argument("--window", type=float, default=6.0, help="--steady: seconds livesym records")
    args = p.parse_args()
    if args.work is None:
        args.work = 6000 if args.steady else 400
    global MAPPINGS, PROCESSES, ATTACH_DELAY_MS, DEPTH, PINGPONG, WORK_NS, PIN
    PINGPONG, WORK_NS, PIN = args.target == "pingpong", args.work_ns, args.pin
    MAPPINGS = args.mappings
    DEPTH = args.depth
    PROCESSES = max(1, args.processes)
    if args.delay is not None or PROCESSES > 1:
        ATTACH_DELAY_MS = args.delay if args.delay is not None else 2000
    exe = _target(args.target, args.json)
    if args.steady:
        return _steady_main(args, exe)
    plain: list[float] = []
    profiled: list[float] = []
    cpus: list[float] = []
    steady: list[float] = []
    samples = lost = 0
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "cap.json"
        for r in range(args.runs):
            order = ("plain", "profiled") if r % 2 == 0 else ("profiled", "plain")
            for which in order:
                if which == "plain":
                    plain.append(plain_run(exe, args.threads, args.work))
                else:
                    extra: tuple[str, ...] = ("--no-kernel",) if args.no_kernel else ()
                    extra += ("--nonblocking",) if args.nonblocking else ()
                    extra += ("--mode", args.mode)
                    t, cpu, share, n, lo = profiled_run(
                        exe, args.threads, args.work, args.rate, args.sampler, capture, extra
                    )
                    profiled.append(t)
                    cpus.append(cpu)
                    if share is not None:
                        steady.append(share)
                    samples += n
                    lost += lo
    slowdown = statistics.median(profiled) / statistics.median(plain) - 1
    result = {
        "benchmark": BENCH,
        "target": args.target,
        "sampler": args.sampler + (" --nonblocking" if args.nonblocking else ""),
        "mode": args.mode,
        "pinned": args.pin,
        "switches_per_s": round(statistics.median(SWITCHES)) if SWITCHES else None,
        "rate_hz": args.rate,
        "threads": args.threads,
        "processes": PROCESSES,
        "mappings": args.mappings,
        "depth": args.depth,
        "plain_median_s": round(statistics.median(plain), 4),
        "profiled_median_s": round(statistics.median(profiled), 4),
        "slowdown_pct": round(slowdown * 100, 2),
        "livesym_cpu_pct_of_one_core": round(statistics.median(cpus) * 100, 2),
        "livesym_steady_cpu_pct_of_one_core": (
            round(statistics.median(steady) * 100, 2) if steady else None
        ),
        "samples": samples,
        "lost": lost,
    }
    rate = result["switches_per_s"]
    switching = f" ({rate:,} switches/s)" if PINGPONG and rate else ""
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"overhead, {args.sampler} at {args.rate} Hz, {args.mode} time, on {args.target}"
            f"{switching}"
            f"{' pinned' if PIN else ''} with {2 if PINGPONG else args.threads} "
            f"threads{f' and {args.mappings} extra mappings' if args.mappings else ''}"
            f"{f' in each of {PROCESSES} processes' if PROCESSES > 1 else ''}: "
            f"work {result['plain_median_s']} s alone, {result['profiled_median_s']} s profiled "
            f"-> slowdown {result['slowdown_pct']} %; livesym used "
            f"{result['livesym_cpu_pct_of_one_core']} % of one core over its run, "
            f"{result['livesym_steady_cpu_pct_of_one_core']} % while the work ran; "
            f"{samples} samples, {lost} lost (median of {args.runs} interleaved runs)"
        )
    return 0


def _steady_main(args: argparse.Namespace, exe: list[str]) -> int:
    if args.target != "crunch" or PROCESSES > 1:
        raise bl.BenchError("--steady measures crunch, one process")
    extra = ("--no-kernel",) if args.no_kernel else ()
    slowdowns: list[float] = []
    shares: list[float] = []
    starts: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            slow, share, first = steady_run(
                exe, args.threads, args.work, args.rate, args.sampler, args.window,
                Path(tmp) / "cap.json", extra,
            )  # fmt: skip
            slowdowns.append(slow)
            if share is not None:
                shares.append(share)
            if first is not None:
                starts.append(first)
    result = {
        "benchmark": BENCH,
        "mode": "steady",
        "sampler": args.sampler,
        "rate_hz": args.rate,
        "threads": args.threads,
        "depth": args.depth,
        "window_s": args.window,
        "steady_slowdown_pct": round(statistics.median(slowdowns) * 100, 2),
        "steady_slowdowns_pct": [round(x * 100, 2) for x in slowdowns],
        "livesym_steady_cpu_pct_of_one_core": (
            round(statistics.median(shares) * 100, 2) if shares else None
        ),
        "livesym_steady_cpu_pcts": [round(x * 100, 2) for x in shares],
        "livesym_cpu_s_first_2s": round(statistics.median(starts), 3) if starts else None,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"steady overhead, {args.sampler} at {args.rate} Hz on crunch with {args.threads} "
            f"threads{f' {args.depth} frames deep' if args.depth else ''}: the work's rate "
            f"{result['steady_slowdown_pct']} % slower while livesym ran than before and "
            f"after it (runs: {result['steady_slowdowns_pct']}); livesym "
            f"{result['livesym_steady_cpu_pct_of_one_core']} % of one core then "
            f"({result['livesym_steady_cpu_pcts']}), "
            f"{result['livesym_cpu_s_first_2s']} s of CPU in its first 2 s "
            f"(median of {args.runs})"
        )
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
