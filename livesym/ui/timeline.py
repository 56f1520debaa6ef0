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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from livesym.records import MARK_EXITED, MARK_LOST, MARK_MAPS, MARK_PROCESS

if TYPE_CHECKING:
    from livesym.engine.snapshot import TimelineData

BARS = "▁▂▃▄▅▆▇█"
MARK_CHARS = {MARK_MAPS: "M", MARK_PROCESS: "+", MARK_EXITED: "-", MARK_LOST: "!"}


def columns_of(per_second: tuple[int, ...], seconds: float, width: int) -> list[float]:
    """Samples per second in each of ``width`` columns spanning ``seconds``, from the
    counts of whole seconds (a second's samples spread over the part of it the session
    had: its last second has only begun)."""
    if width <= 0 or seconds <= 0:
        return [0.0] * max(0, width)
    step = seconds / width
    out = []
    for col in range(width):
        a, b = col * step, (col + 1) * step
        total = 0.0
        for second in range(int(a), min(len(per_second), int(b) + 1)):
            overlap = min(b, second + 1) - max(a, second)
            had = min(1.0, seconds - second)
            if overlap > 0 and had > 0:
                total += per_second[second] * overlap / had
        out.append(total / step)
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
    chosen = _columns(data.between, seconds, columns)
    rows = [("cpu ", data.per_second)]
    if data.off_cpu is not None:
        rows.append(("off ", data.off_cpu))
    for name, per_second in rows:
        text.append(name[:label])
        _bars(text, columns_of(per_second, seconds, columns), chosen)
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
            row[min(columns - 1, int(moment / seconds * columns))] = MARK_CHARS.get(kind, "?")
    text.append(" " * label + "".join(row))
    return text


def _bars(text: Text, values: list[float], chosen: tuple[int, int] | None) -> None:
    """One row of bars from zero, scaled to its highest column; the range in reverse."""
    top = max(values, default=0.0)
    for col, value in enumerate(values):
        level = 0 if value <= 0 or top <= 0 else max(1, round(value * len(BARS) / top))
        char = BARS[level - 1] if level else " "
        inside = chosen is not None and chosen[0] <= col < chosen[1]
        text.append(char, style="reverse" if inside else "")


def _columns(
    between: tuple[float, float] | None, seconds: float, width: int
) -> tuple[int, int] | None:
    if between is None or seconds <= 0:
        return None
    first = int(between[0] / seconds * width)
    return first, max(first + 1, round(between[1] / seconds * width))


@dataclass(frozen=True)
class Span:
    """A range of the session in seconds from its start."""

    start: float
    end: float


class Timeline(Widget):
    """``timeline_text`` of the data last shown; a press and a release pick a range."""

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
            self.refresh()

    def render(self) -> Text:
        return timeline_text(self.data, self.seconds, self.size.width)

    def _moment(self, x: int) -> float:
        label = label_width(self.data)
        width = max(1, self.size.width - label)
        return max(0.0, min(self.seconds, (x - label) / width * self.seconds))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._pressed = self._moment(event.x)
        self.capture_mouse()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        self.release_mouse()
        if self._pressed is None or self.seconds <= 0:
            return
        a, b = sorted((self._pressed, self._moment(event.x + 1)))
        self._pressed = None
        cell = self.seconds / max(1, self.size.width - label_width(self.data))
        if b - a < cell:
            b = min(self.seconds, a + cell)
        self.post_message(self.RangeChosen(Span(a, b)))
