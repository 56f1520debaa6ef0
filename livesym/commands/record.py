"""``livesym record PID -o FILE``: headless recording to a capture file.

The capture is appended to while recording, a chunk every half second
(docs/capture-format.md, the chunked layout), so a killed session still leaves a
readable file that lacks at most its last second; Ctrl-C and SIGTERM end the
recording normally and keep everything.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from livesym.commands.progress import shown
from livesym.commands.top import exit_code_after, run_until_signalled, who
from livesym.engine import Engine
from livesym.printable import printable
from livesym.target.launch import Launched


def run(args: argparse.Namespace) -> int:
    from livesym.commands.profiled import profiled

    with profiled(args) as prof:
        engine = Engine(prof.target, prof.sampler)
        engine.fetch_wait = args.debuginfod_wait
        engine.record_to(args.output)
        signum = asyncio.run(_record(engine, args, prof.launched))
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
    engine: Engine, args: argparse.Namespace, launched: Launched | None
) -> int | None:
    # A started command has the terminal: one line at the start, no progress over its output.
    async with shown(engine, "recording", args.output, duration=args.duration,
                     shares_terminal=launched is not None):  # fmt: skip
        return await run_until_signalled(engine, args.duration, launched)
