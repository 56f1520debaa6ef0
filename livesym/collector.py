"""Pausing Python's cyclic garbage collector around bulk work, from any thread.

A full collection walks every container in the process: with a session's
millions of records that is tens of milliseconds (a hundred in a big process),
and it runs on whichever thread happened to allocate, holding the GIL, so a
capture built in a writer thread would stall the dashboard's event loop.
Reference counting still frees everything while paused. Pauses nest and may
overlap between threads: the collector runs again when the last one ends, if it
ran before the first began.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def collector_paused(*, freeze: bool = False) -> Iterator[None]:
    """No cyclic collection inside; ``freeze``: what exists on the way out is moved
    out of the collector's sight for good (data kept for the whole session)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            if freeze:
                gc.freeze()
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
