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

A thread that outlives the command does not keep the process: the interpreter's exit
waits for every thread not marked daemon, and Textual's terminal threads are not. After a
hung-up terminal, Textual (taking the hang-up's SIGCONT for the end of a Ctrl-Z) started a
second pair that nothing stopped: livesym stayed, its input thread spinning at nice -20 on
the closed terminal's end of file, for good (``livesym.ui.lifeline`` now resumes only after
a Ctrl-Z). Such threads get LINGER seconds once the command is done; then the process
leaves with the command's exit code, its output flushed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time

from livesym.priority import raise_early

LINGER = 1.0  # seconds threads left running may take to end once the command is done


def main() -> int:
    raise_early(sys.argv[1:])
    # numpy only counts here (bincount, cumsum): no BLAS. Its OpenBLAS starts a thread a
    # core at import, which spin ~0.1 s of CPU for nothing and then stay: the recorder's
    # one steady-state stranger (docs/performance.md, issue 31). A user's own setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from livesym.cli import main as cli_main

    try:
        code = cli_main()
    finally:
        gc.freeze()
    leave_past_lingering_threads(code)
    return code


def leave_past_lingering_threads(code: int, linger: float = LINGER) -> None:
    """Return once no thread but daemons is left; where one still runs after ``linger``
    seconds, leave the process now with ``code`` (stdout and stderr flushed)."""
    main_thread = threading.main_thread()
    deadline = time.monotonic() + linger
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() and not t.daemon and t is not main_thread for t in threading.enumerate()):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a terminal gone, a closed pipe
                stream.flush()
        os._exit(code)
