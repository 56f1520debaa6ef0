"""Writing captures: encode, then replace the file atomically.

The document goes to a temporary file of an unpredictable name in the same
directory, created 0600, and is renamed over FILE (``livesym.files``), so a
reader (or a crash) never meets a half-written capture and a planted symlink
redirects nothing. ``PeriodicWriter``
rewrites it while a session runs: every second while writes are cheap, backing
off so writing never takes more than a tenth of the wall-clock time.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

import orjson

from livesym.addr.kinds import hex_or_none
from livesym.capture.model import FORMAT, VERSION
from livesym.collector import collector_paused
from livesym.errors import FileError, LivesymError
from livesym.files import stream_destination, write_atomically
from livesym.records import (
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    ProcessRecord,
    ProcessStat,
)


def frame_json(f: FrameRecord) -> dict[str, object]:
    return {
        "id": f.id,
        "generation": f.generation,
        "vma": hex(f.vma),
        "module": f.module,
        "object": f.object,
        "mapping": (
            [f"{f.mapping[0]:x}", f"{f.mapping[1]:x}", f.mapping[2], f"{f.mapping[3]:x}"]
            if f.mapping
            else None
        ),
        "base": hex_or_none(f.base),
        "segment": f.segment,
        "elf_vaddr": hex_or_none(f.elf_vaddr),
        "elf_offset": hex_or_none(f.elf_offset),
        "symbol": f.symbol,
        "demangled": f.demangled,
        "symbol_vaddr": hex_or_none(f.symbol_vaddr),
        "symbol_size": f.symbol_size,
        "symbol_offset": f.symbol_offset,
        "reason": f.reason.value if f.reason else None,
        "detail": f.detail,
        "steps": list(f.steps),
        "problems": list(f.problems),
        "kind": f.kind,
        "line": f.line,
        "source_file": f.source_file,
    }


def object_json(o: ObjectRecord) -> dict[str, object]:
    return {
        "id": o.id,
        "path": o.path,
        "build_id": o.build_id,
        "e_type": o.e_type,
        "elf_class": o.elf_class,
        "machine": o.machine,
        "segments": list(o.segments),
        "symbol_source": o.symbol_source,
    }


def mapping_json(m: MappingRecord) -> list[object]:
    """``[start, end, perms, pgoff, dev, inode, path, deleted, facts]``; facts only as known."""
    facts: dict[str, object] = {}
    if m.object is not None:
        facts["object"] = m.object
    if m.base is not None:
        facts["base"] = hex(m.base)
    for name, value in (
        ("base_formula", m.base_formula),
        ("e_type", m.e_type),
        ("build_id", m.build_id),
        ("symbol_source", m.symbol_source),
    ):
        if value is not None:
            facts[name] = value
    if m.problems:
        facts["problems"] = list(m.problems)
    return [
        f"{m.start:x}", f"{m.end:x}", m.perms, f"{m.pgoff:x}", m.dev, m.inode, m.path,
        m.deleted, facts,
    ]  # fmt: skip


def generation_json(g: GenerationRecord) -> dict[str, object]:
    return {
        "generation": g.number,
        "pid": g.pid,
        "time": round(g.time, 6),
        "entries": [mapping_json(m) for m in g.mappings],
    }


def process_json(p: ProcessRecord) -> dict[str, object]:
    return {
        "pid": p.pid,
        "name": p.name,
        "argv": list(p.argv),
        "parent": p.parent,
        "started": round(p.started, 6),
        **({} if p.ended is None else {"ended": round(p.ended, 6)}),
    }


def document(
    *,
    created: str,
    version: str,
    target: dict[str, object],
    host: dict[str, object],
    sampler: dict[str, object],
    session: dict[str, object],
    maps: list[GenerationRecord],
    objects: list[ObjectRecord],
    frames: list[FrameRecord],
    stacks: list[tuple[int, ...]],
    threads: dict[int, str],
    samples: list[list[float | int]] | orjson.Fragment,
    process: list[ProcessStat],
    processes: list[ProcessRecord],
    thread_pids: dict[int, int],
) -> dict[str, object]:
    """The capture document; ``samples`` as rows, or already encoded (``SampleRows``)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "created": created,
        "livesym": version,
        "target": target,
        "host": host,
        "sampler": sampler,
        "session": session,
        "maps": [generation_json(g) for g in maps],
        "objects": [object_json(o) for o in objects],
        "frames": [frame_json(f) for f in frames],
        "stacks": [list(s) for s in stacks],
        "threads": {str(tid): name for tid, name in threads.items()},
        "processes": [process_json(p) for p in processes],
        "thread_pids": {str(tid): pid for tid, pid in thread_pids.items()},
        "samples": (
            samples
            if isinstance(samples, orjson.Fragment)
            else [[round(row[0], 6), *row[1:]] for row in samples]
        ),
        "process": [[round(p.time, 3), round(p.cpu_pct, 1), p.rss, p.threads] for p in process],
    }


class SampleRows:
    """A session's samples as the capture's JSON rows, each encoded once.

    A session's samples only grow, and each periodic rewrite of its capture made and
    encoded a row for every sample again: the largest part of a recording's steady cost
    (a write of 5,000 samples took 3 ms of building rows; the writer is allowed 2 % of
    the wall-clock time, which a long session's rewrites reached). Here the rows since
    the last write are encoded, and the whole goes into the document as an encoded
    fragment. Thread-safe: a periodic write and the final one may overlap."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start: float | None = None
        self._count = 0  # samples encoded into _body
        self._body = b""  # their rows, comma-separated, without brackets

    def fragment(
        self,
        times: Sequence[float],
        tids: Sequence[int],
        stacks: Sequence[int],
        flags: Sequence[int],
        weights: Sequence[int],
        start: float,
    ) -> orjson.Fragment:
        """The samples of a snapshot's tables, times from ``start``, as a JSON array."""
        n = len(flags)
        with self._lock:
            if start != self._start or n < self._count:
                # Another session's tables, or a snapshot older than the last one: from
                # the first sample (kept only where it is newer).
                body = _rows(times, tids, stacks, flags, weights, start, 0, n)
                if start != self._start:
                    self._start, self._count, self._body = start, n, body
                return orjson.Fragment(b"[" + body + b"]")
            if n > self._count:
                more = _rows(times, tids, stacks, flags, weights, start, self._count, n)
                self._body = self._body + b"," + more if self._body else more
                self._count = n
            return orjson.Fragment(b"[" + self._body + b"]")


def _rows(
    times: Sequence[float],
    tids: Sequence[int],
    stacks: Sequence[int],
    flags: Sequence[int],
    weights: Sequence[int],
    start: float,
    first: int,
    end: int,
) -> bytes:
    """Samples ``first`` to ``end`` as JSON rows, comma-separated, without brackets."""
    rows = [
        sample_row(round(times[i] - start, 6), tids[i], stacks[i], flags[i], weights[i])
        for i in range(first, end)
    ]
    return orjson.dumps(rows)[1:-1]


def sample_row(when: float, tid: int, stack: int, flags: int, weight: int) -> list[float | int]:
    """One sample as a capture's row: its weight only where it is not 1 (an on-CPU
    sample's), so captures without off-CPU time are as they were."""
    if weight == 1:
        return [when, tid, stack, flags]
    return [when, tid, stack, flags, weight]


def write_capture(path: str | Path, doc: dict[str, object]) -> None:
    """Write ``doc`` to ``path`` atomically (gzip when the name ends in .gz)."""
    path = str(path)
    with collector_paused():
        data = orjson.dumps(doc)
    if path.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    try:
        write_atomically(path, data)
    except OSError as e:
        raise FileError(
            f"cannot write the capture {path}: {e.strerror}; "
            "choose a writable directory with space left (-o)"
        ) from None


T = TypeVar("T")
WRITE_SHARE_INVERSE = 50  # a rewrite waits 50 times as long as the last one took


class PeriodicWriter(Generic[T]):
    """Rewrites a capture while a session runs, without letting writing dominate, and
    without holding up the event loop: ``snapshot`` (cheap, on the caller's thread)
    takes the session's tables; ``render`` (the costly part) makes the document of
    them in a thread, where it is also encoded and written. Writes land in the order
    their snapshots were taken: a slow older write never replaces a newer file."""

    def __init__(
        self,
        path: str | Path,
        snapshot: Callable[[], T],
        render: Callable[[T], dict[str, object]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._snapshot = snapshot
        self._render = render
        self._clock = clock
        self._interval = 1.0
        self._last = clock()
        self._taken = 0  # snapshots taken
        self._landed = 0  # the newest snapshot on disk
        self._order = threading.Lock()
        self._busy: threading.Thread | None = None
        self.failure: LivesymError | None = None
        self.writes = 0
        # A device or a pipe takes one document, the last: rewrites would append copies.
        try:
            self._final_only = stream_destination(str(path))
        except OSError:
            self._final_only = False  # the final write says why, in one line

    def maybe_write(self) -> bool:
        """Start a write in a thread if the interval has passed and none is under way;
        return whether one started."""
        now = self._clock()
        if self._final_only:
            return False
        if now - self._last < self._interval or (self._busy and self._busy.is_alive()):
            return False
        self._last = now
        tables = self._take()
        self._busy = threading.Thread(
            target=self._timed, args=tables, name="livesym-capture-writer", daemon=True
        )
        self._busy.start()
        return True

    def write(self) -> None:
        """Write now, on this thread, and wait: the final write of a session. Raises
        what writing raised (FileError)."""
        self._write(*self._take())

    def _take(self) -> tuple[int, T]:
        self._taken += 1
        return self._taken, self._snapshot()

    def _timed(self, seq: int, tables: T) -> None:
        started = time.monotonic()
        try:
            self._write(seq, tables)
        except LivesymError as e:  # the session's loop raises it (the session fails)
            self.failure = e
            return
        # At most 2 % of the wall-clock time goes to writing (a tenth, before, was more
        # than all the rest of a long session's steady cost: issue 27's bar is 2 %).
        self._interval = max(1.0, (time.monotonic() - started) * WRITE_SHARE_INVERSE)

    def _write(self, seq: int, tables: T) -> None:
        with collector_paused():  # a full collection here would stall the event loop
            doc = self._render(tables)
        with self._order:
            if seq <= self._landed:
                return  # a newer snapshot is already on disk
            write_capture(self.path, doc)
            self._landed = seq
            self.writes += 1
