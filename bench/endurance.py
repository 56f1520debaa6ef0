"""A recording left on: its memory over time, its cost, and what kill -9 leaves.

`livesym record PID -o FILE --rate RATE` runs on four busy threads (sample_targets/
crunch.c, work enough for the whole run) for ``--seconds``. Once a second this reads
the recorder's RSS (/proc/PID/status VmRSS) and its CPU time (utime + stime). At the
end it is killed with SIGKILL, and its capture is read: how much of the session it
holds up to the kill (the must-hold of issue 31: all but the last 1.5 s).

What it reports: RSS at ``--from`` seconds (after the start's imports, the first loads
of the target's files, the detail window filling) and at the end, the growth between
them and per hour; the recorder's CPU over the same span as a share of one core; the
capture's size and samples; the seconds kill -9 lost. The reference for the cost is
the same run's samples taken (a ratio: CPU microseconds a sample).

    .venv/bin/python bench/endurance.py [--seconds 150] [--from 30] [--rate 999]
    .venv/bin/python bench/endurance.py --seconds 3600 --rate 99 --from 60   # an hour
    .venv/bin/python bench/endurance.py --keep-last 20    # a flight recorder

With ``--keep-last S`` the recorder is a flight recorder: at the end it is sent SIGUSR1
first, and the time its dump took to appear and the span the dump holds are reported;
then it is killed as above (its last dump stays: a flight recorder appends nothing).

Issue 31's bars: 150 s at 999 Hz, RSS grows <= 8 MB between 30 s and 150 s; kill -9
loses <= 1.5 s; record at 99 Hz <= 1 % of a core in steady state.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _benchlib as bl

BENCH = "endurance"
THREADS = 4


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise bl.BenchError(f"no VmRSS for {pid}")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=150.0)
    p.add_argument("--from", dest="since", type=float, default=30.0)
    p.add_argument("--rate", type=int, default=999)
    p.add_argument("--gz", action="store_true", help="record to a .json.gz")
    p.add_argument("--keep-last", type=float, default=None, help="a flight recorder")
    args = p.parse_args()
    from livesym.capture.reader import read_capture
    from livesym.sample_targets import build

    script = bl.livesym_script()
    if script is None:
        bl.skip(BENCH, "no livesym script beside this interpreter", args.json)
    exe = build("crunch")
    out = Path(tempfile.mkdtemp(prefix="livesym-endurance-")) / (
        "cap.json.gz" if args.gz else "cap.json"
    )
    target = subprocess.Popen([str(exe), str(THREADS), "100000000", "0"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert target.stdout is not None
    if not target.stdout.readline().startswith("ready"):
        raise bl.BenchError("crunch did not start")
    keep = ["--keep-last", str(args.keep_last)] if args.keep_last else []
    recorder = subprocess.Popen(
        [str(script), "record", str(target.pid), "-o", str(out), "--rate", str(args.rate),
         *keep],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    started = time.monotonic()
    readings: list[tuple[float, int, float]] = []  # (seconds, RSS KiB, CPU seconds)
    try:
        while (now := time.monotonic() - started) < args.seconds:
            readings.append((now, _rss_kb(recorder.pid), _cpu_seconds(recorder.pid)))
            if not args.json:
                print(f"  {now:6.1f} s  RSS {readings[-1][1] / 1024:7.1f} MiB", file=sys.stderr)
            time.sleep(1.0)
        dumped = None
        if args.keep_last:
            asked = time.monotonic()
            os.kill(recorder.pid, signal.SIGUSR1)
            while not out.exists() and time.monotonic() - asked < 30:
                time.sleep(0.02)
            dumped = time.monotonic() - asked
            time.sleep(0.5)  # (written atomically: there whole once there)
        killed = time.monotonic()
        os.kill(recorder.pid, signal.SIGKILL)
    finally:
        recorder.kill()
        recorder.wait()
        target.kill()
        target.wait()
    capture = read_capture(out)
    last = max(row[0] for row in capture.samples)
    lost = killed - (float(capture.session["start"]) + last)
    span = float(capture.session["end"]) - float(capture.session["start"])
    first = next(r for r in readings if r[0] >= args.since)
    end = readings[-1]
    seconds = end[0] - first[0]
    growth_mb = (end[1] - first[1]) / 1024
    cpu = (end[2] - first[2]) / seconds
    samples = sum(row[4] if len(row) > 4 else 1 for row in capture.samples)
    result = {
        "benchmark": BENCH, "rate_hz": args.rate, "seconds": round(end[0], 1),
        "rss_mb_at_from": round(first[1] / 1024, 1), "rss_mb_at_end": round(end[1] / 1024, 1),
        "rss_growth_mb": round(growth_mb, 2),
        "rss_growth_mb_per_hour": round(growth_mb * 3600 / seconds, 1),
        "cpu_share_of_a_core": round(cpu, 4),
        "capture_span_s": round(span, 1),
        "cpu_us_per_sample": round(end[2] / max(1, samples) * 1e6, 1),
        **({} if dumped is None else {"sigusr1_dump_s": round(dumped, 2)}),
        "capture_bytes": out.stat().st_size, "capture_samples": samples,
        "capture_rows": len(capture.samples),
        "bytes_per_second": round(out.stat().st_size / end[0]),
        "kill_lost_s": round(lost, 2),
        "rss_mb_by_minute": [round(r[1] / 1024, 1) for r in readings[:: 60]],
    }  # fmt: skip
    bl.print_result(result, args.json)
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
