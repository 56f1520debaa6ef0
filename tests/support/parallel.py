"""Whole-system validations spread over the machine's cores.

A validation over every ELF file of the system is Python parsing on both sides (the
reference tool's listing, livesym's tables): one process holds one core, and the GIL
keeps threads from doing better. Chunks of the file list go to worker processes, one
per core, each ``python -m tests.support.parallel MODULE FUNCTION`` taking chunk after
chunk on its stdin and answering on its stdout, as length-prefixed pickles: plain
subprocesses, as multiprocessing's spawned workers leave a resource tracker running
after the test (a leftover) and forked ones would copy a pytest process that has
threads of its own. A worker takes the next chunk when it is done with its last, so a
big file holds up one chunk, not a fixed share of the list; the results come back in
the chunks' order, so a failure names the same file as a serial run would.
"""

from __future__ import annotations

import importlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")

CHUNK = 24  # files a chunk: a worker's start is paid once, a chunk's is nothing
ROOT = Path(__file__).resolve().parents[2]  # the repository: ``tests`` imports from it
_LENGTH = struct.Struct("<Q")


def _send(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> object:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("the other side ended")
    return pickle.loads(stream.read(_LENGTH.unpack(head)[0]))


def _serve(fn: Callable[[list[T]], R], todo: queue.Queue[tuple[int, list[T]] | None],
           results: dict[int, R | BaseException]) -> None:  # fmt: skip
    """One worker process: chunks from ``todo`` until it is empty, results by index."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT),
               os.environ.get("PYTHONPATH")))))  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.parallel", fn.__module__, fn.__qualname__],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    index = -1
    try:
        while (job := todo.get()) is not None:
            index, chunk = job
            _send(proc.stdin, chunk)
            ok, answer = cast(tuple[bool, object], _receive(proc.stdout))
            results[index] = cast(R, answer) if ok else RuntimeError(answer)
    except (OSError, EOFError) as e:
        results[index] = RuntimeError(f"a worker failed: {e}")
        while todo.get() is not None:  # the others take the rest
            pass
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()


def map_in_processes(fn: Callable[[list[T]], R], items: Sequence[T]) -> Iterator[R]:
    """``fn`` (a module-level function of an importable module) over chunks of
    ``items`` in one worker process per core; its results in the chunks' order."""
    workers = max(1, min(os.cpu_count() or 1, 4))
    chunks = [list(items[i : i + CHUNK]) for i in range(0, len(items), CHUNK)]
    todo: queue.Queue[tuple[int, list[T]] | None] = queue.Queue()
    for job in enumerate(chunks):
        todo.put(job)
    for _ in range(workers):
        todo.put(None)
    results: dict[int, R | BaseException] = {}
    threads = [threading.Thread(target=_serve, args=(fn, todo, results)) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index in range(len(chunks)):
        result = results.get(index, RuntimeError(f"chunk {index} was not done"))
        if isinstance(result, BaseException):
            raise result
        yield result


def _worker(module: str, name: str) -> None:
    """Answer each chunk with (True, ``fn(chunk)``), or (False, the text of what it
    raised): a result that is a string is not taken for a failure."""
    fn = getattr(importlib.import_module(module), name)
    while True:
        try:
            chunk = _receive(sys.stdin.buffer)
        except EOFError:
            return
        try:
            answer: tuple[bool, object] = (True, fn(chunk))
        except Exception as e:  # the test fails with it, in the parent
            answer = (False, f"{type(e).__name__}: {e}")
        _send(sys.stdout.buffer, answer)


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
