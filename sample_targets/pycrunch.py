"""pycrunch - a fixed amount of Python CPU work, for measuring profiler overhead.

The Python twin of crunch.c, for the py-spy sampler.

usage: python pycrunch.py [THREADS] [MILLION_ITERATIONS_PER_THREAD] [DELAY_MS]

Prints ``ready <pid>``, waits DELAY_MS (so a profiler can attach), runs the
work on THREADS threads (they share the GIL: the work is serial whatever the
count), prints ``elapsed <seconds>`` (wall clock of the work alone) and exits.
A profiler that slows the target shows as a longer elapsed.
"""

from __future__ import annotations

import os
import sys
import threading
import time


def crunch_work(iterations: int, seed: int) -> int:
    x = seed
    for _ in range(iterations):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
    return x


def main(argv: list[str]) -> int:
    threads = int(argv[1]) if len(argv) > 1 else 1
    iterations = int(float(argv[2]) * 1_000_000) if len(argv) > 2 else 5_000_000
    delay = int(argv[3]) if len(argv) > 3 else 0
    print(f"ready {os.getpid()}", flush=True)
    time.sleep(delay / 1000)
    workers = [
        threading.Thread(target=crunch_work, args=(iterations, i), name=f"crunch-{i}")
        for i in range(threads)
    ]
    start = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(f"elapsed {time.monotonic() - start:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
