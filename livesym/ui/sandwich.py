"""Every path through one function (a "sandwich"): its callers above it, out to the
threads' roots, and its callees below it, each a call tree merged over every stack that
holds the function (recursion counted once: callees below its outermost call, callers
above its innermost). Opened with ``t`` from the function's details."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from livesym.profile import ProfileView
from livesym.records import Frame
from livesym.ui.calltree import TreePane
from livesym.ui.footer import KeysFooter
from livesym.ui.format import frame_name
from livesym.ui.header import header_lines
from livesym.ui.options import ViewOptions

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot


class SandwichScreen(Screen[None]):
    """A function's callers tree above its callees tree; Esc goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", tooltip="back to the function's details"),
        Binding("tab", "app.focus_next", "Next tree", key_display="Tab",
                tooltip="paths: callers -> callees (Shift+Tab: back)"),
        Binding("shift+tab", "app.focus_previous", show=False),
    ]  # fmt: skip
    AUTO_FOCUS = "#sandwich-callers-table"

    def __init__(
        self, view: ProfileView, frame: Frame, options: ViewOptions, state: Text | None = None
    ) -> None:
        super().__init__()
        self.view = view
        self.frame = frame
        self.options = options
        self._state = state or Text(end="")  # the header's state line, as the details had it

    def compose(self) -> ComposeResult:
        frame = self.frame
        yield Static(id="sandwich-state", markup=False)
        yield Static(id="sandwich-title", markup=False)
        yield TreePane(
            id="sandwich-callers", table_id="sandwich-callers-table", invertible=False,
            source=lambda view, _: view.callers_tree(frame),
            what="callers: who called it, out to the threads' roots",
        )  # fmt: skip
        yield TreePane(
            id="sandwich-callees", table_id="sandwich-callees-table", invertible=False,
            source=lambda view, _: view.callees_tree(frame),
            what="callees: what it called, down to where the time was spent",
        )  # fmt: skip
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#sandwich-state", Static).update(self._state)
        self.show(self.view)

    def show_state(self, snap: EngineSnapshot, paused: bool) -> None:
        self._state = header_lines(snap, paused)[1]
        if self.is_mounted:
            self.query_one("#sandwich-state", Static).update(self._state)

    def show(self, view: ProfileView) -> None:
        self.view = view
        for pane in self.query(TreePane):
            pane.show(view, self.options)
        self.query_one("#sandwich-title", Static).update(self._title(view))

    def _title(self, view: ProfileView) -> Text:
        """The function, with the flat table's TOTAL and SELF for it."""
        name = frame_name(self.frame, self.options.raw_names)
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        text.append("every path through ")
        text.append(name, "bold")
        row = view.functions.row_of(self.frame)
        if row is None:
            text.append("  ·  not in these samples")
        else:
            text.append(f"  ·  on {row.total_samples} samples' stacks ({row.total_pct:.1f} %), "
                        f"{row.self_samples} in it ({row.self_pct:.1f} %)")  # fmt: skip
        return text
