"""pyphases - a Python program switching between three kinds of work in short phases,
for mixed stacks' join of native and Python frames at each sample (issue 27).

usage: python pyphases.py [SECONDS]

Each cycle runs, from ``main``:

- ``string_work`` for 12 ms: string building, in the interpreter (``unicode_*``);
- ``hash_work`` for 40 ms: SHA-256 through ``_hashlib`` (OpenSSL's libcrypto);
- ``compress_work`` for 5 ms: zlib's ``deflate`` through the ``zlib`` module.

Only ``hash_work`` calls into libcrypto and only ``compress_work`` into zlib: a
sample whose native frames are libcrypto's (or zlib's) under another Python function
was joined with the Python stack of another moment. Prints ``ready <pid>`` first; runs
SECONDS (default: until killed).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import zlib

DATA = bytes(range(256)) * 512  # 128 KiB
PHASES_MS = {"string_work": 12, "hash_work": 40, "compress_work": 5}


def string_work(ms: float) -> int:
    end = time.perf_counter() + ms / 1000
    total = 0
    while time.perf_counter() < end:
        total += len("-".join(str(i) for i in range(40)))
    return total


def hash_work(ms: float) -> bytes:
    end = time.perf_counter() + ms / 1000
    h = hashlib.sha256()
    while time.perf_counter() < end:
        h.update(DATA)
    return h.digest()


def compress_work(ms: float) -> int:
    end = time.perf_counter() + ms / 1000
    total = 0
    while time.perf_counter() < end:
        total += len(zlib.compress(DATA, 6))
    return total


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
    print(f"ready {os.getpid()}", flush=True)
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        string_work(PHASES_MS["string_work"])
        hash_work(PHASES_MS["hash_work"])
        compress_work(PHASES_MS["compress_work"])


if __name__ == "__main__":
    main()
