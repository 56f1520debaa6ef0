"""What the dashboard shows on a terminal too small to keep its promises.

Below MIN_WIDTH x MIN_HEIGHT the tables cannot show a function's name next to its
numbers, nor the details their conversion chain; rather than a screen of cut
pieces, this says what size is needed. q (and Ctrl+C) still quit; sampling and
recording go on, and the dashboard comes back as soon as the terminal is larger.
"""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

MIN_WIDTH = 40
MIN_HEIGHT = 12


def too_small(width: int, height: int) -> bool:
    return width < MIN_WIDTH or height < MIN_HEIGHT


def message(width: int, height: int) -> str:
    return (
        f"terminal too small: {MIN_WIDTH}x{MIN_HEIGHT} needed, this one is {width}x{height}. "
        "Sampling goes on. q quits."
    )


class TooSmallScreen(Screen[None]):
    """In place of every screen while the terminal is too small."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Static(id="too-small", markup=False)

    def on_mount(self) -> None:
        self._say(self.app.size.width, self.app.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._say(event.size.width, event.size.height)

    def _say(self, width: int, height: int) -> None:
        self.query_one("#too-small", Static).update(message(width, height))
