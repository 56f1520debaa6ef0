"""Text that reaches the terminal only when it changed.

A Static's ``update`` repaints its whole region, and Textual sends every repainted
line to the terminal, whether or not a character of it changed: the functions pane's
status line, the same every second, was most of a row's bytes over an SSH link. A
``QuietStatic`` compares what it is given with what it shows and repaints only on a
difference: the same characters with the same styles, the whole line's included
(rich's ``Text`` compares its characters and spans, not its own style).
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class QuietStatic(Static):
    """A Static that ``show`` repaints only when its content changed."""

    _shown: Text | str | None = None

    def show(self, content: Text | str, *, layout: bool = False) -> None:
        """Show ``content``; nothing is repainted or sent when it is what is shown."""
        if _same(content, self._shown):
            return
        self._shown = content
        self.update(content, layout=layout)


def _same(content: Text | str, shown: Text | str | None) -> bool:
    if isinstance(content, Text) and isinstance(shown, Text):
        return content == shown and content.style == shown.style
    return content == shown
