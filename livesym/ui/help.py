"""The help screen: every key, taken from the bindings themselves so it cannot drift."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEY_NAMES = {
    "slash": "/",
    "question_mark": "?",
    "escape": "Esc",
    "enter": "Enter",
    "tab": "Tab",
    "shift+tab": "Shift+Tab",
    "ctrl+c": "Ctrl+C",
    "ctrl+l": "Ctrl+L",
    "up": "↑",
    "down": "↓",
    "pageup": "PgUp",
    "pagedown": "PgDn",
}

# Keys the tables handle themselves (SyncTable's bindings) and mouse actions.
TABLE_KEYS = (
    ("↑ ↓ PgUp PgDn", "move in the table (Home / End: first / last row); the "
                      "highlighted row stays highlighted as the table updates"),
    ("Enter", "functions: details; threads: only that thread; modules: only that module; "
              "mappings: the mapping in full"),
    ("click", "a row highlights it (a second click: as Enter), a header sorts the "
              "functions by that column (again: reverse)"),
)  # fmt: skip


def key_label(key: str) -> str:
    """A binding's keys as a person types them: ``slash`` -> ``/``."""
    return " ".join(KEY_NAMES.get(k, k) for k in key.split(","))


def binding_lines(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """(keys, description) for every binding with a description."""
    lines = []
    for b in bindings:
        if isinstance(b, Binding) and b.description:
            lines.append((b.key_display or key_label(b.key), b.tooltip or b.description))
    return lines


def help_table(sections: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> Table:
    """Sections of (keys, what they do); long descriptions wrap under themselves."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column()
    for n, (title, lines) in enumerate(sections):
        if n:
            grid.add_row("", "")
        grid.add_row(Text(title, style="bold underline", end=""), "")
        for keys, what in lines:
            grid.add_row(Text(keys, end=""), Text(what, end=""))
    return grid


class HelpScreen(ModalScreen[None]):
    """Every key of the dashboard; any of Esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close help")
    ]

    def __init__(self, sections: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_table(self.sections), markup=False)
