"""Textual's partial updates, sent from where they start.

A widget may repaint a region of itself (``Widget.refresh(region)``: ``quiet``'s
changed cells). Textual renders those lines again and crops what it sends to the
region's end, but not to its start: it sends from the start of the widget's part of the
line (``ChopsUpdate.render_segments``, "TODO: crop to x extents"; Textual issue #5625).
The newest column of a 100-column timeline is at its right end: the whole row went out
for it every second, and the header's counters took the words before them along.

``install`` replaces that method with the same loop cropping both ends (the crop a
Textual maintainer suggested in the review of PR #2318, not taken then), only where the
classes still have the shape it is written against; elsewhere it leaves Textual as it
is, and livesym sends what Textual sends. Not done with a widget per column instead:
the timeline would be 100 widgets to lay out, and the header's counters move as they
grow.

Of the cropped cells it sends only those that differ from what the terminal shows
(``ui.shown``: a table whose length changed repainted its whole scrollbar, 22 unchanged
cells, and a row that moved the words it shared with the one before). Textual's full
repaints (``LayoutUpdate``) go out as Textual writes them, their cells recorded; an
inline app's updates leave nothing known.

It writes the styles as a terminal library does, by what changes: Rich renders every
segment as its whole style, its text and a reset (``Style.render``: ``ESC[1;38;2;...m
text ESC[0m``), so a run of cells in one style, split into segments (a number and the
space after it, a bar's cells), repeated the style once a segment, and a move to the
next changed cell came after a reset. Here the runs of one pen go out together, a
cursor move keeps the pen (``ESC[nC`` along a row, 4 bytes where ``ESC[y;xH`` is 7),
another style replaces it in one sequence (``ESC[0;...m``), and the update ends with
a reset, as Textual's own (its other writes assume one). A segment with a link, or a
character wider than a cell, is rendered as Rich renders it.
"""

from __future__ import annotations

import collections
import operator
import weakref
from typing import Any

from rich.cells import cell_len

from livesym.ui.shown import Pen, Shown

_INSTALLED = False
TEXTUALS: Any = None  # Textual's own render_segments, once replaced
LAYOUTS: Any = None  # ... of a full region's update
INLINES: Any = None  # ... of an inline app's


def install() -> bool:
    """Crop partial updates at their start as well; False where Textual's update class
    is not the one this was written for (nothing changed then)."""
    global _INSTALLED, TEXTUALS, LAYOUTS, INLINES
    if _INSTALLED:
        return True
    try:
        from textual import _compositor
        from textual.strip import Strip
    except ImportError:
        return False
    names = ("ChopsUpdate", "LayoutUpdate", "InlineUpdate")
    classes: list[Any] = [getattr(_compositor, name, None) for name in names]
    if not all(callable(getattr(c, "render_segments", None)) for c in classes):
        return False
    if not callable(getattr(Strip, "crop", None)):
        return False
    from rich.style import Style

    if not callable(getattr(Style, "_make_ansi_codes", None)):
        return False
    update, layout, inline = classes
    TEXTUALS, LAYOUTS, INLINES = (c.render_segments for c in classes)
    update.render_segments = _render_segments
    layout.render_segments = _render_layout
    inline.render_segments = _render_inline
    _INSTALLED = True
    return True


def _render_segments(self: Any, console: Any) -> str:
    """``ChopsUpdate.render_segments``, each chop cropped to the span at both ends, only
    the cells that differ from what the terminal shows (``Shown``; rows that moved up or
    down moved by the terminal, ``_scrolled``), in runs grouped by pen and reached by the
    shortest move (``_Pen``)."""
    pen = _Pen(_color_system(console))
    shown = _shown(console)
    pieces = _pieces(self, pen)
    scrolled, back = _scrolled(pieces, shown)
    runs: list[_Run] = []
    for y, x, text, codes, style in back + pieces:
        if codes is None:
            shown.unknown(y, x, cell_len(text))  # (sent as it is, in Rich's rendering)
            runs.append((None, y, x, text, style))
        else:
            runs.extend((codes, y, at, part, style)
                        for at, part in shown.changes(y, x, text, codes))  # fmt: skip
    return scrolled + pen.runs(runs, shown.width)


def _pieces(update: Any, pen: _Pen) -> list[_Piece]:
    """The update's segments cropped to its spans: (row, column, text, pen, style), the
    pen None where the text is not one cell a character (a wide one) or has a link."""
    out: list[_Piece] = []
    chops = update.chops
    chop_ends = update.chop_ends
    for y, x1, x2 in update.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items(), strict=False):
            if strip is None or x > x2 or end <= x1:
                continue
            if not (x2 > x >= x1 and end <= x2):
                start = max(x, x1)
                strip, x = strip.crop(start - x, min(end, x2) - x), start
            for text, style, _ in strip:
                if not text:
                    continue
                cells = cell_len(text)
                if (style is not None and style._link) or cells != len(text):
                    out.append((y, x, text, None, style))
                else:
                    out.append((y, x, text, _PLAIN if style is None else pen.codes(style), style))
                x += cells
    return out


def _scrolled(pieces: list[_Piece], shown: Shown) -> tuple[str, list[_Piece]]:
    """Where rows of the update are rows shown, moved up or down (a table's rows after
    one entered above them): the terminal moves them (a scroll region, lines inserted or
    deleted: what curses and S-Lang do, perf top's lines too), ``shown`` follows, and the
    rest is sent as it differs. A row the update paints is, after it, what is shown with
    the painted cells over it (the compositor repaints what changed, ``quiet`` only the
    cells that did): rows so known whole, three or more in a run, are compared with the
    rows shown. The cells of a moved row that the update does not paint move with it and
    are painted back where they differ. Returns the terminal's sequences, and the cells
    to paint back."""
    width = shown.width
    if width is None:
        return "", []
    rows: dict[int, tuple[list[str | None], list[Pen | None]]] = {}
    painted: dict[int, set[int]] = {}
    for y, x, text, codes, _ in pieces:
        row = rows.get(y)
        if row is None and y not in painted:
            row = rows[y] = shown.row(y, width)
            painted[y] = set()
        end = min(x + len(text), width)
        if codes is None or row is None:
            rows.pop(y, None)  # (not known after it: never compared)
            continue
        row[0][x:end] = text[: end - x]
        row[1][x:end] = [codes] * (end - x)
        painted[y].update(range(x, end))
    if rows:  # (a row between two painted ones that the update leaves is as shown)
        for y in range(min(rows), max(rows)):
            if y not in rows and y not in painted:
                rows[y], painted[y] = shown.row(y, width), set()
    whole = {y: row for y, row in rows.items() if None not in row[0] and None not in row[1]}
    out: list[str] = []
    back: list[_Piece] = []
    for block in _blocks(sorted(whole)):
        found = _moved(block, whole, shown)
        if found is None:
            continue
        top, bottom, by = found
        unpainted = {y: [x for x in range(width) if x not in painted[y]]
                     for y in range(top, bottom + 1)}  # fmt: skip
        kept = {y: shown.cells(y, columns) for y, columns in unpainted.items()}
        count = "" if abs(by) == 1 else str(abs(by))
        what = f"\x1b[{count}L" if by > 0 else f"\x1b[{count}M"
        out.append(f"\x1b[{top + 1};{bottom + 1}r\x1b[{top + 1};1H{what}\x1b[r")
        shown.shift(top, bottom, by)
        for y, cells in kept.items():
            for x, cell in zip(unpainted[y], cells, strict=True):
                if cell is not None:
                    back.append((y, x, cell[0], cell[1], None))
    return "".join(out), back


def _blocks(rows: list[int]) -> list[list[int]]:
    """Sorted rows in runs of consecutive ones, three rows or more."""
    out: list[list[int]] = []
    for y in rows:
        if out and out[-1][-1] == y - 1:
            out[-1].append(y)
        else:
            out.append([y])
    return [run for run in out if len(run) >= 3]


def _moved(
    block: list[int],
    rows: dict[int, tuple[list[str | None], list[Pen | None]]],
    shown: Shown,
) -> tuple[int, int, int] | None:
    """The region and distance (rows down; negative: up) whose move leaves the most of
    ``block``'s new cells where they are shown already, as (top, bottom, distance); None
    where no move leaves MOVE_GAIN cells more than staying does. Moved rows need not be
    the same (a moved row's counts changed too): each row counts the cells it shares
    with the row it would come from, against those it shares with itself shown; the rows
    a move opens share none."""
    first, last = block[0], block[-1]
    width = len(rows[first][0])
    new = {y: list(zip(*rows[y], strict=True)) for y in block}
    old = {y: list(zip(*shown.row(y, width), strict=True)) for y in block}

    def shared(y: int, was: int) -> int:
        return sum(map(operator.eq, new[y], old[was]))

    stay = {y: shared(y, y) for y in block}
    best: tuple[int, int, int] | None = None
    most = MOVE_GAIN
    for by in (1, -1, 2, -2, 3, -3):
        # The rows that may move (their source in the block), the cells each gains, and
        # the best run of them: its gains less what the rows it opens shared with
        # themselves (above it moving down, below it moving up).
        valid = [y for y in block if first <= y - by <= last]
        total, lowest, lowest_at = 0, 0, 0
        for j, y in enumerate(valid):
            if by > 0:  # (the opened rows are above the run's first row: charged there)
                opening = total + sum(stay[o] for o in range(y - by, y))
                if j == 0 or opening < lowest:
                    lowest, lowest_at = opening, j
            elif j == 0 or total < lowest:
                lowest, lowest_at = total, j
            total += shared(y, y - by) - stay[y]
            gained = total - lowest
            if by < 0:
                gained -= sum(stay[o] for o in range(y + 1, y + 1 - by))
            if gained > most:
                most = gained
                top = valid[lowest_at]
                best = (top - by, y, by) if by > 0 else (top, y - by, by)
    return best


# A piece of an update: row, column, text, pen (None: sent as Rich renders it), style.
_Piece = tuple[int, int, str, Pen | None, Any]


def _render_layout(self: Any, console: Any) -> str:
    """``LayoutUpdate.render_segments`` as Textual sends it (a region, every cell), its
    cells the only ones known to be shown."""
    sent: str = LAYOUTS(self, console)
    shown = _shown(console)
    region = self.region
    shown.forget()  # (Textual makes one for the whole screen: after a resize, say)
    shown.width = region.x + region.width
    codes = _Pen(_color_system(console)).codes
    for y, line in enumerate(self.strips, region.y):
        x = region.x
        for strip in line:
            for text, style, _ in strip:
                cells = cell_len(text)
                known = not (style is not None and style._link) and cells == len(text)
                pen = (_PLAIN if style is None else codes(style)) if known else None
                shown.record(y, x, text if known else " " * cells, pen)
                x += cells
    return sent


def _render_inline(self: Any, console: Any) -> str:
    """``InlineUpdate.render_segments``: its cells are not where ``Shown`` counts them
    (an inline app's rows are relative), so nothing shown is known after it."""
    _shown(console).forget()
    sent: str = INLINES(self, console)
    return sent


def forget(console: Any) -> None:
    """Nothing is known of what ``console``'s terminal shows: the next updates send every
    cell (after something else may have written to it; Ctrl+L)."""
    _shown(console).forget()


def _shown(console: Any) -> Shown:
    found = _SHOWN.get(console)
    if found is None:
        found = _SHOWN[console] = Shown()
    return found


def _color_system(console: Any) -> Any:
    from rich.color import ColorSystem

    return console._color_system or ColorSystem.TRUECOLOR


# What each console's terminal shows.
_SHOWN: weakref.WeakKeyDictionary[Any, Shown] = weakref.WeakKeyDictionary()
# A run of cells to send: its pen (None: send it as Rich renders it), row, column, text
# and style.
_Run = tuple[Pen | None, int, int, str, Any]


_PLAIN: Pen = ("", "39", "49")  # no attribute, the terminal's own colours: after a reset
# Cells a move of rows must leave in place, more than staying does, to be made: the
# terminal's sequences for it are ~20 bytes.
MOVE_GAIN = 24
_PENS_KEPT = 4096  # styles whose codes are kept (a dashboard uses some dozens)


class _Pen:
    """Terminal output that sends a style only where it changes, and then only the part
    that changed: a colour alone where the attributes (bold, reverse...) stay; a reset
    and the whole style where they change; and each run of cells after the shortest
    move to it."""

    def __init__(self, color_system: Any) -> None:
        self.color_system = color_system

    def runs(self, runs: list[_Run], width: int | None = None) -> str:
        """``runs`` sent, then a reset, in whichever order is shortest: that of their
        cells; the runs of each pen together, pens in the order that changes least from
        one to the next (``_by_pen``); or that of their cells, but a run in the pen in
        force next where that costs fewer bytes (``_pen_first``). (Where cells overlap
        none does: each is one cell's last change.) ``width``: the screen's, where
        known (for moves relative to the cursor, ``_move``)."""
        along = sorted(runs, key=lambda run: (run[1], run[2]))
        best = self._write(along, width)
        if len(along) > 2:
            for order in (_by_pen(along), _pen_first(along, width)):
                sent = self._write(order, width)
                if len(sent) < len(best):
                    best = sent
        return best

    def _write(self, runs: list[_Run], width: int | None) -> str:
        parts: list[str] = []
        pen, row, column = _PLAIN, -1, -1  # the cursor: not known
        for codes, y, x, text, style in runs:
            parts.append(_move(row, column, y, x, width))
            if codes is None:
                parts.append(_change(pen, _PLAIN))  # Rich's rendering assumes no style ...
                parts.append(style.render(text, color_system=self.color_system) if style
                             else text)  # fmt: skip
                pen, row = _PLAIN, -1  # ... and leaves none; a wide character's width
                continue  # is the terminal's to say
            parts.append(_change(pen, codes))
            parts.append(text)
            pen, row, column = codes, y, x + len(text)
        parts.append(_change(pen, _PLAIN))
        return "".join(parts)

    def codes(self, style: Any) -> Pen:
        key = (self.color_system, style)
        codes = _CODES.get(key)
        if codes is None:
            if len(_CODES) >= _PENS_KEPT:
                _CODES.clear()
            system = self.color_system
            fg, bg = style.color, style.bgcolor
            codes = _CODES[key] = (
                style.without_color._make_ansi_codes(system),
                ";".join(fg.downgrade(system).get_ansi_codes(True)) if fg else "39",
                ";".join(bg.downgrade(system).get_ansi_codes(False)) if bg else "49",
            )
        return codes


def _pen_first(runs: list[_Run], width: int | None) -> list[_Run]:
    """``runs`` (in the order of their cells) reordered: after each, the next in order,
    or the next in the pen in force where that costs fewer bytes to reach and set."""
    queues: dict[Pen | None, collections.deque[int]] = {}
    for i, run in enumerate(runs):
        queues.setdefault(run[0], collections.deque()).append(i)
    done = [False] * len(runs)
    out: list[_Run] = []
    following, pen, row, column = 0, _PLAIN, -1, -1
    while len(out) < len(runs):
        while done[following]:
            following += 1
        choice = following
        queue = queues.get(pen)
        while queue and done[queue[0]]:
            queue.popleft()
        if queue and queue[0] != following:
            a, b = runs[following], runs[queue[0]]
            move_a, move_b = (_move(row, column, r[1], r[2], width) for r in (a, b))
            if len(move_b) < len(move_a) + len(_change(pen, a[0] or _PLAIN)):  # (b: no change)
                choice = queue[0]
        done[choice] = True
        run = runs[choice]
        out.append(run)
        pen, row, column = run[0] or _PLAIN, run[1], run[2] + len(run[3])
        if run[0] is None:
            row = -1
    return out


def _by_pen(runs: list[_Run]) -> list[_Run]:
    """``runs`` (in the order of their cells) by pen: each pen's runs together, in the
    order of their cells, the next pen the one set from the last in the fewest bytes."""
    groups: dict[Pen | None, list[_Run]] = {}
    for run in runs:
        groups.setdefault(run[0], []).append(run)
    out: list[_Run] = []
    pen = _PLAIN
    while groups:
        nearest = min(groups, key=lambda p: len(_change(pen, p or _PLAIN)))
        out += groups.pop(nearest)
        pen = nearest or _PLAIN
    return out


def _move(row: int, column: int, y: int, x: int, width: int | None = None) -> str:
    """The shortest move from the cursor at ``row, column`` (-1: not known) to ``y, x``.

    Along the row to the right (``ESC[nC``) wherever the cursor is known: after the last
    column a terminal waits to wrap, the cursor is not where the count says, but then no
    cell is to its right. Up, down and left (``ESC[nA``, ``ESC[nB``, backspaces or
    ``ESC[nD``) only where the screen's ``width`` says the cursor is not past its last
    column. Else to the cell (``ESC[y;xH``)."""
    if y == row and x >= column >= 0:
        return "" if x == column else (f"\x1b[{x - column}C" if x - column > 1 else "\x1b[C")
    to = f"\x1b[{y + 1};{x + 1}H"
    if row < 0 or width is None or column >= width:
        return to
    rows, cols = y - row, x - column
    down = (
        ""
        if not rows
        else (f"\x1b[{abs(rows)}" if abs(rows) > 1 else "\x1b[") + ("B" if rows > 0 else "A")
    )
    if cols > 0:
        along = f"\x1b[{cols}C" if cols > 1 else "\x1b[C"
    else:
        along = "\b" * -cols if -cols <= 3 else f"\x1b[{-cols}D"
    return min(to, down + along, key=len)


def _change(now: Pen, pen: Pen) -> str:
    """The SGR sequence from the pen ``now`` to ``pen``: the colours that change, or a
    reset and all of it where attributes must go."""
    if pen == now:
        return ""
    if pen == _PLAIN:
        return "\x1b[m"  # (all of it reset: never longer)
    attrs, fg, bg = pen
    had, has = now[0].split(";") if now[0] else [], attrs.split(";") if attrs else []
    if set(had) <= set(has):  # attributes to add, or none: the colours that change
        codes = [code for code in has if code not in had]
        codes += [code for code, was in zip((fg, bg), now[1:], strict=True) if code != was]
    else:  # attributes to turn off: from a reset, all of it
        codes = ["0", attrs] if attrs else ["0"]
        codes += [code for code, plain in zip((fg, bg), _PLAIN[1:], strict=True) if code != plain]
    return f"\x1b[{';'.join(codes)}m"


# The codes of each style in a colour system.
_CODES: dict[tuple[Any, Any], Pen] = {}
