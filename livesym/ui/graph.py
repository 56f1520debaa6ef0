"""The header's samples-per-second graph: bars from zero, newest on the right.

Textual's Sparkline scales between the smallest and largest value shown, so a
steady rate draws as a wall of full bars, a dip of one sample as a cliff, and a
single value (the first second) or all zeros (a sleeping target) as full bars.
A rate reads right only from zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text

from livesym.ui.quiet import CellPainter

BARS = "▁▂▃▄▅▆▇█"  # eighths of a row


def rate_graph(values: Sequence[int], width: int, height: int) -> Text:
    """The last ``width`` values as bars ``height`` rows high, scaled from 0 to the
    largest (a value above 0 shows at least an eighth; 0 shows nothing)."""
    if width <= 0 or height <= 0:
        return Text(end="")
    shown = list(values[-width:])
    shown = [0] * (width - len(shown)) + [max(0, v) for v in shown]
    top = bar_scale(max(shown))
    steps = height * len(BARS)
    levels = [min(steps, max(1, round(v * steps / top))) if v > 0 else 0 for v in shown]
    rows = []
    for row in range(height):
        floor = (height - 1 - row) * len(BARS)
        cells = []
        for level in levels:
            fill = min(len(BARS), level - floor)
            cells.append(BARS[fill - 1] if fill > 0 else " ")
        rows.append("".join(cells))
    return Text("\n".join(rows), no_wrap=True, end="")


def bar_scale(top: float) -> float:
    """The value a full bar stands for: the largest shown, rounded down to a quarter
    power of two (those above it are full too). A steady rate's second-to-second noise
    then draws the same bars, and a new largest value a little above the last does
    not redraw every bar: over SSH each redrawn bar is bytes."""
    return 0.0 if top <= 0 else float(2.0 ** (math.floor(4 * math.log2(top)) / 4))


class RateGraph(CellPainter):
    """``rate_graph`` of the values last shown, drawn at whatever size the widget has;
    only its changed cells repainted (a steady rate's full rows are not sent again)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values: tuple[int, ...] = ()

    def show(self, values: Sequence[int]) -> None:
        values = tuple(values)
        if values != self.values:
            self.values = values
            self.paint()

    def draw(self, width: int, height: int) -> Text:
        return rate_graph(self.values, width, height)
