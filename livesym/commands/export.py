"""``livesym export IN --format FMT -o OUT``: a capture for other profiling tools.

Formats (docs/sharing.md): ``collapsed`` folded stacks (flamegraph.pl, inferno),
``speedscope`` JSON, and ``pprof`` (gzipped profile.proto). ``-o -`` writes to
stdout, except pprof to a terminal.
"""

from __future__ import annotations

import argparse
import sys

from livesym.capture.window import within
from livesym.commands.captures import print_notes, read_with_notes, refuse_overwriting
from livesym.errors import EXIT_OK, FileError, UsageError
from livesym.export.registry import EXPORTERS, FORMATS
from livesym.export.stacks import capture_mode
from livesym.files import write_atomically
from livesym.records import Capture, TimeMode


def run(args: argparse.Namespace) -> int:
    if args.format == "pprof" and args.output == "-" and sys.stdout.isatty():
        raise UsageError("pprof output is binary: give -o FILE, or redirect stdout to a file")
    if args.output != "-":
        refuse_overwriting(args.file, args.output)
    capture, notes = read_with_notes(args)
    print_notes(notes)
    capture = within(capture, args.range_from, args.range_to)
    mode = TimeMode.parse(args.mode) if args.mode else capture_mode(capture)
    data = export(capture, args.format, mode=mode, by_process=args.pid)
    if args.output == "-":
        sys.stdout.buffer.write(data)
    else:
        write_output(args.output, data)
    return EXIT_OK


def export(
    capture: Capture, fmt: str, *, mode: TimeMode = TimeMode.CPU, by_process: bool = False
) -> bytes:
    """The bytes of ``capture`` in format ``fmt`` (one of FORMATS)."""
    exporter = EXPORTERS.get(fmt)
    if exporter is None:
        raise UsageError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    return exporter(capture, mode, by_process)


def write_output(path: str, data: bytes) -> None:
    """Write the export to ``path`` in one rename, 0600 (``livesym.files``)."""
    try:
        write_atomically(path, data, durable=False)
    except OSError as e:
        raise FileError(
            f"cannot write {path}: {e.strerror}; check that its directory exists and is "
            "writable, or give -o another path"
        ) from None
