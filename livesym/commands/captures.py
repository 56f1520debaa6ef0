"""What the commands that read a capture share: reading it (re-symbolized when
--debug-dir or --binaries is given, or DEBUGINFOD_URLS names servers) with the notes
that says, and refusing to write over the capture being read."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from livesym.capture.reader import DEFAULT_MEMORY_LIMIT, read_capture
from livesym.capture.resymbolize import resymbolize
from livesym.commands.text import note_line
from livesym.errors import UsageError
from livesym.printable import printable
from livesym.records import Capture


def read_with_notes(args: argparse.Namespace) -> tuple[Capture, list[str]]:
    """The capture ``args.file``, re-symbolized from ``--debug-dir`` and ``--binaries``
    when any are given, and what re-symbolization has to say (each file it refused)."""
    capture = read_given(args)
    debug = [Path(d) for d in args.debug_dir or ()]
    bins = [Path(b) for b in args.binaries or ()]
    from livesym.symbolize.debuginfod import DebuginfodClient

    server = DebuginfodClient.from_environment()  # (--offline empties DEBUGINFOD_URLS)
    if not debug and not bins and server is None:
        return capture, []
    before = len(session_errors(capture))
    capture = resymbolize(capture, debug, bins, server)
    # resymbolize appends its refusals to the errors the capture already had.
    return capture, session_errors(capture)[before:]


def read_given(args: argparse.Namespace) -> Capture:
    """The capture ``args.file``, within ``--max-capture-memory``."""
    limit = args.max_capture_memory
    return read_capture(args.file, memory_limit=limit or DEFAULT_MEMORY_LIMIT)


def session_errors(capture: Capture) -> list[str]:
    errors = capture.session.get("errors")
    return [str(e) for e in errors] if isinstance(errors, list) else []


def print_notes(notes: Sequence[str]) -> None:
    """Notes on stderr, for the commands whose stdout is a file format or a dashboard:
    the same lines ``report`` prints under its table."""
    for note in notes:
        print(f"livesym: {printable(note_line(note))}", file=sys.stderr)


def refuse_overwriting(input_path: str, output_path: str) -> None:
    """Raise UsageError when OUT is the file IN: writing it would destroy the input
    (after reading, so the damage would be silent)."""
    if _same_file(input_path, output_path):
        raise UsageError(
            f"-o {output_path} is the input {input_path}: writing it would destroy the "
            "capture; give -o another file name"
        )


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)  # hard links and symlinks too
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)
