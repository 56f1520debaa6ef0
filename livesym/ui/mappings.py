"""The mappings pane: the target's maps with what livesym worked out about each.

New mappings (since the first maps generation) are marked ``+``, removed ones
``-`` (and dimmed), and any mapping whose base or alignment checks disagreed
``!``; Enter shows a mapping in full, problems included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static

from livesym.ui.chain import label_grid
from livesym.ui.format import basename, hex_or_dash, number, plain
from livesym.ui.table import Column, Row, SyncTable

if TYPE_CHECKING:
    from livesym.profile.mapping_rows import MappingRow

STATUS_MARK = {"new": "+", "removed": "-", "live": " "}

COLUMNS = (
    Column("mark", "", 2),
    Column("range", "START-END", 25, drop_below=64),
    Column("start", "START", 12, only_below=64),  # narrow: Enter shows the end
    Column("perms", "PERM", 4, drop_below=50),
    Column("samples", "SAMPLES", 7, right=True),
    Column("base", "BASE", 14, drop_below=76, right=True),
    Column("object", "OBJECT", 8, flex=True),
    Column("pgoff", "PGOFF", 8, drop_below=90, right=True),
    Column("type", "TYPE", 6, drop_below=100),
    Column("source", "SYMBOLS", 13, drop_below=116),
    Column("build_id", "BUILD-ID", 12, drop_below=132),
)


def mapping_key(row: MappingRow) -> str:
    start, end, perms, pgoff, path = row.key
    return f"{start:x}-{end:x} {perms} {pgoff:x} {path}"


def mark(row: MappingRow) -> str:
    """``+``/``-``/`` `` for new/removed/live, then ``!`` when checks disagreed."""
    return STATUS_MARK.get(row.status, "?") + ("!" if row.flagged else " ")


def table_row(row: MappingRow) -> Row:
    m = row.record
    style = "dim strike" if row.status == "removed" else "bold" if row.status == "new" else ""
    return Row(
        mapping_key(row),
        {
            "mark": plain(mark(row), "bold reverse" if row.flagged else style),
            "range": plain(f"{m.start:x}-{m.end:x}", style),
            "start": plain(f"{m.start:x}", style),
            "perms": plain(m.perms, style),
            "samples": number(str(row.samples), style),
            "object": plain(basename(m.path) if m.path else "[anon]", style),
            "pgoff": number(f"{m.pgoff:x}", style),
            "base": number(hex_or_dash(m.base), style),
            "type": plain(m.e_type or "-", style),
            "source": plain(m.symbol_source or "-", style),
            "build_id": plain(m.build_id[:12] if m.build_id else "-", style),
        },
    )


def describe(row: MappingRow) -> Table:
    """Every field of one mapping, one per line, values as data."""
    m = row.record
    lines = [
        ("mapping", f"{m.start:#x}-{m.end:#x} {m.perms} pgoff {m.pgoff:#x}"),
        ("device", f"{m.dev} inode {m.inode}"),
        ("status", row.status),
        ("object", (m.path or "[anonymous]") + (" (deleted)" if m.deleted else "")),
        ("base", hex_or_dash(m.base)),
        ("formula", m.base_formula or "-"),
        ("ELF type", m.e_type or "-"),
        ("build-id", m.build_id or "-"),
        ("symbols", m.symbol_source or "-"),
        ("samples", str(row.samples)),
    ]
    lines += [("problem", p) for p in m.problems] or [("problems", "none")]
    return label_grid(lines)


class MappingsTable(SyncTable):
    """The maps, in address order."""

    @dataclass
    class Chosen(Message):
        mapping: MappingRow

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)
        self.by_key: dict[str, MappingRow] = {}

    def show(self, mappings: Sequence[MappingRow]) -> None:
        self.by_key = {mapping_key(m): m for m in mappings}
        self.sync([table_row(m) for m in mappings])

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        found = self.by_key.get(event.key)
        if found is not None:
            self.post_message(self.Chosen(found))


class MappingScreen(ModalScreen[None]):
    """One mapping in full; Escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, mapping: MappingRow) -> None:
        super().__init__()
        self.mapping = mapping

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="mapping-box"):
            yield Static(describe(self.mapping), markup=False)
