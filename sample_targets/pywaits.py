"""pywaits - a Python thread that computes, sleeps and reads a pipe: the ground truth of
off-CPU time in a Python program (issue 29).

usage: python pywaits.py [SECONDS] [TIMES_FILE]

Its main thread repeats a 40 ms cycle:

- ``compute`` for 10 ms of its own CPU time;
- ``nap``: ``time.sleep(0.02)``, 20 ms;
- ``read_pipe``: ``os.read`` of a pipe that a helper *process* (forked at the start, so
  no thread of this one waits for it) answers 10 ms after it is asked.

Wall time: compute 25 %, nap 50 %, read_pipe 25 % on an idle machine (on a busy one a
sleep ends late and a computation is preempted: each part's wall time is measured). With
TIMES_FILE, a line ``when compute nap read_pipe cpu`` is added to it at the end of each
cycle: the moment (CLOCK_MONOTONIC, the clock of livesym's sample times), each part's
wall time so far and the thread's own CPU time, in seconds, for a test to hold a profile
to over the profile's own seconds. Prints ``ready <pid>`` first; runs SECONDS (0: until
killed).
"""

from __future__ import annotations

import os
import sys
import time

CPU_S, NAP_S, READ_S = 0.010, 0.020, 0.010


def compute() -> int:
    end = time.thread_time() + CPU_S
    total = 0
    while time.thread_time() < end:
        total += sum(range(200))
    return total


def nap() -> None:
    time.sleep(NAP_S)


def read_pipe(ask: int, answer: int) -> bytes:
    os.write(ask, b"?")
    return os.read(answer, 1)


def helper(ask: int, answer: int) -> None:
    """The forked helper: answers each question READ_S later, until the pipe closes (or
    the asker is gone: killed, it reads no answer)."""
    try:
        while os.read(ask, 1):
            time.sleep(READ_S)
            os.write(answer, b"!")
    except OSError:
        pass
    os._exit(0)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    ask_r, ask_w = os.pipe()
    answer_r, answer_w = os.pipe()
    if os.fork() == 0:
        os.close(ask_w)
        os.close(answer_r)
        helper(ask_r, answer_w)
    os.close(ask_r)
    os.close(answer_w)
    # Whole lines, for a reader at any moment.
    times = open(sys.argv[2], "a", buffering=1) if len(sys.argv) > 2 else None  # noqa: SIM115
    print(f"ready {os.getpid()}", flush=True)
    end = time.monotonic() + seconds
    spent = [0.0, 0.0, 0.0]
    while seconds <= 0 or time.monotonic() < end:
        t0 = time.monotonic()
        compute()
        t1 = time.monotonic()
        nap()
        t2 = time.monotonic()
        read_pipe(ask_w, answer_r)
        t3 = time.monotonic()
        for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2)):
            spent[i] += dt
        if times is not None:
            parts = " ".join(f"{v:.6f}" for v in spent)
            times.write(f"{t3:.6f} {parts} {time.thread_time():.6f}\n")


if __name__ == "__main__":
    main()
