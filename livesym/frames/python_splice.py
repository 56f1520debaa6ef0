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
  locks, ``gc``, ``sys``, ``unicode``, ``thread``, ``stringio``), and the GIL's waits
  (``take_gil``, ``PyEval_RestoreThread``): with off-CPU time, a thread waiting for the
  GIL is told from one waiting on a lock of its own;
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

import re
from collections.abc import Sequence
from enum import Enum
from typing import TypeVar

from livesym.records import PYTHON_MOVED, FrameRecord, StackCopy
from livesym.sampling.base import PythonCheck
from livesym.target.cpython_files import is_interpreter
from livesym.unwind.walk import Registers

__all__ = ["InstructionPointer", "Role", "checked", "role_of", "splice"]

T = TypeVar("T")

_TOKENS = re.compile(r"[^_.]+")
_EVAL = {"EvalFrameDefault", "EvalFrameEx"}
# py-spy's list: interpreter functions worth showing (get_merge_strategy).
_KEPT_PREFIXES = frozenset(
    {"time", "sys", "gc", "os", "unicode", "thread", "stringio", "sre", "PyGilState",
     "PyThread", "lock"}
)  # fmt: skip
# Where a thread waits for the GIL (not py-spy's: its stacks are on-CPU time).
_KEPT_NAMES = frozenset({"take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread"})


class Role(Enum):
    """What a native frame is to the merge."""

    EVAL = "eval"  # an evaluation loop frame: Python frames take its place
    INTERPRETER = "interpreter"  # the interpreter's machinery: left out
    OTHER = "other"  # kept where it is


def role_of(symbol: str | None, path: str | None) -> Role:
    """The role of a native frame named ``symbol`` in the object at ``path``."""
    if not is_interpreter(path):
        return Role.OTHER
    if symbol in _KEPT_NAMES:
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


# A frame above the leaf has at most this many registers recovered (x86-64's
# callee-saved, sp and the return address); the leaf has all of them.
CALLEE_SAVED_MAX = 8
PLACE_AGREEMENT = 0.85  # the share of a site's matching samples its places matched in
SLOTS = 96  # words of a loop's C frame, from its stack pointer, a place may be in
MAX_SITES = 4096  # call sites of the loop whose places are kept

Place = tuple[str, int]  # ("register", DWARF number) or ("slot", offset from sp)


class InstructionPointer:
    """Where CPython's evaluation loop keeps its instruction pointer (``next_instr``)
    while it calls out, learnt for each of its call sites from the samples: in a
    callee-saved register (r15 at most of Debian's python3.11's, built with LTO; in
    memory at others) or in a slot of its C frame (pyenv's build; its r14 holds it
    at three calls in four), the compiler's choice being fixed at each site. The
    places of a site are those that pointed into the running function's bytecode in
    nearly every sample there that any did; at a site not known yet, its
    callee-saved registers. In the leaf, every register counts (the loop runs there: its
    registers are current; a slot holds what was spilled at its last call)."""

    def __init__(self, pc: int = 16, sp: int = 7) -> None:
        # The DWARF numbers of the registers holding a frame's address and its stack
        # pointer (x86-64's by default).
        self._pc, self._sp = pc, sp
        self._sites: dict[int, dict[Place, int]] = {}  # site -> its places' matches
        self._checks: dict[int, int] = {}  # site -> samples where any place matched

    def learn(self, registers: Registers, stack: StackCopy | None, code: tuple[int, int]) -> None:
        site = dict(registers).get(self._pc)
        if site is None or len(registers) > CALLEE_SAVED_MAX:
            return  # a leaf's registers: any may hold anything there
        hits = {p for p, v in self._candidates(registers, stack) if code[0] <= v < code[1]}
        if not hits:
            return
        if len(self._sites) >= MAX_SITES and site not in self._sites:
            self._sites.clear()
            self._checks.clear()
        matches = self._sites.setdefault(site, {})
        for p in hits:
            matches[p] = matches.get(p, 0) + 1
        self._checks[site] = self._checks.get(site, 0) + 1

    def places(self, registers: Registers) -> set[Place] | None:
        """The places learnt for this frame's call site: those that matched in nearly
        every sample there that any did (a read that came too late matches wrongly
        now and then); None where none did yet."""
        site = dict(registers).get(self._pc)
        if site is None or site not in self._sites:
            return None
        least = PLACE_AGREEMENT * self._checks[site]
        return {p for p, n in self._sites[site].items() if n >= least} or None

    def values(self, registers: Registers, stack: StackCopy | None) -> list[int]:
        """The values that may be the loop's instruction pointer in this loop frame."""
        places = self.places(registers)
        if len(registers) > CALLEE_SAVED_MAX or places is None:
            return [v for _, v in registers]
        if all(kind == "register" for kind, _ in places):  # no slot: no need to scan them
            return [v for r, v in registers if ("register", r) in places]
        return [v for p, v in self._candidates(registers, stack) if p in places]

    def _candidates(self, registers: Registers, stack: StackCopy | None) -> list[tuple[Place, int]]:
        """Each place of a loop frame and its value: its registers, its C frame's slots."""
        out: list[tuple[Place, int]] = [(("register", r), v) for r, v in registers]
        sp = dict(registers).get(self._sp) if stack is not None else None
        if stack is None or sp is None:
            return out
        for k in range(SLOTS):
            value = stack.word(sp + 8 * k)
            if value is None:
                break
            out.append((("slot", 8 * k), value))
        return out


def checked(
    python: tuple[FrameRecord, ...],
    check: PythonCheck,
    loops: tuple[tuple[tuple[int, int], ...], ...],
    place: InstructionPointer,
    stack: StackCopy | None = None,
) -> tuple[FrameRecord, ...]:
    """The Python frames livesym read as the sample arrived, as the sample ran them.

    Each evaluation loop frame of the sample (``loops``, innermost first, registers as
    unwinding recovered them) holds the loop's instruction pointer, into the bytecode
    of the innermost Python function it ran then:

    - the read's leaf: the read is the sample's;
    - a function further up the read (there once): it had called on by the read, and
      the frames from it up are the sample's;
    - another function (named from the code objects read before): where the read
      began at the frame this loop ran then (``anchored``, over as many loops as the
      sample has), the function returned and another call from the same caller took
      its frame (pyload's alternating slices): the function on the read's frames from
      the caller up; where the next loop's function is the read's leaf (or, not
      anchored, in the read), the inner loop returned before the read: its function
      on the frames from there up.

    Else the stack had changed by the read, or no loop frame was reached:
    ``PYTHON_MOVED``, counted and shown, never a guess."""
    if not loops or not check.codes:
        return (PYTHON_MOVED,)
    place.learn(loops[0], stack, check.codes[0])
    values = place.values(loops[0], stack)
    depth = _depth_in(check.codes, values)
    if depth is not None:
        return python[depth:]
    inner = next((f for f in map(check.code_at, values) if f is not None), None)
    if inner is None:
        return (PYTHON_MOVED,)
    if check.anchored and check.loops == len(loops):
        return (inner, *python[1:])  # read from the frame the sample's loop ran
    outer = _depth_in(check.codes, place.values(loops[1], stack)) if len(loops) > 1 else None
    if outer is None or (check.anchored and (outer, check.loops) != (0, len(loops) - 1)):
        return (PYTHON_MOVED,)
    return (inner, *python[outer:])


def _depth_in(codes: tuple[tuple[int, int], ...], values: list[int]) -> int | None:
    """Where in the read (leaf first) the function whose bytecode holds one of
    ``values`` is, if it is there once."""
    for depth, (start, end) in enumerate(codes):
        if any(start <= value < end for value in values):
            return depth if codes.count((start, end)) == 1 or depth == 0 else None
    return None
