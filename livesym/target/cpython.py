"""A CPython interpreter's Python stacks, read from its memory at the moment livesym
asks: what py-spy reads, without py-spy.

Why livesym reads them itself (issue 27): mixed stacks pair each perf sample with the
Python frames of its thread *at that sample*. py-spy, run beside perf, writes each
thread's stack only when it sees it change, at its random intervals: a phase change
reaches the join about one interval late (7-8 % of the samples of a program switching
phases every 12-42 ms went to the wrong Python function). Read here, as perf's sample
arrives (``livesym.sampling.perf_event`` wakes at each sample for this), the stack is a
fraction of a millisecond old, and the engine checks it against the sample itself
(``livesym.frames.python_splice.checked``: the interpreter's instruction pointer, in a
register or a C-frame slot of the sampled evaluation loop frame, points into the
bytecode of the function it ran).

What is read (CPython 3.11; its ``Include/internal`` headers give the offsets, which
``tests/unit/test_cpython_frames.py`` checks against python3.11-dev's): ``_PyRuntime``
(a symbol of python3.11 or libpython3.11) -> the first interpreter -> its threads,
each with its OS thread id -> the innermost ``_PyCFrame`` -> its current
``_PyInterpreterFrame`` -> ``previous`` ... ; each frame's code object (name, file,
first line, line table) and last instruction, which gives the line. Other versions
are not read here (``open_interpreter`` says why); the mixed sampler then joins
py-spy's frames as before.

The target's memory is hostile and changing under the read (the target is never
stopped): every pointer is checked for null and alignment, depths and sizes are
bounded, and a read that fails or finds nonsense gives ``None`` for that sample,
never an exception.

Written by hand: py-spy is a program, not a library; no maintained Python library
reads another process's interpreter frames.
"""

from __future__ import annotations

import os
import re
import struct
import time
from bisect import bisect_right, insort
from dataclasses import dataclass

from livesym.addr.convert import derive_base
from livesym.addr.maps import MapsSnapshot
from livesym.elf.image import load_image
from livesym.errors import LivesymError
from livesym.records import Reason, StackCopy, Unresolved

MAX_DEPTH = 1024  # Python frames read for one sample (CPython's default limit is 1000)
MAX_THREADS = 4096  # thread states walked when looking a thread up
MAX_NAME = 1024  # characters of a function or file name
MAX_LINETABLE = 64 << 10  # bytes of one code object's line table (a 10,000-line function: ~30 KiB)
MAX_CODES = 1 << 16  # code objects whose names are kept
RESCAN = 0.5  # seconds between walks of the thread states for a thread not found
MAX_NEEDED = 256  # DT_NEEDED entries of an executable looked at for its libpython

# What a reader needs of the interpreter's exported symbols.
SYMBOLS = (
    "_PyRuntime",
    "_PyEval_EvalFrameDefault",
    "PyCode_Type",
    "PyUnicode_Type",
    "PyBytes_Type",
)
_INTERPRETER = re.compile(r"(?:^|/)(?:python3\.11|libpython3\.11[^/]*\.so[^/]*)$")


@dataclass(frozen=True, slots=True)
class Layout:
    """Offsets into CPython's structures (x86-64 and other LP64 machines)."""

    runtime_interpreters_head: int
    interp_threads_head: int
    tstate_next: int
    tstate_cframe: int
    tstate_native_thread_id: int
    cframe_current_frame: int
    cframe_previous: int
    frame_code: int
    frame_previous: int
    frame_prev_instr: int
    frame_is_entry: int
    frame_size: int  # bytes of a frame read at once
    code_size: int  # ob_size: code units of bytecode
    code_firstlineno: int
    code_filename: int
    code_name: int
    code_qualname: int
    code_linetable: int
    code_bytecode: int  # co_code_adaptive: the bytecode, inside the code object
    code_header: int  # bytes of a code object read at once


PY311 = Layout(
    runtime_interpreters_head=40, interp_threads_head=16, tstate_next=8, tstate_cframe=56,
    tstate_native_thread_id=160, cframe_current_frame=8, cframe_previous=16,
    frame_code=32, frame_previous=48, frame_prev_instr=56, frame_is_entry=68, frame_size=72,
    code_size=16, code_firstlineno=72, code_filename=112, code_name=120, code_qualname=128,
    code_linetable=136,
    code_bytecode=184, code_header=144,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PyCode:
    """What names a code object: its function, file and first line."""

    name: str
    filename: str
    firstlineno: int


@dataclass(frozen=True, slots=True)
class PythonRead:
    """A thread's Python stack as read: (code, line) leaf first, with the run-time
    range of each one's bytecode (``codes``: the interpreter's instruction pointer
    lies in it while it runs that function)."""

    frames: tuple[tuple[PyCode, int | None], ...]
    codes: tuple[tuple[int, int], ...]
    # Read from the frame the sample's innermost running loop ran then (``stack``'s
    # ``copy``): its leaf is that frame as it is now, which another call may have
    # taken since.
    anchored: bool = False
    loops: int = 0  # evaluation loops the frames read run in
    failed: bool = False  # a read failed or found nonsense (the stack changed under it)


FAILED = PythonRead((), (), failed=True)


@dataclass(frozen=True, slots=True)
class Types:
    """Run-time addresses of the type objects a read checks what it found against:
    memory that is not a code object (a str, a bytes) is never read as one."""

    code: int
    unicode: int
    bytes: int


class CPython:
    """One CPython 3.11 process's interpreter, read through /proc/PID/mem."""

    def __init__(
        self,
        pid: int,
        runtime: int,
        layout: Layout,
        eval_range: tuple[int, int],
        types: Types,
    ) -> None:
        self.pid = pid
        self.runtime = runtime
        self.layout = layout
        self.eval_range = eval_range  # run-time [start, end) of _PyEval_EvalFrameDefault
        self.types = types
        self._fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        self._tstates: dict[int, int] = {}  # OS thread id -> its PyThreadState
        self._codes: dict[tuple[int, int, int, int], tuple[PyCode, bytes]] = {}
        self._lines: dict[tuple[PyCode, int], int | None] = {}
        self._missed: dict[int, float] = {}  # threads not found, when last looked for
        # Every code object read, by its bytecode's range: what an instruction pointer
        # found in a sample names (``code_at``, from the engine's thread: replaced
        # whole when a code object is added, never changed in place).
        self._ranges: tuple[list[int], dict[int, tuple[int, PyCode, bytes]]] = ([], {})

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _read(self, address: int, size: int) -> bytes | None:
        if address <= 0 or address >= 1 << 63:
            return None
        try:
            data = os.pread(self._fd, size, address)
        except OSError:
            return None
        return data if len(data) == size else None

    def _pointer(self, address: int) -> int | None:
        data = self._read(address, 8)
        if data is None:
            return None
        value = int.from_bytes(data, "little")
        return value if value and not value & 7 else None

    def stack(self, tid: int, copy: StackCopy | None = None) -> PythonRead | None:
        """The Python stack thread ``tid`` runs now; an empty one where it runs no
        Python code; None for a thread Python does not know. ``FAILED`` where the read
        failed, or caught the stack changing (read once more first; with a copy, then
        as the stack runs now, ``anchored`` False).

        With ``copy``, the copy of the thread's C stack a sample took: the stack is
        read from the frame its innermost evaluation loop ran *then* (its _PyCFrame's
        ``current_frame``, on the C stack, as the copy holds it), not the one it runs
        now: frames called since are left out, and a frame that returned since is
        still read (a popped frame's memory keeps its function and caller until the
        next call takes it; the engine checks which, ``PythonRead.anchored``)."""
        tstate = self._tstates.get(tid)
        if tstate is None:
            # A thread Python does not know (a C library's own) is sampled as often as
            # any: the thread states are walked again for it twice a second at most.
            now = time.monotonic()
            if now - self._missed.get(tid, -RESCAN) < RESCAN:
                return None
            if len(self._missed) >= MAX_THREADS:
                self._missed.clear()
            self._missed[tid] = now
            self._find_threads()
            tstate = self._tstates.get(tid)
            if tstate is None:
                return None
        read = self._stack(tstate, copy)
        if read is None:  # its thread state went away: look again next time
            self._tstates.pop(tid, None)
            return None
        if read.failed:
            read = self._stack(tstate, copy) or FAILED
        if read.failed and copy is not None:
            # The frame the sample's loop ran was taken by another call since, and its
            # code is being written (beside a busy core, 2-4 % of pyload's samples): the
            # stack as it runs now, which the engine checks against the sample.
            read = self._stack(tstate, None) or FAILED
        return read

    def _stack(self, tstate: int, copy: StackCopy | None) -> PythonRead | None:
        lay = self.layout
        cframe = self._pointer(tstate + lay.tstate_cframe)
        if cframe is None:
            return None
        # Each evaluation loop running pushes a _PyCFrame and marks its first Python
        # frame an entry: as many of one as of the other, or the read was torn (a
        # generator resumed, a loop returned, while it was read).
        cframes: list[int] = []  # the loops' _PyCFrames, innermost first; the root last
        outer: int | None = cframe
        while outer is not None and len(cframes) <= MAX_DEPTH:
            cframes.append(outer)
            outer = self._pointer(outer + lay.cframe_previous)
        frame, anchored = self._pointer(cframe + lay.cframe_current_frame), False
        if copy is not None:
            for k, at in enumerate(cframes[:-1]):
                then = copy.word(at + lay.cframe_current_frame)
                # The innermost loop that ran at the sample: in the copy, and linked to
                # its outer one there too. A loop entered since (C code calling back
                # into Python) may sit where the sample's C frames were: the copy holds
                # their data at its place, not a _PyCFrame.
                if then is not None and copy.word(at + lay.cframe_previous) == cframes[k + 1]:
                    frame, anchored, cframes = (then or None), True, cframes[k:]
                    break
        frames: list[tuple[PyCode, int | None]] = []
        codes: list[tuple[int, int]] = []
        addresses: list[int] = []
        entries = 0
        while frame is not None and len(frames) < MAX_DEPTH:
            addresses.append(frame)
            raw = self._read(frame, lay.frame_size)
            if raw is None:
                return FAILED
            entries += raw[lay.frame_is_entry] & 1
            code, previous, prev_instr = struct.unpack_from(
                "<Q8xQQ", raw, lay.frame_code
            )  # f_code, (frame_obj), previous, prev_instr
            found = self._code(code)
            if found is None:
                return FAILED
            info, linetable, start, end = found
            codes.append((start, end))
            frames.append((info, self._line_of(info, linetable, prev_instr - start)))
            frame = previous if previous and not previous & 7 else None
        if entries != len(cframes) - 1:
            return FAILED
        return PythonRead(tuple(frames), tuple(codes), anchored, len(cframes) - 1)

    def _code(self, address: int) -> tuple[PyCode, bytes, int, int] | None:
        """A code object: what names it, its line table, and its bytecode's range."""
        lay = self.layout
        raw = self._object(address, lay.code_header, self.types.code)
        if raw is None:
            return None
        size = struct.unpack_from("<q", raw, lay.code_size)[0]
        first = struct.unpack_from("<i", raw, lay.code_firstlineno)[0]
        # The qualified name, as py-spy shows 3.11's functions (``Thread._bootstrap``).
        filename, name, linetable = (
            int.from_bytes(raw[at : at + 8], "little")
            for at in (lay.code_filename, lay.code_qualname, lay.code_linetable)
        )
        if not 0 < size < 1 << 24:
            return None
        start = address + lay.code_bytecode
        key = (address, name, filename, first)
        known = self._codes.get(key)
        if known is None:
            info = PyCode(self._string(name) or "?", self._string(filename) or "?", first)
            table = self._bytes(linetable) or b""
            if len(self._codes) >= MAX_CODES:
                self._codes.clear()
            known = self._codes[key] = (info, table)
        end = start + 2 * size
        starts, ranges = self._ranges
        if ranges.get(start, (0,))[0] != end:
            full = len(ranges) >= MAX_CODES
            starts, ranges = ([], {}) if full else (list(starts), dict(ranges))
            if start not in ranges:
                insort(starts, start)
            ranges[start] = (end, known[0], known[1])
            self._ranges = (starts, ranges)
        return known[0], known[1], start, end

    def _line_of(self, info: PyCode, table: bytes, offset: int) -> int | None:
        key = (info, offset)
        found = self._lines.get(key, -1)
        if found == -1:
            if len(self._lines) >= MAX_CODES:
                self._lines.clear()
            found = self._lines[key] = _line(table, info.firstlineno, offset)
        return found

    def code_at(self, address: int) -> tuple[PyCode, int | None] | None:
        """The function whose bytecode holds ``address`` (an instruction pointer), and
        the line there, among the code objects read so far; None if none holds it."""
        starts, ranges = self._ranges
        i = bisect_right(starts, address) - 1
        if i < 0:
            return None
        start = starts[i]
        end, info, table = ranges[start]
        if address >= end:
            return None
        return info, _line(table, info.firstlineno, address - start - 2)

    def _object(self, address: int, size: int, kind: int) -> bytes | None:
        """The first ``size`` bytes of the object at ``address``, where it is one of the
        type at ``kind`` (its ob_type, at 8); None where it is not, or cannot be read."""
        if not address or address & 7:
            return None
        head = self._read(address, size)
        if head is None or int.from_bytes(head[8:16], "little") != kind:
            return None
        return head

    def _string(self, address: int) -> str | None:
        """A compact str object's text (the names CPython makes are)."""
        head = self._object(address, 48, self.types.unicode)
        if head is None:
            return None
        length = struct.unpack_from("<q", head, 16)[0]
        state = struct.unpack_from("<I", head, 32)[0]
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or not 0 <= length <= MAX_NAME or kind not in (1, 2, 4):
            return None
        data = self._read(address + (48 if ascii_ else 72), length * kind)
        if data is None:
            return None
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return data.decode(codec, "replace")

    def _bytes(self, address: int) -> bytes | None:
        head = self._object(address, 32, self.types.bytes)
        if head is None:
            return None
        size = struct.unpack_from("<q", head, 16)[0]
        if not 0 <= size <= MAX_LINETABLE:
            return None
        return self._read(address + 32, size) if size else b""

    def _find_threads(self) -> None:
        """Every thread state of the first interpreter, by OS thread id."""
        lay = self.layout
        interp = self._pointer(self.runtime + lay.runtime_interpreters_head)
        tstate = self._pointer(interp + lay.interp_threads_head) if interp else None
        found: dict[int, int] = {}
        for _ in range(MAX_THREADS):  # a count, not the found ones: the list may loop
            if tstate is None:
                break
            raw = self._read(tstate + lay.tstate_native_thread_id, 8)
            if raw is None:
                break
            found[int.from_bytes(raw, "little")] = tstate
            tstate = self._pointer(tstate + lay.tstate_next)
        self._tstates = found


def _line(table: bytes, first: int, offset: int) -> int | None:
    """The line of the instruction at byte ``offset`` of the bytecode, from a 3.11
    location table (Objects/locations.md): entries of (code, length in code units),
    each a line delta and columns by its code."""
    target = offset // 2  # the code unit
    line, unit, i, n = first, 0, 0, len(table)
    while i < n:
        head = table[i]
        i += 1
        code, length = (head >> 3) & 15, (head & 7) + 1
        if code == 15:  # no location
            delta, known = 0, False
        elif code == 14:  # long form: line delta, end line delta, column, end column
            delta, i = _svarint(table, i)
            for _ in range(3):
                _, i = _varint(table, i)
            known = True
        elif code == 13:  # no column
            delta, i = _svarint(table, i)
            known = True
        elif code >= 10:  # one line: delta code - 10, two bytes of columns
            delta, i, known = code - 10, i + 2, True
        else:  # short form: same line, one byte of columns
            delta, i, known = 0, i + 1, True
        line += delta
        if unit <= target < unit + length:
            return line if known else None
        unit += length
    return None


def _varint(table: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(table) and shift < 36:
        b = table[i]
        i += 1
        value |= (b & 63) << shift
        shift += 6
        if not b & 64:
            break
    return value, i


def _svarint(table: bytes, i: int) -> tuple[int, int]:
    value, i = _varint(table, i)
    return (-(value >> 1) if value & 1 else value >> 1), i


def open_interpreter(pid: int, maps: MapsSnapshot, root: str) -> CPython | Unresolved:
    """The CPython 3.11 interpreter of process ``pid`` (its maps ``maps``, its files
    under ``root``), or why livesym does not read its stacks itself. The interpreter
    is the executable (python3.11) or, built shared, libpython3.11."""
    paths = _interpreter_paths(maps)
    if not paths:
        return Unresolved(Reason.NO_SYMBOLS, "no CPython 3.11 interpreter is mapped")
    why = Unresolved(Reason.NO_SYMBOLS, f"{paths[0]} exports no _PyRuntime")
    for shown in paths[:4]:
        found = _interpreter_in(pid, maps, root, shown)
        if isinstance(found, CPython):
            return found
        why = found if found.reason is not Reason.NO_SYMBOLS else why
    return why


def interpreter_to_come(maps: MapsSnapshot, root: str) -> bool:
    """Whether a process stopped before its first instruction (a command livesym
    started) will have a CPython 3.11 interpreter to read once it runs: python3.11 is
    mapped, and exports the reader's symbols itself (its thread state comes as Python
    sets itself up) or needs a libpython3.11 that the loader has not mapped yet."""
    for shown in _interpreter_paths(maps)[:4]:
        path = root + shown if root else shown
        try:
            if len(_dynamic_symbols(path, SYMBOLS)) == len(SYMBOLS) or _needs_libpython(path):
                return True
        except OSError:
            continue
    return False


def _interpreter_paths(maps: MapsSnapshot) -> list[str]:
    return list(
        dict.fromkeys(e.path for e in maps.entries if e.path and _INTERPRETER.search(e.path))
    )


def _needs_libpython(path: str) -> bool:
    """Whether the file's DT_NEEDED entries (MAX_NEEDED at most) name a libpython3.11."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        try:
            section = ELFFile(f).get_section_by_name(".dynamic")
            if not isinstance(section, DynamicSection):
                return False
            for n, tag in enumerate(section.iter_tags("DT_NEEDED")):
                if n >= MAX_NEEDED:
                    break
                if _INTERPRETER.search(str(getattr(tag, "needed", ""))):
                    return True
        except (ELFError, ValueError, KeyError, struct.error, UnicodeDecodeError):
            return False
    return False


def _interpreter_in(pid: int, maps: MapsSnapshot, root: str, shown: str) -> CPython | Unresolved:
    path = root + shown if root else shown
    try:
        image = load_image(path)
        symbols = _dynamic_symbols(path, SYMBOLS)
    except (LivesymError, OSError) as e:
        return Unresolved(Reason.UNREADABLE, f"{shown}: {e}")
    if len(symbols) < len(SYMBOLS):
        return Unresolved(Reason.NO_SYMBOLS, f"{shown} exports no _PyRuntime")
    first = next(e for e in maps.entries if e.path == shown)
    base = derive_base(first, image.segments, image.e_type, os.sysconf("SC_PAGE_SIZE"))
    if isinstance(base, Unresolved):
        return base
    at = {name: base.base + value for name, (value, _) in symbols.items()}
    start, size = symbols["_PyEval_EvalFrameDefault"]
    types = Types(at["PyCode_Type"], at["PyUnicode_Type"], at["PyBytes_Type"])
    eval_range = (base.base + start, base.base + start + size)
    try:
        found = CPython(pid, at["_PyRuntime"], PY311, eval_range, types)
    except OSError as e:
        return Unresolved(Reason.UNREADABLE, f"cannot read its memory: {e.strerror}")
    found._find_threads()
    if not found._tstates:
        found.close()
        return Unresolved(Reason.UNREADABLE, "its interpreter has no thread state to read")
    return found


def _dynamic_symbols(path: str, names: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """(value, size) of each of ``names`` in the file's .dynsym, where present."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    found: dict[str, tuple[int, int]] = {}
    with open(path, "rb") as f:
        try:
            section = ELFFile(f).get_section_by_name(".dynsym")
            if not isinstance(section, SymbolTableSection):
                return found
            for name in names:
                symbols = section.get_symbol_by_name(name) or []
                for symbol in symbols[:1]:
                    found[name] = (int(symbol["st_value"]), int(symbol["st_size"]))
        except (ELFError, ValueError, KeyError, struct.error) as e:
            raise OSError(f"its symbols cannot be read: {e}") from None
    return found
