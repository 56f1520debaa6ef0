"""Function symbol tables from .symtab and .dynsym, built in bulk.

Each table is read with one bounded read and decoded in one pass with
``struct.iter_unpack``; names stay as offsets into their string table and are
decoded only when a lookup returns them. Entries are sorted once; a lookup is a
binary search plus, for nested or overlapping symbols, a short walk up a
precomputed chain of enclosing entries.

What counts as a function symbol: STT_FUNC or STT_GNU_IFUNC, a defined section
(st_shndx != SHN_UNDEF) and a non-zero value. A sized symbol covers
[value, value + size); a size-0 symbol (``_start`` in a bare-metal image)
covers up to the next function symbol or the end of its section, whichever is
first. Several names at one range are aliases: one is chosen by a fixed rule
(sized, then a name without a symbol version, then GLOBAL over WEAK over LOCAL,
then fewer leading underscores, then the longer name, then byte order), the
others stay available.

ARM: bit 0 of a Thumb function's address is a mode flag, not part of the address.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, groupby, pairwise

from livesym.addr.kinds import ElfVaddr
from livesym.elf.demangle import demangle_bytes
from livesym.elf.gopclntab import SOURCE_GOPCLNTAB, read_go_table
from livesym.elf.image import (
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_SYMTAB,
    ElfImage,
    SectionHeader,
    string_at,
)
from livesym.elf.plt import plt_stubs
from livesym.errors import ElfFormatError, FileError

STT_FUNC = 2
STT_GNU_IFUNC = 10
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
EM_ARM = 40
ADDR_LIMIT = 1 << 64

# A lookup walks up enclosing symbols at most this far; crafted tables with
# thousands of nested symbols then cost a bounded walk, not a hang.
MAX_NESTING_WALK = 64
# Finding one symbol's enclosing entry scans back at most this many entries.
MAX_PARENT_SCAN = 1 << 16
# Names are capped so a string table without NULs cannot produce one
# multi-megabyte "name" per lookup.
MAX_NAME_BYTES = 64 * 1024

_BIND_PREFERENCE = {STB_GLOBAL: 0, STB_GNU_UNIQUE: 0, STB_WEAK: 1, STB_LOCAL: 2}

SOURCE_SYMTAB = "symtab"
SOURCE_DYNSYM = "dynsym"
SOURCE_PLT = "plt"
# The sources that are the object file's symbol tables, not something found for it or
# read from its other tables (``gopclntab``: its rows say so).
OWN_SOURCES = frozenset((SOURCE_SYMTAB, SOURCE_DYNSYM, SOURCE_PLT))

# A name reference is (st_name << TABLE_BITS) | table id: the table id picks the
# string table (and source label) among the merged tables -- the object's own
# .symtab and .dynsym, a debug file's .symtab, MiniDebugInfo's .symtab.
TABLE_BITS = 3
TABLE_MASK = (1 << TABLE_BITS) - 1
MAX_TABLES = 1 << TABLE_BITS
# The object's PLT stubs: above its own tables (0, 1), a debug file's and MiniDebugInfo's.
PLT_TABLE = 6
# A Go program's own function table, where no symbol table names its functions.
GO_TABLE = 7


@dataclass(frozen=True, slots=True)
class SymbolHit:
    """The function that holds an address, and where in it the address falls."""

    name: str
    demangled: str
    vaddr: ElfVaddr
    size: int
    declared_size: int
    offset: int
    source: str


@dataclass(frozen=True, slots=True)
class SymbolEntry:
    """One function symbol as the table holds it (after alias resolution)."""

    name: str
    vaddr: int
    end: int
    declared_size: int
    source: str
    aliases: tuple[str, ...]


class SymbolTable:
    """Sorted function symbols of one ELF image; ``lookup`` is O(log n).

    Two pieces of work are deferred until a lookup needs them, because most
    symbols are never looked up: choosing among aliases of one range (it needs
    their names), and finding the entries a nested symbol sits inside.
    """

    def __init__(
        self,
        starts: list[int],
        ends: list[int],
        sizes: list[int],
        name_refs: list[int],
        strtabs: list[bytes],
        alias_groups: dict[int, list[_Raw]],
        sources: tuple[str, ...],
        problems: tuple[str, ...],
        labels: tuple[str, ...] = (SOURCE_SYMTAB, SOURCE_DYNSYM),
    ) -> None:
        self._starts = starts
        self._ends = ends
        self._sizes = sizes
        self._name_refs = name_refs
        self._strtabs = strtabs
        self._unsettled = alias_groups  # position -> raw aliases, until first asked
        self._alias_refs: dict[int, tuple[int, ...]] = {}
        # reach[i]: the largest end among entries 0..i. No entry at or before i
        # covers an address at or past it, which ends most misses at once.
        self._reach = list(accumulate(ends, max))
        self._parents: dict[int, int] = {}
        self._names: dict[int, str] = {}
        self._demangled: dict[int, str] = {}
        self._labels = labels  # table id -> source label
        self.sources = sources
        self.problems = problems

    def __len__(self) -> int:
        return len(self._starts)

    def index_of(self, vaddr: int) -> int | None:
        """Index of the innermost function symbol covering ``vaddr``, or None."""
        return self.enclosing(bisect_right(self._starts, vaddr) - 1, vaddr)

    def enclosing(self, i: int, vaddr: int) -> int | None:
        """From entry ``i`` (the last one starting at or below ``vaddr``), the innermost
        entry covering ``vaddr``: i itself, or one of the entries it is nested in."""
        if i < 0:
            return None
        ends = self._ends
        if vaddr < ends[i]:
            return i
        if self._reach[i] <= vaddr:
            return None
        for _ in range(MAX_NESTING_WALK):
            i = self._parent(i)
            if i < 0:
                return None
            if vaddr < ends[i]:
                return i
        return None

    def _parent(self, i: int) -> int:
        """The nearest earlier entry still open at entry i's start, or -1.

        Entries are sorted by (start, -end), so only those open at start_i can
        cover an address that i misses. Jumping along known parents skips
        entries that closed in between (the all-nearest-greater-values walk).
        """
        memo = self._parents
        found = memo.get(i)
        if found is not None:
            return found
        starts, ends, reach = self._starts, self._ends, self._reach
        start = starts[i]
        j = i - 1
        for _ in range(MAX_PARENT_SCAN):
            if j < 0 or ends[j] > start:
                break
            if reach[j] <= start:
                j = -1
                break
            known = memo.get(j)
            j = known if known is not None else j - 1
        else:
            j = -1  # a crafted table of endless siblings: treat as not nested
        memo[i] = j
        return j

    def lookup(self, vaddr: int) -> SymbolHit | None:
        i = self.index_of(vaddr)
        if i is None:
            return None
        start = self._starts[i]
        return SymbolHit(
            name=self.name(i),
            demangled=self.demangled(i),
            vaddr=ElfVaddr(start),
            size=self._ends[i] - start,
            declared_size=self.declared_size(i),
            offset=vaddr - start,
            source=self.source(i),
        )

    @property
    def starts(self) -> list[int]:
        """Symbol start addresses in table order (read-only by convention; hot paths index it)."""
        return self._starts

    @property
    def ends(self) -> list[int]:
        """Symbol end addresses (exclusive), parallel to ``starts``."""
        return self._ends

    @property
    def reach(self) -> list[int]:
        """reach[i]: the largest end among entries 0..i (an address at or past it is in
        no entry up to i: ``enclosing`` need not walk)."""
        return self._reach

    def name_columns(self) -> tuple[list[int], list[bytes], Mapping[int, object]]:
        """Each entry's name reference (table id in the low TABLE_BITS, string offset
        above), the string tables, and the entries whose alias is not chosen yet: the
        live objects, for a batch loop in C that reads names as ``raw_name`` does."""
        return self._name_refs, self._strtabs, self._unsettled

    def start(self, i: int) -> int:
        return self._starts[i]

    def end(self, i: int) -> int:
        return self._ends[i]

    def declared_size(self, i: int) -> int:
        if i in self._unsettled:
            self._settle(i)
        return self._sizes[i]

    def source(self, i: int) -> str:
        if i in self._unsettled:
            self._settle(i)
        return self._labels[self._name_refs[i] & TABLE_MASK]

    def name(self, i: int) -> str:
        cached = self._names.get(i)
        if cached is None:
            if i in self._unsettled:
                self._settle(i)
            cached = self._names[i] = self._decode(self._name_refs[i])
        return cached

    def demangled(self, i: int) -> str:
        cached = self._demangled.get(i)
        if cached is None:
            cached = self._demangled[i] = demangle_bytes(self.raw_name(i), self.name(i))
        return cached

    def raw_name(self, i: int) -> bytes:
        """The name's bytes as the string table holds them."""
        if i in self._unsettled:
            self._settle(i)
        ref = self._name_refs[i]
        return string_at(self._strtabs[ref & TABLE_MASK], ref >> TABLE_BITS, MAX_NAME_BYTES)

    def aliases(self, i: int) -> tuple[str, ...]:
        """Every name at this symbol's range, the chosen one first."""
        if i in self._unsettled:
            self._settle(i)
        refs = self._alias_refs.get(i)
        if refs is None:
            return (self.name(i),)
        return tuple(self._decode(r) for r in refs)

    def entries(self) -> Iterator[SymbolEntry]:
        for i in range(len(self._starts)):
            yield SymbolEntry(
                name=self.name(i),
                vaddr=self._starts[i],
                end=self._ends[i],
                declared_size=self.declared_size(i),
                source=self.source(i),
                aliases=self.aliases(i),
            )

    def _settle(self, i: int) -> None:
        """Choose the name for an aliased range by the alias rule; keep the others."""
        ordered = _order_aliases(self._unsettled.pop(i), self._strtabs)
        self._sizes[i], self._name_refs[i] = ordered[0][1], ordered[0][2]
        if len(ordered) > 1:
            self._alias_refs[i] = tuple(r[2] for r in ordered)

    def _decode(self, ref: int) -> str:
        return string_at(self._strtabs[ref & TABLE_MASK], ref >> TABLE_BITS, MAX_NAME_BYTES).decode(
            "utf-8", "backslashreplace"
        )


# st_info -> is it STT_FUNC or STT_GNU_IFUNC (the low nibble), for a table lookup
# in the decode loop instead of two comparisons.
_IS_FUNC = tuple((info & 0xF) in (STT_FUNC, STT_GNU_IFUNC) for info in range(256))

# One raw function symbol: (start, declared size, name ref, bind, shndx).
_Raw = tuple[int, int, int, int, int]


def _entry_format(image: ElfImage) -> tuple[str, int]:
    order = "<" if image.little_endian else ">"
    if image.elf_class == 64:
        return order + "IBBHQQ", 24
    return order + "IIIBBH", 16


def _read_table(
    image: ElfImage, sec: SectionHeader, table_id: int, problems: list[str]
) -> tuple[list[_Raw], bytes]:
    """Decode one symbol table's function symbols; return them and its string table."""
    fmt, entsize = _entry_format(image)
    label = f"{sec.name or 'symbol table'} (section {sec.index})"
    if sec.sh_type == SHT_NOBITS or sec.sh_size == 0:
        return [], b""
    if sec.sh_entsize != entsize:
        problems.append(f"{label}: entry size {sec.sh_entsize}, expected {entsize}; skipped")
        return [], b""
    file_size = image.size
    avail = max(0, min(sec.sh_size, file_size - sec.sh_offset))
    if avail < sec.sh_size:
        problems.append(f"{label}: runs past the end of the file; read the part that is there")
    count = avail // entsize
    if not 0 < sec.sh_link < len(image.sections):
        problems.append(f"{label}: sh_link {sec.sh_link} names no string table; skipped")
        return [], b""
    strsec = image.sections[sec.sh_link]
    str_avail = max(0, min(strsec.sh_size, file_size - strsec.sh_offset))
    if str_avail < strsec.sh_size:
        problems.append(f"{strsec.name or 'string table'}: runs past the end of the file")
    if count == 0:
        return [], b""
    data = image.read(sec.sh_offset, count * entsize)
    strtab = image.read(strsec.sh_offset, str_avail) if str_avail else b""
    thumb = image.machine_code == EM_ARM
    is_func = _IS_FUNC
    rows = struct.iter_unpack(fmt, data)
    out: list[_Raw]
    if image.elf_class == 64:
        out = [
            (value, size, (st_name << TABLE_BITS) | table_id, info >> 4, shndx)
            for st_name, info, _other, shndx, value, size in rows
            if is_func[info] and shndx and value
        ]
    else:
        out = [
            (value, size, (st_name << TABLE_BITS) | table_id, info >> 4, shndx)
            for st_name, value, size, info, _other, shndx in rows
            if is_func[info] and shndx and value
        ]
    if thumb:
        # Bit 0 of an ARM function's address selects Thumb mode; it is not an address bit.
        out = [(r[0] & ~1, *r[1:]) for r in out]
    return out, strtab


@dataclass(frozen=True)
class SymbolPart:
    """One symbol table's function symbols, ready to merge with other tables.

    ``table_id`` is in the low bits of every name reference in ``raw``; ``sections``
    are those of the file the table came from (they bound size-0 symbols).
    """

    table_id: int
    source: str
    raw: list[_Raw]
    strtab: bytes
    sections: tuple[SectionHeader, ...]


def symbol_parts(
    image: ElfImage,
    first_id: int = 0,
    label: str | None = None,
    problems: list[str] | None = None,
) -> list[SymbolPart]:
    """The function symbols of ``image``'s .symtab and .dynsym, numbered from ``first_id``.

    ``label`` names the source of every part (a debug file's tables are its
    source, not "symtab"). The object's own tables (``first_id`` 0) come with a
    part for its PLT stubs, which no symbol table covers. A damaged table is skipped with a note in
    ``problems``; the other still counts. Raises FileError only if the file
    changed or vanished meanwhile.
    """
    notes = problems if problems is not None else []
    parts: list[SymbolPart] = []
    # .symtab is a superset of .dynsym when both exist; reading both still
    # matters for files whose .symtab was stripped to a subset.
    for offset, (sh_type, source) in enumerate(
        ((SHT_SYMTAB, SOURCE_SYMTAB), (SHT_DYNSYM, SOURCE_DYNSYM))
    ):
        table_id = first_id + offset
        if table_id >= MAX_TABLES:
            raise ValueError(f"symbol table id {table_id} out of range")
        sec = next((s for s in image.sections if s.sh_type == sh_type), None)
        if sec is None:
            continue
        try:
            entries, strtab = _read_table(image, sec, table_id, notes)
        except ElfFormatError as e:
            notes.append(str(e))
            continue
        except FileError:
            raise
        parts.append(SymbolPart(table_id, label or source, entries, strtab, image.sections))
    if first_id == 0:
        if not any(p.raw and p.source == SOURCE_SYMTAB for p in parts):
            go = go_part(image, notes)
            if go is not None:
                parts.append(go)
        plt = plt_part(image, parts, notes)
        if plt is not None:
            parts.append(plt)
    return parts


def go_part(image: ElfImage, problems: list[str]) -> SymbolPart | None:
    """A Go program's functions from its ``.gopclntab`` (``livesym.elf.gopclntab``):
    what names them once ``-s -w`` stripped its symbol table. None for other objects."""
    table = read_go_table(image, problems)
    if table is None or not table.functions:
        return None
    text = image.section(".text")
    section = text.index if text is not None else 0
    raw: list[_Raw] = [
        (start, end - start, (name << TABLE_BITS) | GO_TABLE, STB_GLOBAL, section)
        for start, name, end in table.functions
    ]
    return SymbolPart(GO_TABLE, SOURCE_GOPCLNTAB, raw, table.names, image.sections)


def plt_part(image: ElfImage, own: Sequence[SymbolPart], problems: list[str]) -> SymbolPart | None:
    """The object's PLT stubs as symbols (``printf@plt``), or None if it has none
    that can be named. ``own``: its .symtab/.dynsym parts, which name the ifuncs
    that IRELATIVE stubs lead to."""
    strtabs = [b""] * MAX_TABLES
    for part in own:
        strtabs[part.table_id] = part.strtab
    by_start: dict[int, list[_Raw]] | None = None

    def name_at(addr: int) -> bytes | None:
        nonlocal by_start
        if by_start is None:
            by_start = {}
            for part in own:
                for raw in part.raw:
                    by_start.setdefault(raw[0], []).append(raw)
        group = by_start.get(addr)
        if not group:
            return None
        ref = _order_aliases(group, strtabs)[0][2]
        return string_at(strtabs[ref & TABLE_MASK], ref >> TABLE_BITS, MAX_NAME_BYTES) or None

    dynstr = next((p.strtab for p in own if p.source == SOURCE_DYNSYM), b"")
    stubs = plt_stubs(image, dynstr, name_at, problems)
    if not stubs:
        return None
    names = bytearray(b"\0")
    raw: list[_Raw] = []
    for stub in stubs:
        raw.append((stub.start, stub.size, (len(names) << TABLE_BITS) | PLT_TABLE, STB_LOCAL,
                    stub.section))  # fmt: skip
        names += stub.name + b"\0"
    return SymbolPart(PLT_TABLE, SOURCE_PLT, raw, bytes(names), image.sections)


def load_symbols(image: ElfImage) -> SymbolTable:
    """Build the function symbol table of ``image`` from .symtab and .dynsym.

    A damaged table is skipped with a problem note; the other table still
    counts. Raises FileError only if the file changed or vanished meanwhile.
    """
    problems: list[str] = []
    parts = symbol_parts(image, problems=problems)
    return merge_parts(parts, problems)


def merge_parts(parts: Sequence[SymbolPart], problems: Sequence[str] = ()) -> SymbolTable:
    """One table from several parts; the same name at the same range collapses."""
    strtabs = [b""] * MAX_TABLES
    labels = [SOURCE_SYMTAB] * MAX_TABLES
    sections: list[tuple[SectionHeader, ...]] = [()] * MAX_TABLES
    raw: list[_Raw] = []
    sources: list[str] = []
    for part in parts:
        strtabs[part.table_id] = part.strtab
        labels[part.table_id] = part.source
        sections[part.table_id] = part.sections
        # PLT stubs name no function of the object: a stripped file whose only names
        # are its stubs still shows as having no symbols.
        if part.raw and part.source not in sources and part.source != SOURCE_PLT:
            sources.append(part.source)
        raw.extend(part.raw)
    return _build(raw, strtabs, sections, tuple(sources), list(problems), tuple(labels))


def _build(
    raw: list[_Raw],
    strtabs: list[bytes],
    sections: Sequence[tuple[SectionHeader, ...]],
    sources: tuple[str, ...],
    problems: list[str],
    labels: tuple[str, ...] = (SOURCE_SYMTAB, SOURCE_DYNSYM),
) -> SymbolTable:
    """``sections[table id]``: the section headers of the file each table came from."""
    # Columns and a sort of indices by start address -- comprehensions and
    # C-level sorting, so tens of thousands of symbols load in milliseconds.
    limit = ADDR_LIMIT
    starts0 = [r[0] for r in raw]
    ends0 = [r[0] + r[1] if r[0] + r[1] < limit else limit for r in raw]
    zero_size = [i for i, r in enumerate(raw) if r[1] == 0]
    if zero_size:
        distinct_starts = sorted(set(starts0))
        for i in zero_size:
            own = sections[raw[i][2] & TABLE_MASK]
            ends0[i] = _implicit_end(starts0[i], raw[i][4], distinct_starts, own)
    order = sorted(range(len(raw)), key=starts0.__getitem__)
    by_start = [starts0[i] for i in order]
    ties = [k for k, (a, b) in enumerate(pairwise(by_start), 1) if a == b]
    aliases: dict[int, list[int]] = {}  # final position -> raw indices of one range
    if ties:
        order = _settle_ties(order, ties, ends0, aliases)
    starts = [starts0[i] for i in order] if ties else by_start
    ends = [ends0[i] for i in order]
    sizes = [raw[i][1] for i in order]
    refs = [raw[i][2] for i in order]
    groups = {n: [raw[i] for i in members] for n, members in aliases.items()}
    return SymbolTable(starts, ends, sizes, refs, strtabs, groups, sources, tuple(problems), labels)


def _settle_ties(
    order: list[int], ties: list[int], ends: list[int], aliases: dict[int, list[int]]
) -> list[int]:
    """Within each run of one start address: longer ranges first (an enclosing symbol
    before those nested in it), and equal ranges collapsed to one entry whose raw
    indices are recorded in ``aliases`` under its final position."""
    settled: list[int] = []
    done = 0
    k = 0
    while k < len(ties):
        lo = ties[k] - 1  # the run is order[lo:hi]
        hi = ties[k] + 1
        while k + 1 < len(ties) and ties[k + 1] == hi:
            k += 1
            hi += 1
        settled.extend(order[done:lo])
        run = sorted(order[lo:hi], key=lambda i: -ends[i])
        for _end, same in groupby(run, key=ends.__getitem__):
            members = list(same)
            if len(members) > 1:
                aliases[len(settled)] = members
            settled.append(members[0])
        done = hi
        k += 1
    settled.extend(order[done:])
    return settled


def _implicit_end(
    start: int, shndx: int, distinct_starts: list[int], sections: tuple[SectionHeader, ...]
) -> int:
    k = bisect_right(distinct_starts, start)
    nxt = distinct_starts[k] if k < len(distinct_starts) else ADDR_LIMIT
    if 0 < shndx < SHN_LORESERVE and shndx < len(sections):
        sec = sections[shndx]
        if sec.holds_addr(start):
            return min(nxt, sec.sh_addr + sec.sh_size)
    if nxt == ADDR_LIMIT:
        # Last symbol and no section to bound it: cover its first byte only,
        # rather than claim the rest of the address space.
        return start + 1
    return nxt


def _order_aliases(group: list[_Raw], strtabs: list[bytes]) -> list[_Raw]:
    """Aliases best first; duplicates of one name (.symtab and .dynsym) collapse."""
    best: dict[bytes, tuple[tuple[object, ...], _Raw]] = {}
    for entry in group:
        _start, size, ref, bind, _shndx = entry
        table = ref & TABLE_MASK
        name = string_at(strtabs[table], ref >> TABLE_BITS, MAX_NAME_BYTES)
        underscores = len(name) - len(name.lstrip(b"_"))
        # A .symtab spells symbol versions into names (clock_nanosleep@@GLIBC_2.17);
        # .dynsym keeps them apart. The plain name reads better and is the one a
        # stripped library's .dynsym gives, with or without its debug file merged in.
        versioned = b"@" in name
        # Last: the lower table id, so the object's own tables win over a debug file's.
        key = (size == 0, versioned, _BIND_PREFERENCE.get(bind, 3), underscores, -len(name),
               name, table)  # fmt: skip
        if name not in best or key < best[name][0]:
            best[name] = (key, entry)
    return [entry for _key, entry in sorted(best.values(), key=lambda kv: kv[0])]
