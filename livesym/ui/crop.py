"""Textual's partial updates, sent from where they start.

A widget may repaint a region of itself (``Widget.refresh(region)``: ``quiet``'s
changed cells). Textual renders those lines again and crops what it sends to the
region's end, but not to its start: it sends from the start of the widget's part of the
line (``ChopsUpdate.render_segments``, "TODO: crop to x extents"; Textual issue #5625).
The newest column of a 100-column timeline is at its right end: the whole row went out
for it every second, and the header's counters took the words before them along.

``install`` replaces that one method with the same loop cropping both ends (the crop a
Textual maintainer suggested in the review of PR #2318, not taken then), only where the
class still has the shape it is written against; elsewhere it leaves Textual as it is,
and livesym sends what Textual sends. Not done with a widget per column instead: the
timeline would be 100 widgets to lay out, and the header's counters move as they grow.
"""

from __future__ import annotations

from typing import Any

_INSTALLED = False


def install() -> bool:
    """Crop partial updates at their start as well; False where Textual's update class
    is not the one this was written for (nothing changed then)."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        from textual import _compositor
        from textual.strip import Strip
    except ImportError:
        return False
    update = getattr(_compositor, "ChopsUpdate", None)
    if update is None or not callable(getattr(update, "render_segments", None)):
        return False
    if not callable(getattr(Strip, "crop", None)):
        return False
    update.render_segments = _render_segments
    _INSTALLED = True
    return True


def _render_segments(self: Any, console: Any) -> str:
    """``ChopsUpdate.render_segments``, each chop cropped to the span at both ends."""
    from rich.control import Control

    sequences: list[str] = []
    append = sequences.append
    move_to = Control.move_to
    chops = self.chops
    chop_ends = self.chop_ends
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items(), strict=False):
            if strip is None or x > x2 or end <= x1:
                continue
            if x2 > x >= x1 and end <= x2:
                append(move_to(x, y).segment.text)
                append(strip.render(console))
                continue
            start = max(x, x1)
            strip = strip.crop(start - x, min(end, x2) - x)
            append(move_to(start, y).segment.text)
            append(strip.render(console))
        if y != last_y:
            append("\n")
    return "".join(sequences)
