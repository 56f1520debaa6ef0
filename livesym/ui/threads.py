"""The threads pane: samples per thread and each thread's top function."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from livesym.profile import ProfileView, ThreadRow
from livesym.ui.format import frame_name, number, pct, plain
from livesym.ui.table import Column, Row, SyncTable

COLUMNS = (
    Column("tid", "TID", 7, right=True),
    Column("name", "NAME", 15),
    Column("samples", "SAMPLES", 7, right=True),
    Column("pct", "%", 5, right=True),
    Column("top", "TOP FUNCTION", 16, flex=True),
)


def table_row(row: ThreadRow, raw: bool) -> Row:
    top = frame_name(row.top_function, raw) if row.top_function is not None else "-"
    return Row(
        str(row.tid),
        {
            "tid": number(str(row.tid)),
            "name": plain(row.name),
            "samples": number(str(row.samples)),
            "pct": number(pct(row.pct)),
            "top": plain(top),
        },
    )


class ThreadsTable(SyncTable):
    """Threads by samples; Enter shows only that thread's samples in the functions."""

    @dataclass
    class Chosen(Message):
        tid: int
        name: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)
        self.names: dict[int, str] = {}

    def show(self, view: ProfileView, raw: bool) -> None:
        self.names = {r.tid: r.name for r in view.threads}
        self.sync([table_row(r, raw) for r in view.threads])

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        tid = int(event.key)
        self.post_message(self.Chosen(tid, self.names.get(tid, "")))
