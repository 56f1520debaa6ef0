"""The hot-function pane: the profile's functions, sorted and filtered as asked."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from livesym.profile import Frame, FunctionRow, ProfileView
from livesym.ui.format import basename, frame_name, number, pct, plain
from livesym.ui.options import SORT_LABELS, ViewOptions
from livesym.ui.table import Column, Row, SyncTable

MAX_ROWS = 200  # a few screens; the filter finds the rest (each row costs on every refresh)
# Sorts the view's functions already have (self samples, then total, then frame order).
DEFAULT_ORDER = ("self", "samples")

COLUMNS = (
    Column("self", "SELF%", 6, right=True),
    Column("total", "TOTAL%", 6, right=True),
    Column("samples", "SAMPLES", 7, right=True),
    Column("function", "FUNCTION", 16, flex=True),
    Column("module", "MODULE", 16, drop_below=64),
)


def frame_key(frame: Frame) -> str:
    """A row key that tells every two distinct frames apart."""
    vaddr = "" if frame.vaddr is None else f"{frame.vaddr:x}"
    return "\x1f".join(
        (frame.kind, frame.module or "", vaddr, frame.symbol or "", frame.reason or "")
    )


def _sort_key(sort: str) -> Callable[[FunctionRow], tuple[object, ...]]:
    """The key for one sort column, ties broken the same way every time."""
    keys: dict[str, Callable[[FunctionRow], tuple[object, ...]]] = {
        "self": lambda r: (-r.self_samples, -r.total_samples, r.frame.order),
        "samples": lambda r: (-r.self_samples, -r.total_samples, r.frame.order),
        "total": lambda r: (-r.total_samples, -r.self_samples, r.frame.order),
        "function": lambda r: (r.frame.label.casefold(), r.frame.order),
        "module": lambda r: (basename(r.frame.module).casefold(), -r.self_samples, r.frame.order),
    }
    return keys[sort]


def matches(row: FunctionRow, text: str, raw: bool) -> bool:
    """Whether the function's name (as shown) or its module contains ``text``."""
    needle = text.casefold()
    frame = row.frame
    return needle in frame_name(frame, raw).casefold() or needle in (frame.module or "").casefold()


def select(
    view: ProfileView, options: ViewOptions, limit: int = MAX_ROWS
) -> tuple[list[FunctionRow], int]:
    """The first ``limit`` functions, filtered by text and sorted as ``options`` say,
    and how many matched the filter."""
    rows: Sequence[FunctionRow] = view.functions
    if options.text:
        rows = [r for r in rows if matches(r, options.text, options.raw_names)]
    if options.sort in DEFAULT_ORDER and not options.flipped:
        return list(rows[:limit]), len(rows)  # the view's own order
    pick = heapq.nlargest if options.flipped else heapq.nsmallest
    return pick(limit, rows, key=_sort_key(options.sort)), len(rows)


def table_row(row: FunctionRow, raw: bool) -> Row:
    frame = row.frame
    return Row(
        frame_key(frame),
        {
            "self": number(pct(row.self_pct)),
            "total": number(pct(row.total_pct)),
            "samples": number(str(row.self_samples)),
            "function": plain(frame_name(frame, raw), "" if frame.resolved else "italic"),
            "module": plain(basename(frame.module)),
        },
    )


def status_line(options: ViewOptions, shown: int, matching: int, total: int) -> Text:
    """What the table holds: window, sort, filters and how many rows."""
    order = "↑" if options.flipped else "↓"
    parts = [
        "recent window" if options.recent else "cumulative",
        f"sort {SORT_LABELS[options.sort]} {order}",
    ]
    if options.thread is not None:
        parts.append(f"thread {options.thread} {options.thread_name}".rstrip())
    if options.module is not None:
        parts.append(f"module {basename(options.module)}")
    if options.text:
        parts.append(f"filter {options.text!r}")
    if options.raw_names:
        parts.append("raw names")
    parts.append(f"{matching} of {total} functions" if matching < total else f"{total} functions")
    if shown < matching:
        parts.append(f"first {shown} shown")
    return Text("  ·  ".join(parts), no_wrap=True, overflow="ellipsis", end="")


class FunctionsPane(Vertical):
    """The status line and the hot-function table."""

    @dataclass
    class Chosen(Message):
        """Enter (or a click) on a function: open its details."""

        frame: Frame

    @dataclass
    class SortAsked(Message):
        """A click on a column header."""

        column: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.frames: dict[str, Frame] = {}
        self._shown: tuple[ProfileView, ViewOptions] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="functions-status", markup=False)
        yield SyncTable(COLUMNS, id="functions-table")

    @property
    def table(self) -> SyncTable:
        return self.query_one("#functions-table", SyncTable)

    def show(self, view: ProfileView, options: ViewOptions) -> None:
        """Show ``view``'s functions as ``options`` select and sort them."""
        if self._shown is not None and self._shown[0] is view and self._shown[1] == options:
            return  # views are immutable: the same view shows the same rows
        self._shown = (view, options)
        shown, matching = select(view, options)
        self.frames = {frame_key(r.frame): r.frame for r in shown}
        self.table.sync([table_row(r, options.raw_names) for r in shown])
        status = self.query_one("#functions-status", Static)
        # One line, fixed in the stylesheet: no relayout of the screen for new text.
        status.update(status_line(options, len(shown), matching, len(view.functions)), layout=False)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = self.table.key_for(event.row_key)
        frame = self.frames.get(key) if key is not None else None
        if frame is not None:
            self.post_message(self.Chosen(frame))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.post_message(self.SortAsked(str(event.column_key.value)))
