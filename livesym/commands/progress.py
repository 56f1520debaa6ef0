"""What a headless command says on the terminal while it samples.

``top`` and ``record`` print their results at the end; until then a user at a
terminal must see that sampling runs, how far it got and how to stop it. Where
livesym alone has the terminal, that is one line on stderr, rewritten in place every
PROGRESS_PERIOD seconds and never wider than the terminal (a line that wraps cannot
be rewritten: each rewrite would add a line). Where a command livesym started shares
the terminal, a rewritten line would land in the middle of its output: one line is
said at the start instead. Nothing is said where stderr is not a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator

from livesym.engine import Engine
from livesym.printable import printable

PROGRESS_PERIOD = 0.5


def progress_line(
    verb: str, pid: int, elapsed: float, samples: int, lost: int, output: str, width: int
) -> str:
    """The progress line in at most ``width - 1`` columns (the last column would wrap on
    some terminals): the less useful parts go first, then the path is cut with '…'."""
    head = f"{verb} pid {pid}: {elapsed:5.1f} s, {samples} samples, {lost} lost"
    output = printable(output)
    room = max(1, width - 1)
    if output:
        base = os.path.basename(output)
        candidates = [f"{head} -> {output} (Ctrl-C to stop)", f"{head} -> {output}",
                      f"{head} -> {base}"]  # fmt: skip
    else:
        candidates = [f"{head} (Ctrl-C to stop)"]
    for line in [*candidates, head]:
        if len(line) <= room:
            return line
    return head[: room - 1] + "…"


async def _rewrite(engine: Engine, verb: str, output: str) -> None:
    while True:
        stats = engine.sampler.stats
        elapsed = engine.clock() - engine.started
        width = shutil.get_terminal_size((80, 24)).columns
        line = progress_line(verb, engine.info.pid, elapsed, stats.samples, stats.lost, output,
                             width)  # fmt: skip
        try:
            sys.stderr.write(f"\r{line}\x1b[K")
            sys.stderr.flush()
        except OSError:  # the terminal went away: sampling goes on (SIGHUP ends it)
            return
        await asyncio.sleep(PROGRESS_PERIOD)


@contextlib.asynccontextmanager
async def shown(
    engine: Engine,
    verb: str,
    output: str = "",
    *,
    duration: float | None = None,
    shares_terminal: bool = False,
) -> AsyncIterator[None]:
    """While the block runs: the progress line (``verb``: ``recording``, ``sampling``),
    or one line at the start where a started command ``shares_terminal``."""
    if not sys.stderr.isatty():
        yield
        return
    if shares_terminal:
        where = f" to {printable(output)}" if output else ""
        until = f"for {duration:g} s or until it exits" if duration else "until it exits"
        with contextlib.suppress(OSError):
            print(f"livesym: {verb} pid {engine.info.pid}{where} {until} (Ctrl-C reaches "
                  "it too; a second one stops sampling)", file=sys.stderr, flush=True)  # fmt: skip
        yield
        return
    task = asyncio.create_task(_rewrite(engine, verb, output))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        with contextlib.suppress(OSError):
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
