"""pyload - a Python sample target with known shares of CPU time.

Two worker threads (``threading`` names in brackets):

* ``[pyhot]`` runs pure Python.  Every 10 ms period it burns 6 ms of its own
  CPU time (``time.thread_time``) in ``py_hot_a`` and 3 ms in ``py_hot_b``,
  alternating in 30 slices of 0.2 ms + 0.1 ms, each function with a loop of
  its own (no shared helper), so of this thread's samples ``py_hot_a`` is 2/3 and
  ``py_hot_b`` 1/3 whatever the CPU speed and the GIL contention.
* ``[cext]`` spends its time in C extensions: every 10 ms period, 2 ms of CPU
  time in ``c_hash`` (``hashlib.sha256`` over a 256 KiB buffer: OpenSSL's
  libcrypto via ``_hashlib``, which releases the GIL) and 1 ms in ``c_json``
  (``json.dumps``/``json.loads`` of a small document: ``_json``).

The main thread only sleeps (an idle thread for ``--idle`` tests).  The
workers' sleeps get up to 3 ms of random extra each, so their periods never
run in lock-step with a sampler's timer (py-spy samples on wall-clock ticks,
and its 20 ms at 50 Hz is a multiple of the 10 ms period).

The shares *within* a thread hold whatever the load; how much CPU each thread
gets does not: the threads share the GIL (only the hashing runs without it),
so ``pyhot`` gets about 0.8 of a core and ``cext`` about a fifth on an idle
two-core machine, and periods stretch when they queue for it (a late period
starts at once, without catching up).  Waiting for the GIL is off-CPU.

usage: python pyload.py [SECONDS]
    SECONDS  run for that long, then exit 0 (default: until killed)

Prints ``ready <pid>`` (flushed) once both workers run.  SIGTERM ends it at
once (default action); SIGINT too (the workers are daemon threads).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable

PERIOD = 0.010  # seconds of wall time per period
A_BUDGET = 0.006  # CPU seconds per period in py_hot_a
B_BUDGET = 0.003  # in py_hot_b
HASH_BUDGET = 0.002  # in c_hash
JSON_BUDGET = 0.001  # in c_json
SLICES = 30  # py_hot_a and py_hot_b alternate in this many slices per period
CHUNK = 200  # loop iterations between looks at the clock (a few microseconds)
JITTER = 0.003  # at most this much random extra sleep per period

_BUFFER = bytes(range(256)) * 1024  # 256 KiB
_DOCUMENT = {f"key{i}": [i, str(i), {"f": i * 0.5, "t": True}] for i in range(200)}

sink = 0  # keeps the results alive


def py_hot_a(budget: float) -> int:
    """Pure-Python loop until this thread has used ``budget`` more CPU seconds."""
    end = time.thread_time() + budget
    acc = 0
    while time.thread_time() < end:
        for i in range(CHUNK):
            acc += i * i
    return acc


def py_hot_b(budget: float) -> int:
    """Same as py_hot_a, a separate function so samples tell them apart."""
    end = time.thread_time() + budget
    acc = 0
    while time.thread_time() < end:
        for i in range(CHUNK):
            acc += i ^ 7
    return acc


def c_hash(budget: float) -> int:
    """SHA-256 over a buffer (C: _hashlib -> libcrypto) until ``budget`` CPU seconds."""
    end = time.thread_time() + budget
    n = 0
    while time.thread_time() < end:
        n += hashlib.sha256(_BUFFER).digest()[0]
    return n


def c_json(budget: float) -> int:
    """json.dumps/json.loads round trips (C: _json) until ``budget`` CPU seconds."""
    end = time.thread_time() + budget
    n = 0
    while time.thread_time() < end:
        n += len(json.loads(json.dumps(_DOCUMENT)))
    return n


def _periodic(*work: tuple[Callable[[float], int], float]) -> None:
    global sink
    next_start = time.monotonic()
    while True:
        for fn, budget in work:
            sink += fn(budget)
        next_start += PERIOD
        delay = next_start - time.monotonic()
        if delay > 0:
            time.sleep(delay + random.uniform(0.0, JITTER))
        else:  # fell behind (a loaded machine): do not try to catch up
            next_start = time.monotonic()


def pyhot_main() -> None:
    # Fine slices (0.2 ms + 0.1 ms), so whatever happens at a fixed point of the
    # period (waking up, the GIL's 5 ms switch interval) falls on both functions
    # alike, and samples taken in a burst (a sampler catching up) still spread.
    slices = [(py_hot_a, A_BUDGET / SLICES), (py_hot_b, B_BUDGET / SLICES)] * SLICES
    _periodic(*slices)


def cext_main() -> None:
    _periodic((c_hash, HASH_BUDGET), (c_json, JSON_BUDGET))


def main(argv: list[str]) -> int:
    seconds = float(argv[1]) if len(argv) > 1 else None
    for name, target in (("pyhot", pyhot_main), ("cext", cext_main)):
        threading.Thread(target=target, name=name, daemon=True).start()
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    try:
        if seconds is None:
            while True:
                time.sleep(3600)
        else:
            time.sleep(seconds)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
