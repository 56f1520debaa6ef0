"""wsgiburn - a CPU-bound WSGI application, for profiling a pre-fork server's workers.

Every request computes ``checksum`` over a fixed amount of work in pure Python
(``burn_cpu``, about 20 ms), then answers with the result and the worker's pid:
a server's workers busy serving it show that function as their Python frames.

usage (gunicorn): gunicorn -w 4 -b 127.0.0.1:PORT --chdir sample_targets wsgiburn:app
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

ROUNDS = 60_000  # iterations of burn_cpu per request


def burn_cpu(rounds: int) -> int:
    x = 1
    for i in range(rounds):
        x = (x * 1103515245 + 12345 + i) & 0x7FFFFFFF
    return x


def checksum() -> int:
    return burn_cpu(ROUNDS)


def app(environ: dict[str, object], start_response: Callable[..., object]) -> Iterable[bytes]:
    body = f"{checksum()} {os.getpid()}\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
