"""A table that follows a list of keyed rows in place, drawn line by line.

Every refresh hands ``SyncTable.sync`` the rows to show, in display order. The
table's rows are positions (slots): slot ``i`` shows the ``i``-th row. A sync
repaints only the slots whose cells changed; the highlighted row follows its
item's key, and the view scrolls only if the item would leave it.

Why not Textual's DataTable: any change to a DataTable (one ``update_cell``, a
resize, focus moving) throws away its whole render cache, so every key that
changed a table re-rendered every visible cell through Rich, 15-30 ms a frame on
the dashboard's tables, and a first visit to a pane took two layouts. Here each
row is rendered once into a Strip and kept until its cells change or the columns
do; the cursor is a style laid over the row's strip. It is a Line API widget
(``ScrollView.render_line``), so Textual asks only for the lines on the screen.

Columns adapt to the width: optional columns drop out on narrow terminals and
one flexible column takes what is left, cutting long names with an ellipsis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from livesym.ui.quiet import strip_changes

PADDING = 1  # cells on each side of every column
SCROLLBAR = 2  # columns kept free for the vertical scrollbar
HEADER = 1  # lines above the rows (the column labels)

_EMPTY = Text("")


@dataclass(frozen=True)
class Column:
    """One column: fixed ``width``, or with ``flex`` at least ``width`` plus what is left.

    ``drop_below``: the column is hidden when the table is narrower than that;
    ``only_below``: it is shown only then (a shorter stand-in for a dropped column).
    """

    key: str
    label: str
    width: int
    flex: bool = False
    drop_below: int = 0
    right: bool = False
    only_below: int | None = None


@dataclass(frozen=True)
class Row:
    """One row to show: its item's key (stable across refreshes) and its cells by column."""

    key: str
    cells: dict[str, Text]


def layout(columns: Sequence[Column], width: int) -> tuple[tuple[Column, int], ...]:
    """The columns shown at ``width`` with their widths; a flex column takes the rest."""
    shown = [
        c
        for c in columns
        if width >= c.drop_below and (c.only_below is None or width < c.only_below)
    ]
    fixed = sum(c.width + 2 * PADDING for c in shown if not c.flex)
    flex = [c for c in shown if c.flex]
    spare = max(0, width - SCROLLBAR - fixed - sum(2 * PADDING for _ in flex))
    each = spare // len(flex) if flex else 0
    return tuple((c, max(c.width, each) if c.flex else c.width) for c in shown)


def _same(a: Text, b: Text) -> bool:
    """Equal as shown: rich's Text equality ignores the base style."""
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans


def _same_cells(a: dict[str, Text], b: dict[str, Text]) -> bool:
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def cell_segments(text: Text, width: int, right: bool, console: Console) -> list[Segment]:
    """``text`` in exactly ``width`` cells with the padding either side: cut with an
    ellipsis when longer, aligned right or left when shorter."""
    cell = text.copy()
    cell.truncate(width, overflow="ellipsis")
    pad = width - cell.cell_len
    if pad > 0:
        if right:
            cell.pad_left(pad)
        else:
            cell.pad_right(pad)
    edge = Segment(" " * PADDING)
    return [edge, *cell.render(console, end=""), edge]


@dataclass
class TableMessage(Message):
    """What a table tells its screen; ``control`` is the table (for ``@on`` selectors)."""

    table: SyncTable

    @property
    def control(self) -> SyncTable:
        return self.table


class SyncTable(ScrollView, can_focus=True):
    """A row-cursor table whose rows are kept in step with ``sync``."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"sync-table--header", "sync-table--cursor"}
    DEFAULT_CSS = """
    SyncTable {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;  /* columns drop and names are cut instead */
        & > .sync-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .sync-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .sync-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        &:nocolor > .sync-table--cursor {
            text-style: reverse;
        }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Select", show=False),
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("ctrl+home,home", "first", "First row", show=False),
        Binding("ctrl+end,end", "last", "Last row", show=False),
    ]

    @dataclass
    class RowHighlighted(TableMessage):
        """The cursor moved to another item (by key or mouse, or its item left)."""

        key: str

    @dataclass
    class RowSelected(TableMessage):
        """Enter on the highlighted item, or a click on it."""

        key: str

    @dataclass
    class HeaderSelected(TableMessage):
        """A click on a column's label."""

        column: str

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.column_specs = tuple(columns)
        self._layout: tuple[tuple[Column, int], ...] = ()
        self._layout_width = -1  # the width _layout was worked out for
        self._rows: list[Row] = []  # what the last sync asked for, in order
        self._slot_of: dict[str, int] = {}  # item key -> slot
        self._cursor = 0
        self._strips: dict[int, Strip] = {}  # slot -> its row, rendered (without the cursor)
        self._header: tuple[Style, Strip] | None = None  # its style, and the labels drawn
        self._base: Style | None = None  # the style the cached strips were rendered with
        self.rendered = 0  # rows rendered so far (the cache's misses)

    # -- what callers use ------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def cursor_row(self) -> int:
        """The highlighted slot."""
        return self._cursor

    @property
    def selected_key(self) -> str | None:
        """The key of the highlighted item, if any."""
        if 0 <= self._cursor < len(self._rows):
            return self._rows[self._cursor].key
        return None

    def select_key(self, key: str, *, scroll: bool = True) -> bool:
        """Highlight the item with ``key``; False when it is not shown."""
        slot = self._slot_of.get(key)
        if slot is None:
            return False
        self.move_cursor(slot, scroll=scroll)
        return True

    def move_cursor(self, slot: int, *, scroll: bool = True) -> None:
        """Highlight ``slot`` (clamped to the rows there are)."""
        if not self._rows:
            return
        slot = max(0, min(slot, len(self._rows) - 1))
        old, self._cursor = self._cursor, slot
        if old != slot:
            self._refresh_slot(old)
            self._refresh_slot(slot)
            self.post_message(self.RowHighlighted(self, self._rows[slot].key))
        if scroll:
            self._scroll_to_cursor()

    def row_keys(self) -> list[str]:
        """The keys of the items shown, in display order."""
        return [row.key for row in self._rows]

    def cell(self, key: str, column: str) -> Text:
        """What the item's row shows in ``column`` (as given to ``sync``)."""
        return self._rows[self._slot_of[key]].cells.get(column, _EMPTY)

    def visible_columns(self) -> list[str]:
        return [column.key for column, _ in self._columns()]

    def column_x(self, key: str) -> int | None:
        """Where a shown column starts, in cells from the table's left edge."""
        x = 0
        for column, width in self._columns():
            if column.key == key:
                return x
            x += width + 2 * PADDING
        return None

    def sync(self, rows: Sequence[Row]) -> None:
        """Show ``rows`` in this order, repainting only the rows whose cells differ."""
        selected = self.selected_key
        old = self._rows
        self._rows = list(rows)
        self._slot_of = {row.key: slot for slot, row in enumerate(self._rows)}
        for slot, row in enumerate(self._rows):
            if slot >= len(old) or not _same_cells(old[slot].cells, row.cells):
                self._repaint_slot(slot)
        for slot in range(len(self._rows), len(old)):  # rows gone from the end
            self._strips.pop(slot, None)
            self._refresh_slot(slot)
        if len(self._rows) != len(old):
            self._set_virtual_size()
        follow = self._slot_of.get(selected) if selected is not None else None
        if follow is None:  # no item had the cursor, or it left: the slot keeps it
            follow = max(0, min(self._cursor, len(self._rows) - 1))
        if follow != self._cursor:
            self._refresh_slot(self._cursor)
            self._cursor = follow
            self._refresh_slot(follow)
        # The view stays unless the highlighted item would leave it.
        if not self._cursor_in_view():
            self._scroll_to_cursor()
        key = self.selected_key
        if key is not None and key != selected:
            self.post_message(self.RowHighlighted(self, key))

    # -- layout ----------------------------------------------------------------

    def set_columns(self, columns: Sequence[Column]) -> None:
        """Show ``columns`` from now on (the rows' cells are keyed by column: a column
        a row has no cell for is blank)."""
        columns = tuple(columns)
        if columns == self.column_specs:
            return
        self.column_specs = columns
        self._layout_width = -1
        self._strips.clear()
        self._header = None
        self.refresh()

    def _columns(self) -> tuple[tuple[Column, int], ...]:
        """The columns at the table's present width. Worked out where they are needed,
        not in a resize handler: a table shown for the first time then draws its rows
        in the frame that gives it its size, not in one after its Resize event."""
        width = self.size.width
        if width != self._layout_width:
            self._layout_width = width
            new = layout(self.column_specs, width)
            if new != self._layout:
                self._layout = new
                self._strips.clear()
                self._header = None
        return self._layout

    def on_resize(self, event: events.Resize) -> None:
        self._set_virtual_size()
        if not self._cursor_in_view():
            self._scroll_to_cursor()

    def _set_virtual_size(self) -> None:
        size = Size(sum(w + 2 * PADDING for _, w in self._columns()), len(self._rows) + HEADER)
        if size == self.virtual_size:
            return
        if not self.is_mounted:
            self.virtual_size = size
            return
        # A new count of rows moves the scrollbar; laying the screen out again repainted
        # every line each time a function entered or left (as Textual's layout=False).
        self.set_reactive(SyncTable.virtual_size, size)
        self._scroll_update(size)

    def on_focus(self, event: events.Focus) -> None:
        self._refresh_slot(self._cursor)  # the cursor's colours say where the focus is

    def on_blur(self, event: events.Blur) -> None:
        self._refresh_slot(self._cursor)

    # -- scrolling -------------------------------------------------------------

    @property
    def _page(self) -> int:
        """Rows that fit under the header."""
        return max(1, self.scrollable_content_region.height - HEADER)

    def _cursor_in_view(self) -> bool:
        if self.scrollable_content_region.height <= HEADER:
            return True  # hidden (another pane, a screen above): nothing to keep in view
        top = round(self.scroll_y)
        return top <= self._cursor < top + self._page

    def _scroll_to_cursor(self) -> None:
        """Bring the cursor into view, moving as little as it takes; a cursor on the first
        page shows the first page (the hottest rows are never hidden above it)."""
        top = round(self.scroll_y)
        if self._cursor < self._page:
            if top:
                self.scroll_to(y=0, animate=False, immediate=True)
        elif self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True)
        elif self._cursor >= top + self._page:
            self.scroll_to(y=self._cursor - self._page + 1, animate=False, immediate=True)

    def _refresh_slot(self, slot: int) -> None:
        top = round(self.scroll_y)
        if top <= slot < top + self._page:
            self.refresh_line(slot + HEADER)

    def _repaint_slot(self, slot: int) -> None:
        """The row in ``slot`` changed: in view, only its cells that differ are
        repainted (its counts change every update, its name seldom)."""
        was = self._strips.pop(slot, None)
        top = round(self.scroll_y)
        if not top <= slot < top + self._page:
            return
        if was is None or not self.is_mounted or self.rich_style != self._base:
            self.refresh_line(slot + HEADER)
            return
        runs = strip_changes(was, self._row_strip(slot, self.scrollable_content_region.width))
        if runs is None:
            self.refresh_line(slot + HEADER)
        for x0, x1 in runs or ():
            self.refresh(Region(x0, slot + HEADER - top, x1 - x0, 1))

    # -- keys and mouse --------------------------------------------------------

    def action_move(self, step: int) -> None:
        if self._rows:
            self.move_cursor(self._cursor + step)

    def action_page(self, step: int) -> None:
        if self._rows:
            self.move_cursor(self._cursor + step * self._page)

    def action_first(self) -> None:
        if self._rows:
            self.move_cursor(0)

    def action_last(self) -> None:
        if self._rows:
            self.move_cursor(len(self._rows) - 1)

    def action_select(self) -> None:
        key = self.selected_key
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def on_click(self, event: events.Click) -> None:
        """A header sorts; a row is highlighted, and a click on the highlighted row opens it."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        event.stop()
        if offset.y < HEADER:
            column = self._column_at(offset.x)
            if column is not None:
                self.post_message(self.HeaderSelected(self, column))
            return
        slot = round(self.scroll_y) + offset.y - HEADER
        if not 0 <= slot < len(self._rows):
            return
        if slot == self._cursor:
            self.action_select()
        else:
            self.move_cursor(slot)

    def _column_at(self, x: int) -> str | None:
        left = 0
        for column, width in self._columns():
            left += width + 2 * PADDING
            if x < left:
                return column.key
        return None

    # -- drawing ---------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        columns = self._columns()
        base = self.rich_style
        if base != self._base:  # a theme change: the cached strips have old colours
            self._base = base
            self._strips.clear()
            self._header = None
        if y < HEADER:
            header_style = base + self.get_component_rich_style("sync-table--header")
            if self._header is None or self._header[0] != header_style:
                labels = [(Text(column.label), w, column.right) for column, w in columns]
                self._header = (header_style, self._line(labels, width, header_style))
            return self._header[1]
        slot = round(self.scroll_y) + y - HEADER
        if slot >= len(self._rows):
            return Strip.blank(width, base)
        strip = self._row_strip(slot, width)
        if slot == self._cursor:
            cursor = self.get_component_rich_style("sync-table--cursor")
            strip = Strip(list(Segment.apply_style(strip, post_style=cursor)), strip.cell_length)
        return strip

    def _row_strip(self, slot: int, width: int) -> Strip:
        """The row in ``slot`` drawn at ``width`` (without the cursor), kept until it
        changes."""
        strip = self._strips.get(slot)
        if strip is None:
            cells = self._rows[slot].cells
            texts = [
                (cells.get(column.key, _EMPTY), w, column.right or _right(cells, column.key))
                for column, w in self._columns()
            ]
            strip = self._strips[slot] = self._line(texts, width, self.rich_style)
            self.rendered += 1
        return strip

    def _line(self, cells: list[tuple[Text, int, bool]], width: int, style: Style) -> Strip:
        console = self.app.console
        segments: list[Segment] = []
        for text, w, right in cells:
            segments += cell_segments(text, w, right, console)
        strip = Strip(Segment.apply_style(segments, style))
        return strip.adjust_cell_length(width, style).simplify()


def _right(cells: dict[str, Text], key: str) -> bool:
    text = cells.get(key)
    return text is not None and text.justify == "right"


__all__ = ["Column", "Row", "SyncTable", "layout"]
