"""Text for the dashboard's cells: numbers, addresses and names as data.

Names and paths come from the target (symbol tables, /proc): they are never
markup, so everything here returns ``rich.text.Text`` built from plain strings,
and never control characters: each name is made ``printable`` (livesym.printable).
"""

from __future__ import annotations

from rich.text import Text

from livesym.printable import printable
from livesym.records import Frame


def basename(path: str | None) -> str:
    """The last component of a path, or the pseudo-path itself (``[vdso]``)."""
    if not path:
        return "?"
    return printable(path.rpartition("/")[2] or path)


def frame_name(frame: Frame, raw: bool = False) -> str:
    """What a table shows for a function: its demangled label, or with ``raw`` the
    symbol as the object names it (mangled)."""
    if raw and frame.symbol:
        return printable(frame.symbol)
    return printable(frame.label)


def hex_or_dash(value: int | None) -> str:
    return "-" if value is None else f"{value:#x}"


def pct(value: float) -> str:
    return f"{value:.1f}"


def size_bytes(n: int) -> str:
    """A byte count in binary units with one decimal: ``1.5 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float) -> str:
    """Elapsed time as ``12.3 s``, ``4m05s`` or ``1h02m``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def plain(text: str, style: str = "", justify: str | None = None) -> Text:
    """A cell holding ``text`` literally (no markup), on one line, cut with an ellipsis."""
    return Text(
        printable(text),
        style=style,
        justify=justify,  # type: ignore[arg-type]
        no_wrap=True,
        overflow="ellipsis",
        end="",
    )


def number(text: str, style: str = "") -> Text:
    """A right-aligned numeric cell."""
    return plain(text, style, justify="right")
