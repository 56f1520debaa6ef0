"""A session's captures: a recording appended to while it runs (``capture.appender``:
a chunk of what is new every half second, the last at its end), or the session so far
written whole when asked (``w`` in the dashboard), from the tables frozen on the event
loop and made into a document (``capture.session``) off it.

Source lines are looked up for a recording's last chunk only (and for a capture written
on request), within ``LinesBudget``: a process told to leave hurries them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

from livesym.capture.appender import AppendingWriter, Rotation
from livesym.capture.chunks import Increment, Mark
from livesym.capture.session import (
    SessionFacts,
    Tables,
    last_seconds,
    session_capture,
    session_document,
    with_lines,
)
from livesym.capture.writer import write_capture
from livesym.collector import collector_paused
from livesym.engine.lines import LinesBudget
from livesym.records import Capture, FrameRecord

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
        self._holds: list[Callable[[], int]] = []

    def record_to(self, path: str | Path, rotation: Rotation | None = None) -> None:
        """Append to a capture at ``path`` while running (off the event loop), and its
        last chunk at the end (source lines included); a new file when it is full."""
        self.writer = AppendingWriter(str(path), self, self._clock, rotation)

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
        """The samples every reader by index has taken: a recording's file, a push (None:
        none reads them so)."""
        marks = [hold() for hold in self._holds]
        marks += [self.writer.written] if self.writer is not None else []
        return min(marks) if marks else None

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

    def hold(self, mark: Callable[[], int]) -> None:
        """Keep the samples from the absolute index ``mark()`` on unfolded: a reader of
        them by index (``record --push``) has not taken them yet."""
        self._holds.append(mark)

    async def interval(self, since: int, began: float) -> tuple[Capture, int]:
        """The samples stored since the absolute index ``since`` as a capture of their own
        (every stack, frame and object of the session; its start ``began``, on the
        session's clock): what ``record --push`` sends of an interval, each sample once
        however late it came. With the index the next interval starts at. The rows are
        taken on the loop, the rest made in a thread."""
        inc = self._increment(Mark(samples=since))
        facts = dataclasses.replace(self._facts(), start=began, lost_at=())

        def made() -> Capture:
            with collector_paused():
                return session_capture(inc.part, facts)

        return await asyncio.to_thread(made), inc.mark.samples

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
