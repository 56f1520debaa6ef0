"""The ``livesym`` command's first code: raise livesym's priority before anything else
loads, then run the command line (``livesym.cli``).

On a box whose cores are all taken, every millisecond of CPU a nice-0 process needs
costs it a second or more of waiting: the imports and the parser of a sampling command
took minutes there (livesym.priority). So a command that samples (top, record, attach)
is raised here, from the words of its command line, before argparse and the rest of
livesym are imported; ``livesym.cli`` says what was done in the header and puts it
back at the end.

At the end the objects the session made are frozen out of the collector: the
interpreter's exit runs a last full collection over every object alive, which after a
session (its tables, the target's symbol and CFI tables) took 60-120 ms of CPU, and half
a second of waiting on a box whose cores are all taken. They are freed all the same;
nothing that runs at exit (atexit handlers, finalizers) is skipped.
"""

from __future__ import annotations

import gc
import sys

from livesym.priority import raise_early


def main() -> int:
    raise_early(sys.argv[1:])
    from livesym.cli import main as cli_main

    try:
        return cli_main()
    finally:
        gc.freeze()
