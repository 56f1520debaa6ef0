"""From attaching to the first named row, on a target whose hot code is in libLLVM.

Workload: llvm-symbolizer demangling a stream of addresses through libLLVM (stripped,
110 MB; its .dynsym names the exported functions, the FDEs of its 98,000-entry
.eh_frame_hdr bound the rest). livesym must read that table and the symbols, and
unwind every sample from its stack copy, before it can name a row.

Candidate: a fresh interpreter (so imports count) that starts livesym's engine as
``top`` and the dashboard do (perf sampler, 99 Hz, the default stack copy) and polls
its snapshot every 20 ms. Timed from spawning it: the first row of any kind, the first
named row in libLLVM (a symbol of its own), and the first row there bounded by an FDE
(an unnamed function).

Reference, in the same run: perf's quickest way to a named profile of the same process,
``perf record -F 99 --call-graph dwarf -p PID -- sleep 0.5`` then ``perf report
--stdio``, timed from spawning perf record until perf report has printed (``perf top``
redraws every 2 s at the least).

    .venv/bin/python bench/first_named_row.py [--runs 5]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _benchlib as bl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # livesym, tests.support
from tests.support import perf_ref

# Runs in the fresh interpreter: prints one JSON line per first, then exits.
PROBE = """
import asyncio, json, sys, time
from livesym.sampling.choice import choose_sampler
from livesym.engine import Engine
from livesym.target.process import TargetProcess

pid = int(sys.argv[1])
firsts = {}

async def main():
    engine = Engine(TargetProcess(pid), choose_sampler("perf", pid, 99, False).sampler)
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop, 20.0))
    while len(firsts) < 3 and not task.done():
        await asyncio.sleep(0.02)
        for row in engine.snapshot().view.functions.unordered():
            frame = row.frame
            now = time.monotonic()
            firsts.setdefault("any row", now)
            if "libLLVM" in (frame.module or ""):
                if frame.resolved:
                    firsts.setdefault("named row in libLLVM", now)
                elif frame.reason is not None and frame.reason.value == "unnamed_function":
                    firsts.setdefault("FDE-bounded row in libLLVM", now)
    stop.set()
    await task

asyncio.run(main())
print(json.dumps(firsts))
"""


def _livesym_firsts(pid: int) -> dict[str, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", PROBE, str(pid)], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    if done.returncode != 0:
        raise bl.BenchError(f"the probe failed: {done.stderr.strip()[-300:]}")
    firsts: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return {what: at - started for what, at in firsts.items()}


def _perf_report(pid: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        data = str(Path(tmp) / "perf.data")
        started = time.monotonic()
        subprocess.run(["perf", "record", "-q", "-F", "99", "--call-graph", "dwarf", "-p",
                        str(pid), "-o", data, "--", "sleep", "0.5"],
                       capture_output=True, check=True, timeout=60)  # fmt: skip
        subprocess.run(["perf", "report", "--stdio", "-i", data], capture_output=True,
                       check=True, timeout=120)  # fmt: skip
        return time.monotonic() - started


def main() -> int:
    args = bl.parser((__doc__ or "").splitlines()[0]).parse_args()
    with perf_ref.workload("llvm-symbolizer") as pid:
        if pid is None:
            bl.skip("first_named_row", "llvm-symbolizer or libLLVM is not installed", args.json)
        if shutil.which("perf") is None:
            bl.skip("first_named_row", "perf (the reference) is not installed", args.json)
        livesym: dict[str, list[float]] = {}
        perf: list[float] = []
        for r in range(args.runs):  # alternating, so neither always runs first
            for which in ("livesym", "perf") if r % 2 == 0 else ("perf", "livesym"):
                if which == "perf":
                    perf.append(_perf_report(pid))
                    continue
                for what, seconds in _livesym_firsts(pid).items():
                    livesym.setdefault(what, []).append(seconds)
    median_perf = sorted(perf)[len(perf) // 2]
    results: dict[str, object] = {"perf record 0.5 s + perf report": median_perf}
    for what, times in livesym.items():
        median = sorted(times)[len(times) // 2]
        results[what] = {"median_s": median, "ratio_to_perf": median / median_perf,
                         "runs": len(times)}  # fmt: skip
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"first named row, {args.runs} runs each, medians (from spawning the process):")
    print(f"  perf record 0.5 s + perf report   {median_perf:6.2f} s")
    for what, times in livesym.items():
        median = sorted(times)[len(times) // 2]
        print(f"  livesym: {what:28s} {median:6.2f} s  ({median / median_perf:.2f}x perf)"
              f"  of {len(times)} runs")  # fmt: skip
    return 0


if __name__ == "__main__":
    bl.run_main("first_named_row", main)
