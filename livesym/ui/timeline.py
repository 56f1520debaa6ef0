"""The timeline: samples over the whole session, two rows at any width, live and in a
replay. The first row draws the samples in each column's seconds as bars from zero (the
range the panes show, where one is chosen, in reverse); the second marks where the maps
changed (``M``), where a process was first seen (``+``), and says the session's length
and the range chosen.

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

from livesym.records import MARK_MAPS, MARK_PROCESS

if TYPE_CHECKING:
    from livesym.engine.snapshot import TimelineData

BARS = "▁▂▃▄▅▆▇█"
MARK_CHARS = {MARK_MAPS: "M", MARK_PROCESS: "+"}


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


def timeline_text(data: TimelineData | None, seconds: float, width: int) -> Text:
    """The two rows, as data (nothing in them is markup)."""
    text = Text(no_wrap=True, end="")
    if width <= 0 or data is None:
        return text
    values = columns_of(data.per_second, seconds, width)
    top = max(values, default=0.0)
    chosen = _columns(data.between, seconds, width)
    for col, value in enumerate(values):
        level = 0 if value <= 0 or top <= 0 else max(1, round(value * len(BARS) / top))
        char = BARS[level - 1] if level else " "
        inside = chosen is not None and chosen[0] <= col < chosen[1]
        text.append(char, style="reverse" if inside else "")
    text.append("\n")
    said = f"{seconds:.1f} s"
    if data.between is not None:
        said = f"range {data.between[0]:.1f}-{min(data.between[1], seconds):.1f} s of {said}"
    row = [" "] * width
    if len(said) + 1 <= width:
        row[width - len(said) :] = said
    for moment, kind in data.marks:  # (over the words where they meet: a mark is a fact)
        if 0 <= moment <= seconds:
            row[min(width - 1, int(moment / seconds * width))] = MARK_CHARS.get(kind, "?")
    text.append("".join(row))
    return text


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
            self.refresh()

    def render(self) -> Text:
        return timeline_text(self.data, self.seconds, self.size.width)

    def _moment(self, x: int) -> float:
        width = max(1, self.size.width)
        return max(0.0, min(self.seconds, x / width * self.seconds))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._pressed = self._moment(event.x)
        self.capture_mouse()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        self.release_mouse()
        if self._pressed is None or self.seconds <= 0:
            return
        a, b = sorted((self._pressed, self._moment(event.x + 1)))
        self._pressed = None
        if b - a < self.seconds / max(1, self.size.width):
            b = min(self.seconds, a + self.seconds / max(1, self.size.width))
        self.post_message(self.RangeChosen(Span(a, b)))
