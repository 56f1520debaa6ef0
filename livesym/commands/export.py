"""``livesym export IN --format FMT -o OUT``: a capture for other profiling tools.

Formats (docs/sharing.md): ``collapsed`` folded stacks (flamegraph.pl, inferno),
``speedscope`` JSON, and ``pprof`` (gzipped profile.proto). ``-o -`` writes to
stdout, except pprof to a terminal.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from livesym.capture.model import Capture
from livesym.commands.captures import print_notes, read_with_notes, refuse_overwriting
from livesym.errors import EXIT_OK, FileError, UsageError
from livesym.files import write_atomically

FORMATS = ("collapsed", "speedscope", "pprof")


def run(args: argparse.Namespace) -> int:
    if args.format == "pprof" and args.output == "-" and sys.stdout.isatty():
        raise UsageError("pprof output is binary: give -o FILE, or redirect stdout to a file")
    if args.output != "-":
        refuse_overwriting(args.file, args.output)
    capture, notes = read_with_notes(args)
    print_notes(notes)
    data = export(capture, args.format, include_idle=args.idle)
    if args.output == "-":
        sys.stdout.buffer.write(data)
    else:
        write_output(args.output, data)
    return EXIT_OK


def export(capture: Capture, fmt: str, *, include_idle: bool = False) -> bytes:
    """The bytes of ``capture`` in format ``fmt`` (one of FORMATS)."""
    if fmt == "collapsed":
        from livesym.export.collapsed import collapsed

        return collapsed(capture, include_idle=include_idle).encode()
    if fmt == "speedscope":
        from livesym.export.speedscope import speedscope

        name = Path(str(capture.target.get("exe") or "livesym")).name
        return speedscope(capture, include_idle=include_idle, name=name)
    if fmt == "pprof":
        try:
            from livesym.export.pprof import pprof
        except ImportError:
            raise UsageError(
                "--format pprof needs the protobuf package: pip install protobuf"
            ) from None
        return pprof(capture, include_idle=include_idle)
    raise UsageError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


def write_output(path: str, data: bytes) -> None:
    """Write the export to ``path`` in one rename, 0600 (``livesym.files``)."""
    try:
        write_atomically(path, data, durable=False)
    except OSError as e:
        raise FileError(
            f"cannot write {path}: {e.strerror}; check that its directory exists and is "
            "writable, or give -o another path"
        ) from None
