"""``livesym scrub IN -o OUT``: a copy of a capture that can be shared (docs/sharing.md)."""

from __future__ import annotations

import argparse
import sys

import orjson

from livesym.capture.scrub import ScrubOptions, leftover_addresses, scrub
from livesym.capture.session import capture_document
from livesym.capture.writer import write_capture
from livesym.commands.captures import read_given, refuse_overwriting
from livesym.errors import EXIT_OK, CaptureError, LivesymError


def run(args: argparse.Namespace) -> int:
    refuse_overwriting(args.file, args.output)
    original = read_given(args)
    options = ScrubOptions(drop_host=args.drop_host, basenames=args.basenames)
    try:
        scrubbed = scrub(original, options)
    except OverflowError as e:
        raise CaptureError(
            f"{args.file}: cannot scrub: {e}; share an export instead "
            "('livesym export --format collapsed' has no run-time addresses)"
        ) from None
    doc = capture_document(scrubbed)
    # The promise is that no original address survives: check the very text
    # that is written, and write nothing rather than a file that leaks.
    left = leftover_addresses(original, orjson.dumps(doc).decode(), scrubbed)
    if left:
        raise LivesymError(
            f"scrubbing {args.file} left {len(left)} original address(es) in the output "
            f"(first {left[0]:#x}); nothing was written: this is a bug, please report it"
        )
    write_capture(args.output, doc)
    print(
        f"livesym: wrote {args.output}: {len(scrubbed.frames)} frames and "
        f"{sum(len(g.mappings) for g in scrubbed.maps)} mappings moved to a new address space",
        file=sys.stderr,
    )
    return EXIT_OK
