"""pycrunch - a fixed amount of Python CPU work, for measuring profiler overhead.

The Python twin of crunch.c, for the py-spy sampler.

usage: python pycrunch.py [THREADS] [MILLION_ITERATIONS_PER_THREAD] [DELAY_MS] [MAPPINGS]

Prints ``ready <pid>``, waits DELAY_MS (so a profiler can attach), runs the
work on THREADS threads (they share the GIL: the work is serial whatever the
count), prints ``elapsed <seconds>`` (wall clock of the work alone) and exits.
A profiler that slows the target shows as a longer elapsed.

With MAPPINGS, the process first maps that many extra regions (one anonymous
mapping whose pages alternate between two protections, so the kernel keeps
each page a mapping of its own), as JVMs, browsers and big Python services
have thousands: what reading /proc/PID/maps costs shows in the elapsed time.
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


def many_mappings(count: int) -> object:
    """``count`` mappings (about), kept alive by the returned object."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    region = mmap.mmap(-1, count * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    for i in range(0, count, 2):
        if libc.mprotect(base + i * page, page, mmap.PROT_READ) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed (vm.max_map_count?)")
    return region


def main(argv: list[str]) -> int:
    threads = int(argv[1]) if len(argv) > 1 else 1
    iterations = int(float(argv[2]) * 1_000_000) if len(argv) > 2 else 5_000_000
    delay = int(argv[3]) if len(argv) > 3 else 0
    kept = many_mappings(int(argv[4])) if len(argv) > 4 and int(argv[4]) > 0 else None
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
    del kept
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
