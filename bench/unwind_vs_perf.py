"""Callers found by unwinding, against ``perf record --call-graph dwarf`` in the same window.

For each workload, livesym (``top --sampler perf --no-kernel``) and perf (user-space cpu-clock,
DWARF unwinding with the largest stack copy, 65528 bytes) sample the same process at
the same time. For every function perf gives at least --min-children % of the samples
under it (children, i.e. TOTAL), the report prints perf's figure and livesym's, and the
share of livesym's samples that reached their thread's root. perf's figures are over
its own stacks that reached their root (tests/support/perf_ref.py, shared with the
tests): perf's copy of 32 KiB cuts deeper stacks short.

Workloads (all real programs): frameless (sample target: a frameless leaf under
frame-pointer callers, with shares known by construction), python3 running a
recursive function, xz -9 (stripped liblzma), llvm-symbolizer demangling through
libLLVM (a big stripped C++ library). Inlined frames, which perf expands from DWARF
and livesym does not, are left out; names are compared up to their parameter list.

    .venv/bin/python bench/unwind_vs_perf.py [--seconds 6] [--min-children 10]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _benchlib as bl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # livesym, tests.support
from tests.support import perf_ref


def _compare(pid: int, seconds: float, min_children: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        perf = perf_ref.start_perf(pid, seconds, data)
        ours = subprocess.run(
            [str(bl.livesym_script() or "livesym"), "top", str(pid), "--sampler", "perf",
             "--duration", str(seconds), "--json", "--limit", "400", "--no-kernel"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        perf.wait()
        theirs, perf_whole = perf_ref.children(data, min_children)
    doc = json.loads(ours.stdout)
    total, truncated = perf_ref.livesym_totals(doc)
    rows = [
        (name, share, total.get(name))
        for name, share in sorted(theirs.items(), key=lambda x: -x[1])
    ]
    return {"samples": doc["samples"], "lost": doc["lost"], "reached_root": 100 - truncated,
            "perf_reached_root": perf_whole, "rows": rows}  # fmt: skip


def main() -> int:
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--min-children", type=float, default=10.0)
    args = p.parse_args()
    if shutil.which("perf") is None:
        bl.skip("unwind_vs_perf", "perf is not installed", args.json)
    results = {}
    for name in ("frameless", "python3", "xz", "llvm-symbolizer"):
        with perf_ref.workload(name) as pid:
            if pid is None:
                print(f"{name}: SKIP (not installed)")
                continue
            found = results[name] = _compare(pid, args.seconds, args.min_children)
        if args.json:
            continue
        print(f"{name}: livesym {found['samples']} samples, {found['lost']} lost, "
              f"{found['reached_root']:.1f} % reached their root (perf: "
              f"{found['perf_reached_root']:.1f} %, whose others are left out)")  # fmt: skip
        worst = 0.0
        for fn, theirs, ours in found["rows"]:  # type: ignore[attr-defined]
            diff = abs(theirs - ours) if ours is not None else float("inf")
            worst = max(worst, diff)
            shown = f"{ours:6.1f}" if ours is not None else "     -"
            print(f"  {fn[:70]:70s} perf {theirs:6.1f}  livesym {shown}")
        print(f"  largest difference: {worst:.1f} pp")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    bl.run_main("unwind_vs_perf", main)
