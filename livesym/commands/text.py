"""Text for the terminal: names and paths from a process or a capture, made harmless.

A symbol, a path or a thread name is data, and a crafted one (a hostile
capture, a library named by an attacker) may hold an escape sequence that
recolours or rewrites the terminal, or a line break that forges a table row.
Every text output of the commands goes through ``printable`` line by line, so
no field can be forgotten; JSON outputs need nothing (JSON escapes).
"""

from __future__ import annotations

from collections.abc import Iterable

TEXT_ROWS = 20  # functions a text table lists without --limit: a screenful (JSON lists all)


def printable(text: str) -> str:
    """``text`` with every character Python does not call printable (controls, line
    breaks, bidi overrides, lone surrogates) written as its Python escape:
    ESC as ``\\x1b``, a newline as ``\\n``, U+202E as ``\\u202e``."""
    if text.isprintable():
        return text  # the usual case, one C call
    # repr() of a single non-printable character is exactly its escape, in quotes.
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def text_lines(lines: Iterable[str]) -> str:
    """Lines as terminal text: each made printable, each ended by a newline."""
    return "".join(printable(line) + "\n" for line in lines)


def note_line(note: str) -> str:
    """A capture's non-fatal problem, as ``report`` lists it under its table."""
    return f"note: {note}"
