"""One function in detail: its hottest addresses (or lines), the conversion
chain of the highlighted one, and its callers and callees."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from livesym.profile import FunctionRow, Neighbours, ProfileView
from livesym.records import KIND_PYTHON, Frame, FrameRecord, ObjectRecord
from livesym.ui.chain import chain_table
from livesym.ui.footer import KeysFooter
from livesym.ui.format import basename, frame_name, hex_or_dash, number, pct, plain
from livesym.ui.functions import frame_key
from livesym.ui.header import header_lines
from livesym.ui.session import Selection
from livesym.ui.table import Column, Row, SyncTable

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot, HotAddress
    from livesym.ui.session import Session

HOT_LIMIT = 20  # addresses shown
ALL_ADDRESSES = 100_000  # addresses asked for, to know each one's share

# Narrow, the address goes first (the chain below shows it), then the numbers fit.
HOT_COLUMNS = (
    Column("where", "ADDRESS", 14, drop_below=58),
    Column("as", "AS", 4),
    Column("vaddr", "ELF VADDR", 10, drop_below=70),
    Column("symbol", "SYMBOL+OFFSET", 10, flex=True),
    Column("samples", "SAMPLES", 7, right=True),
    Column("pct", "%", 5, right=True),
)
LINE_COLUMNS = (
    Column("where", "LINE", 10, drop_below=54),  # SOURCE has the line too
    Column("as", "AS", 4),
    Column("symbol", "SOURCE", 10, flex=True),
    Column("samples", "SAMPLES", 7, right=True),
    Column("pct", "%", 5, right=True),
)
NEIGHBOUR_COLUMNS = (
    Column("samples", "SAMPLES", 7, right=True, drop_below=30),  # the name matters more
    Column("function", "FUNCTION", 12, flex=True),
)


def hot_key(hot: HotAddress) -> str:
    return f"{hot.record.id}{'c' if hot.call else ''}"


def hot_row(hot: HotAddress, total: int) -> Row:
    """One hot address (or Python line) with its share of the samples holding the function.

    An address is where the function was executing (as the leaf: ``run``) or the
    call it was making (as a caller: ``call``), so the shares add up to 100 over the
    function's total.
    """
    record, count = hot.record, hot.samples
    if record.kind == KIND_PYTHON:
        where = f"line {record.line}" if record.line is not None else "line ?"
        vaddr, symbol = "-", f"{record.module or '?'}:{record.line or '?'}"
    else:
        where, vaddr = f"{record.vma:#x}", hex_or_dash(record.elf_vaddr)
        # As the tables and the title name it: an unnamed function by its module and start
        # (``liblzma.so.5 @ 0x16880+0x5c``), other unresolved code by why and where.
        name = record.demangled or record.symbol
        if name is None and record.symbol_vaddr is not None:
            name = record.frame().label
        symbol = f"{name}+{record.symbol_offset or 0:#x}" if name else record.frame().label
    share = 100.0 * count / total if total else 0.0
    return Row(
        hot_key(hot),
        {
            "where": plain(where),
            "as": plain("call" if hot.call else "run"),
            "vaddr": number(vaddr),
            "symbol": plain(symbol),
            "samples": number(str(count)),
            "pct": number(pct(share)),
        },
    )


def neighbour_row(frame: Frame, count: int, raw: bool) -> Row:
    return Row(
        frame_key(frame),
        {"samples": number(str(count)), "function": plain(frame_name(frame, raw))},
    )


def title_text(frame: Frame, row: FunctionRow | None, raw: bool) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    out.append(frame_name(frame, raw), style="bold")
    out.append(f"  ({basename(frame.module) if frame.module else 'no module'})")
    if row is not None:
        out.append(
            f"  self {pct(row.self_pct)}% ({row.self_samples})"
            f"  total {pct(row.total_pct)}% ({row.total_samples})"
        )
    else:
        out.append("  no samples in the current view")
    return out


class DetailsScreen(Screen[None]):
    """Details of one function; Escape goes back, Enter on a caller/callee opens it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", tooltip="back to the previous screen"),
        Binding("tab", "app.focus_next", "Next table", key_display="Tab",
                tooltip="hot addresses -> callers -> callees, scrolled into view (Shift+Tab: "
                "back); Enter on a caller or callee opens its details"),
        Binding("shift+tab", "app.focus_previous", show=False),
        Binding("t", "paths", "Paths", tooltip="every path through this function: its "
                "callers above it, its callees below it (a sandwich of call trees)"),
    ]  # fmt: skip
    AUTO_FOCUS = ""  # the hot table is focused on mount, see there

    def __init__(
        self,
        session: Session,
        frame: Frame,
        raw: bool,
        view: ProfileView,
        selection: Selection | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.frame = frame
        self.raw = raw
        self.view = view
        self.selection = selection or Selection()
        self.records: dict[str, FrameRecord] = {}
        self.neighbours: dict[str, Frame] = {}
        self._state = Text(end="")

    def compose(self) -> ComposeResult:
        # The session's state stays in sight (LIVE, TARGET EXITED, ...), as on the dashboard.
        yield Static(id="details-state", markup=False)
        with VerticalScroll(id="details"):
            yield Static(id="details-title", markup=False)
            python = self.frame.kind == KIND_PYTHON
            yield Static(
                "Hottest lines" if python else "Hottest addresses", classes="section", markup=False
            )
            yield SyncTable(LINE_COLUMNS if python else HOT_COLUMNS, id="details-hot")
            yield Static(id="details-chain", markup=False)
            with Horizontal(id="details-neighbours"):
                with Vertical():
                    yield Static("Callers", classes="section", markup=False)
                    yield SyncTable(NEIGHBOUR_COLUMNS, id="details-callers")
                with Vertical():
                    yield Static("Callees", classes="section", markup=False)
                    yield SyncTable(NEIGHBOUR_COLUMNS, id="details-callees")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.show(self.view)
        self._fit_hot_table(self.app.size.height)
        self.query_one("#details-state", Static).update(self._state)
        # Focused now, not after a frame (as Widget.focus does), and without scrolling it
        # into view: before the first layout every widget looks out of view, and the
        # title would be scrolled away.
        self.set_focus(self.query_one("#details-hot", SyncTable), scroll_visible=False)

    def show(self, view: ProfileView) -> None:
        """Show the function as ``view`` has it, and its hot addresses as the engine has them."""
        self.view = view
        row = view.functions.row_of(self.frame)
        self.query_one("#details-title", Static).update(title_text(self.frame, row, self.raw))
        # Shares of the samples the view selects (window, thread, module, time).
        s = self.selection
        every = self.session.hot_addresses(
            self.frame, ALL_ADDRESSES, recent=s.recent, thread=s.thread, module=s.module,
            mode=s.mode, process=s.process, between=s.between,
        )  # fmt: skip
        total = sum(h.samples for h in every)
        hot = every[:HOT_LIMIT]
        self.records = {hot_key(h): h.record for h in hot}
        table = self.query_one("#details-hot", SyncTable)
        table.sync([hot_row(h, total) for h in hot])
        self._show_neighbours("#details-callers", view.callers(self.frame))
        self._show_neighbours("#details-callees", view.callees(self.frame))
        self._show_chain()

    def show_state(self, snap: EngineSnapshot, paused: bool) -> None:
        """The header's state line: what the session is doing while details are open
        (kept until the screen is mounted, when it is called before)."""
        self._state = header_lines(snap, paused)[1]
        if self.is_mounted:
            self.query_one("#details-state", Static).update(self._state)

    def on_resize(self, event: events.Resize) -> None:
        self._fit_hot_table(event.size.height)

    def _fit_hot_table(self, height: int) -> None:
        """A third of the screen at most for the hot addresses: on a short terminal the
        conversion chain below them still shows."""
        hot = self.query_one("#details-hot", SyncTable)
        hot.styles.max_height = max(3, min(12, height // 3))

    def _show_neighbours(self, selector: str, pairs: Neighbours) -> None:
        for frame, _ in pairs:
            self.neighbours[frame_key(frame)] = frame
        rows = [neighbour_row(frame, count, self.raw) for frame, count in pairs]
        self.query_one(selector, SyncTable).sync(rows)

    def _show_chain(self) -> None:
        chain = self.query_one("#details-chain", Static)
        key = self.query_one("#details-hot", SyncTable).selected_key
        record = self.records.get(key) if key is not None else None
        if record is None:
            chain.update(Text("No samples end in this function: it is only a caller here.", end=""))
            return
        obj = self.session.object_record(record.object) if record.object is not None else None
        chain.update(chain_table(record, obj))
        if record.kind != KIND_PYTHON and record.source_file is None and record.symbol:
            # DWARF may take a moment on a big object: asked off the event loop.
            self.run_worker(self._show_line(record, obj), exclusive=True, group="line")

    async def _show_line(self, record: FrameRecord, obj: ObjectRecord | None) -> None:
        source = await asyncio.to_thread(self.session.source_line, record)
        key = self.query_one("#details-hot", SyncTable).selected_key
        if source is not None and self.records.get(key or "") is record:
            self.query_one("#details-chain", Static).update(chain_table(record, obj, source))

    def action_paths(self) -> None:
        """Every path through the function, as two call trees."""
        from livesym.ui.options import ViewOptions
        from livesym.ui.sandwich import SandwichScreen

        s = self.selection
        options = ViewOptions(recent=s.recent, thread=s.thread, module=s.module,
                              process=s.process, raw_names=self.raw, between=s.between)  # fmt: skip
        self.app.push_screen(SandwichScreen(self.view, self.frame, options, self._state))

    def on_sync_table_row_highlighted(self, event: SyncTable.RowHighlighted) -> None:
        if event.table.id == "details-hot":
            self._show_chain()

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        event.stop()
        frame = self.neighbours.get(event.key)
        if frame is not None and event.table.id != "details-hot":
            self.app.push_screen(
                DetailsScreen(self.session, frame, self.raw, self.view, self.selection)
            )
