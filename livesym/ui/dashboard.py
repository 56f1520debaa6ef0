"""The main screen: header, the panes (PANES: one entry each) and the footer.

Each ``tick`` the screen takes a snapshot for the header's counters. Unless
paused it also keeps it for the tables, and shows it in the visible pane only
(hidden panes catch up when shown). Sorting, the text filter and the name
style re-show the data already held, so they work while paused; the window
and the thread/module filters select different samples, so changing them takes
a fresh snapshot even while paused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher

from livesym.records import TimeMode
from livesym.ui.calltree import TreePane
from livesym.ui.flame import FlameScreen
from livesym.ui.footer import KeysFooter
from livesym.ui.format import frame_name
from livesym.ui.functions import Baseline, FunctionsPane
from livesym.ui.header import SessionHeader
from livesym.ui.mappings import MappingScreen, MappingsTable
from livesym.ui.modules import ModulesTable
from livesym.ui.options import ViewOptions
from livesym.ui.pane_tabs import PaneTabs
from livesym.ui.processes import ProcessesTable
from livesym.ui.table import SyncTable
from livesym.ui.threads import ThreadsTable
from livesym.ui.timeline import Timeline

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot
    from livesym.profile import ProfileView
    from livesym.profile.mapping_rows import MappingRow
    from livesym.ui.session import Session


def _rows_of(options: ViewOptions) -> tuple[object, ...]:
    """What decides which functions the table lists and in which order."""
    o = options
    return (o.recent, o.between, o.thread, o.process, o.module, o.text, o.sort, o.flipped)


def _show_functions(screen: DashboardScreen, held: EngineSnapshot) -> None:
    view = screen.view
    if view is not None:
        functions = screen.query_one(FunctionsPane)
        functions.window = held.recent_window
        functions.baseline = screen.baseline
        functions.show(view, screen.options)


def _show_threads(screen: DashboardScreen, held: EngineSnapshot) -> None:
    screen.query_one(ThreadsTable).show(held.view, screen.options.raw_names)


def _show_processes(screen: DashboardScreen, held: EngineSnapshot) -> None:
    screen.query_one(ProcessesTable).show(held)


def _show_modules(screen: DashboardScreen, held: EngineSnapshot) -> None:
    screen.query_one(ModulesTable).show(held.view)


def _show_tree(screen: DashboardScreen, held: EngineSnapshot) -> None:
    view = screen.view
    if view is not None:
        screen.query_one(TreePane).show(view, screen.options)


def _show_mappings(screen: DashboardScreen, held: EngineSnapshot) -> None:
    if screen.maps is None:
        screen.maps = screen.session.mappings(screen.options.process)
    screen.query_one(MappingsTable).show(screen.maps)


@dataclass(frozen=True)
class Pane:
    """One pane of the dashboard: a new pane is one more entry in PANES."""

    id: str  # the container's id, and what action_pane takes
    title: str  # on the pane line
    key: str  # the key that shows it
    table: str  # the selector of its table, focused when it is shown
    make: Callable[[], Widget]
    show: Callable[[DashboardScreen, EngineSnapshot], None]  # the held data, in it


PANES = (
    Pane("functions", "Functions", "1", "#functions-table",
         lambda: FunctionsPane(id="functions-pane"), _show_functions),
    Pane("threads", "Threads", "2", "#threads-table",
         lambda: ThreadsTable(id="threads-table"), _show_threads),
    Pane("modules", "Modules", "3", "#modules-table",
         lambda: ModulesTable(id="modules-table"), _show_modules),
    Pane("mappings", "Mappings", "4", "#mappings-table",
         lambda: MappingsTable(id="mappings-table"), _show_mappings),
    Pane("tree", "Tree", "5", "#tree-table", lambda: TreePane(id="tree-pane"), _show_tree),
    Pane("processes", "Processes", "6", "#processes-table",
         lambda: ProcessesTable(id="processes-table"), _show_processes),
)  # fmt: skip
PANE_BY_ID = {pane.id: pane for pane in PANES}


def _pane_bindings() -> list[BindingType]:
    """A key per pane; the first carries the footer's and the help's description."""
    keys = " ".join(p.key for p in PANES)
    titles = ", ".join(p.title.lower() for p in PANES)
    first, *rest = PANES
    return [
        Binding(first.key, f"pane('{first.id}')", "Panes", show=False, key_display=keys,
                tooltip=f"{titles} pane"),
        *(Binding(p.key, f"pane('{p.id}')", show=False) for p in rest),
    ]  # fmt: skip


NARROW = 70  # below this many columns the header drops its graph
WIDE = 100  # from this many columns on the graph is wider
GRAPH_NARROW, GRAPH_WIDE = 16, 30


class DashboardScreen(Screen[None]):
    """Header, panes and footer; owns what the user chose to see."""

    AUTO_FOCUS = "#functions-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "next_pane(1)", "Pane", key_display="Tab", tooltip="next pane"),
        Binding("shift+tab", "next_pane(-1)", "Pane", show=False, tooltip="previous pane"),
        *_pane_bindings(),
        Binding("slash", "filter", "Filter", tooltip="filter functions by text in name or module "
                "(Enter keeps the filter, Esc clears it)"),
        Binding("s", "sort", "Sort", tooltip="sort functions by the next column: self%, total%, "
                "function, module"),
        Binding("S", "reverse", "Reverse", show=False, tooltip="reverse the sort order"),
        Binding("p", "pause", "Pause", tooltip="pause / resume the tables (the header's "
                "counters keep going)"),
        Binding("c", "window", "Window", tooltip="the whole session / only the recent window"),
        Binding("less_than_sign", "range_move(-1)", "Range", show=False, key_display="< >",
                tooltip="the "
                "timeline's range earlier (> later); the first press picks the last quarter"),
        Binding("greater_than_sign", "range_move(1)", show=False, tooltip="the range later"),
        Binding("left_curly_bracket", "range_scale(0.5)", show=False, key_display="{ }",
                tooltip="the timeline's range narrower (} wider; as wide as the session: none)"),
        Binding("right_curly_bracket", "range_scale(2)", show=False, tooltip="the range wider"),
        Binding("equals_sign", "range_clear", show=False, key_display="=",
                tooltip="no range: the whole session again"),
        Binding("b", "baseline", "Baseline", show=False, tooltip="pin what the panes show now "
                "(the range, the filters) as the baseline: the functions then show each one's "
                "change against it, '*' where larger than noise, and the flame graph is "
                "coloured by change (b again: unpin)"),
        Binding("o", "time", "Time", tooltip="the time shown: CPU, wall (on and off the CPU), "
                "off-CPU (where threads wait); off-CPU time is collected with --mode wall"),
        Binding("n", "names", "Names", show=False, tooltip="raw (mangled) / demangled names"),
        Binding("x", "clear", "Clear", show=False,
                tooltip="clear the process, thread, module and text filters"),
        Binding("r", "reset", "Reset", show=False, tooltip="reset: forget the samples so far"),
        Binding("f", "flame", "Flame", tooltip="the flame graph of what the functions or the "
                "tree show (from the tree: at its highlighted node; from the functions: the "
                "highlighted function's frames marked)"),
    ]  # fmt: skip

    def __init__(self, session: Session, mode: TimeMode | None = None) -> None:
        super().__init__()
        self.session = session
        self.mode = mode  # the time shown; None: the session's (--mode)
        self.options = ViewOptions()
        self.paused = False
        self.last: EngineSnapshot | None = None  # the newest snapshot (header)
        self.held: EngineSnapshot | None = None  # what the tables show
        self._filtered: ProfileView | None = None  # the held samples, engine-filtered
        self.maps: tuple[MappingRow, ...] | None = None  # of the held moment, once shown
        self.baseline: Baseline | None = None  # pinned with 'b': the functions' deltas

    def compose(self) -> ComposeResult:
        yield SessionHeader(id="header")
        yield Timeline(id="timeline")
        yield PaneTabs(((p.id, p.title) for p in PANES), PANES[0].id, id="pane-tabs")
        with ContentSwitcher(initial=PANES[0].id, id="panes"):
            for pane in PANES:
                with Container(id=pane.id):
                    yield pane.make()
        yield KeysFooter()

    # -- data ------------------------------------------------------------------

    @property
    def pane(self) -> str:
        return self.query_one("#panes", ContentSwitcher).current or PANES[0].id

    def tick(self) -> EngineSnapshot:
        """Take a snapshot: always into the header, unless paused into the tables."""
        snap = self._snapshot()
        self.last = snap
        self.query_one(SessionHeader).show(snap, self.paused)
        self._show_timeline(snap)
        if not self.paused or self.held is None:
            self._hold(snap)
        return snap

    def _snapshot(self) -> EngineSnapshot:
        o = self.options
        return self.session.snapshot(recent=o.recent, mode=self.mode, between=o.between)

    def _show_timeline(self, snap: EngineSnapshot) -> None:
        """The session over time, the range shown marked (the recent window: a range that
        moves with the session)."""
        data, o = snap.timeline, self.options
        if o.thread is not None or o.process is not None:
            data = self.session.timeline(thread=o.thread, process=o.process, between=o.between)
        if o.recent and o.between is None:
            data = replace(data, between=(max(0.0, snap.elapsed - snap.recent_window),
                                          snap.elapsed))  # fmt: skip
        self.query_one(Timeline).show(data, snap.elapsed)

    def _hold(self, snap: EngineSnapshot) -> None:
        """Keep ``snap`` for the tables and show it in the visible pane."""
        self.held = snap
        self._filtered = None
        self.maps = None
        self.show_pane()

    @property
    def view(self) -> ProfileView | None:
        """The functions' view of the held data: with a thread or module filter the engine
        selects the samples (asked once per held snapshot, and only when shown)."""
        o = self.options
        if self.held is None or not o.engine_filtered:
            return self.held.view if self.held is not None else None
        if self._filtered is None:
            self._filtered = self.session.snapshot(
                recent=o.recent, thread=o.thread, module=o.module, mode=self.mode,
                process=o.process, between=o.between,
            ).view  # fmt: skip
        return self._filtered

    def refetch(self) -> None:
        """A fresh snapshot for the tables, paused or not (the selection changed)."""
        snap = self._snapshot()
        self.last = snap
        self._hold(snap)
        self.query_one(SessionHeader).show(snap, self.paused)
        self._show_timeline(snap)

    def show_pane(self) -> None:
        """Show the held data in the visible pane."""
        held = self.held
        if held is None:
            return
        PANE_BY_ID[self.pane].show(self, held)

    def set_options(self, options: ViewOptions) -> None:
        """Apply new view options; a new window or thread/module filter needs new samples."""
        old, self.options = self.options, options
        fresh = (old.recent, old.between, old.thread, old.module, old.process) != (
            options.recent, options.between, options.thread, options.module, options.process
        )  # fmt: skip
        if fresh:
            self.refetch()
        else:
            self.show_pane()
        if _rows_of(old) != _rows_of(options):
            # Another selection or order of functions: the table shows its first rows from
            # the top (following the old cursor's row could scroll them out of view).
            self.table_of("functions").move_cursor(0)

    # -- panes -----------------------------------------------------------------

    def table_of(self, pane: str) -> SyncTable:
        return self.query_one(PANE_BY_ID[pane].table, SyncTable)

    def action_next_pane(self, step: int) -> None:
        """Show the next (or previous) pane."""
        index = [p.id for p in PANES].index(self.pane)
        self.action_pane(PANES[(index + step) % len(PANES)].id)

    def action_pane(self, pane: str) -> None:
        """Show one pane, its rows and its focused table in one frame."""
        if pane == self.pane:
            return
        self.query_one("#panes", ContentSwitcher).current = pane
        self.query_one(PaneTabs).active = pane
        # The screen lays itself out in its next frame. Left to the panes, the layout
        # is asked for from their own message queues, and a frame drawn before that
        # (the new name, the old pane) would make the switch take two.
        self.refresh(layout=True)
        if pane != "functions":
            self.query_one(FunctionsPane).close_filter()  # the text stays
        self.show_pane()
        # Focused now rather than after the next frame (as Widget.focus does), so the
        # highlighted row is drawn in its focused colours in the pane's first frame.
        self.set_focus(self.table_of(pane))

    def on_pane_tabs_clicked(self, event: PaneTabs.Clicked) -> None:
        self.action_pane(event.pane)

    # -- choices ---------------------------------------------------------------

    def action_sort(self) -> None:
        """Sort functions by the next column."""
        self.set_options(self.options.next_sort())

    def action_reverse(self) -> None:
        """Reverse the sort order."""
        self.set_options(replace(self.options, flipped=not self.options.flipped))

    def on_functions_pane_sort_asked(self, event: FunctionsPane.SortAsked) -> None:
        self.set_options(self.options.sort_by(event.column))

    def action_window(self) -> None:
        """Switch between the whole session and the recent window."""
        self.set_options(replace(self.options, recent=not self.options.recent, between=None))

    # -- the timeline's range ---------------------------------------------------

    def _seconds(self) -> float:
        return self.last.elapsed if self.last is not None else 0.0

    def _range(self, between: tuple[float, float] | None) -> None:
        """Show ``between`` (clipped to the session; all of it: no range)."""
        seconds = self._seconds()
        if between is not None:
            a, b = max(0.0, between[0]), min(seconds, between[1])
            between = None if b <= a or (a <= 0.0 and b >= seconds) else (a, b)
        self.set_options(replace(self.options, between=between, recent=False))

    def action_range_move(self, step: int) -> None:
        """The range half its width earlier or later (the first: the last quarter)."""
        seconds, now = self._seconds(), self.options.between
        if now is None:
            self._range((0.75 * seconds, seconds))
            return
        width = now[1] - now[0]
        shift = step * width / 2
        shift = max(-now[0], min(seconds - now[1], shift))  # (kept whole, inside)
        self._range((now[0] + shift, now[1] + shift))

    def action_range_scale(self, factor: float) -> None:
        """The range narrower or wider about its middle (the first: the middle half)."""
        seconds, now = self._seconds(), self.options.between or (0.0, self._seconds())
        middle, half = (now[0] + now[1]) / 2, (now[1] - now[0]) / 2 * factor
        half = max(half, seconds / 200)  # (a range keeps some width)
        self._range((middle - half, middle + half))

    def action_range_clear(self) -> None:
        """No range: the whole session."""
        self._range(None)

    def on_timeline_range_chosen(self, event: Timeline.RangeChosen) -> None:
        self._range((event.span.start, event.span.end))

    def action_baseline(self) -> None:
        """Pin what the panes show now as the baseline, or unpin it."""
        view = self.view
        if self.baseline is not None or view is None:
            self.baseline = None
        else:
            self.baseline = Baseline.pinned(view, self.options, self._seconds())
            self.notify(f"baseline pinned: {self.baseline.label}", markup=False)
        self.show_pane()

    def action_time(self) -> None:
        """Show the next time: CPU, wall, off-CPU (a session that collected off-CPU time)."""
        snap = self.last
        if snap is None:
            return
        if not snap.off_cpu_collected:
            self.notify("this session did not collect off-CPU time: start it with --mode wall "
                        "(or off-cpu)", severity="warning", markup=False)  # fmt: skip
            return
        modes = list(TimeMode)
        current = snap.mode if self.mode is None else self.mode
        self.mode = modes[(modes.index(current) + 1) % len(modes)]
        self.refetch()
        self.table_of("functions").move_cursor(0)
        self.notify(f"time: {self.mode.value}", markup=False)

    def action_names(self) -> None:
        """Switch between demangled and raw names."""
        self.set_options(replace(self.options, raw_names=not self.options.raw_names))

    def action_clear(self) -> None:
        """Clear the process, thread, module and text filters."""
        self.set_options(self.options.cleared())

    def on_threads_table_chosen(self, event: ThreadsTable.Chosen) -> None:
        self.set_options(replace(self.options, thread=event.tid, thread_name=event.name))
        self.action_pane("functions")

    def on_processes_table_chosen(self, event: ProcessesTable.Chosen) -> None:
        self.set_options(replace(self.options, process=event.pid, process_name=event.name))
        self.action_pane("functions")

    def on_modules_table_chosen(self, event: ModulesTable.Chosen) -> None:
        self.set_options(replace(self.options, module=event.module))
        self.action_pane("functions")

    def action_flame(self) -> None:
        """Open the flame graph of the view the panes show."""
        view = self.view
        if view is None:
            return
        raw = self.options.raw_names
        if self.pane == "tree":
            tree = self.query_one(TreePane)
            screen = FlameScreen(view, raw, inverted=tree.inverted, path=tree.selected_path(),
                                 baseline=self.baseline)  # fmt: skip
        else:
            functions = self.query_one(FunctionsPane)
            search = frame_name(f, raw) if (f := functions.selected_frame()) is not None else ""
            screen = FlameScreen(view, raw, search=search, baseline=self.baseline,
                                 haystacks=functions.haystacks)  # fmt: skip
        self.app.push_screen(screen)
        if self.last is not None:
            screen.show_state(self.last, self.paused)

    def on_tree_pane_changed(self, event: TreePane.Changed) -> None:
        event.stop()
        self.show_pane()

    def on_mappings_table_chosen(self, event: MappingsTable.Chosen) -> None:
        self.app.push_screen(MappingScreen(event.mapping))

    def action_pause(self) -> None:
        """Freeze or unfreeze the tables; the header's counters keep going."""
        self.paused = not self.paused
        if self.paused and self.maps is None:
            self.maps = self.session.mappings(
                self.options.process
            )  # of the paused moment, shown or not yet
        if not self.paused and self.last is not None:
            self.refetch()
        elif self.last is not None:
            self.query_one(SessionHeader).show(self.last, self.paused)
        self.notify("paused: tables frozen, counters live" if self.paused else "resumed")

    def action_reset(self) -> None:
        """Forget the samples so far."""
        self.session.reset()
        self.refetch()
        self.notify("reset: counting from now")

    # -- text filter -----------------------------------------------------------

    def action_filter(self) -> None:
        """Type the text filter on the functions' status line (the table keeps focus)."""
        self.action_pane("functions")
        self.set_focus(self.table_of("functions"))
        self.query_one(FunctionsPane).open_filter(self.options.text)

    def on_key(self, event: events.Key) -> None:
        """`/` and the keys typed while the filter is open. Keys bubble here in the order
        they come, from whichever table has focus; a binding would run only once the
        key reached the app, after the keys behind it had gone by (tmux send-keys lost
        "hot" after /). While typing, `s` is an s, not a binding's key."""
        functions = self.query_one(FunctionsPane)
        if functions.editing is None and event.key == "slash":
            event.stop()
            event.prevent_default()
            self.action_filter()
        elif functions.filter_key(event):
            event.stop()
            event.prevent_default()

    def on_functions_pane_filter_edited(self, event: FunctionsPane.FilterEdited) -> None:
        event.stop()
        self.set_options(replace(self.options, text=event.text))

    def on_resize(self, event: events.Resize) -> None:
        graph = self.query_one("#header-graph")
        graph.display = event.size.width >= NARROW
        graph.styles.width = GRAPH_WIDE if event.size.width >= WIDE else GRAPH_NARROW
