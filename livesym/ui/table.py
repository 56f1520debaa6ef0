"""A DataTable that follows a list of keyed rows in place.

Every refresh hands ``SyncTable.sync`` the rows to show, in display order.
The table's rows are positions (slots): slot ``i`` shows the ``i``-th row,
and a refresh updates only the cells whose text changed (``update_cell``),
adds slots at the end when the list grows and removes them from the end when
it shrinks; nothing is cleared and rebuilt. The highlighted row follows its
item's key: when the item moves to another slot the cursor moves with it, and
the view scrolls only if the item would leave it.

Why slots rather than one DataTable row per item: ``remove_row`` and ``sort``
cost O(rows) each in DataTable, so following items by row key costs
O(rows x changes) per refresh, while slots cost O(cells that changed).

Columns adapt to the width: optional columns drop out on narrow terminals and
one flexible column takes what is left, cutting long names with an ellipsis.
Only a resize that changes that layout re-creates the columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

PADDING = 1  # cells on each side of every column (DataTable's cell_padding)
SCROLLBAR = 2  # columns kept free for the vertical scrollbar

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


def _slot(index: int) -> str:
    return str(index)


class SyncTable(DataTable[Text]):
    """A row-cursor DataTable whose rows are kept in step with ``sync``."""

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, cell_padding=PADDING)
        self.column_specs = tuple(columns)
        self._layout: tuple[tuple[Column, int], ...] = ()
        self._rows: list[Row] = []  # what the last sync asked for, in order
        self._slot_of: dict[str, int] = {}  # item key -> slot
        self._shown: list[dict[str, Text]] = []  # slot -> cells in the table

    # -- what callers use ------------------------------------------------------

    @property
    def selected_key(self) -> str | None:
        """The key of the highlighted item, if any."""
        row = self.cursor_row
        if not self._shown or not 0 <= row < len(self._shown):
            return None
        return self._rows[row].key

    def select_key(self, key: str, *, scroll: bool = True) -> bool:
        """Highlight the item with ``key``; False when it is not shown."""
        slot = self._slot_of.get(key)
        if slot is None or slot >= len(self._shown):
            return False
        if slot != self.cursor_row:
            self.move_cursor(row=slot, scroll=scroll)
        return True

    def key_for(self, row_key: RowKey) -> str | None:
        """The item shown in a DataTable row (as events name it)."""
        try:
            slot = int(str(row_key.value))
        except ValueError:
            return None
        return self._rows[slot].key if 0 <= slot < len(self._shown) else None

    def row_keys(self) -> list[str]:
        """The keys of the items shown, in display order."""
        return [row.key for row in self._rows[: len(self._shown)]]

    def cell(self, key: str, column: str) -> Text:
        """What the item's row shows in ``column`` (as given to ``sync``)."""
        return self._shown[self._slot_of[key]].get(column, _EMPTY)

    def visible_columns(self) -> list[str]:
        return [column.key for column, _ in self._layout]

    def sync(self, rows: Sequence[Row]) -> None:
        """Show ``rows`` in this order, changing only the cells that differ."""
        selected = self.selected_key
        self._rows = list(rows)
        self._slot_of = {row.key: slot for slot, row in enumerate(self._rows)}
        if not self._layout:
            return  # not laid out yet: the first resize shows them
        for slot, row in enumerate(self._rows):
            if slot < len(self._shown):
                self._update(slot, row)
            else:
                self.add_row(*self._cells(row), key=_slot(slot))
                self._shown.append(dict(row.cells))
        while len(self._shown) > len(self._rows):
            # From the end: the rows before keep their slots, the cursor its place.
            self.remove_row(_slot(len(self._shown) - 1))
            self._shown.pop()
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
        self._shown = []
        for column, width in new:
            label = Text(column.label, justify="right" if column.right else "left")
            self.add_column(label, width=width, key=column.key)
        for slot, row in enumerate(self._rows):
            self.add_row(*self._cells(row), key=_slot(slot))
            self._shown.append(dict(row.cells))
        if selected is not None:
            self.select_key(selected)

    # -- the diff --------------------------------------------------------------

    def _cells(self, row: Row) -> list[Text]:
        return [row.cells.get(column.key, _EMPTY) for column, _ in self._layout]

    def _update(self, slot: int, row: Row) -> None:
        old = self._shown[slot]
        for column, _ in self._layout:
            new = row.cells.get(column.key, _EMPTY)
            if not _same(old.get(column.key, _EMPTY), new):
                self.update_cell(_slot(slot), column.key, new)
        self._shown[slot] = dict(row.cells)


__all__ = ["Column", "Row", "RowKey", "SyncTable", "layout"]
