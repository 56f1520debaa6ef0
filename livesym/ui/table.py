"""A DataTable that follows a list of keyed rows in place.

Every refresh hands ``SyncTable.sync`` the rows to show, in display order.
The table diffs them against what it shows: changed cells are updated,
vanished rows removed, new rows added, and the order fixed with one sort;
nothing is cleared and rebuilt, so the highlighted row (followed by its key)
and the scroll position survive. Columns adapt to the width: optional columns
drop out on narrow terminals and one flexible column takes what is left,
cutting long names with an ellipsis. Only a resize that changes that layout
re-creates the columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey

PADDING = 1  # cells on each side of every column (DataTable's cell_padding)
SCROLLBAR = 2  # columns kept free for the vertical scrollbar


@dataclass(frozen=True)
class Column:
    """One column: fixed ``width``, or with ``flex`` at least ``width`` plus what is left.

    ``drop_below``: the column is hidden when the table is narrower than that.
    """

    key: str
    label: str
    width: int
    flex: bool = False
    drop_below: int = 0
    right: bool = False


@dataclass(frozen=True)
class Row:
    """One row to show: a stable key and its cells by column key."""

    key: str
    cells: dict[str, Text]


class _KeyedText(Text):
    """The first cell of a row, carrying the row's key so a sort can rank rows by key."""

    row_key: str = ""


_EMPTY = Text("")


def _keyed(cell: Text, key: str) -> _KeyedText:
    out = _KeyedText(
        cell.plain,
        style=cell.style,
        justify=cell.justify,
        no_wrap=True,
        overflow="ellipsis",
        end="",
        spans=list(cell.spans),
    )
    out.row_key = key
    return out


def _same(a: Text, b: Text) -> bool:
    """Equal as shown: rich's Text equality ignores the base style."""
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans


def layout(columns: Sequence[Column], width: int) -> tuple[tuple[Column, int], ...]:
    """The columns shown at ``width`` with their widths; a flex column takes the rest."""
    shown = [c for c in columns if width >= c.drop_below]
    fixed = sum(c.width + 2 * PADDING for c in shown if not c.flex)
    flex = [c for c in shown if c.flex]
    spare = max(0, width - SCROLLBAR - fixed - sum(2 * PADDING for _ in flex))
    each = spare // len(flex) if flex else 0
    return tuple((c, max(c.width, each) if c.flex else c.width) for c in shown)


class SyncTable(DataTable[Text]):
    """A row-cursor DataTable whose rows are kept in step with ``sync``."""

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, cell_padding=PADDING)
        self.column_specs = tuple(columns)
        self._layout: tuple[tuple[Column, int], ...] = ()
        self._rows: list[Row] = []  # what the last sync asked for, in order
        self._shown: dict[str, dict[str, Text]] = {}  # row key -> cells in the table

    # -- what callers use ------------------------------------------------------

    @property
    def selected_key(self) -> str | None:
        """The key of the highlighted row, if any."""
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except CellDoesNotExist:
            return None
        return key.value

    def select_key(self, key: str, *, scroll: bool = True) -> bool:
        """Highlight the row with ``key``; False when there is none."""
        if key not in self._shown:
            return False
        index = self.get_row_index(key)
        if index != self.cursor_row:
            self.move_cursor(row=index, scroll=scroll)
        return True

    def row_keys(self) -> list[str]:
        """The keys of the rows in display order."""
        return [str(row.key.value) for row in self.ordered_rows]

    def visible_columns(self) -> list[str]:
        return [column.key for column, _ in self._layout]

    def sync(self, rows: Sequence[Row]) -> None:
        """Show ``rows`` in this order, changing only what differs."""
        self._rows = list(rows)
        if not self._layout:
            return  # not laid out yet: the first resize shows them
        selected = self.selected_key
        wanted = {row.key for row in rows}
        for key in [k for k in self._shown if k not in wanted]:
            self.remove_row(key)
            del self._shown[key]
        for row in rows:
            old = self._shown.get(row.key)
            if old is None:
                self._add(row)
            else:
                self._update(row, old)
        self._order([row.key for row in rows])
        if selected is not None:
            self.select_key(selected, scroll=False)

    # -- layout ----------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        """Re-create the columns when the width changes which fit, or how wide."""
        new = layout(self.column_specs, event.size.width)
        if new == self._layout:
            return
        selected = self.selected_key
        self._layout = new
        self.clear(columns=True)
        self._shown.clear()
        for column, width in new:
            label = Text(column.label, justify="right" if column.right else "left")
            self.add_column(label, width=width, key=column.key)
        for row in self._rows:
            self._add(row)
        if selected is not None:
            self.select_key(selected)

    # -- the diff --------------------------------------------------------------

    def _cells(self, row: Row) -> list[Text]:
        cells = [row.cells.get(column.key, _EMPTY) for column, _ in self._layout]
        cells[0] = _keyed(cells[0], row.key)
        return cells

    def _add(self, row: Row) -> None:
        self.add_row(*self._cells(row), key=row.key)
        self._shown[row.key] = dict(row.cells)

    def _update(self, row: Row, old: dict[str, Text]) -> None:
        first = self._layout[0][0].key
        for column, _ in self._layout:
            new = row.cells.get(column.key, _EMPTY)
            if _same(old.get(column.key, _EMPTY), new):
                continue
            self.update_cell(
                row.key, column.key, _keyed(new, row.key) if column.key == first else new
            )
        self._shown[row.key] = dict(row.cells)

    def _order(self, keys: list[str]) -> None:
        if self.row_keys() == keys:
            return
        rank = {key: n for n, key in enumerate(keys)}
        first = ColumnKey(self._layout[0][0].key)

        def by_rank(cell: Text) -> int:
            return rank.get(getattr(cell, "row_key", ""), len(rank))

        self.sort(first, key=by_rank)


__all__ = ["Column", "Row", "RowKey", "SyncTable", "layout"]
