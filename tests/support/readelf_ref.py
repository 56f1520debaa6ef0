"""A reference for livesym's function symbol tables: GNU readelf's listing, parsed.

``readelf -sSW`` (binutils, C) is an outside opinion on every symbol of a file. This module runs
it, parses its section and symbol listings, applies livesym's documented semantics (which
symbols are functions, where a size-0 symbol ends, which ranges merge into aliases) and compares
the result with a ``SymbolTable``.

What readelf 2.40 prints, as verified on this machine (see tests/integration/
test_symbol_validation.py, which checks each point on a synthetic file):

* ``Num:`` is right-aligned in 6 columns: from symbol 100000 on there is no leading blank.
* Size is decimal up to 99999 and ``0x``-prefixed hex above (default ``--sym-base``).
* Type is ``IFUNC`` only when EI_OSABI is GNU or FreeBSD; otherwise ``<OS specific>: 10`` --
  with blanks, so the listing cannot be split on whitespace. Bind ``UNIQUE`` likewise becomes
  ``<OS specific>: 10``.
* Vis may be followed by ``[<other>: 88]`` (extra st_other bits).
* Ndx is ``UND``, ``ABS``, ``COM``, a number, or ``PRC[0xff01]``, ``OS [0xff20]`` (a blank),
  ``RSV[0xffff]``, ``bad section index[200]`` (blanks), machine-specific names.
* The name follows Ndx after exactly one blank and runs to the end of the line. In .dynsym,
  readelf appends the symbol version from .gnu.version: ``name@@VER`` (default version),
  ``name@VER`` (hidden) and ``name@VER (N)`` (a version needed from another object, also shown
  for defined symbols), and only when the file has a VERSYM section. So a .dynsym name that
  itself contains '@' is ambiguous in a versioned file (none exists on this machine: checked
  against pyelftools on every file). ``-D`` reads the dynamic segment's table instead
  ("Symbol table for image", versions still appended); ``--sym-base=10|16`` only changes the
  Size column. Neither is used. .symtab names are printed as they are, and in linked files
  they may legitimately contain ``@`` (``dlerror@GLIBC_2.34`` for an undefined symbol).
* With LC_ALL=C, bytes < 0x20 print as ``^`` + chr(byte + 0x40), 0x7f as ``^`` + b"\\xbf",
  other bytes verbatim. (In a UTF-8 locale readelf 2.40 drops bytes of multibyte characters,
  so the locale is forced to C.)
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

READELF = "/usr/bin/readelf"
ELF_MAGIC = b"\x7fELF"
EM_ARM = 40
STT_FUNC, STT_GNU_IFUNC = 2, 10
SHN_LORESERVE = 0xFF00
ADDR_LIMIT = 1 << 64

_TYPES = {
    b"NOTYPE": 0,
    b"OBJECT": 1,
    b"FUNC": 2,
    b"SECTION": 3,
    b"FILE": 4,
    b"COMMON": 5,
    b"TLS": 6,
    b"RELC": 8,
    b"SRELC": 9,
    b"IFUNC": 10,
}
_BINDS = {b"LOCAL": 0, b"GLOBAL": 1, b"WEAK": 2, b"UNIQUE": 10}
_NUMBERED = re.compile(rb"<[^>]*>: (\d+)")

# Num: Value Size Type Bind Vis [other] Ndx Name
_SYMBOL_LINE = re.compile(
    rb"^ *(\d+): ([0-9a-f]+) +(\d+|0x[0-9a-f]+) "
    rb"(<[^>]*>: \d+|\S+) +"
    rb"(<[^>]*>: \d+|\S+) +"
    rb"(\S+)(?: \[[^\]]*\])? +"
    rb"(bad section index\[ *\d+\]|OS \[0x[0-9a-f]+\]|\S+) "
    rb"(.*)$"
)
_TABLE_HEADER = re.compile(rb"^Symbol table '(.*)' contains (\d+) entr(?:y|ies):$")
_COLUMNS = re.compile(rb"^ +Num: +Value +Size Type +Bind +Vis +Ndx Name$")
# [Nr] Name Type Address Off Size ES Flg Lk Inf Al -- the name may be empty ([0]).
_SECTION_LINE = re.compile(
    rb"^ *\[ *(\d+)\] (.*?) +(\S+) +([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) "
)
_VERSION_SUFFIX = re.compile(rb"@@?[^@ ]+(?: \(\d+\))?$")


@dataclass(frozen=True, slots=True)
class Section:
    index: int
    name: bytes
    sh_type: str
    addr: int
    size: int


@dataclass(frozen=True, slots=True)
class Symbol:
    num: int
    value: int
    size: int
    type: int  # -1 for a type readelf names but this parser does not know
    bind: int
    ndx: bytes  # as printed: b"UND", b"ABS", b"12", b"OS [0xff20]", ...
    name: bytes  # as printed, version suffix removed for .dynsym, still escaped


@dataclass
class Listing:
    """What one ``readelf -sSW`` run says about one file."""

    sections: list[Section] = field(default_factory=list)
    tables: list[tuple[bytes, str, list[Symbol]]] = field(default_factory=list)  # name, type
    unparsed: list[bytes] = field(default_factory=list)  # symbol lines the regex missed
    stderr: bytes = b""
    returncode: int = 0


def iter_elf_files(roots: Iterable[str]) -> Iterator[str]:
    """Regular files with ELF magic under ``roots``, each (st_dev, st_ino) once, sorted walk.

    os.walk does not descend into symlinked directories; symlinked files are followed once
    (stat, not lstat) and then deduplicated with whatever they point to.
    """
    seen: set[tuple[int, int]] = set()
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fname in sorted(filenames):
                path = os.path.join(dirpath, fname)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                try:
                    with open(path, "rb") as f:
                        if f.read(4) != ELF_MAGIC:
                            continue
                except OSError:
                    continue
                yield path


def e_machine(path: str) -> int:
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20:
        return 0
    return int.from_bytes(head[18:20], "little" if head[5] != 2 else "big")


def run_readelf(path: str) -> Listing:
    proc = subprocess.run(
        [READELF, "-sSW", "--wide", path],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C"},
        check=False,
    )
    listing = parse_readelf(proc.stdout)
    listing.stderr = proc.stderr
    listing.returncode = proc.returncode
    return listing


def _number(token: bytes, table: dict[bytes, int]) -> int:
    known = table.get(token)
    if known is not None:
        return known
    m = _NUMBERED.fullmatch(token)
    return int(m.group(1)) if m else -1


def parse_readelf(out: bytes) -> Listing:
    listing = Listing()
    section_types: dict[bytes, str] = {}
    current: list[Symbol] | None = None
    strip_versions = False
    for line in out.split(b"\n"):
        if current is None:
            m = _SECTION_LINE.match(line)
            if m and not line.lstrip().startswith(b"[Nr]"):
                sec = Section(
                    index=int(m.group(1)),
                    name=m.group(2),
                    sh_type=m.group(3).decode(),
                    addr=int(m.group(4), 16),
                    size=int(m.group(6), 16),
                )
                listing.sections.append(sec)
                section_types.setdefault(sec.name, sec.sh_type)
                continue
        header = _TABLE_HEADER.match(line)
        if header:
            name = header.group(1)
            sh_type = section_types.get(name, "?")
            current = []
            listing.tables.append((name, sh_type, current))
            # readelf adds versions only to the dynamic symbol table, from .gnu.version.
            strip_versions = sh_type == "DYNSYM" and "VERSYM" in section_types.values()
            continue
        if current is None or not line.strip() or _COLUMNS.match(line):
            continue
        m = _SYMBOL_LINE.match(line)
        if m is None:
            listing.unparsed.append(line)
            continue
        num, value, size, typ, bind, _vis, ndx, name = m.groups()
        if strip_versions:
            name = _VERSION_SUFFIX.sub(b"", name)
        current.append(
            Symbol(
                num=int(num),
                value=int(value, 16),
                size=int(size, 16) if size.startswith(b"0x") else int(size),
                type=_number(typ, _TYPES),
                bind=_number(bind, _BINDS),
                ndx=ndx,
                name=name,
            )
        )
    return listing


def readelf_escape(raw: bytes) -> bytes:
    """What readelf (LC_ALL=C) prints for the raw st_name bytes ``raw``."""
    out = bytearray()
    for b in raw:
        if b < 0x20 or b == 0x7F:
            out += bytes((0x5E, (b + 0x40) & 0xFF))  # '^' and the byte + 0x40
        else:
            out.append(b)
    return bytes(out)


def printed_name(printed: bytes) -> str:
    """readelf's printed name as text: undecodable bytes become ``\\xNN``, as in livesym."""
    return printed.decode("utf-8", "backslashreplace")


_PLAIN = re.compile(r"[^\x00-\x1f\x7f]*")


def readelf_name(name: str) -> str:
    """How readelf (LC_ALL=C) prints a name livesym decoded with backslashreplace, as text.

    Control bytes can never sit inside a valid UTF-8 sequence, so escaping them after decoding
    gives what ``printed_name`` makes of readelf's output: equal names compare equal. (Only a
    name holding the literal text ``\\xNN`` could collide with an undecodable byte.)
    """
    if _PLAIN.fullmatch(name):  # nearly every name: nothing to escape
        return name
    out = []
    for ch in name:
        c = ord(ch)
        if c < 0x20:
            out.append("^" + chr(c + 0x40))
        elif c == 0x7F:
            out.append("^\\xbf")  # readelf prints b"^\xbf", not valid UTF-8 on its own
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True, slots=True)
class RefFunc:
    start: int
    size: int
    name: str  # as readelf prints it, decoded (see printed_name / readelf_name)
    source: str  # "symtab" | "dynsym"
    shndx: int | None  # a section index, or None for UND/ABS/COM/reserved/bad


def _section_index(ndx: bytes) -> int | None:
    return int(ndx) if ndx.isdigit() else None


def functions(listing: Listing, machine: int) -> list[RefFunc]:
    """Function symbols per livesym's semantics, from the first .symtab and first .dynsym.

    livesym reads the first section of type SYMTAB and the first of type DYNSYM; so does this.
    """
    out: list[RefFunc] = []
    for want, source in (("SYMTAB", "symtab"), ("DYNSYM", "dynsym")):
        table = next((syms for _name, t, syms in listing.tables if t == want), None)
        if table is None:
            continue
        for s in table:
            if s.type not in (STT_FUNC, STT_GNU_IFUNC) or s.ndx == b"UND" or s.value == 0:
                continue
            start = s.value & ~1 if machine == EM_ARM else s.value
            out.append(RefFunc(start, s.size, printed_name(s.name), source, _section_index(s.ndx)))
    return out


Range = tuple[int, int, str]  # start, end, printed name


def ranges(funcs: list[RefFunc], sections: list[Section]) -> set[Range]:
    """(start, end, name) of every function symbol, size-0 ends resolved as livesym documents."""
    distinct = sorted({f.start for f in funcs})
    by_index = {s.index: s for s in sections}
    out: set[Range] = set()
    for f in funcs:
        if f.size:
            end = min(f.start + f.size, ADDR_LIMIT)
        else:
            k = bisect_right(distinct, f.start)
            nxt = distinct[k] if k < len(distinct) else None
            sec = by_index.get(f.shndx) if f.shndx and f.shndx < SHN_LORESERVE else None
            if sec is not None and sec.addr <= f.start < sec.addr + sec.size:
                end = min(nxt if nxt is not None else ADDR_LIMIT, sec.addr + sec.size)
            elif nxt is None:
                end = f.start + 1
            else:
                end = nxt
        out.add((f.start, end, f.name))
    return out


@dataclass
class Report:
    symbols: int = 0
    lookups: int = 0
    mismatches: list[str] = field(default_factory=list)  # the first MAX_REPORTED
    mismatch_count: int = 0


MAX_REPORTED = 20  # mismatches listed per file; the count is always exact


def compare(table: object, ref: set[Range], max_lookup_symbols: int | None = None) -> Report:
    """Check a livesym SymbolTable against reference ranges (see the validation test)."""
    from livesym.elf.symtab import SOURCE_PLT, SymbolTable

    assert isinstance(table, SymbolTable)
    rep = Report(symbols=len(ref))
    count = 0

    def bad(msg: str) -> None:
        nonlocal count
        count += 1
        if len(rep.mismatches) < MAX_REPORTED:
            rep.mismatches.append(msg)

    # (a) every (start, end, name) -- and so every (start, name) and every size -- agrees.
    got: set[Range] = set()
    for e in table.entries():
        if e.source == SOURCE_PLT:
            # No symbol table holds PLT stubs; tests/integration/test_plt_names.py checks
            # them against objdump. They stay in the table, so (b) sees that they shadow
            # no real symbol.
            continue
        for alias in e.aliases:
            got.add((e.vaddr, e.end, readelf_name(alias)))
    for start, end, name in sorted(ref - got):
        bad(f"missing in livesym: {name!r} [{start:#x}, {end:#x})")
    for start, end, name in sorted(got - ref):
        bad(f"not in reference: {name!r} [{start:#x}, {end:#x})")

    # (b) lookups. Expected hit: the innermost reference range covering the address, i.e. the
    # greatest (start, -end) among the ranges that cover it.
    keyed = sorted({(s, -e) for s, e, _n in ref})
    key_starts = [s for s, _ in keyed]
    shortest_at: dict[int, int] = {}
    for s, neg_end in keyed:
        shortest_at[s] = -neg_end  # sorted by -end ascending, so the last one is the shortest

    def innermost(addr: int) -> tuple[int, int] | None:
        k = bisect_right(key_starts, addr) - 1
        while k >= 0:
            s, neg_end = keyed[k]
            if addr < -neg_end:
                return s, -neg_end
            k -= 1
        return None

    chosen = sorted(ref)
    if max_lookup_symbols is not None and len(chosen) > max_lookup_symbols:
        step = len(chosen) / max_lookup_symbols
        chosen = [chosen[int(i * step)] for i in range(max_lookup_symbols)]
    for start, end, name in chosen:
        hit = table.lookup(start)
        rep.lookups += 1
        want_end = shortest_at[start]
        if hit is None:
            bad(f"lookup({start:#x}) -> None; {name!r} starts there")
        elif (hit.vaddr, hit.vaddr + hit.size) != (start, want_end):
            bad(
                f"lookup({start:#x}) -> {hit.name!r} [{hit.vaddr:#x}, {hit.vaddr + hit.size:#x}),"
                f" expected [{start:#x}, {want_end:#x}) ({name!r})"
            )
        elif want_end == end:
            i = table.index_of(start)
            aliases = table.aliases(i) if i is not None else ()
            if name not in {readelf_name(a) for a in aliases} or hit.name != aliases[0]:
                bad(f"lookup({start:#x}) -> {hit.name!r}, aliases {aliases}; expected {name!r}")
        last = end - 1
        if last == start:
            continue
        hit = table.lookup(last)
        rep.lookups += 1
        want = innermost(last)
        got_range = None if hit is None else (int(hit.vaddr), hit.vaddr + hit.size)
        if got_range != want:
            bad(f"lookup({last:#x}) (last byte of {name!r}) -> {got_range}, expected {want}")
        elif hit is not None and hit.offset != last - hit.vaddr:
            bad(f"lookup({last:#x}): offset {hit.offset} != {last - hit.vaddr}")
    if count > len(rep.mismatches):
        rep.mismatches.append(f"... {count - len(rep.mismatches)} more")
    rep.mismatch_count = count
    return rep
