"""Text for the terminal: names and paths from a process or a capture, made harmless.

A symbol, a path or a thread name is data, and a crafted one (a hostile
capture, a library named by an attacker) may hold an escape sequence that
recolours or rewrites the terminal, or a line break that forges a table row.
Every text output of the commands goes through ``printable`` (livesym.printable)
line by line, so no field can be forgotten; JSON outputs need nothing (JSON escapes).
"""

from __future__ import annotations

from collections.abc import Iterable

from livesym.printable import printable

TEXT_ROWS = 20  # functions a text table lists without --limit: a screenful (JSON lists all)


def text_lines(lines: Iterable[str]) -> str:
    """Lines as terminal text: each made printable, each ended by a newline."""
    return "".join(printable(line) + "\n" for line in lines)


def note_line(note: str) -> str:
    """A capture's non-fatal problem, as ``report`` lists it under its table."""
    return f"note: {note}"
