"""Start-up cost: ``livesym --help`` and a one-address symbolize against bare Python.

Reference: ``python -c pass`` with the same interpreter (the venv's). The
candidates are the ``livesym`` console script beside that interpreter:

    livesym --help
    livesym symbolize -e /usr/bin/true 0x10

Each sample is the mean of ``--loops`` back-to-back starts (a single start is
tens of milliseconds, below the noise of a busy machine); samples alternate
between the commands. Reported: median and min per start, and the overhead
over the bare interpreter (difference of medians).

Then ``python -X importtime`` shows which top-level packages each command
imports beyond what bare start-up imports. ``--help`` must not import
``textual`` or ``elftools``: a FAIL line is printed (and the exit status is 1)
if it does.

    .venv/bin/python bench/startup.py [--runs N] [--loops K] [--json]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import _benchlib as bl

BENCH = "startup"
TRUE = "/usr/bin/true"
FORBIDDEN_IN_HELP = ("textual", "elftools")
DEFAULT_LOOPS = 10
MAX_NESTED_SHOWN = 12

# "import time:       123 |        456 |     package.module"
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)")


def repeated(fn: Callable[[], None], loops: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(loops):
            fn()

    return run


def imports(argv: Sequence[str]) -> dict[str, int]:
    """Top-level package -> cumulative microseconds of its top-level imports
    (every package imported at any depth appears, with 0 if only nested)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    out: dict[str, int] = {}
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        m = _IMPORT_LINE.match(line)
        if m is None:
            continue
        cumulative, indent, name = int(m.group(2)), m.group(3), m.group(4)
        top = name.split(".")[0]
        out.setdefault(top, 0)
        if not indent:
            out[top] += cumulative
    return out


def main() -> int:
    bl.utf8_stdout()
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--loops",
        type=int,
        default=DEFAULT_LOOPS,
        help=f"starts per sample (default {DEFAULT_LOOPS})",
    )
    args = p.parse_args()
    script = bl.livesym_script()
    if script is None:
        bl.skip(BENCH, f"no livesym script beside {sys.executable} (pip install -e .)", args.json)
    ref_name = "python -c pass"
    help_name = "livesym --help"
    sym_name = f"livesym symbolize -e {TRUE} 0x10"
    commands: list[tuple[str, list[str]]] = [
        (ref_name, [sys.executable, "-c", "pass"]),
        (help_name, [str(script), "--help"]),
    ]
    notes: list[str] = []
    if os.path.isfile(TRUE):
        commands.append((sym_name, [str(script), "symbolize", "-e", TRUE, "0x10"]))
    else:
        notes.append(f"{TRUE} not found: symbolize start-up not measured")

    loops = max(1, args.loops)
    timings = bl.interleaved(
        [(name, repeated(bl.command(argv), loops)) for name, argv in commands],
        runs=args.runs,
        warmup=args.warmup,
    )
    for t in timings.values():
        t.samples = [s / loops for s in t.samples]

    baseline = imports(["-c", "pass"])
    new_imports = {
        name: {k: v for k, v in imports(argv).items() if k not in baseline}
        for name, argv in commands
        if name != ref_name
    }
    forbidden = [m for m in FORBIDDEN_IN_HELP if m in new_imports[help_name]]

    ref = timings[ref_name]
    if args.json:
        result: dict[str, Any] = {
            "benchmark": BENCH,
            "interpreter": sys.executable,
            "runs": args.runs,
            "loops": loops,
            "warmup": args.warmup,
            "reference": ref_name,
            "commands": {
                name: {
                    **t.as_json(),
                    "overhead_s": round(t.median - ref.median, 6),
                    "ratio": round(t.median / ref.median, 3),
                }
                for name, t in timings.items()
            },
            "imports_beyond_bare_start_us": new_imports,
            "help_forbidden_imports": forbidden,
            "help_ok": not forbidden,
            "notes": notes,
        }
        print(json.dumps(result))
        return 1 if forbidden else 0

    print(
        f"start-up (median of {args.runs} interleaved runs x {loops} starts; "
        f"reference {ref_name}: {bl.msecs(ref.median)}, min {bl.msecs(ref.min)})"
    )
    for name, t in timings.items():
        if name == ref_name:
            continue
        print(
            f"  {name}: {bl.msecs(t.median)} (min {bl.msecs(t.min)}) → "
            f"+{bl.msecs(t.median - ref.median)} over bare python, {t.median / ref.median:.2f}x"
        )
    for note in notes:
        print(f"  {note}")
    for name, mods in new_imports.items():
        timed = sorted(((m, us) for m, us in mods.items() if us), key=lambda kv: -kv[1])
        nested = [m for m, us in mods.items() if not us]
        listed = ", ".join(f"{m} {us / 1000:.1f} ms" for m, us in timed)
        if nested:
            shown = ", ".join(nested[:MAX_NESTED_SHOWN])
            more = len(nested) - MAX_NESTED_SHOWN
            listed += f"; imported inside those: {shown}" + (f", +{more} more" if more > 0 else "")
        print(f"  imports of '{name}' beyond bare start-up: {listed or '(none)'}")
    if forbidden:
        print(f"FAIL: '{help_name}' imports {', '.join(forbidden)}")
        return 1
    print(f"  ok: '{help_name}' imports neither {' nor '.join(FORBIDDEN_IN_HELP)}")
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
