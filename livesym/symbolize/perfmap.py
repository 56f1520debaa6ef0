"""JIT symbols from ``/tmp/perf-<pid>.map``, the perf map convention.

A JIT (node --perf-basic-prof, Python -X perf, the JVM's perf-map-agent) writes
one line per generated function, ``START SIZE name`` with START and SIZE in hex
(a ``0x`` prefix is allowed), appending as it compiles. The code lives in
anonymous executable mappings that no ELF file describes: the perf map is the
only name for it.

The file is read incrementally: the offset of the last complete line is kept,
and the file is read again from there when a lookup misses and the file has
grown (at most every ``RECHECK_S``). A replaced or truncated file is read
anew. Later lines win where entries overlap (code recompiled in place).

Hostile input: lines longer than ``MAX_LINE`` are skipped, at most
``MAX_ENTRIES`` entries and ``MAX_BYTES`` bytes are read in all, and at most
``MAX_READ`` bytes per refresh, so one lookup never stalls on a huge file.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

MAX_LINE = 4096
MAX_ENTRIES = 2_000_000
MAX_BYTES = 256 << 20
MAX_READ = 16 << 20
RECHECK_S = 0.5
MAX_OVERLAP_WALK = 64
ADDR_LIMIT = 1 << 64


@dataclass(frozen=True, slots=True)
class JitSymbol:
    """One perf map entry: [start, start + size) is ``name``; ``line`` in the file."""

    start: int
    size: int
    name: str
    line: int

    @property
    def end(self) -> int:
        return self.start + self.size


class PerfMap:
    """The perf map of one process, read as it grows; thread-safe."""

    def __init__(
        self, open_path: str, shown_as: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.open_path = open_path
        self.shown_as = shown_as  # the path as the target names it
        self._clock = clock
        self._lock = threading.Lock()
        self._checked = float("-inf")
        self.version = 0  # changes whenever the entries do
        self._reset()

    def _reset(self, ino: int | None = None) -> None:
        self._ino = ino
        self._offset = 0
        self._lines = 0
        self._entries: list[JitSymbol] = []
        self._starts: list[int] = []
        self._sorted: list[JitSymbol] = []
        self._dirty = False
        self.version += 1
        self.skipped = 0  # lines that were not entries
        self.problem: str | None = None

    @property
    def exists(self) -> bool:
        return self._ino is not None

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, vma: int) -> JitSymbol | None:
        """The entry covering ``vma``; the file is read again first when it may have
        grown since the last look (a miss, and ``RECHECK_S`` passed)."""
        with self._lock:
            found = self._find(vma)
            if found is None and self._clock() - self._checked >= RECHECK_S:
                self._refresh()
                found = self._find(vma)
            return found

    def covers(self, vma: int) -> bool:
        """Whether an entry read so far covers ``vma`` (the file is not read again)."""
        with self._lock:
            return self._find(vma) is not None

    def refresh(self) -> None:
        with self._lock:
            self._refresh()

    def _find(self, vma: int) -> JitSymbol | None:
        if self._dirty:
            self._sorted = sorted(self._entries, key=lambda e: e.start)
            self._starts = [e.start for e in self._sorted]
            self._dirty = False
        k = bisect_right(self._starts, vma) - 1
        best: JitSymbol | None = None
        # Overlapping entries: the one written last wins, among a bounded walk back.
        for i in range(k, max(-1, k - MAX_OVERLAP_WALK), -1):
            entry = self._sorted[i]
            if entry.start <= vma < entry.end and (best is None or entry.line > best.line):
                best = entry
        return best

    def _refresh(self) -> None:
        self._checked = self._clock()
        try:
            fd = os.open(self.open_path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            if self._ino is not None:
                self._reset()
            return
        try:
            st = os.fstat(fd)
            if st.st_ino != self._ino or st.st_size < self._offset:
                self._reset(st.st_ino)  # a new file, or truncated: read it from the start
            budget = min(MAX_READ, MAX_BYTES - self._offset, st.st_size - self._offset)
            if budget <= 0 or len(self._entries) >= MAX_ENTRIES:
                if self._offset >= MAX_BYTES or len(self._entries) >= MAX_ENTRIES:
                    self.problem = (
                        f"{self.shown_as}: only the first {len(self._entries)} "
                        "entries were read (the file is larger than livesym reads)"
                    )
                return
            data = os.pread(fd, budget, self._offset)
        except OSError as e:
            self.problem = f"{self.shown_as}: cannot read: {e.strerror}"
            return
        finally:
            os.close(fd)
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        end = data.rfind(b"\n") + 1
        if end == 0:
            if len(data) >= MAX_LINE:
                # No newline in a line this long: not a perf map line; skip past it.
                self._offset += len(data)
                self.skipped += 1
            return  # else: a line still being written; read it when complete
        added = 0
        for raw in data[:end].split(b"\n")[:-1]:
            self._lines += 1
            entry = _parse_line(raw, self._lines) if len(raw) <= MAX_LINE else None
            if entry is None:
                self.skipped += 1
                continue
            self._entries.append(entry)
            added += 1
            if len(self._entries) >= MAX_ENTRIES:
                break
        self._offset += end
        if added:
            self._dirty = True
            self.version += 1


def _parse_line(raw: bytes, line: int) -> JitSymbol | None:
    parts = raw.split(None, 2)
    if len(parts) < 3:
        return None
    try:
        start = int(parts[0], 16)
        size = int(parts[1], 16)
    except ValueError:
        return None
    if size <= 0 or not 0 <= start < ADDR_LIMIT or start + size > ADDR_LIMIT:
        return None
    name = parts[2].strip().decode("utf-8", "backslashreplace")
    return JitSymbol(start, size, name, line) if name else None
