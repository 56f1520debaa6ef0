"""``livesym record PID -o FILE``: headless recording to a capture file.

The capture is rewritten atomically while recording (docs/capture-format.md),
so a killed session still leaves a readable file; Ctrl-C and SIGTERM end the
recording normally and keep everything.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from livesym.commands.top import choose_sampler, run_until_signalled
from livesym.engine import Engine
from livesym.errors import EXIT_OK
from livesym.symbolize.sources import checked_debug_dirs
from livesym.target.process import TargetProcess

PROGRESS_PERIOD = 0.5


def run(args: argparse.Namespace) -> int:
    target = TargetProcess(args.pid, debug_dirs=checked_debug_dirs(args.debug_dir))
    sampler = choose_sampler(args.sampler, args.pid, args.rate, args.idle)
    engine = Engine(target, sampler)
    engine.record_to(args.output)
    asyncio.run(_record(engine, args.duration, args.output))
    snap = engine.snapshot()
    print(
        f"livesym: recorded {snap.samples} samples ({snap.lost} lost) from pid {args.pid} "
        f"in {snap.elapsed:.1f} s ({snap.state}) to {args.output}",
        file=sys.stderr,
    )
    return EXIT_OK


async def _record(engine: Engine, duration: float | None, output: str) -> None:
    progress = asyncio.create_task(_progress(engine, output)) if sys.stderr.isatty() else None
    try:
        await run_until_signalled(engine, duration)
    finally:
        if progress is not None:
            progress.cancel()
            await asyncio.gather(progress, return_exceptions=True)
            sys.stderr.write("\r\x1b[K")


async def _progress(engine: Engine, output: str) -> None:
    """One line on the terminal, rewritten in place."""
    while True:
        stats = engine.sampler.stats
        elapsed = engine.clock() - engine.started
        sys.stderr.write(
            f"\rrecording pid {engine.info.pid}: {elapsed:5.1f} s, {stats.samples} samples, "
            f"{stats.lost} lost -> {output} (Ctrl-C to stop)\x1b[K"
        )
        sys.stderr.flush()
        await asyncio.sleep(PROGRESS_PERIOD)
