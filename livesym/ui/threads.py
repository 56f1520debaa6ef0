"""The threads pane: samples per thread, each thread's top function, and where its
time went: on a CPU, waiting for one (runnable), asleep, waiting for disk. The split
covers everything the session counted of the thread, whatever time the table shows;
without off-CPU time collected (--mode cpu) only the first is known."""

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
# Where the session collected off-CPU time: each thread's split too (at 80 columns
# without the samples and the disk share, for the function's room).
SPLIT_COLUMNS = (
    *COLUMNS[:2],
    Column("samples", "SAMPLES", 7, right=True, drop_below=100),
    COLUMNS[3],
    Column("on", "ON%", 5, right=True),
    Column("runq", "RUNQ%", 5, right=True),
    Column("sleep", "SLEEP%", 6, right=True),
    Column("disk", "DISK%", 5, right=True, drop_below=90),
    COLUMNS[-1],
)
# The split's places (profile.aggregate.SPLIT_LABELS): on a CPU, off it (why not known),
# waiting for a CPU, sleeping, disk. The unknown part counts as sleep here.
_ON, _UNKNOWN, _RUNQ, _SLEEP, _DISK = range(5)


def split_cells(split: tuple[int, ...]) -> dict[str, str]:
    """The thread's time on a CPU and off it by why, in % of all of it."""
    whole = sum(split)
    if not whole or len(split) < 5:
        return {"on": "-", "runq": "-", "sleep": "-", "disk": "-"}
    if whole == split[_ON]:  # nothing off the CPU was counted: the rest is not known
        return {"on": pct(100.0), "runq": "-", "sleep": "-", "disk": "-"}

    def share(n: int) -> str:
        return pct(100 * n / whole)

    return {
        "on": share(split[_ON]),
        "runq": share(split[_RUNQ]),
        "sleep": share(split[_SLEEP] + split[_UNKNOWN]),
        "disk": share(split[_DISK]),
    }


def table_row(row: ThreadRow, raw: bool) -> Row:
    top = frame_name(row.top_function, raw) if row.top_function is not None else "-"
    return Row(
        str(row.tid),
        {
            "tid": number(str(row.tid)),
            "name": plain(row.name),
            "samples": number(str(row.samples)),
            "pct": number(pct(row.pct)),
            **{key: number(text) for key, text in split_cells(row.split).items()},
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
        off_cpu = any(sum(r.split[1:]) for r in view.threads)
        self.set_columns(SPLIT_COLUMNS if off_cpu else COLUMNS)
        self.sync([table_row(r, raw) for r in view.threads])

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        tid = int(event.key)
        self.post_message(self.Chosen(tid, self.names.get(tid, "")))
