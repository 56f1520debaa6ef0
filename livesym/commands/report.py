"""``livesym report FILE``: the hot-function table of a capture, as ``top`` prints it
(of a time range of it with ``--from``/``--to``: ``capture.window``)."""

from __future__ import annotations

import argparse
import sys

from livesym.capture.window import within
from livesym.commands.captures import read_with_notes
from livesym.commands.top import checked_process, output
from livesym.engine import replay_snapshot
from livesym.errors import EXIT_OK
from livesym.records import TimeMode


def run(args: argparse.Namespace) -> int:
    # The notes are in the capture's errors, which the table lists (and the JSON has).
    capture, _notes = read_with_notes(args)
    capture = within(capture, args.range_from, args.range_to)
    mode = TimeMode.parse(args.mode) if args.mode else None
    snap = replay_snapshot(capture, process=args.process, mode=mode)
    snap = checked_process(snap, args.process)
    pid = capture.target.get("pid")
    sys.stdout.write(output(args, snap, pid if isinstance(pid, int) else 0, "report"))
    return EXIT_OK
