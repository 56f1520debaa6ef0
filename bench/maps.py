"""Reading and diffing /proc/PID/maps of a process with 1k, 10k and 40k mappings.

Each size is a real process: sample_targets/pycrunch.py maps that many regions
(alternating protections, one mapping a page) and waits. For each size:

- reference: the kernel's part, reading the maps file as bytes (``read_maps_text``);
- first read: read and parse every line (``MapsWatcher`` made anew);
- unchanged: the watcher's timed re-read when nothing changed (text compared whole);
- changed: a re-read after 1 % of the lines changed (only new lines are parsed);
- the command: ``livesym maps PID`` as a user runs it, whole (bar: < 0.5 s at 40k), beside
  the start of the same interpreter doing nothing.

Printed: milliseconds per operation (median of --runs), its ratio to the kernel's
read, and its share of the dashboard's refresh period (250 ms). JVMs, browsers and
big Python services map tens of thousands of regions; the engine re-reads the maps
every second, so this must stay well under the refresh period.

    .venv/bin/python bench/maps.py [--sizes 1000 10000 40000] [--runs 5] [--json]
"""

from __future__ import annotations

import json
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _benchlib as bl

BENCH = "maps"
REFRESH_S = 0.25


def _start(count: int) -> subprocess.Popen[str]:
    import livesym.sample_targets as targets

    script = Path(targets.__file__).resolve().parent / "pycrunch.py"
    # One thread, no work after a 10 minute wait: the process only holds its mappings.
    proc = subprocess.Popen(
        [sys.executable, str(script), "1", "0", "600000", str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    if not ready or not proc.stdout.readline().startswith("ready"):
        proc.kill()
        raise bl.BenchError(f"pycrunch with {count} mappings did not start")
    return proc


def _changed(text: str, share: float) -> str:
    """``text`` with ``share`` of its lines altered (their inode field), as a target
    that maps and unmaps would alter them."""
    lines = text.splitlines()
    step = max(1, int(1 / share))
    for i in range(0, len(lines), step):
        parts = lines[i].split(None, 5)
        if len(parts) >= 5:
            parts[4] = str(int(parts[4]) + 1)
            lines[i] = " ".join(parts)
    return "\n".join(lines) + "\n"


def _median_ms(fn: object, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def measure(count: int, runs: int) -> dict[str, object]:
    from livesym.target.maps_watcher import MapsWatcher
    from livesym.target.process import TargetProcess

    proc = _start(count)
    try:
        target = TargetProcess(proc.pid)
        lines = len(target.read_maps_text().splitlines())
        kernel = _median_ms(target.read_maps_text, runs)
        first = _median_ms(lambda: MapsWatcher(target), runs)
        watcher = MapsWatcher(target, min_interval=0)
        unchanged = _median_ms(lambda: watcher.refresh(force=True), runs)
        # 1 % of the lines changed: the watcher re-reads a text that differs from its last.
        real = target.read_maps_text
        altered = [_changed(real(), 0.01), real()]
        target.read_maps_text = lambda: altered.reverse() or altered[0]  # type: ignore[method-assign]
        changed = _median_ms(lambda: watcher.refresh(force=True), runs)
        # The whole command a user runs, against the start of the same interpreter.
        script = bl.livesym_script()
        command = (
            _median_ms(bl.command([str(script), "maps", str(proc.pid)]), runs) if script else 0
        )
        start = _median_ms(bl.command([sys.executable, "-c", "pass"]), runs)
    finally:
        proc.kill()
        proc.wait()
    return {
        "mappings": lines,
        "kernel_read_ms": round(kernel, 2),
        "first_read_ms": round(first, 2),
        "unchanged_ms": round(unchanged, 2),
        "changed_1pct_ms": round(changed, 2),
        "unchanged_vs_kernel": round(unchanged / kernel, 2),
        "changed_vs_kernel": round(changed / kernel, 2),
        "changed_share_of_refresh_pct": round(changed / (REFRESH_S * 1000) * 100, 1),
        "maps_command_ms": round(command, 1),
        "python_start_ms": round(start, 1),
    }


def main() -> int:
    p = bl.parser("Reading and diffing /proc/PID/maps at 1k, 10k and 40k mappings.")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 40_000])
    args = p.parse_args()
    results = [measure(n, args.runs) for n in args.sizes]
    if args.json:
        print(json.dumps({"benchmark": BENCH, "results": results}))
        return 0
    print(f"maps re-reads (median of {args.runs}); reference: the kernel's read of the file")
    for r in results:
        print(
            f"  {r['mappings']:>6} mappings: kernel {r['kernel_read_ms']} ms; first read "
            f"{r['first_read_ms']} ms; unchanged {r['unchanged_ms']} ms "
            f"({r['unchanged_vs_kernel']}x the kernel's); 1 % changed {r['changed_1pct_ms']} ms "
            f"({r['changed_vs_kernel']}x, {r['changed_share_of_refresh_pct']} % of a refresh); "
            f"`livesym maps PID` {r['maps_command_ms']} ms (python -c pass: "
            f"{r['python_start_ms']} ms)"
        )
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
