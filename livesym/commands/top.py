"""``livesym top PID``: sample for a while, then print the hot-function table.

Ctrl-C or SIGTERM ends sampling early; what was gathered is still printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

from livesym.engine import Engine, EngineSnapshot
from livesym.errors import EXIT_OK, UsageError
from livesym.profile import FunctionRow
from livesym.sampling.base import Sampler
from livesym.target.process import TargetProcess

SAMPLERS = ("auto", "perf", "ptrace", "pyspy")


def run(args: argparse.Namespace) -> int:
    target = TargetProcess(args.pid)
    sampler = choose_sampler(args.sampler, args.pid, args.rate, args.idle)
    snapshot = asyncio.run(_sample(target, sampler, args.duration))
    if args.json:
        print(json.dumps(top_json(snapshot, args.limit)))
    else:
        sys.stdout.write(render_top(snapshot, args.pid, args.limit))
    return EXIT_OK


def choose_sampler(name: str, pid: int, rate: int, idle: bool) -> Sampler:
    """The sampler asked for; ``auto`` picks the best one permitted and says why."""
    from livesym.sampling.perf_event import PerfSampler

    if name in ("ptrace", "pyspy"):
        raise UsageError(f"the {name} sampler is not in this version yet; use --sampler perf")
    if name == "auto":
        reason = PerfSampler.available()
        if reason is not None:
            raise UsageError(f"no sampler can attach: perf: {reason}")
    return PerfSampler(pid, rate, idle=idle)


async def _sample(target: TargetProcess, sampler: Sampler, duration: float) -> EngineSnapshot:
    engine = Engine(target, sampler)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await engine.run(stop, duration)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return engine.snapshot()


def _function_json(row: FunctionRow) -> dict[str, object]:
    f = row.frame
    return {
        "symbol": f.symbol,
        "demangled": f.demangled if f.symbol else f.label,
        "module": f.module,
        "self": row.self_samples,
        "total": row.total_samples,
        "self_pct": round(row.self_pct, 3),
        "total_pct": round(row.total_pct, 3),
    }


def top_json(snapshot: EngineSnapshot, limit: int) -> dict[str, object]:
    view = snapshot.view
    return {
        "samples": view.samples,
        "lost": snapshot.lost,
        "duration_s": round(snapshot.elapsed, 3),
        "sampler": snapshot.sampler,
        "rate_hz": snapshot.rate_hz,
        "state": snapshot.state,
        "errors": list(snapshot.errors),
        "functions": [_function_json(r) for r in view.functions[:limit]],
    }


def render_top(snapshot: EngineSnapshot, pid: int, limit: int) -> str:
    view = snapshot.view
    lines = [
        f"livesym top: pid {pid}, {snapshot.elapsed:.1f} s, {view.samples} samples "
        f"({snapshot.lost} lost), sampler {snapshot.sampler} at {snapshot.rate_hz} Hz, "
        f"{snapshot.state}",
        "",
        f"{'SELF%':>6} {'TOTAL%':>6} {'SELF':>7} {'TOTAL':>7}  FUNCTION  (MODULE)",
    ]
    for row in view.functions[:limit]:
        module = os.path.basename(row.frame.module) if row.frame.module else "?"
        lines.append(
            f"{row.self_pct:6.1f} {row.total_pct:6.1f} {row.self_samples:7d} "
            f"{row.total_samples:7d}  {row.frame.label}  ({module})"
        )
    if not view.functions:
        lines.append("  (no samples: the target was idle, or exited at once)")
    for error in snapshot.errors:
        lines.append(f"note: {error}")
    return "\n".join(lines) + "\n"
