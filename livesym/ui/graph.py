"""The header's samples-per-second graph: bars from zero, newest on the right.

Textual's Sparkline scales between the smallest and largest value shown, so a
steady rate draws as a wall of full bars, a dip of one sample as a cliff, and a
single value (the first second) or all zeros (a sleeping target) as full bars.
A rate reads right only from zero.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget

BARS = "▁▂▃▄▅▆▇█"  # eighths of a row


def rate_graph(values: Sequence[int], width: int, height: int) -> Text:
    """The last ``width`` values as bars ``height`` rows high, scaled from 0 to the
    largest (a value above 0 shows at least an eighth; 0 shows nothing)."""
    if width <= 0 or height <= 0:
        return Text(end="")
    shown = list(values[-width:])
    shown = [0] * (width - len(shown)) + [max(0, v) for v in shown]
    top = max(shown)
    steps = height * len(BARS)
    levels = [max(1, round(v * steps / top)) if v > 0 else 0 for v in shown]
    rows = []
    for row in range(height):
        floor = (height - 1 - row) * len(BARS)
        cells = []
        for level in levels:
            fill = min(len(BARS), level - floor)
            cells.append(BARS[fill - 1] if fill > 0 else " ")
        rows.append("".join(cells))
    return Text("\n".join(rows), no_wrap=True, end="")


class RateGraph(Widget):
    """``rate_graph`` of the values last shown, drawn at whatever size the widget has."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values: tuple[int, ...] = ()

    def show(self, values: Sequence[int]) -> None:
        values = tuple(values)
        if values != self.values:
            self.values = values
            self.refresh()

    def render(self) -> Text:
        return rate_graph(self.values, self.size.width, self.size.height)
