"""``livesym record PID -o FILE``: headless recording to a capture file.

The capture is rewritten atomically while recording (docs/capture-format.md),
so a killed session still leaves a readable file; Ctrl-C and SIGTERM end the
recording normally and keep everything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys

from livesym.commands.text import printable
from livesym.commands.top import exit_code_after, run_until_signalled, who
from livesym.engine import Engine
from livesym.target.launch import Launched

PROGRESS_PERIOD = 0.5


def run(args: argparse.Namespace) -> int:
    from livesym.commands.profiled import profiled

    with profiled(args) as prof:
        engine = Engine(prof.target, prof.sampler)
        engine.fetch_wait = args.debuginfod_wait
        engine.record_to(args.output)
        # A started command has the terminal: no progress line over its output.
        progress = sys.stderr.isatty() and prof.launched is None
        signum = asyncio.run(_record(engine, args.duration, args.output, progress, prof.launched))
        snap = engine.snapshot()
        print(
            f"livesym: recorded {snap.samples} samples ({snap.lost} lost) from "
            f"{who(snap, prof.pid)} in {snap.elapsed:.1f} s ({snap.state}) to "
            f"{printable(args.output)}",
            file=sys.stderr,
        )
        ending = prof.ending()
    if ending is not None:
        line, code = ending
        print(f"livesym: {printable(line)}", file=sys.stderr)
        return code
    return exit_code_after(signum)


async def _record(
    engine: Engine, duration: float | None, output: str, progress: bool, launched: Launched | None
) -> int | None:
    shown = asyncio.create_task(_progress(engine, output)) if progress else None
    try:
        return await run_until_signalled(engine, duration, launched)
    finally:
        if shown is not None:
            shown.cancel()
            await asyncio.gather(shown, return_exceptions=True)
            with contextlib.suppress(OSError):
                sys.stderr.write("\r\x1b[K")


async def _progress(engine: Engine, output: str) -> None:
    """One line on the terminal, rewritten in place, never wider than the terminal
    (a line that wraps cannot be rewritten: each rewrite would add a line)."""
    while True:
        stats = engine.sampler.stats
        elapsed = engine.clock() - engine.started
        width = shutil.get_terminal_size((80, 24)).columns
        line = progress_line(engine.info.pid, elapsed, stats.samples, stats.lost, output, width)
        try:
            sys.stderr.write(f"\r{line}\x1b[K")
            sys.stderr.flush()
        except OSError:  # the terminal went away: the recording goes on (SIGHUP ends it)
            return
        await asyncio.sleep(PROGRESS_PERIOD)


def progress_line(
    pid: int, elapsed: float, samples: int, lost: int, output: str, width: int
) -> str:
    """The progress line in at most ``width - 1`` columns (the last column would wrap on
    some terminals): the less useful parts go first, then the path is cut with '…'."""
    head = f"recording pid {pid}: {elapsed:5.1f} s, {samples} samples, {lost} lost"
    output = printable(output)
    room = max(1, width - 1)
    for line in (
        f"{head} -> {output} (Ctrl-C to stop)",
        f"{head} -> {output}",
        f"{head} -> {os.path.basename(output)}",
        head,
    ):
        if len(line) <= room:
            return line
    return head[: room - 1] + "…"
