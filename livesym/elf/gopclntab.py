"""Go's own function table (``.gopclntab``): names for Go programs stripped of symbols.

Go services ship stripped (``-ldflags="-s -w"``): no ``.symtab``, no DWARF, no
``.eh_frame``. The runtime still needs its function table for tracebacks and the
garbage collector, so ``.gopclntab`` stays: every function's entry address and name
(Go's ``debug/gosym`` and ``runtime/symtab.go``; the OpenTelemetry profiler and
Parca name stripped Go from it). Its layouts, by the magic at its start:

- Go 1.2-1.15 (``0xfffffffb``): after an 8-byte header, ``nfunc`` (a pointer-sized
  word) and ``nfunc`` pairs (entry address, offset of the function's ``_func``),
  then the end address; a ``_func`` starts with its entry address and a 32-bit
  name offset, both counted from the table's start.
- Go 1.16-1.17 (``0xfffffffa``): ``nfunc``, ``nfiles``, then offsets of the name
  table, the compilation units, the file table, the pc tables and the function
  table; pairs as before, a ``_func``'s name offset counted in the name table.
- Go 1.18 and later (``0xfffffff0``, 1.20's ``0xfffffff1``): ``textStart`` after
  ``nfiles``; the pairs are 32-bit offsets from ``textStart`` (0 from Go 1.26 on:
  the ``.text`` section's address then).

The end of function ``i`` is the entry of ``i + 1``; the last ends at the table's
end address. A ``_func`` whose entry disagrees with its pair is skipped (a damaged
or foreign table), as is a pair out of order.

The table is hostile input: its size is bounded, every count is bounded by the
bytes that hold it, every offset checked before it is read, names are capped.

Written by hand: no maintained Python library reads it (pyelftools does not).
"""

from __future__ import annotations

import struct
from bisect import bisect_right

from livesym.elf.cfi_rules import CfaRule, RegisterRule, Row, ThreadRoot
from livesym.elf.image import SHT_NOBITS, ElfImage, SectionHeader
from livesym.errors import ElfFormatError

SECTION = ".gopclntab"
SOURCE_GOPCLNTAB = "gopclntab"
MAX_TABLE_BYTES = 256 << 20  # Kubernetes' biggest binaries hold ~60 MiB
MAX_FUNCTIONS = 1 << 21

GO12, GO116, GO118, GO120 = 0xFFFFFFFB, 0xFFFFFFFA, 0xFFFFFFF0, 0xFFFFFFF1
_VERSIONS = {GO12: "1.2", GO116: "1.16", GO118: "1.18", GO120: "1.20"}

MAX_PC_STEPS = 1 << 16  # steps of one function's pc-value table decoded, at most

# Where Go's runtime starts a stack: the walk ends there as at a root, as Go's own
# traceback does. Every goroutine's frames end at goexit, a thread's system stack at
# mstart (rt0_go under the first). Named as in .gopclntab; a .symtab adds ".abi0" to
# assembly functions.
ROOT_FUNCTIONS = frozenset({"runtime.goexit", "runtime.mstart", "runtime.rt0_go"})
# Where it moves to another stack: the callers are on the goroutine's stack, which a
# copy of the system stack does not hold (systemstack and morestack switch to it,
# mcall too, and clears the frame pointer).
SWITCH_FUNCTIONS = frozenset({"runtime.systemstack", "runtime.morestack", "runtime.mcall"})

# x86-64 DWARF registers: rbp, rsp, the return address.
_RBP, _RSP, _RA = 6, 7, 16


def stack_edge(name: str) -> ThreadRoot | None:
    """Where a Go function of this name is an edge of a stack: a root or a switch."""
    bare = name.removesuffix(".abi0")
    if bare in ROOT_FUNCTIONS:
        return ThreadRoot(name)
    if bare in SWITCH_FUNCTIONS:
        return ThreadRoot(name, switched=True)
    return None


class GoTable:
    """The functions one ``.gopclntab`` names (sorted by entry; names as offsets into
    ``names``, NUL-terminated), and each one's stack-pointer table."""

    def __init__(self, version: str, data: bytes, quantum: int, little: bool) -> None:
        self.version = version
        self.data = data
        self.quantum = quantum
        self.little = little
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.name_offsets: list[int] = []
        self.func_offsets: list[int] = []  # each one's ``_func`` in ``data``
        self.names = b""
        self.pctab = 0  # where the pc-value tables start in ``data``
        self.entry_size = 8

    @property
    def functions(self) -> list[tuple[int, int, int]]:
        """(entry, name offset, end) of each function."""
        return list(zip(self.starts, self.name_offsets, self.ends, strict=True))

    def name_of(self, offset: int, limit: int = 4096) -> bytes:
        end = self.names.find(b"\0", offset, offset + limit)
        return self.names[offset : end if end >= 0 else min(len(self.names), offset + limit)]

    def sp_delta(self, vaddr: int) -> int | None:
        """How far the stack pointer is below the function's entry value at ``vaddr``
        (its frame there, without the return address); None where no function or
        table covers it."""
        i = bisect_right(self.starts, vaddr) - 1
        if i < 0 or vaddr >= self.ends[i]:
            return None
        at = self.func_offsets[i] + self.entry_size + 12  # entry, name, args, deferreturn
        if at + 4 > len(self.data):
            return None
        table = struct.unpack_from("<I" if self.little else ">I", self.data, at)[0]
        if not table:
            return None
        return _pc_value(self.data, self.pctab + table, self.starts[i], vaddr, self.quantum)

    def rules_at(self, vaddr: int, machine: str) -> Row | None:
        """Unwind rules from the stack-pointer table (x86-64): the return address at
        the frame's top, and the caller's frame pointer below it where the function
        made a frame (Go saves it there). None elsewhere."""
        if machine != "EM_X86_64":
            return None  # arm64 keeps the return address in the link register: untested
        delta = self.sp_delta(vaddr)
        if delta is None or delta < 0:
            return None
        registers = {_RA: RegisterRule("offset", -8)}
        if delta > 0:
            registers[_RBP] = RegisterRule("offset", -16)
        return Row(vaddr, CfaRule(_RSP, delta + 8), registers, False)


def _pc_value(data: bytes, at: int, entry: int, target: int, quantum: int) -> int | None:
    """The value a Go pc-value table (runtime/symtab.go's ``pcvalue``) gives ``target``:
    pairs of (zig-zag value delta, pc delta) varints from value -1 at ``entry``."""
    value, pc, first = -1, entry, True
    for _ in range(MAX_PC_STEPS):
        got = _varint(data, at)
        if got is None:
            return None
        uvdelta, at = got
        if uvdelta == 0 and not first:
            return None  # the table ended before reaching ``target``
        first = False
        value += -(uvdelta & 1) ^ (uvdelta >> 1)
        got = _varint(data, at)
        if got is None:
            return None
        pcdelta, at = got
        pc += pcdelta * quantum
        if target < pc:
            return value
    return None


def _varint(data: bytes, at: int) -> tuple[int, int] | None:
    value = shift = 0
    while at < len(data) and shift < 35:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7
    return None


def is_go(image: ElfImage) -> bool:
    """Whether ``image`` is a Go program (or a shared object Go built)."""
    return any(s.name in (SECTION, ".go.buildinfo") for s in image.sections)


def read_go_table(image: ElfImage, problems: list[str]) -> GoTable | None:
    """The functions of ``image``'s ``.gopclntab``; None where it has none or it cannot
    be read (said in ``problems``)."""
    sec = image.section(SECTION)
    if sec is None or sec.sh_type == SHT_NOBITS or sec.sh_size < 16:
        return None
    size = min(sec.sh_size, MAX_TABLE_BYTES, max(0, image.size - sec.sh_offset))
    if size < sec.sh_size:
        problems.append(f"{SECTION}: {sec.sh_size} bytes, read {size}")
    try:
        data = image.read(sec.sh_offset, size)
        return parse_go_table(data, image.little_endian, _text_start(image))
    except ElfFormatError as e:
        problems.append(f"{SECTION}: {e}")
        return None


def _text_start(image: ElfImage) -> int:
    text: SectionHeader | None = image.section(".text")
    return text.sh_addr if text is not None else 0


def parse_go_table(data: bytes, little: bool, text_start: int = 0) -> GoTable:
    """Parse a ``.gopclntab``'s bytes; ``text_start``: the ``.text`` address, for
    tables that do not say it. Raise ElfFormatError for anything malformed."""
    order = "<" if little else ">"
    if len(data) < 16:
        raise ElfFormatError("too short for its header")
    magic, pad, quantum, ptr = struct.unpack_from(order + "IHBB", data, 0)
    version = _VERSIONS.get(magic)
    if version is None or pad != 0 or ptr not in (4, 8) or quantum not in (1, 2, 4):
        raise ElfFormatError(f"not a Go function table (magic {magic:#x}, pointer size {ptr})")
    word = order + ("Q" if ptr == 8 else "I")

    def word_at(offset: int) -> int:
        if offset + ptr > len(data):
            raise ElfFormatError(f"header word at {offset} past the table's end")
        return int(struct.unpack_from(word, data, offset)[0])

    nfunc = word_at(8)
    table = GoTable(version, data, quantum, little)
    if magic == GO12:
        functab, names_at, base, pctab = 8 + ptr, 0, 0, 0
        pair, entry_fmt = order + ("QQ" if ptr == 8 else "II"), word
    elif magic == GO116:
        names_at, pctab, functab = word_at(8 + 2 * ptr), word_at(8 + 5 * ptr), word_at(8 + 6 * ptr)
        base = 0
        pair, entry_fmt = order + ("QQ" if ptr == 8 else "II"), word
    else:
        base = word_at(8 + 2 * ptr) or text_start
        names_at, pctab, functab = word_at(8 + 3 * ptr), word_at(8 + 6 * ptr), word_at(8 + 7 * ptr)
        pair, entry_fmt = order + "II", order + "I"
    funcdata = 0 if magic == GO12 else functab
    pair_size = struct.calcsize(pair)
    if not all(0 <= x <= len(data) for x in (names_at, pctab, functab)) or not functab:
        raise ElfFormatError("offsets past the table's end")
    room = (len(data) - functab) // pair_size
    if nfunc > min(room, MAX_FUNCTIONS):
        raise ElfFormatError(f"{nfunc} functions do not fit its {len(data)} bytes")
    pairs = list(struct.iter_unpack(pair, data[functab : functab + nfunc * pair_size]))
    end_at = functab + nfunc * pair_size
    entry_size = struct.calcsize(entry_fmt)
    end = (
        struct.unpack_from(entry_fmt, data, end_at)[0] if end_at + entry_size <= len(data) else None
    )
    name_fmt = order + "i"
    rows: list[tuple[int, int, int, int]] = []
    for i, (entry, func_off) in enumerate(pairs):
        at = funcdata + func_off
        if at + entry_size + 4 > len(data):
            continue
        if struct.unpack_from(entry_fmt, data, at)[0] != entry:
            continue  # a damaged table, or not this version's
        name = struct.unpack_from(name_fmt, data, at + entry_size)[0]
        if name < 0 or names_at + name >= len(data):
            continue
        following = pairs[i + 1][0] if i + 1 < len(pairs) else end
        if following is None or following <= entry:
            continue
        rows.append((base + entry, name, base + following, at))
    rows.sort()
    table.starts = [r[0] for r in rows]
    table.name_offsets = [r[1] for r in rows]
    table.ends = [r[2] for r in rows]
    table.func_offsets = [r[3] for r in rows]
    table.names = data[names_at:]
    table.pctab = pctab
    table.entry_size = entry_size
    return table
