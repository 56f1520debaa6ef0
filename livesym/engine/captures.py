"""A session's captures: kept up to date while it runs, written whole at its end or
when asked (``w`` in the dashboard), each from the tables frozen on the event loop and
made into a document (``capture.session``) off it.

Source lines are looked up for a capture's last write only (and for one written on
request), within ``LinesBudget``: a process told to leave hurries them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from livesym.capture.session import SessionFacts, Tables, session_document
from livesym.capture.writer import PeriodicWriter, SampleRows, write_capture
from livesym.collector import collector_paused
from livesym.engine.lines import LinesBudget
from livesym.records import FrameRecord

Lines = Callable[[list[FrameRecord], LinesBudget], list[FrameRecord]]


class SessionCaptures:
    """The captures of one session: ``freeze`` takes its tables now (on the loop),
    ``facts`` says what the capture says beside them, ``lines`` fills in source lines,
    ``ended`` whether the session is over (its last write has lines)."""

    def __init__(
        self,
        freeze: Callable[[], Tables],
        facts: Callable[[], SessionFacts],
        lines: Lines,
        ended: Callable[[], bool],
        clock: Callable[[], float],
    ) -> None:
        self._freeze = freeze
        self._facts = facts
        self._lines = lines
        self._ended = ended
        self._clock = clock
        self.writer: PeriodicWriter[Tables] | None = None
        self.budget = LinesBudget()

    def record_to(self, path: str | Path) -> None:
        """Keep a capture at ``path`` up to date while running (written off the event
        loop), and complete at the end (source lines included in the last write)."""
        rows = SampleRows()  # the rows written so far, not encoded again
        self.writer = PeriodicWriter(
            path,
            self._freeze,
            lambda tables: self._document(tables, lines=self._ended(), rows=rows),
            self._clock,
        )

    def tick(self) -> None:
        """Once a tick while running: a rewrite when it is due (in a thread); the disk's
        refusal of an earlier one raised, to end the session and say so."""
        if self.writer is not None:
            if self.writer.failure is not None:
                raise self.writer.failure
            self.writer.maybe_write()

    def finish(self) -> None:
        """The session ended: the recorded capture's last write (nothing lost)."""
        if self.writer is not None:
            self.writer.write()

    def write(self, path: str | Path) -> None:
        """The session so far to ``path`` (atomically; gzip for .gz), lines included."""
        write_capture(path, self.document(lines=True))

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

    def _document(
        self, t: Tables, lines: bool, rows: SampleRows | None = None
    ) -> dict[str, object]:
        """The capture document of ``t``: pure work on a snapshot, for any thread."""
        budget, fill = self.budget, self._lines
        filler = (lambda frames: fill(frames, budget)) if lines else None
        return session_document(t, self._facts(), filler, rows)
