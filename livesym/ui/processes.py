"""The processes pane: samples per process of the session (several with ``--children``,
a name matching several processes, a server's workers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from livesym.ui.format import number, pct, plain
from livesym.ui.table import Column, Row, SyncTable

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot

COLUMNS = (
    Column("pid", "PID", 7, right=True),
    Column("name", "NAME", 15),
    Column("samples", "SAMPLES", 7, right=True),
    Column("pct", "%", 5, right=True),
    Column("parent", "PARENT", 7, right=True, drop_below=60),
    Column("command", "COMMAND", 16, flex=True),
)


def process_rows(snap: EngineSnapshot) -> list[Row]:
    """Processes with samples, busiest first, then those sampled without one (a shell
    that only waits, a worker that was idle): every process of the session is listed."""
    return [
        _row(snap, pid, name, samples, pct(share) if share is not None else "-")
        for pid, name, samples, share in snap.all_processes()
    ]


def _row(snap: EngineSnapshot, pid: int, name: str, samples: int, share: str) -> Row:
    record = snap.processes.get(pid)
    parent = str(record.parent) if record is not None and record.parent else "-"
    command = record.command_line if record is not None else name
    return Row(
        str(pid),
        {
            "pid": number(str(pid)),
            "name": plain(record.name if record is not None else name),
            "samples": number(str(samples)),
            "pct": number(share),
            "parent": number(parent),
            "command": plain(command),
        },
    )


class ProcessesTable(SyncTable):
    """Processes by samples; Enter shows only that process's samples in every pane."""

    @dataclass
    class Chosen(Message):
        pid: int
        name: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)
        self.names: dict[int, str] = {}

    def show(self, snap: EngineSnapshot) -> None:
        self.names = {pid: p.name for pid, p in snap.processes.items()}
        self.names.update((r.pid, r.name) for r in snap.view.processes)
        self.sync(process_rows(snap))

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        pid = int(event.key)
        self.post_message(self.Chosen(pid, self.names.get(pid, "")))
