"""What the terminal shows, as far as the dashboard wrote it: each cell's character and
pen, so that an update sends only the cells that differ from it.

Textual sends every cell of a region it repaints, and a widget repaints whole: a table
whose row count changed sends its scrollbar's 22 unchanged cells, a row that moved
sends the words it shares with the row that was there, a counter sends its unchanged
digits. A terminal library keeps what the screen holds and sends the difference
(curses' ``doupdate``, S-Lang's ``SLsmg_refresh``: perf top's); Textual keeps no such
copy, and Rich renders segments, not cells, so it is kept here, where the dashboard's
updates are written out (``ui.crop``).

Only what is certain is known: a cell is known once livesym wrote it, until something
else may have changed the terminal (a full repaint records the whole screen anew;
Ctrl+L forgets it all and repaints). A cell written with a link, or in a character
wider than one cell, is left unknown and sent whenever it is repainted. The rows and
columns kept are bounded (``MAX_SIDE``): past them nothing is known and all is sent.
"""

from __future__ import annotations

Pen = tuple[str, str, str]  # SGR codes: attributes, foreground, background
Row = tuple[list[str | None], list[Pen | None]]  # each cell's character and pen

MAX_SIDE = 1000  # rows, and columns, of a screen whose cells are kept (16 MB at most)
MERGE_GAP = 3  # unchanged cells between two changes sent rather than moved over


class Shown:
    """The cells of one terminal as last written; None where not known."""

    def __init__(self) -> None:
        self.rows: dict[int, Row] = {}
        self.width: int | None = None  # the screen's, once a full repaint said it

    def forget(self) -> None:
        self.rows.clear()
        self.width = None

    def changes(self, y: int, x: int, text: str, pen: Pen) -> list[tuple[int, str]]:
        """The runs ``(x, text)`` of ``text`` at ``x`` in row ``y`` that differ from what
        is shown (merged across gaps of up to MERGE_GAP cells); they are shown after."""
        row = self._row(y, x + len(text))
        if row is None:
            return [(x, text)]
        chars, pens = row
        end = x + len(text)
        if chars[x:end] == list(text) and pens[x:end] == [pen] * len(text):
            return []
        runs: list[tuple[int, str]] = []
        start = last = -1  # the current run's first changed cell, and its last
        for i, char in enumerate(text):
            if chars[x + i] == char and pens[x + i] == pen:
                continue
            if start >= 0 and i - last - 1 > MERGE_GAP:
                runs.append((x + start, text[start : last + 1]))
                start = -1
            if start < 0:
                start = i
            last = i
        if start >= 0:
            runs.append((x + start, text[start : last + 1]))
        chars[x:end] = list(text)
        pens[x:end] = [pen] * len(text)
        return runs

    def record(self, y: int, x: int, text: str, pen: Pen | None) -> None:
        """``text`` written at ``x`` of row ``y`` in ``pen``; None: the cells it covers
        (``len(text)`` of them) are not known."""
        row = self._row(y, x + len(text))
        if row is None:
            return
        chars, pens = row
        end = x + len(text)
        if pen is None:
            chars[x:end] = [None] * len(text)
            pens[x:end] = [None] * len(text)
        else:
            chars[x:end] = list(text)
            pens[x:end] = [pen] * len(text)

    def holds(self, y: int, x: int, chars: list[str | None], pens: list[Pen | None]) -> bool:
        """Whether row ``y`` shows these characters in these pens from column ``x``."""
        row = self.rows.get(y)
        if row is None:
            return False
        end = x + len(chars)
        return row[0][x:end] == chars and row[1][x:end] == pens

    def row(self, y: int, width: int) -> tuple[list[str | None], list[Pen | None]]:
        """Copies of the first ``width`` cells of row ``y``: characters, pens (None: not
        known)."""
        chars, pens = self.rows.get(y, ([], []))
        pad = [None] * max(0, width - len(chars))
        return [*chars[:width], *pad], [*pens[:width], *pad]

    def cells(self, y: int, columns: list[int]) -> list[tuple[str, Pen] | None]:
        """The character and pen of each of ``columns`` in row ``y``; None where not known."""
        row = self.rows.get(y)
        out: list[tuple[str, Pen] | None] = []
        for x in columns:
            char = row[0][x] if row is not None and x < len(row[0]) else None
            pen = row[1][x] if row is not None and x < len(row[1]) else None
            out.append(None if char is None or pen is None else (char, pen))
        return out

    def shift(self, top: int, bottom: int, by: int) -> None:
        """Rows ``top`` to ``bottom`` moved ``by`` rows down (up where negative), as the
        terminal moves them in a scroll region: the rows it opens are not known."""
        old = {y: self.rows.pop(y) for y in range(top, bottom + 1) if y in self.rows}
        for y in range(top, bottom + 1):
            row = old.get(y - by)
            if row is not None:
                self.rows[y] = row

    def unknown(self, y: int, x: int, cells: int) -> None:
        self.record(y, x, " " * cells, None)

    def _row(self, y: int, end: int) -> Row | None:
        if not (0 <= y < MAX_SIDE and end <= MAX_SIDE):
            return None
        row = self.rows.get(y)
        if row is None:
            row = self.rows[y] = ([], [])
        chars, pens = row
        if len(chars) < end:
            chars.extend([None] * (end - len(chars)))
            pens.extend([None] * (end - len(pens)))
        return row
