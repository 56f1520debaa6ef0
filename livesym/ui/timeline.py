"""The timeline: samples over the whole session, two rows at any width (three where
off-CPU time was collected), live and in a replay. The first row draws the samples on a
CPU in each column's seconds as bars from zero (the range the panes show, where one is
chosen, in reverse); where off-CPU time was collected, each row is labelled and the
second draws the sampling periods threads spent off a CPU (their waits) alike, on its
own scale. With a thread or process chosen, the rows are its samples alone. The last
row marks where the maps changed (``M``), where a process was first seen (``+``), where
one of several exited (``-``) and where samples were lost (``!``, the second livesym
learnt of it), and says whose samples the rows are (where not every thread's), the
session's length and the range chosen.

A range is chosen with the keys (``<`` ``>`` move it, ``{`` ``}`` narrow and widen it,
``=`` drops it: the dashboard's) or with the mouse: press on the timeline and release
where the range ends. Every pane then shows that range only (``Engine.snapshot(between=...)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.message import Message

from livesym.records import MARK_EXITED, MARK_LOST, MARK_MAPS, MARK_PROCESS
from livesym.ui.graph import bar_scale
from livesym.ui.quiet import CellPainter

if TYPE_CHECKING:
    from livesym.engine.snapshot import TimelineData

BARS = "▁▂▃▄▅▆▇█"
MARK_CHARS = {MARK_MAPS: "M", MARK_PROCESS: "+", MARK_EXITED: "-", MARK_LOST: "!"}


def column_seconds(seconds: float, columns: int) -> float:
    """The seconds a column spans: the shortest power of two (of a second) with which
    ``seconds`` fit in ``columns``. The session fills half the row or more, and as it
    grows only its newest column changes, until it fills the row and the step doubles:
    a timeline rescaled every update was sent whole to the terminal every update."""
    if columns <= 0 or seconds <= 0:
        return 1.0
    return float(2.0 ** math.ceil(math.log2(seconds / columns)))


def columns_of(
    per_second: tuple[int, ...], seconds: float, width: int, step: float | None = None
) -> list[float]:
    """Samples per second in each of ``width`` columns of ``step`` seconds
    (``column_seconds``) over the session's ``seconds``, from the counts of whole
    seconds; nothing after its end. A second's samples spread over the part of it the
    session had (its last second has only begun), and a column over the part of it the
    session had: the newest is drawn at its rate, not as a dip."""
    if width <= 0 or seconds <= 0:
        return [0.0] * max(0, width)
    step = column_seconds(seconds, width) if step is None else step
    out = []
    for col in range(width):
        a, b = col * step, min((col + 1) * step, seconds)
        total = 0.0
        for second in range(int(a), min(len(per_second), math.ceil(b))):
            overlap = min(b, second + 1) - max(a, second)
            had = min(1.0, seconds - second)
            if overlap > 0 and had > 0:
                total += per_second[second] * overlap / had
        out.append(total / (b - a) if b > a else 0.0)
    return out


LABEL = 4  # cells of a row's label ("cpu ", "off ") where off-CPU time has its own row


def label_width(data: TimelineData | None) -> int:
    """Cells before the columns: a label where the timeline has an off-CPU row."""
    return LABEL if data is not None and data.off_cpu is not None else 0


def timeline_text(data: TimelineData | None, seconds: float, width: int) -> Text:
    """The rows, as data (nothing in them is markup): the samples on a CPU, the time off
    it (where collected), the marks and what is shown."""
    text = Text(no_wrap=True, end="")
    label = label_width(data)
    columns = width - label
    if columns <= 0 or data is None:
        return text
    step = column_seconds(seconds, columns)
    chosen = _columns(data.between, seconds, step)
    rows = [("cpu ", data.per_second)]
    if data.off_cpu is not None:
        rows.append(("off ", data.off_cpu))
    for name, per_second in rows:
        text.append(name[:label])
        _bars(text, columns_of(per_second, seconds, columns, step), chosen)
        text.append("\n")
    said = f"{seconds:.1f} s"
    if data.between is not None:
        said = f"range {data.between[0]:.1f}-{min(data.between[1], seconds):.1f} s of {said}"
    if data.threads:
        said = f"{data.threads} · {said}"
    row = [" "] * columns
    if len(said) + 1 <= columns:
        row[columns - len(said) :] = said
    for moment, kind in data.marks:  # (over the words where they meet: a mark is a fact)
        if 0 <= moment <= seconds:
            row[min(columns - 1, int(moment / step))] = MARK_CHARS.get(kind, "?")
    text.append(" " * label + "".join(row))
    return text


def _bars(text: Text, values: list[float], chosen: tuple[int, int] | None) -> None:
    """One row of bars from zero, scaled to its highest column (``bar_scale``); the
    range in reverse."""
    top, full = bar_scale(max(values, default=0.0)), len(BARS)
    for col, value in enumerate(values):
        level = 0 if value <= 0 or top <= 0 else min(full, max(1, round(value * full / top)))
        char = BARS[level - 1] if level else " "
        inside = chosen is not None and chosen[0] <= col < chosen[1]
        text.append(char, style="reverse" if inside else "")


def _columns(
    between: tuple[float, float] | None, seconds: float, step: float
) -> tuple[int, int] | None:
    if between is None or seconds <= 0:
        return None
    first = int(between[0] / step)
    return first, max(first + 1, round(min(between[1], seconds) / step))


@dataclass(frozen=True)
class Span:
    """A range of the session in seconds from its start."""

    start: float
    end: float


class Timeline(CellPainter):
    """``timeline_text`` of the data last shown, only its changed cells repainted; a
    press and a release pick a range."""

    class RangeChosen(Message):
        def __init__(self, span: Span) -> None:
            super().__init__()
            self.span = span

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data: TimelineData | None = None
        self.seconds = 0.0
        self._pressed: float | None = None

    def show(self, data: TimelineData, seconds: float) -> None:
        if (data, seconds) != (self.data, self.seconds):
            self.data, self.seconds = data, seconds
            rows = 3 if data.off_cpu is not None else 2
            if self.styles.height is None or self.styles.height.value != rows:
                self.styles.height = rows  # (an off-CPU row where off-CPU time was collected)
            self.paint()

    def draw(self, width: int, height: int) -> Text:
        return timeline_text(self.data, self.seconds, width)

    def step(self) -> float:
        """The seconds a column spans at the present width (``column_seconds``)."""
        return column_seconds(self.seconds, self.size.width - label_width(self.data))

    def column_of(self, moment: float) -> int:
        """The cell (from the widget's left) of the column ``moment`` seconds in."""
        return label_width(self.data) + int(moment / self.step())

    def _moment(self, x: int) -> float:
        return max(0.0, min(self.seconds, (x - label_width(self.data)) * self.step()))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._pressed = self._moment(event.x)
        self.capture_mouse()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        self.release_mouse()
        if self._pressed is None or self.seconds <= 0:
            return
        a, b = sorted((self._pressed, self._moment(event.x + 1)))
        self._pressed = None
        if b - a < self.step():
            b = min(self.seconds, a + self.step())
        self.post_message(self.RangeChosen(Span(a, b)))
