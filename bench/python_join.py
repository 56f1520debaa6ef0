"""Mixed stacks' join of native and Python frames, against the program's truth and
``py-spy record --native`` alone: sample_targets/pyphases.py switches between SHA-256
(hash_work, 40 ms), string work (string_work, 12 ms) and zlib (compress_work, 5 ms)
under the distribution's python3. Only hash_work calls libcrypto and only
compress_work calls zlib, so a sample whose native frames are libcrypto's or zlib's
under another Python function was joined with the Python stack of another moment.

For each way mixed stacks get their Python frames -- livesym's own read at the sample
(CPython 3.11, the default) and py-spy's windows (``LIVESYM_MIXED_PY_SPY=1``) -- runs
by turns with py-spy alone, several rounds, and reports the median of:

- misplaced: samples with libcrypto's or zlib's frames under another Python function,
  as a share of all samples;
- marked: samples whose Python frames are marked not known (``python_moved``, the
  stack changed before it was read; ``python_unread``);
- the largest difference of a function's share (hash_work, string_work,
  compress_work, main) from py-spy alone's (the mean of its runs before and after).

    .venv/bin/python bench/python_join.py [--rate 199] [--seconds 4] [--runs 3]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _benchlib

from livesym.sampling.pyspy import find_py_spy

ROOT = Path(__file__).resolve().parent.parent
PYPHASES = ROOT / "sample_targets" / "pyphases.py"
PYTHON = "/usr/bin/python3"
CALLER_OF = {"libcrypto": "hash_work", "libz": "compress_work"}
FUNCTIONS = ("hash_work", "string_work", "compress_work", "main")
MODES = {"livesym read": {}, "py-spy windows": {"LIVESYM_MIXED_PY_SPY": "1"}}


def reference(pid: int, seconds: float, rate: int) -> dict[str, float]:
    """py-spy alone's total share (%) of each function."""
    out = subprocess.run(
        [find_py_spy() or "py-spy", "record", "--pid", str(pid), "--rate", str(rate), "--duration",
         str(int(seconds)), "--format", "raw", "--output", "/dev/stdout", "--native"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    counts: dict[str, int] = {}
    total = 0
    for line in out.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        total += int(n)
        for name in {f.split(" (", 1)[0] for f in stack.split(";")}:
            counts[name] = counts.get(name, 0) + int(n)
    return {name: 100 * n / max(total, 1) for name, n in counts.items()}


def livesym(pid: int, seconds: float, rate: int, env: dict[str, str]) -> dict[str, float]:
    """Misplaced and marked shares (%) and each function's share, from a capture."""
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "phases.json"
        subprocess.run(
            [sys.executable, "-m", "livesym", "record", str(pid), "-o", str(capture),
             "--sampler", "mixed", "--duration", str(seconds), "--rate", str(rate)],
            env={**os.environ, **env}, capture_output=True, timeout=120, check=True,
        )  # fmt: skip
        doc = json.loads(capture.read_text())
    frames = doc["frames"]
    stacks = [[frames[i] for i in doc["stacks"][s[2]]] for s in doc["samples"]]
    misplaced = marked = 0
    shares: dict[str, int] = {}
    for stack in stacks:
        if any(f["reason"] in ("python_moved", "python_unread") for f in stack):
            marked += 1
        for name in {f["symbol"] for f in stack if f["kind"] == "python"}:
            shares[name] = shares.get(name, 0) + 1
        for lib, caller in CALLER_OF.items():
            at = next((k for k, f in enumerate(stack)
                       if lib in str(f["module"] or "").rsplit("/", 1)[-1]), None)  # fmt: skip
            if at is None:
                continue
            leaf = next((f for f in stack[at:] if f["kind"] == "python"), None)
            if leaf is not None and leaf["symbol"] != caller:
                misplaced += 1
    n = max(len(stacks), 1)
    out = {"misplaced": 100 * misplaced / n, "marked": 100 * marked / n, "samples": len(stacks)}
    out.update({f: 100 * shares.get(f, 0) / n for f in FUNCTIONS})
    return out


def main() -> None:
    ap = _benchlib.parser(__doc__ or "")
    ap.add_argument("--rate", type=int, default=199)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    proc = subprocess.Popen([PYTHON, str(PYPHASES)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        before = reference(proc.pid, args.seconds, args.rate)
        for k in range(args.runs):
            order = list(MODES) if k % 2 == 0 else list(reversed(MODES))
            for mode in order:
                ours = livesym(proc.pid, args.seconds, args.rate, MODES[mode])
                after = reference(proc.pid, args.seconds, args.rate)
                far = max(abs(ours[f] - (before.get(f, 0) + after.get(f, 0)) / 2)
                          for f in FUNCTIONS)  # fmt: skip
                results[mode].append({**ours, "far": far})
                before = after
    finally:
        proc.kill()
        proc.wait()
    print(f"pyphases under {PYTHON}, mixed at {args.rate} Hz, {args.seconds:g} s a run, "
          f"median of {args.runs} runs each (py-spy alone before and after each)")  # fmt: skip
    print(f"{'Python frames from':<16} {'misplaced %':>12} {'marked %':>9} "
          f"{'largest share difference (pp)':>31} {'samples':>8}")  # fmt: skip
    for mode, runs in results.items():
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{mode:<16} {med['misplaced']:>12.2f} {med['marked']:>9.2f} "
              f"{med['far']:>31.2f} {med['samples']:>8.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
