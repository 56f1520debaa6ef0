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

from livesym.commands.flight import FlightRecorder, Trigger, check_output_directory
from livesym.commands.progress import shown
from livesym.commands.top import exit_code_after, run_until_signalled, who
from livesym.engine import Engine
from livesym.errors import UsageError
from livesym.printable import printable
from livesym.target.launch import Launched

# Seconds between the engine's rounds: nobody watches a recording's samples arrive, and a
# round costs its wake-ups whatever it brings (a tenth of a second cost a recording at
# 99 Hz a third of its CPU). A chunk is written every half second all the same.
RECORD_TICK = 0.25


def run(args: argparse.Namespace) -> int:
    from livesym.commands.profiled import profiled

    trigger = None if args.trigger is None else Trigger.parse(args.trigger)
    if trigger is not None and args.keep_last is None:
        raise UsageError("--trigger needs --keep-last S: the seconds each dump holds")
    if args.keep_last is not None:
        check_output_directory(args.output)
    with profiled(args) as prof:
        engine = Engine(prof.target, prof.sampler)
        engine.fetch_wait = args.debuginfod_wait
        engine.tick = RECORD_TICK
        flight = None
        if args.keep_last is None:
            engine.captures.record_to(args.output)
        else:
            flight = FlightRecorder(engine, args.output, args.keep_last, trigger)
        signum = asyncio.run(_record(engine, args, prof.launched, flight))
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
    engine: Engine,
    args: argparse.Namespace,
    launched: Launched | None,
    flight: FlightRecorder | None,
) -> int | None:
    # A started command has the terminal: one line at the start, no progress over its output.
    async with shown(engine, "recording", args.output, duration=args.duration,
                     shares_terminal=launched is not None):  # fmt: skip
        if flight is None:
            return await run_until_signalled(engine, args.duration, launched)
        with flight.listening():
            watch = asyncio.create_task(flight.watch())
            try:
                return await run_until_signalled(engine, args.duration, launched)
            finally:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
                await flight.last()
