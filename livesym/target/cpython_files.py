"""Which files are CPython's interpreter, and whether a process runs it: a ``python*``
executable, or a mapped libpython (its abiflags: d, m, u, t). Read by the sampler
choice (``auto`` takes py-spy for a Python program) and by the splice of Python frames
into native stacks (the interpreter's own frames give way to them)."""

from __future__ import annotations

import os
import re

PYTHON_EXE = re.compile(r"^python(\d+(\.\d+)?)?[dmut]*$")
LIBPYTHON = re.compile(r"/libpython\d+(\.\d+)?[dmut]*\.so")


def is_interpreter(path: str | None) -> bool:
    """Whether the object at ``path`` is the interpreter: python3.x or libpython."""
    if not path:
        return False
    return bool(PYTHON_EXE.match(os.path.basename(path)) or LIBPYTHON.search(path))


def runs_cpython(pid: int) -> bool:
    """Whether ``pid`` runs CPython: a ``python*`` executable or a mapped libpython."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        exe = ""
    if is_interpreter(exe):
        return True
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any(LIBPYTHON.search(line) for line in f)
    except OSError:
        return False
