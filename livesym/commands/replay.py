"""``livesym replay FILE``: the dashboard of a recorded session.

The capture feeds the same engine and profile a live session uses, at
``--speed`` times real time or all at once with ``--instant``, so the
tables show what the live dashboard showed (and what ``report`` prints); of a time
range of it with ``--from``/``--to`` (``capture.window``).
"""

from __future__ import annotations

import argparse

from livesym.capture.window import within
from livesym.commands.attach import require_terminal
from livesym.commands.captures import print_notes, read_with_notes
from livesym.engine import Engine
from livesym.interrupts import held
from livesym.records import TimeMode


def run(args: argparse.Namespace) -> int:
    capture, notes = read_with_notes(args)
    capture = within(capture, args.range_from, args.range_to)
    require_terminal("replay", "'livesym report'")
    # Before the dashboard takes the screen: they are there again when it gives it back
    # (the dashboard also lists them among the capture's errors).
    print_notes(notes)
    engine = Engine.for_capture(capture, speed=None if args.instant else args.speed)

    with held():  # Textual's class set-up does not survive an interrupt
        from livesym.ui.app import run_dashboard

    mode = TimeMode.parse(args.mode) if args.mode else None  # None: the capture's
    return run_dashboard(engine, pid=engine.info.pid, mode=mode, refresh=args.refresh)
