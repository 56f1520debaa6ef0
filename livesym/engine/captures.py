"""A session's captures: a recording appended to while it runs (``capture.appender``:
a chunk of what is new every half second, the last at its end), or the session so far
written whole when asked (``w`` in the dashboard), from the tables frozen on the event
loop and made into a document (``capture.session``) off it.

Source lines are looked up for a recording's last chunk only (and for a capture written
on request), within ``LinesBudget``: a process told to leave hurries them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from livesym.capture.appender import AppendingWriter
from livesym.capture.chunks import Increment, Mark
from livesym.capture.session import (
    SessionFacts,
    Tables,
    last_seconds,
    session_document,
    with_lines,
)
from livesym.capture.writer import write_capture
from livesym.collector import collector_paused
from livesym.engine.lines import LinesBudget
from livesym.records import FrameRecord

Lines = Callable[[list[FrameRecord], LinesBudget], list[FrameRecord]]


class SessionCaptures:
    """The captures of one session: ``freeze`` takes its tables now (on the loop),
    ``increment`` what they hold beyond a mark, ``facts`` says what the capture says
    beside them, ``lines`` fills in source lines."""

    def __init__(
        self,
        freeze: Callable[[], Tables],
        increment: Callable[[Mark], Increment],
        facts: Callable[[], SessionFacts],
        lines: Lines,
        clock: Callable[[], float],
    ) -> None:
        self._freeze = freeze
        self._increment = increment
        self._facts = facts
        self._lines = lines
        self._clock = clock
        self.writer: AppendingWriter | None = None
        self.budget = LinesBudget()

    def record_to(self, path: str | Path) -> None:
        """Append to a capture at ``path`` while running (off the event loop), and its
        last chunk at the end (source lines included)."""
        self.writer = AppendingWriter(str(path), self, self._clock)

    # -- what the appending writer takes (capture.appender.Session) --------------------

    def increment(self, since: Mark) -> Increment:
        return self._increment(since)

    def facts(self) -> SessionFacts:
        return self._facts()

    def lined_frames(self) -> list[FrameRecord]:
        """The frames the stacks hold that source lines were found for (the last chunk
        says them again)."""
        t = self._freeze()
        budget, fill = self.budget, self._lines
        lined = with_lines(t.frames, t.stacks, lambda frames: fill(frames, budget))
        return [new for new, old in zip(lined, t.frames, strict=True) if new is not old]

    def written(self) -> int | None:
        """The samples a recording has written (None: not recording)."""
        return None if self.writer is None else self.writer.written

    def tick(self) -> None:
        """Once a tick while running: a chunk when one is due (in a thread); the disk's
        refusal of an earlier one raised, to end the session and say so."""
        if self.writer is not None:
            if self.writer.failure is not None:
                raise self.writer.failure
            self.writer.maybe_write()

    def finish(self) -> None:
        """The session ended: the recording's last chunk (nothing lost)."""
        if self.writer is not None:
            self.writer.write(last=True)

    def write(self, path: str | Path) -> None:
        """The session so far to ``path`` (atomically; gzip for .gz), lines included."""
        write_capture(path, self.document(lines=True))

    async def dump_async(self, path: str | Path, since: float, period: float) -> None:
        """The session's seconds from ``since`` (on its clock) to ``path``, as if it had
        begun then (``capture.session.last_seconds``): a flight recorder's dump, off the
        event loop but for freezing the tables."""
        tables = self._freeze()

        def write() -> None:
            with collector_paused():
                cut, facts = last_seconds(tables, self._facts(), since, period)
                budget, fill = self.budget, self._lines
                doc = session_document(cut, facts, lambda frames: fill(frames, budget))
            write_capture(path, doc)

        await asyncio.to_thread(write)

    async def write_async(self, path: str | Path) -> None:
        """``write`` without holding up the event loop: only the tables are frozen on
        it; source lines, encoding and writing run in a thread."""
        tables = self._freeze()

        def write() -> None:
            with collector_paused():  # a full collection here would stall the event loop
                doc = self._document(tables, True)
            write_capture(path, doc)

        await asyncio.to_thread(write)

    def document(self, *, lines: bool = False) -> dict[str, object]:
        """The session so far as a capture document (docs/capture-format.md)."""
        return self._document(self._freeze(), lines)

    def _document(self, t: Tables, lines: bool) -> dict[str, object]:
        """The capture document of ``t``: pure work on a snapshot, for any thread."""
        budget, fill = self.budget, self._lines
        filler = (lambda frames: fill(frames, budget)) if lines else None
        return session_document(t, self._facts(), filler)
