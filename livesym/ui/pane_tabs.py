"""The line naming the dashboard's panes, the shown one marked; a click shows a pane.

Textual's Tabs moves its underline after a screen refresh, so every pane switch
took one more frame (30 ms on a busy terminal) than the pane itself. This line is
drawn in the same frame as the pane it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

GAP = 1  # cells between two names


def tab_labels(panes: tuple[tuple[str, str], ...], active: str, width: int) -> list[str]:
    """Each pane's label: the shown one in brackets (the mark survives NO_COLOR and
    copy-paste), whole; the others whole where they fit, else cut to three letters,
    else to their number key, so the shown pane is always named on a narrow line."""
    for short in (None, 3, 0):
        labels = []
        for n, (pane, name) in enumerate(panes, 1):
            if pane == active:
                labels.append(f"[{name}]")
            elif short is None:
                labels.append(f" {name} ")
            else:
                labels.append(f" {name[:short] if short else n} ")
        if sum(len(label) + GAP for label in labels) - GAP <= width:
            break
    return labels


class PaneTabs(Widget):
    """One line of pane names; ``active`` is the shown pane."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"pane-tabs--active"}
    DEFAULT_CSS = """
    PaneTabs {
        height: 1;
        color: $text-muted;
        & > .pane-tabs--active {
            color: $foreground;
            background: $boost;
            text-style: bold underline;
        }
    }
    """

    active: reactive[str] = reactive("")

    @dataclass
    class Clicked(Message):
        pane: str

    def __init__(
        self, panes: Iterable[tuple[str, str]], active: str, *, id: str | None = None
    ) -> None:
        """``panes``: (pane id, name shown) in order."""
        super().__init__(id=id)
        self.panes = tuple(panes)
        self.set_reactive(PaneTabs.active, active)

    def render(self) -> Text:
        marked = self.get_component_rich_style("pane-tabs--active")
        labels = tab_labels(self.panes, self.active, self.size.width)
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        for (pane, _name), label in zip(self.panes, labels, strict=True):
            shown = pane == self.active
            style = (marked if shown else Style()) + Style.from_meta({"pane": pane})
            line.append(label, style)
            line.append(" " * GAP)
        return line

    def on_click(self, event: events.Click) -> None:
        pane = event.style.meta.get("pane")  # the name clicked, as drawn
        if isinstance(pane, str):
            event.stop()
            self.post_message(self.Clicked(pane))
