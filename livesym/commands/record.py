"""``livesym record PID -o FILE``: headless recording to a capture file.

The capture is appended to while recording, a chunk every half second
(docs/capture-format.md, the chunked layout), so a killed session still leaves a
readable file that lacks at most its last second; Ctrl-C and SIGTERM end the
recording normally and keep everything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys

from livesym.capture.appender import Rotation
from livesym.commands.flight import FlightRecorder, Trigger, check_output_directory
from livesym.commands.progress import shown
from livesym.commands.pushing import Pushing
from livesym.commands.top import exit_code_after, run_until_signalled, who
from livesym.engine import RECORD_TICK, Engine
from livesym.errors import UsageError
from livesym.export.push import Target
from livesym.printable import printable
from livesym.target.launch import Launched


def run(args: argparse.Namespace) -> int:
    from livesym.commands.profiled import profiled

    trigger = None if args.trigger is None else Trigger.parse(args.trigger)
    if trigger is not None and args.keep_last is None:
        raise UsageError("--trigger needs --keep-last S: the seconds each dump holds")
    if args.keep is not None and args.max_size is None:
        raise UsageError("--keep needs --max-size SIZE: the size at which a new file begins")
    if args.max_size is not None and args.keep_last is not None:
        raise UsageError("--max-size and --keep-last do not go together: a flight recorder "
                         "writes only when asked")  # fmt: skip
    if args.keep_last is not None:
        check_output_directory(args.output)
    rotation = None if args.max_size is None else Rotation(args.max_size, args.keep)
    push = _push_target(args)
    with profiled(args) as prof:
        engine = Engine(prof.target, prof.sampler)
        engine.fetch_wait = args.debuginfod_wait
        # nobody watches a recording's samples arrive (a chunk is written every half
        # second all the same), nor asks for a view of them until it ends: they are
        # counted into the profile then, from the tables (``Counted.deferred``)
        engine.tick = RECORD_TICK
        engine.counted.deferred = True
        flight = None
        if args.keep_last is None:
            engine.captures.record_to(args.output, rotation)
        else:
            flight = FlightRecorder(engine, args.output, args.keep_last, trigger)
        pushing = None if push is None else Pushing(engine, push, args.push_interval)
        signum = asyncio.run(_record(engine, args, prof.launched, flight, pushing))
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


def _push_target(args: argparse.Namespace) -> Target | None:
    """Where ``--push`` sends, with its name and labels (checked before anything starts)."""
    if args.push is None:
        if args.push_name is not None or args.push_label:
            raise UsageError("--push-name and --push-label need --push URL")
        return None
    labels: dict[str, str] = {}
    for item in args.push_label:
        key, equals, value = item.partition("=")
        if not equals:
            raise UsageError(f"--push-label {item!r} is not KEY=VALUE")
        labels[key] = value
    return Target.parse(args.push, args.push_name or _app_name(args), labels)


def _app_name(args: argparse.Namespace) -> str:
    """The target's name as Pyroscope takes it: its command's, or its given name."""
    launch = getattr(args, "launch", None)
    name = launch[0] if launch else str(args.target)
    base = os.path.basename(name) or "livesym"
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", base)


async def _record(
    engine: Engine,
    args: argparse.Namespace,
    launched: Launched | None,
    flight: FlightRecorder | None,
    pushing: Pushing | None,
) -> int | None:
    # A started command has the terminal: one line at the start, no progress over its output.
    async with shown(engine, "recording", args.output, duration=args.duration,
                     shares_terminal=launched is not None):  # fmt: skip
        beside = [flight.watch()] if flight is not None else []
        beside += [pushing.run()] if pushing is not None else []
        tasks = [asyncio.create_task(work) for work in beside]
        with flight.listening() if flight is not None else contextlib.nullcontext():
            try:
                return await run_until_signalled(engine, args.duration, launched)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if flight is not None:
                    await flight.last()
                if pushing is not None:
                    await pushing.finish()
