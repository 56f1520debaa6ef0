"""Names and paths made harmless for a terminal, on the command line and in the dashboard.

A symbol, a path, a command line or a thread name is data, and a crafted one (a
hostile capture, a library or a thread named by an attacker) may hold an escape
sequence that recolours or rewrites the terminal, or a line break that forges a
table row or pushes the dashboard's header down. Rich keeps ESC and line breaks
in a ``Text``, and the flame graph writes segments as they are, so every name
shown goes through ``printable`` first. JSON outputs need nothing (JSON escapes).
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every character Python does not call printable (controls, line
    breaks, bidi overrides, lone surrogates) written as its Python escape:
    ESC as ``\\x1b``, a newline as ``\\n``, U+202E as ``\\u202e``."""
    if text.isprintable():
        return text  # the usual case, one C call
    # repr() of a single non-printable character is exactly its escape, in quotes.
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
