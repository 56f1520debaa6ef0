"""What collecting off-CPU time costs a target that switches all the time.

The target is sample_targets/pingpong.c: two threads passing a byte through two pipes,
each blocking in read until the other writes, a fixed number of round trips (tens of
thousands of context switches a second); it prints the time the round trips took. Runs
alternate between: nothing attached (the reference), ``livesym record --mode wall``
(perf's switch events: a sample with a stack copy at every switch), ``livesym record``
in CPU time (on-CPU figures, which must not change), and, as the reference off-CPU
profiler, ``perf record -e context-switches -c 1 --call-graph dwarf --switch-events``,
what perf does for off-CPU stacks without BPF. The slowdown is each one's median time
over the reference's, and so is the target's own CPU time (its rusage: what the stack
copies at its switches cost it, in its system time). On a VM the time alone misleads:
a target that does nothing but wake up is faster beside anything that keeps the CPUs out
of their idle states (perf record, livesym), so its CPU is the figure to read.
livesym's own CPU is its rusage over its wall time; its capture
says how many samples were lost; the switches a second are the reference run's
(``voluntary_ctxt_switches`` + ``nonvoluntary_ctxt_switches`` of both threads over its
time).

With ``--pin`` the target runs on the first CPU alone (its two threads take turns there:
the CPU is never idle, nothing wakes from an idle state) and the profilers on the
others: the slowdown is then what the profiler's work at the target's switches costs it,
and no fillers are run.

    .venv/bin/python bench/off_cpu.py [--rate 99] [--trips 200000] [--work-us 0] [--runs 5]
    .venv/bin/python bench/off_cpu.py --pin --trips 300000
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import _benchlib as bl

BENCH = "off_cpu"
DELAY_MS = 700  # the target waits this long before its work: the profiler attaches


WORK_NS = 0  # each thread's CPU work at each turn (--work-us)
PIN = False  # the target on the first CPU, the profilers on the others (--pin)


def _start(exe: Path, trips: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(exe), str(trips), str(DELAY_MS), str(WORK_NS)],
                            stdout=subprocess.PIPE, text=True,
                            preexec_fn=bl.on_first_cpu if PIN else None)  # fmt: skip
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 10)
    if not ready or not proc.stdout.readline().startswith("ready"):
        proc.kill()
        raise bl.BenchError("pingpong did not start")
    return proc


CPU: dict[int, float] = {}  # pid -> the target's CPU seconds (user + system), at its end


def _elapsed(proc: subprocess.Popen[str]) -> float:
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    CPU[proc.pid] = usage.ru_utime + usage.ru_stime
    for line in out.splitlines():
        if line.startswith("elapsed "):
            return float(line.split()[1])
    raise bl.BenchError(f"pingpong printed no elapsed time: {out!r}")


def _switches(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def plain(exe: Path, trips: int) -> tuple[float, float, float]:
    """(seconds of work, switches a second during it, its CPU seconds)."""
    proc = _start(exe, trips)
    time.sleep(DELAY_MS / 1000 - 0.2)
    before, t0 = _switches(proc.pid), time.monotonic()
    assert proc.stdout is not None
    # The switches just before it exits: read them while its threads still live.
    deadline = t0 + 600
    last = before
    while time.monotonic() < deadline:  # not reaped here: _elapsed takes its rusage
        try:
            if Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            last = _switches(proc.pid)
        except (OSError, ValueError, IndexError):
            break
        time.sleep(0.05)
    elapsed = _elapsed(proc)
    return elapsed, (last - before) / max(elapsed, 1e-9), CPU[proc.pid]


def livesym(
    exe: Path, trips: int, rate: int, mode: str, capture: Path
) -> tuple[float, float, int, float]:
    """(seconds of work, livesym's CPU in cores over its run, samples lost, the target's
    CPU seconds)."""
    proc = _start(exe, trips)
    started = time.monotonic()
    rec = subprocess.Popen(
        [str(bl.livesym_script() or "livesym"), "record", str(proc.pid), "-o", str(capture),
         "--rate", str(rate), "--sampler", "perf", "--mode", mode],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=bl.on_other_cpus if PIN else None,
    )  # fmt: skip
    elapsed = _elapsed(proc)
    _pid, status, usage = os.wait4(rec.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        err = rec.stderr.read().decode() if rec.stderr else ""
        raise bl.BenchError(f"livesym record failed: {err.strip()[-200:]}")
    doc = json.loads(capture.read_text())
    cores = (usage.ru_utime + usage.ru_stime) / wall
    return elapsed, cores, int(doc["session"]["lost"]), CPU[proc.pid]


def perf(exe: Path, trips: int, data: Path) -> tuple[float, float]:
    proc = _start(exe, trips)
    rec = subprocess.Popen(
        ["perf", "record", "-q", "-e", "context-switches", "-c", "1", "--call-graph", "dwarf",
         "--switch-events", "-p", str(proc.pid), "-o", str(data)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=bl.on_other_cpus if PIN else None,
    )  # fmt: skip
    elapsed = _elapsed(proc)
    rec.wait(timeout=600)
    return elapsed, CPU[proc.pid]


def _runs(
    args: argparse.Namespace,
    exe: Path,
    have_perf: bool,
    results: dict[str, list[float]],
    spent: dict[str, list[float]],
    cores: dict[str, list[float]],
    lost: dict[str, int],
    rates: list[float],
) -> None:
    """The runs, alternating, each candidate's figures added to the lists."""
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.warmup + args.runs):
            timed = r >= args.warmup
            order = ["plain", "wall", "cpu", "perf"][:: 1 if r % 2 == 0 else -1]
            for name in order:
                if name == "plain":
                    elapsed, rate, cpu = plain(exe, args.trips)
                    rates.append(rate)
                elif name == "perf":
                    if not have_perf:
                        continue
                    elapsed, cpu = perf(exe, args.trips, Path(tmp) / "perf.data")
                else:
                    elapsed, used, n, cpu = livesym(exe, args.trips, args.rate, name,
                                                    Path(tmp) / f"{name}.json")  # fmt: skip
                    if timed:
                        cores[name].append(used)
                        lost[name] += n
                if timed:
                    results[name].append(elapsed)
                    spent[name].append(cpu)


def main() -> int:
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=99, help="sampling rate in Hz (default 99)")
    p.add_argument("--trips", type=int, default=200_000, help="round trips (default 200000)")
    p.add_argument("--idle-box", action="store_true",
                   help="leave the other CPUs idle (by default a 'nice -n 19 yes' per CPU "
                   "keeps them out of their idle states, which wake-ups pay for)")  # fmt: skip
    p.add_argument("--work-us", type=float, default=0.0,
                   help="each thread's CPU work at each turn, in us (default 0: none)")  # fmt: skip
    p.add_argument("--pin", action="store_true",
                   help="the target on the first CPU, the profilers on the others")  # fmt: skip
    args = p.parse_args()
    global WORK_NS, PIN
    WORK_NS = round(args.work_us * 1000)
    PIN = args.pin
    bl.utf8_stdout()
    from livesym.sample_targets import build

    exe = build("pingpong")
    have_perf = shutil.which("perf") is not None
    results: dict[str, list[float]] = {"plain": [], "wall": [], "cpu": [], "perf": []}
    spent: dict[str, list[float]] = {name: [] for name in results}  # the target's CPU s
    cores: dict[str, list[float]] = {"wall": [], "cpu": []}
    lost: dict[str, int] = {"wall": 0, "cpu": 0}
    rates: list[float] = []
    fillers = [] if args.idle_box or args.pin else [
        subprocess.Popen(["nice", "-n", "19", "yes"], stdout=subprocess.DEVNULL)
        for _ in range(os.cpu_count() or 1)
    ]  # fmt: skip
    try:
        _runs(args, exe, have_perf, results, spent, cores, lost, rates)
    finally:
        for filler in fillers:
            filler.kill()
            filler.wait()
    base = statistics.median(results["plain"])
    base_cpu = statistics.median(spent["plain"])
    report = {
        "benchmark": BENCH,
        "rate_hz": args.rate,
        "trips": args.trips,
        "work_us": args.work_us,
        "pinned": args.pin,
        "switches_per_s": round(statistics.median(rates)),
        "plain_s": round(base, 3),
        "plain_cpu_s": round(base_cpu, 3),
        **{
            f"{k}_target_cpu": round(statistics.median(v) / base_cpu, 3)
            for k, v in spent.items()
            if k != "plain" and v
        },
        **{
            f"{k}_slowdown": round(statistics.median(v) / base, 3)
            for k, v in results.items()
            if k != "plain" and v
        },
        **{f"{k}_livesym_cores": round(statistics.median(v), 3) for k, v in cores.items()},
        **{f"{k}_lost": n for k, n in lost.items()},
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"pingpong{' (pinned)' if args.pin else ''}: {args.trips} round trips, "
          f"{report['switches_per_s']:,} switches/s, "
          f"{bl.secs(base)} alone, {bl.secs(base_cpu)} of CPU (median of {args.runs})")  # fmt: skip
    for key in ("wall", "cpu", "perf"):
        if f"{key}_slowdown" in report:
            line = (f"  {key:5s} time {report[f'{key}_slowdown']:.3f}x, the target's CPU "
                    f"{report[f'{key}_target_cpu']:.3f}x")  # fmt: skip
            if key in cores:
                line += (f", livesym {100 * report[f'{key}_livesym_cores']:.1f} % of a core, "
                         f"{lost[key]} samples lost")  # fmt: skip
            print(line)
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
