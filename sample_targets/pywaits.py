"""pywaits - a Python thread that computes, sleeps and reads a pipe: the ground truth of
off-CPU time in a Python program (issue 29).

usage: python pywaits.py [SECONDS]

Its main thread repeats a 40 ms cycle:

- ``compute`` for 10 ms of its own CPU time;
- ``nap``: ``time.sleep(0.02)``, 20 ms;
- ``read_pipe``: ``os.read`` of a pipe that a helper *process* (forked at the start, so
  no thread of this one waits for it) answers 10 ms after it is asked.

Wall time: compute 25 %, nap 50 %, read_pipe 25 %; off-CPU time 67 / 33 %. Prints
``ready <pid>`` first; runs SECONDS (default: until killed).
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
    """The forked helper: answers each question READ_S later, until the pipe closes."""
    while os.read(ask, 1):
        time.sleep(READ_S)
        os.write(answer, b"!")
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
    print(f"ready {os.getpid()}", flush=True)
    end = time.monotonic() + seconds
    while seconds <= 0 or time.monotonic() < end:
        compute()
        nap()
        read_pipe(ask_w, answer_r)


if __name__ == "__main__":
    main()
