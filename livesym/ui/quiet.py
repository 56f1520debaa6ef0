"""Only the characters that changed reach the terminal.

Textual sends every repainted line to the terminal whole, whether or not a character
of it changed, and a widget's ``refresh()`` repaints all its lines. Over an SSH link
that was most of what the dashboard wrote: the header's three lines every second for a
counter or two, the timeline's rows for one new column. A widget can instead name the
regions of its cells that changed (``refresh(*regions)``): Textual then renders those
lines again but sends only those cells, after a cursor move.

``changed_cells`` compares two renderings of a widget, Text for Text, and says which
cells differ: the same character with the same styles is the same cell. ``QuietStatic``
(a line or a few of text, the header's and the panes' status lines) and ``CellPainter``
(a widget drawn from its data at its size: the timeline, the header's graph) repaint
with it. Nothing here guesses: where the cells cannot be told apart by position (wide
characters, a different number of lines) the whole widget is repainted.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

# Unchanged cells between two changed runs of a line, below which the runs are sent as
# one: a cursor move costs about as many bytes as this many cells.
JOIN_GAP = 8

_Cell = tuple[str, tuple[str, ...]]


def changed_cells(old: Text | None, new: Text) -> list[Region] | None:
    """The regions (in the widget's content, a line each) where ``new`` differs from
    ``old``, cell by cell; None where it cannot be said by position (no ``old``, another
    number of lines, another base style, a wide character): repaint it all."""
    if old is None or str(old.style) != str(new.style):
        return None
    before, after = old.split("\n", allow_blank=True), new.split("\n", allow_blank=True)
    if len(before) != len(after):
        return None
    regions: list[Region] = []
    for y, (was, now) in enumerate(zip(before, after, strict=True)):
        a, b = _cells(was), _cells(now)
        if a is None or b is None:
            return None
        regions += [Region(x0, y, x1 - x0, 1) for x0, x1 in _runs(a, b)]
    return regions


def _cells(line: Text) -> list[_Cell] | None:
    """Each character of ``line`` with the styles of the spans over it; None where a
    character is not one cell wide."""
    plain = line.plain
    if cell_len(plain) != len(plain):
        return None
    styles: list[list[str]] = [[] for _ in plain]
    for span in line.spans:
        name = str(span.style)
        for i in range(max(0, span.start), min(len(plain), span.end)):
            styles[i].append(name)
    return [(char, tuple(style)) for char, style in zip(plain, styles, strict=True)]


def strip_changes(old: Strip, new: Strip) -> list[tuple[int, int]] | None:
    """The [start, end) runs of cells where the rendered line ``new`` differs from
    ``old`` (a table's row); None where a character is not one cell wide."""
    a, b = _strip_cells(old), _strip_cells(new)
    return None if a is None or b is None else _runs(a, b)


def _strip_cells(strip: Strip) -> list[tuple[str, object]] | None:
    cells: list[tuple[str, object]] = []
    for segment in strip:
        text = segment.text
        if cell_len(text) != len(text):
            return None
        cells += [(char, segment.style) for char in text]
    return cells


def _runs(a: Sequence[object], b: Sequence[object]) -> list[tuple[int, int]]:
    """The [start, end) runs of cells that differ (a cell one line has and the other
    has not differs), joined where fewer than JOIN_GAP cells lie between."""
    runs: list[tuple[int, int]] = []
    for x in range(max(len(a), len(b))):
        if x < len(a) and x < len(b) and a[x] == b[x]:
            continue
        if runs and x - runs[-1][1] < JOIN_GAP:
            runs[-1] = (runs[-1][0], x + 1)
        else:
            runs.append((x, x + 1))
    return runs


class CellPainter(Widget):
    """A widget drawn as one Text from its data at its size (``draw``), whose ``paint``
    repaints only the cells that changed since it was last drawn on the screen."""

    _drawn: Text | None = None  # what the screen shows: the last ``render``
    # What ``paint`` drew for the repaint it asked for, and at which size: ``render``
    # takes it rather than drawing it again (a day's timeline is 86,400 seconds to add).
    _painted: tuple[tuple[int, int], Text] | None = None

    def draw(self, width: int, height: int) -> Text:
        raise NotImplementedError

    def paint(self) -> None:
        """The data changed: repaint the cells that now differ."""
        self._painted = None
        if not self.is_mounted or self.size.area == 0:
            self.refresh()
            return
        size = (self.size.width, self.size.height)
        new = self.draw(*size)
        self._painted = (size, new)
        regions = changed_cells(self._drawn, new)
        if regions is None:
            self.refresh()
        elif regions:
            self.refresh(*regions)

    def render(self) -> Text:
        size = (self.size.width, self.size.height)
        painted, self._painted = self._painted, None
        self._drawn = painted[1] if painted is not None and painted[0] == size else self.draw(*size)
        return self._drawn


class QuietStatic(CellPainter):
    """Text (never markup) that ``show`` repaints only where it changed."""

    DEFAULT_CSS = """
    QuietStatic {
        height: auto;
    }
    """

    _shown: Text = Text(end="")

    def show(self, content: Text | str, *, layout: bool = False) -> None:
        """Show ``content``: nothing is repainted or sent where it is what is shown, only
        the cells that differ where it is not (``layout``: its size may change too)."""
        text = Text(content, end="") if isinstance(content, str) else content
        if _same(text, self._shown):
            return
        self._shown = text
        if layout:
            self.refresh(layout=True)
        else:
            self.paint()

    def draw(self, width: int, height: int) -> Text:
        return self._shown


def _same(content: Text, shown: Text) -> bool:
    # (rich's Text compares its characters and spans, not its own style)
    return content == shown and content.style == shown.style
