"""The modules pane: samples per module (by the leaf frame's object)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from livesym.profile import ModuleRow, ProfileView
from livesym.ui.format import number, pct, plain
from livesym.ui.table import Column, Row, SyncTable

COLUMNS = (
    Column("module", "MODULE", 20),
    Column("samples", "SAMPLES", 7, right=True),
    Column("pct", "%", 5, right=True),
    Column("path", "PATH", 10, flex=True, drop_below=60),
)

NO_MODULE = ""  # row key of the samples with no module at all


def table_row(row: ModuleRow) -> Row:
    return Row(
        row.module if row.module is not None else NO_MODULE,
        {
            "module": plain(row.label),
            "samples": number(str(row.self_samples)),
            "pct": number(pct(row.pct)),
            "path": plain(row.module or "-"),
        },
    )


class ModulesTable(SyncTable):
    """Modules by samples; Enter shows only the functions sampled in that module."""

    @dataclass
    class Chosen(Message):
        module: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)

    def show(self, view: ProfileView) -> None:
        self.sync([table_row(r) for r in view.modules])

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        module = event.key
        # The engine's module filter has no value for "no module".
        if module != NO_MODULE:
            self.post_message(self.Chosen(module))
