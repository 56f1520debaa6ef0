"""``livesym report FILE``: the hot-function table of a capture, as ``top`` prints it."""

from __future__ import annotations

import argparse
import json
import sys

from livesym.capture.replay import snapshot
from livesym.capture.resymbolize import read_resymbolized
from livesym.commands.top import render_top, top_json
from livesym.errors import EXIT_OK


def run(args: argparse.Namespace) -> int:
    capture = read_resymbolized(args.file, args.debug_dir, args.binaries)
    snap = snapshot(capture)
    pid = capture.target.get("pid")
    if args.json:
        print(json.dumps(top_json(snap, args.limit)))
    else:
        sys.stdout.write(render_top(snap, pid if isinstance(pid, int) else 0, args.limit))
    return EXIT_OK
