"""What the user chose to see: window, filters, sort and name style."""

from __future__ import annotations

from dataclasses import dataclass, replace

# The hot-function table's sort columns, in the order ``s`` cycles through them. The
# SAMPLES column counts self samples: a click on it sorts as SELF% does.
SORT_COLUMNS = ("self", "total", "function", "module")
SORT_ALIASES = {"samples": "self"}
SORT_LABELS = {
    "self": "self%",
    "total": "total%",
    "function": "function",
    "module": "module",
}


@dataclass(frozen=True)
class ViewOptions:
    """The dashboard's view settings; each key press makes a new one."""

    recent: bool = False  # the recent window instead of the whole session
    # A time range of the session (seconds from its start), chosen on the timeline: the
    # panes show its samples alone (it wins over ``recent``)
    between: tuple[float, float] | None = None
    thread: int | None = None  # only this tid's samples
    thread_name: str = ""
    process: int | None = None  # only this pid's samples
    process_name: str = ""
    module: str | None = None  # only samples whose leaf is in this module
    text: str = ""  # only functions whose name or module contains this
    raw_names: bool = False  # mangled names as the object has them
    sort: str = "self"
    flipped: bool = False  # numbers sort high first, names A-Z; this flips either

    def next_sort(self) -> ViewOptions:
        index = SORT_COLUMNS.index(self.sort)
        return replace(self, sort=SORT_COLUMNS[(index + 1) % len(SORT_COLUMNS)], flipped=False)

    def sort_by(self, column: str) -> ViewOptions:
        """Sort by ``column``; the same column again flips the direction."""
        column = SORT_ALIASES.get(column, column)
        if column not in SORT_COLUMNS:
            return self
        if column == self.sort:
            return replace(self, flipped=not self.flipped)
        return replace(self, sort=column, flipped=False)

    @property
    def engine_filtered(self) -> bool:
        """Whether the engine, not the table, must select the samples."""
        return self.thread is not None or self.module is not None or self.process is not None

    def cleared(self) -> ViewOptions:
        return replace(
            self, thread=None, thread_name="", process=None, process_name="", module=None, text=""
        )
