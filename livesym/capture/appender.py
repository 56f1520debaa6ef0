"""Appending a recording's chunks to its capture file, off the event loop.

``ChunkFile`` owns the file. The first chunk goes, with the header, to a private
temporary file beside the destination that is then renamed over it (as
``livesym.files`` writes a whole file: a planted symlink redirects nothing), and every
later chunk is appended to that same open file. A ``.gz`` capture gets one gzip member
a chunk: the file is a whole gzip file after every chunk (``zcat`` reads it), and a
write cut short leaves a member the reader knows for the torn tail it is. A write the
disk refuses (full, quota) is cut back off the file, so what was written before still
reads, and the session is told in one line.

``AppendingWriter`` decides when: every ``INTERVAL`` seconds it takes what is new from
the session on the caller's thread (cheap slices) and encodes and appends it in a
thread; a chunk lands only after the one before it, and what a refused chunk held goes
into the next one.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from livesym.capture.chunks import ChunkMaker, Increment, Mark
from livesym.capture.session import SessionFacts
from livesym.collector import collector_paused
from livesym.errors import FileError, LivesymError
from livesym.files import open_atomically, stamped, write_all
from livesym.records import FrameRecord

# Seconds between chunks: a process killed outright loses what the last one did not
# hold, up to this and the time it takes the samples to be resolved (well within a
# second: the must-hold is 1.5 s).
INTERVAL = 0.5
# A chunk is due this much before INTERVAL has passed: the rounds that ask are on a
# grid of their own, and one a millisecond early would put the chunk off a round.
DUE_EARLY = 0.05
GZIP_LEVEL = 6


class ChunkFile:
    """A capture file that only grows: created whole with its first data, appended to
    after. A device or a pipe (``files.stream_destination``) is written into."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._gzip = path.endswith(".gz")
        self._fd: int | None = None
        self._size = 0  # bytes of whole chunks in the file
        self._stream = False  # a device or a pipe: nothing to cut back
        self.chunks = 0

    def append(self, data: bytes) -> None:
        """Append ``data`` (gzipped, for a .gz name) whole, or not at all. Raises FileError."""
        payload = gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0) if self._gzip else data
        try:
            if self._fd is None:
                self._fd, self._stream = open_atomically(self.path, payload)
            else:
                write_all(self._fd, payload)
        except OSError as e:
            self._cut_back()
            raise FileError(
                f"cannot write the capture {self.path}: {e.strerror}; "
                "what was written before still reads; choose a writable directory with "
                "space left (-o)"
            ) from None
        self._size += len(payload)
        self.chunks += 1

    @property
    def stream(self) -> bool:
        """Whether it is a device or a pipe (nothing to rotate)."""
        return self._stream

    @property
    def size(self) -> int:
        """Bytes of whole chunks in the file."""
        return self._size

    def close(self) -> None:
        """Flush the file to disk and close it (a stream: close it)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.fsync(fd)
        os.close(fd)

    def _cut_back(self) -> None:
        """Take a refused chunk's part off the file: it ends with the last whole chunk."""
        if self._fd is not None and not self._stream:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)


class Session(Protocol):
    """What the writer needs of a session: what is new beyond a mark, the facts, and
    frames with their source lines (for the last chunk)."""

    def increment(self, since: Mark) -> Increment: ...

    def facts(self) -> SessionFacts: ...

    def lined_frames(self) -> Sequence[FrameRecord]: ...


@dataclass(frozen=True)
class Rotation:
    """Start a new file once the capture reaches ``max_size`` bytes, the full one renamed
    with the moment it ended (``files.stamped``); keep ``keep`` of those (None: all)."""

    max_size: int
    keep: int | None = None


class AppendingWriter:
    """Appends a session's chunks to its capture while it runs, and the last at its end."""

    def __init__(
        self,
        path: str,
        session: Session,
        clock: Callable[[], float] = time.monotonic,
        rotation: Rotation | None = None,
    ) -> None:
        self.path = path
        self._session = session
        self._clock = clock
        self._rotation = rotation
        self.rotated: list[str] = []  # the full files kept, oldest first
        self._file = ChunkFile(path)
        self._maker = ChunkMaker()
        self._mark = Mark()  # what the file holds
        self._last = clock()
        self._busy: threading.Thread | None = None
        self._order = threading.Lock()  # one chunk at a time, in order
        self.failure: LivesymError | None = None
        self.closed = False

    @property
    def chunks(self) -> int:
        return self._file.chunks

    @property
    def written(self) -> int:
        """Samples the file holds (what may be folded in memory: ``engine.folding``)."""
        return self._mark.samples

    def maybe_write(self) -> bool:
        """Start a chunk in a thread when one is due and none is under way."""
        now = self._clock()
        due = now - self._last >= INTERVAL - DUE_EARLY
        if self.closed or not due or (self._busy and self._busy.is_alive()):
            return False
        self._last = now
        inc, facts = self._session.increment(self._mark), self._session.facts()
        self._busy = threading.Thread(
            target=self._in_thread, args=(inc, facts), name="livesym-capture-writer", daemon=True
        )
        self._busy.start()
        return True

    def write(self, *, last: bool = False) -> None:
        """Append what is new now, on this thread, waiting for a chunk under way first;
        ``last``: with source lines, and the file closed after. Raises FileError."""
        busy = self._busy
        if busy is not None:
            busy.join()
        if self.closed:
            return
        inc, facts = self._session.increment(self._mark), self._session.facts()
        extra = self._session.lined_frames() if last else ()
        try:
            self._append(inc, facts, extra, last=last)
        finally:
            if last:
                self.closed = True
                self._file.close()

    def _in_thread(self, inc: Increment, facts: SessionFacts) -> None:
        try:
            self._append(inc, facts, ())
        except LivesymError as e:  # the session's loop raises it (the session fails)
            self.failure = e

    def _append(
        self,
        inc: Increment,
        facts: SessionFacts,
        extra: Sequence[FrameRecord],
        *,
        last: bool = False,
    ) -> None:
        with self._order:
            if inc.since != self._mark:
                return  # taken before the last chunk landed: its part is written
            with collector_paused():  # a full collection here would stall the event loop
                data = self._maker.lines(inc, facts, extra)
            self._file.append(data)
            self._maker.landed(inc, facts)
            self._mark = inc.mark
            rotation = self._rotation
            if (
                not last  # (the session's last chunk ends its file: FILE is there)
                and rotation is not None
                and self._file.size >= rotation.max_size
                and not self._file.stream
            ):
                self._rotate(rotation)

    def _rotate(self, rotation: Rotation) -> None:
        """The full file renamed with its end's moment, and a new one begun: its first
        chunk says the session's tables again (every stack, frame and object so far), its
        samples only those since (perf's --switch-output)."""
        self._file.close()
        when, nth = time.time(), 1
        while os.path.lexists(done := stamped(self.path, when, nth)):
            nth += 1  # (several files in one second: none replaces another)
        try:
            os.replace(self.path, done)
        except OSError as e:
            raise FileError(f"cannot rotate the capture {self.path}: {e.strerror}; choose "
                            "a writable directory (-o)") from None  # fmt: skip
        self.rotated.append(done)
        while rotation.keep is not None and len(self.rotated) > rotation.keep:
            with contextlib.suppress(OSError):
                os.unlink(self.rotated.pop(0))
        self._file = ChunkFile(self.path)
        self._maker = ChunkMaker()
        self._mark = Mark(samples=self._mark.samples, process=self._mark.process)
