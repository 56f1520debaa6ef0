"""The hot-function pane: the profile's functions, sorted and filtered as asked."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message

from livesym.printable import printable
from livesym.profile import FunctionRow, ProfileView
from livesym.profile.diff import FunctionDiff, KeySpace, ProfileDiff, Side, diff_views
from livesym.records import Frame, reason_text
from livesym.ui.format import basename, frame_name, number, pct, plain
from livesym.ui.options import SORT_LABELS, ViewOptions
from livesym.ui.quiet import QuietStatic
from livesym.ui.table import Column, Row, SyncTable

MAX_ROWS = 200  # a few screens; the filter finds the rest (each row costs on every refresh)
GONE_ROWS = 50  # rows of functions gone since the baseline, after the view's own
MAX_FILTER = 200  # characters of filter text kept (a paste can be anything)
CURSOR = "▏"
# Sorts the view's functions already have (self samples, then total, then frame order).
COUNT_ORDERS = ("self", "total")  # sorts FunctionRows.top picks by counts

COLUMNS = (
    Column("self", "SELF%", 6, right=True),
    Column("total", "TOTAL%", 6, right=True),
    Column("samples", "SAMPLES", 7, right=True, drop_below=50),  # SELF% says it in short
    Column("function", "FUNCTION", 16, flex=True),
    Column("module", "MODULE", 16, drop_below=64),
)


# With a baseline pinned: each function's change of self share against it, in points,
# '*' where larger than sampling noise explains (profile.diff).
BASELINE_COLUMNS = (*COLUMNS[:2], Column("delta", "ΔSELF", 7, right=True), *COLUMNS[2:])


@dataclass(frozen=True)
class Baseline:
    """What the panes showed when the baseline was pinned, and what it was; its functions
    are matched once (``side``), and every view shown after is laid against them."""

    view: ProfileView
    label: str
    space: KeySpace = field(default_factory=KeySpace, compare=False)

    @classmethod
    def pinned(cls, view: ProfileView, options: ViewOptions, seconds: float) -> Baseline:
        """``view``, shown with ``options`` ``seconds`` into the session, as a baseline
        labelled with its range (or the session so far) and its selection."""
        o = options
        when = (f"{o.between[0]:.1f}-{o.between[1]:.1f} s" if o.between is not None
                else f"0-{seconds:.1f} s")  # fmt: skip
        return cls(view, " ".join([when, *selection_parts(o)]))

    @cached_property
    def side(self) -> Side:
        return self.space.side(self.view)

    def diff(self, view: ProfileView) -> ProfileDiff:
        return diff_views(self.view, view, space=self.space, base_side=self.side)


def delta_cell(change: FunctionDiff | None) -> Text:
    if change is None:
        return number("")
    mark = "*" if change.significant else " "
    return number(f"{change.delta_self_pp:+.1f}{mark}")


def frame_key(frame: Frame) -> str:
    """A row key that tells every two distinct frames apart."""
    vaddr = "" if frame.vaddr is None else f"{frame.vaddr:x}"
    return "\x1f".join(
        (
            frame.kind,
            frame.module or "",
            vaddr,
            frame.symbol or "",
            reason_text(frame.reason, ""),
        )
    )


# A function's (frame, self samples, total samples), as ``FunctionRows.counts`` gives them:
# the table sorts these and makes rows for the ones it shows only.
_Counts = tuple[Frame, int, int]
_FOLDED: dict[str, str] = {}  # a name, case-folded: sorted by on every view of a session
_FOLDED_MAX = 1 << 19


def _folded(text: str) -> str:
    folded = _FOLDED.get(text)
    if folded is None:
        if len(_FOLDED) >= _FOLDED_MAX:
            _FOLDED.clear()
        folded = _FOLDED[text] = text.casefold()
    return folded


def _sort_key(sort: str) -> Callable[[_Counts], tuple[object, ...]]:
    """The key for one sort column, ties broken the same way every time."""
    keys: dict[str, Callable[[_Counts], tuple[object, ...]]] = {
        "self": lambda c: (-c[1], -c[2], c[0].order),
        "total": lambda c: (-c[2], -c[1], c[0].order),
        "function": lambda c: (_folded(c[0].label), c[0].order),
        "module": lambda c: (_folded(basename(c[0].module)), -c[1], c[0].order),
    }
    return keys[sort]


class Haystacks:
    """Each function's name (as shown) and module, case-folded, made once per frame and
    name style: typing a filter over tens of thousands of functions then costs one
    substring test a function per key."""

    LIMIT = 500_000  # frames remembered before starting over (a long live session)

    def __init__(self) -> None:
        self._made: dict[tuple[Frame, bool], str] = {}

    def warm(self, view: ProfileView, raw: bool) -> None:
        """Make the view's haystacks now (when the filter opens, before the first key)."""
        for frame in view.functions.frames():
            self.of(frame, raw)

    def of(self, frame: Frame, raw: bool) -> str:
        key = (frame, raw)
        hay = self._made.get(key)
        if hay is None:
            if len(self._made) >= self.LIMIT:
                self._made.clear()
            hay = self._made[key] = f"{frame_name(frame, raw)}\n{frame.module or ''}".casefold()
        return hay


def select(
    view: ProfileView,
    options: ViewOptions,
    limit: int = MAX_ROWS,
    haystacks: Haystacks | None = None,
) -> tuple[list[FunctionRow], int]:
    """The first ``limit`` functions, filtered by text and sorted as ``options`` say,
    and how many matched the filter."""
    functions = view.functions
    if not options.text and options.sort in COUNT_ORDERS:
        by_total = options.sort == "total"
        return functions.top(limit, by_total=by_total, reverse=options.flipped), len(functions)
    # Picked from every function's counts in any order (rows made for those picked): the
    # view's whole order is not needed.
    counts: list[_Counts] | Iterator[_Counts]
    if options.text:
        hay = (haystacks or Haystacks()).of
        needle, raw = options.text.casefold(), options.raw_names
        counts = [c for c in functions.counts() if needle in hay(c[0], raw)]
        matching = len(counts)
    else:
        counts, matching = functions.counts(), len(functions)
    pick = heapq.nlargest if options.flipped else heapq.nsmallest
    scale = 100.0 / view.samples if view.samples else 0.0
    picked = pick(limit, counts, key=_sort_key(options.sort))
    return [FunctionRow(f, own, total, own * scale, total * scale)
            for f, own, total in picked], matching  # fmt: skip


def gone_rows(diff: ProfileDiff, options: ViewOptions, haystacks: Haystacks) -> list[FunctionRow]:
    """The functions the baseline had and the view has no sample of, where that change
    is larger than noise (largest first, at most GONE_ROWS, the text filter applied):
    listed after the others, at nothing, so that what stopped is seen as what started."""
    needle, raw = options.text.casefold(), options.raw_names
    gone = (f for f in diff.significant if f.new.total_samples == 0
            and (not needle or needle in haystacks.of(f.frame, raw)))  # fmt: skip
    return [FunctionRow(f.frame, 0, 0, 0.0, 0.0) for f in islice(gone, GONE_ROWS)]


def table_row(row: FunctionRow, raw: bool, diff: ProfileDiff | None = None) -> Row:
    frame = row.frame
    return Row(
        frame_key(frame),
        {
            "delta": delta_cell(diff.of(frame) if diff is not None else None),
            "self": number(pct(row.self_pct)),
            "total": number(pct(row.total_pct)),
            "samples": number(str(row.self_samples)),
            "function": plain(frame_name(frame, raw), "" if frame.resolved else "italic"),
            "module": plain(basename(frame.module)),
        },
    )


def status_line(
    options: ViewOptions, shown: int, matching: int, total: int, window: float = 5.0,
    baseline: str | None = None,
) -> Text:  # fmt: skip
    """What the table holds: window (the recent one with its length), sort, filters and
    how many rows."""
    order = "↑" if options.flipped else "↓"
    parts = [
        f"last {window:g} s" if options.recent else "cumulative",
        f"sort {SORT_LABELS[options.sort]} {order}",
    ]
    parts += selection_parts(options)
    if options.text:
        parts.append(f"filter {options.text!r}")
    if options.raw_names:
        parts.append("raw names")
    parts.append(counts(shown, matching, total))
    if baseline is not None:
        parts.append(f"ΔSELF vs baseline {baseline}")
    return Text(printable("  ·  ".join(parts)), no_wrap=True, overflow="ellipsis", end="")


def selection_parts(options: ViewOptions) -> list[str]:
    """The status line's words for the process, thread and module filters (every pane
    that follows them says them alike)."""
    parts = []
    if options.process is not None:
        parts.append(f"process {options.process} {options.process_name}".rstrip())
    if options.thread is not None:
        parts.append(f"thread {options.thread} {options.thread_name}".rstrip())
    if options.module is not None:
        parts.append(f"module {basename(options.module)}")
    return parts


def counts(shown: int, matching: int, total: int) -> str:
    text = f"{matching} of {total} functions" if matching < total else f"{total} functions"
    return f"{text}  ·  first {shown} shown" if shown < matching else text


def prompt_line(text: str, shown: int, matching: int, total: int) -> Text:
    """The status line while the filter is typed: the text so far, and what it matches."""
    line = Text(no_wrap=True, overflow="ellipsis", end="")
    line.append("/ ", "bold")
    line.append(printable(text))
    line.append(CURSOR, "reverse")
    line.append(f"  {counts(shown, matching, total)}  ·  Enter keeps, Esc clears")
    return line


def edited(text: str, event: events.Key) -> tuple[str, bool] | None:
    """The filter text after ``event``, and whether it closes the filter; None for a
    key that is not the filter's (arrows and pages still move in the table)."""
    key = event.key
    if key == "escape":
        return "", True
    if key == "enter":
        return text, True
    if key in ("backspace", "ctrl+h"):
        return text[:-1], False
    if key in ("ctrl+u", "ctrl+w"):
        return "", False
    if event.is_printable and event.character:
        return (text + event.character)[:MAX_FILTER], False
    return None


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

    @dataclass
    class FilterEdited(Message):
        """The text filter as typed so far; ``done``: Enter or Esc closed it."""

        text: str
        done: bool

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.frames: dict[str, Frame] = {}
        self._shown: tuple[ProfileView, ViewOptions] | None = None
        self._with: Baseline | None = None  # the baseline the rows shown were against
        self.haystacks = Haystacks()
        self._counts = (0, 0, 0)  # shown, matching, total
        self.window = 5.0  # seconds the recent window looks back (the session's)
        self.baseline: Baseline | None = None  # pinned: each function's change against it
        self._diff: tuple[ProfileView, Baseline, ProfileDiff] | None = None
        # The filter text while it is typed, None when closed. It is typed on the
        # status line with the table keeping focus: no input to show, focus or lay
        # out, so each key costs what the table's update costs.
        self.editing: str | None = None

    def compose(self) -> ComposeResult:
        yield QuietStatic(id="functions-status", markup=False)
        yield SyncTable(COLUMNS, id="functions-table")

    @property
    def table(self) -> SyncTable:
        return self.query_one("#functions-table", SyncTable)

    def show(self, view: ProfileView, options: ViewOptions) -> None:
        """Show ``view``'s functions as ``options`` select and sort them (and each one's
        change against the baseline, where one is pinned)."""
        if (
            self._shown is not None
            and self._shown[0] is view  # (by identity: two views' equality sorts both)
            and self._shown[1] == options
            and self._with is self.baseline
        ):
            return  # views are immutable: the same view shows the same rows
        self._shown, self._with = (view, options), self.baseline
        shown, matching = select(view, options, haystacks=self.haystacks)
        diff = self._diff_of(view)
        if diff is not None:
            shown += gone_rows(diff, options, self.haystacks)
        self.frames = {frame_key(r.frame): r.frame for r in shown}
        self.table.set_columns(BASELINE_COLUMNS if self.baseline is not None else COLUMNS)
        self.table.sync([table_row(r, options.raw_names, diff) for r in shown])
        self._counts = (len(shown), matching, len(view.functions))
        self._show_status()

    def _diff_of(self, view: ProfileView) -> ProfileDiff | None:
        """``view`` against the baseline (made once per view shown)."""
        base = self.baseline
        if base is None:
            return None
        if self._diff is None or self._diff[0] is not view or self._diff[1] is not base:
            self._diff = (view, base, base.diff(view))
        return self._diff[2]

    def _show_status(self) -> None:
        if self.editing is not None:
            line = prompt_line(self.editing, *self._counts)
        elif self._shown is not None:
            label = self.baseline.label if self.baseline is not None else None
            line = status_line(self._shown[1], *self._counts, window=self.window,
                               baseline=label)  # fmt: skip
        else:
            line = Text()
        # One line, fixed in the stylesheet: no relayout of the screen for new text.
        self.query_one("#functions-status", QuietStatic).show(line, layout=False)

    def open_filter(self, text: str) -> None:
        """Start typing the filter (from ``text``) on the status line."""
        self.editing = text[:MAX_FILTER]
        self._show_status()
        if self._shown is not None:  # once the prompt is on the screen
            view, options = self._shown
            self.call_after_refresh(self.haystacks.warm, view, options.raw_names)

    def close_filter(self) -> None:
        """Stop typing the filter; the text stays as it is."""
        if self.editing is not None:
            self.editing = None
            self._show_status()

    def filter_key(self, event: events.Key) -> bool:
        """Apply a key to the filter being typed; False if it is not the filter's. (The
        screen passes every key here as it bubbles up, in the order they come.)"""
        if self.editing is None:
            return False
        change = edited(self.editing, event)
        if change is None:
            return False
        text, done = change
        self.editing = None if done else text
        self._show_status()
        self.post_message(self.FilterEdited(text, done))
        return True

    def on_paste(self, event: events.Paste) -> None:
        if self.editing is None:
            return
        event.stop()
        text = (self.editing + " ".join(event.text.split()))[:MAX_FILTER]
        self.editing = text
        self._show_status()
        self.post_message(self.FilterEdited(text, False))

    def selected_frame(self) -> Frame | None:
        """The function under the cursor, if any."""
        key = self.table.selected_key
        return self.frames.get(key) if key is not None else None

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        frame = self.frames.get(event.key)
        if frame is not None:
            self.post_message(self.Chosen(frame))

    def on_sync_table_header_selected(self, event: SyncTable.HeaderSelected) -> None:
        event.stop()
        self.post_message(self.SortAsked(event.column))
