"""Mixed stacks: a thread's Python frames put in place of the interpreter's native ones.

A perf sample of a Python program, unwound, is the interpreter's C stack: the hot C
function of an extension at the leaf, then ``_PyEval_EvalFrameDefault`` once for each
time C code called into Python, between the interpreter's calling machinery
(``_PyObject_MakeTpCall``, ``cfunction_vectorcall_O``, ...), down to ``main`` or the
thread's start. py-spy read the same thread's Python frames at that moment
(``livesym.sampling.mixed``). They are merged as py-spy merges its own ``--native``
stacks (its ``merge_native_stack``), so the two read alike:

- each evaluation loop frame (``PyEval_EvalFrameDefault``/``EvalFrameEx``, ``.cold``
  parts too) stands for Python frames, which take its place;
- the interpreter's other frames (its executable or libpython) are left out, but for
  those py-spy keeps because they say what the program waits for or works at
  (``time_sleep``, ``os_*``, ``sre_*``, the GIL's ``PyThread_*``/``PyGilState_*``,
  locks, ``gc``, ``sys``, ``unicode``, ``thread``, ``stringio``);
- every other native frame stays where it is: the C extension at the leaf, and the
  thread's roots in libc.

Python 3.11 and later evaluate a Python-to-Python call inside the same loop frame, so
one loop frame may stand for several Python frames; py-spy tells them apart by a flag
(``is_entry``) its chrometrace output does not carry. The innermost loop frames take
one Python frame each and the outermost the rest (at least one). Where only the interpreter's own
frames lie between loop frames (most stacks) the merged stack is the same either way;
a C extension calling back into Python (a ctypes callback, a Cython module) is shown
with one Python frame above it.

Python frames py-spy did not see (``PYTHON_UNREAD``) stand at the outermost loop frame;
a stack whose unwinding ended before any loop frame gets the Python frames after its
native ones (py-spy's rule too), so nothing is lost.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from enum import Enum
from typing import TypeVar

from livesym.sampling.pyspy_parse import LIBPYTHON, PYTHON_EXE

__all__ = ["Role", "role_of", "splice"]

T = TypeVar("T")

_TOKENS = re.compile(r"[^_.]+")
_EVAL = {"EvalFrameDefault", "EvalFrameEx"}
# py-spy's list: interpreter functions worth showing (get_merge_strategy).
_KEPT_PREFIXES = frozenset(
    {"time", "sys", "gc", "os", "unicode", "thread", "stringio", "sre", "PyGilState",
     "PyThread", "lock"}
)  # fmt: skip


class Role(Enum):
    """What a native frame is to the merge."""

    EVAL = "eval"  # an evaluation loop frame: Python frames take its place
    INTERPRETER = "interpreter"  # the interpreter's machinery: left out
    OTHER = "other"  # kept where it is


def is_interpreter(path: str | None) -> bool:
    """Whether the object at ``path`` is the interpreter: python3.x or libpython."""
    if not path:
        return False
    return bool(PYTHON_EXE.match(os.path.basename(path)) or LIBPYTHON.search(path))


def role_of(symbol: str | None, path: str | None) -> Role:
    """The role of a native frame named ``symbol`` in the object at ``path``."""
    if not is_interpreter(path):
        return Role.OTHER
    tokens = _TOKENS.findall(symbol or "")
    if not tokens:
        return Role.INTERPRETER
    if tokens[0] == "PyEval" and len(tokens) > 1 and tokens[1] in _EVAL:
        return Role.EVAL
    return Role.OTHER if tokens[0] in _KEPT_PREFIXES else Role.INTERPRETER


def splice(items: Sequence[T], roles: Sequence[Role], python: Sequence[T], unread: T) -> list[T]:
    """``items`` (leaf first, native; ``roles`` says what each is) with ``python`` (leaf
    first) in place of the evaluation loop frames, the interpreter's others left out;
    ``unread`` stands for Python frames where there are none to put."""
    loops = [i for i, role in enumerate(roles) if role is Role.EVAL]
    if not loops:
        # A thread that runs no Python (a C library's own) needs none; a stack cut short
        # before its loop frames gets them after its native ones.
        return [*items, *(p for p in python if p != unread)]
    # A loop frame with no Python frame seen: the stack py-spy saw is not this one's.
    left = list(python) or [unread]
    out: list[T] = []
    for i, (item, role) in enumerate(zip(items, roles, strict=True)):
        if role is Role.EVAL:
            # The outermost keeps at least one: inner loops take one while two are left.
            take = len(left) if i == loops[-1] else min(1, len(left) - 1)
            out += left[:take]
            del left[:take]
        elif role is Role.OTHER:
            out.append(item)
    return out
