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

The same loop writes the styles as a terminal library does, by what changes: Rich
renders every segment as its whole style, its text and a reset (``Style.render``:
``ESC[1;38;2;...m text ESC[0m``), so a run of cells in one style, split into segments
(a number and the space after it, a bar's cells), repeated the style once a segment,
and a move to the next changed cell came after a reset. Here a segment in the style in
force sends its text alone, another style replaces it in one sequence (``ESC[0;...m``),
a cursor move keeps it (it does not change the pen), and the update ends with a reset,
as Textual's own (its other writes assume one). A segment with a link is rendered as
Rich renders it.
"""

from __future__ import annotations

from typing import Any

_INSTALLED = False
TEXTUALS: Any = None  # Textual's own render_segments, once replaced


def install() -> bool:
    """Crop partial updates at their start as well; False where Textual's update class
    is not the one this was written for (nothing changed then)."""
    global _INSTALLED, TEXTUALS
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
    from rich.style import Style

    if not callable(getattr(Style, "_make_ansi_codes", None)):
        return False
    TEXTUALS = update.render_segments
    update.render_segments = _render_segments
    _INSTALLED = True
    return True


def _render_segments(self: Any, console: Any) -> str:
    """``ChopsUpdate.render_segments``, each chop cropped to the span at both ends and
    its styles sent as they change (``_Pen``)."""
    from rich.color import ColorSystem
    from rich.control import Control

    pen = _Pen(console._color_system or ColorSystem.TRUECOLOR)
    move_to = Control.move_to
    chops = self.chops
    chop_ends = self.chop_ends
    for y, x1, x2 in self.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items(), strict=False):
            if strip is None or x > x2 or end <= x1:
                continue
            if not (x2 > x >= x1 and end <= x2):
                start = max(x, x1)
                strip, x = strip.crop(start - x, min(end, x2) - x), start
            pen.raw(move_to(x, y).segment.text)
            for text, style, _ in strip:
                pen.text(text, style)
    return pen.done()


_PLAIN = ("", "39", "49")  # no attribute, the terminal's own colours: after a reset
_PENS_KEPT = 4096  # styles whose codes are kept (a dashboard uses some dozens)


class _Pen:
    """Terminal output that sends a style only where it changes, and then only the part
    that changed: a colour alone where the attributes (bold, reverse...) stay; a reset
    and the whole style where they change."""

    def __init__(self, color_system: Any) -> None:
        self.color_system = color_system
        self.parts: list[str] = []
        self.pen = _PLAIN  # in force: (attributes' codes, foreground's, background's)

    def raw(self, text: str) -> None:
        self.parts.append(text)

    def text(self, text: str, style: Any) -> None:
        if not text:
            return
        if style is not None and style._link:
            self._set(_PLAIN)  # Rich's own rendering assumes no style in force ...
            self.parts.append(style.render(text, color_system=self.color_system))
            return  # ... and leaves none (it ends with a reset)
        self._set(_PLAIN if style is None else self._codes(style))
        self.parts.append(text)

    def _codes(self, style: Any) -> tuple[str, str, str]:
        key = (self.color_system, style)
        codes = _CODES.get(key)
        if codes is None:
            if len(_CODES) >= _PENS_KEPT:
                _CODES.clear()
            system = self.color_system
            fg, bg = style.color, style.bgcolor
            codes = _CODES[key] = (
                style.without_color._make_ansi_codes(system),
                ";".join(fg.downgrade(system).get_ansi_codes(True)) if fg else "39",
                ";".join(bg.downgrade(system).get_ansi_codes(False)) if bg else "49",
            )
        return codes

    def _set(self, pen: tuple[str, str, str]) -> None:
        now = self.pen
        if pen == now:
            return
        attrs, fg, bg = pen
        if attrs != now[0]:  # attributes to turn off: from a reset, all of it
            codes = ["0", attrs] if attrs else ["0"]
            codes += [
                code for code, plain in zip((fg, bg), _PLAIN[1:], strict=True) if code != plain
            ]
        else:
            codes = [code for code, was in zip((fg, bg), now[1:], strict=True) if code != was]
        self.parts.append(f"\x1b[{';'.join(codes)}m")
        self.pen = pen

    def done(self) -> str:
        self._set(_PLAIN)
        return "".join(self.parts)


# The codes of each style in a colour system.
_CODES: dict[tuple[Any, Any], tuple[str, str, str]] = {}
