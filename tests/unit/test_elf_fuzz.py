"""Hostile ELF files never crash or hang livesym: mutated real and synthetic files.

Property, per example: ``load_image`` returns an image or raises a ``LivesymError`` (never any
other exception); ``load_symbols`` likewise; then 50 lookups at addresses derived from the
segments and the entries return None or a hit that covers the address, and the entry's name
and aliases decode. Each example runs under a hard 2 s timer (``setitimer``, raising a
BaseException that livesym's ``except Exception`` cannot swallow) and a tracemalloc bound on the
peak of what it allocates.

Seeds: /usr/bin/true and libc.so.6 of this machine, and synthetic files from
tests/support/elfbuild.py in every class and byte order. Mutations are aimed at the fields that
size and place things (e_shoff, e_shnum, sh_offset, sh_size, sh_link, sh_entsize, p_offset,
p_filesz, st_name, st_value, st_size, ...), set to extreme values, plus byte flips, string
tables without NULs and truncation at any length.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from livesym.elf.image import ElfImage, load_image
from livesym.elf.symtab import SymbolHit, SymbolTable, load_symbols
from livesym.errors import LivesymError
from tests.support import readelf_ref as ref
from tests.support.elfbuild import (
    EM_386,
    EM_ARM,
    EM_S390,
    EM_X86_64,
    SHN_ABS,
    STB_LOCAL,
    STB_WEAK,
    STT_GNU_IFUNC,
    STT_OBJECT,
    Built,
    Sec,
    Spec,
    Sym,
    build,
    shdr_field_offset,
)
from tests.support.hostile import substitution_bomb

TIME_LIMIT = 2.0  # seconds per example
MEMORY_LIMIT = 64 << 20  # peak bytes allocated by one example (tracemalloc)
LOOKUPS = 50
FUZZ = settings(
    derandomize=True,
    database=None,  # derandomized: nothing to replay, and no .hypothesis/ in the repository
    deadline=None,  # the hard timer below is the deadline
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- seeds ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    label: str
    offset: int
    width: int  # bytes


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    little: bool
    fields: tuple[Field, ...]  # header fields worth aiming at
    strtabs: tuple[tuple[int, int], ...]  # (offset, size) of string tables, for NUL removal


_EHDR = {  # name -> (offset, width) for ELF32, ELF64
    "e_entry": ((24, 4), (24, 8)),
    "e_phoff": ((28, 4), (32, 8)),
    "e_shoff": ((32, 4), (40, 8)),
    "e_phentsize": ((42, 2), (54, 2)),
    "e_phnum": ((44, 2), (56, 2)),
    "e_shentsize": ((46, 2), (58, 2)),
    "e_shnum": ((48, 2), (60, 2)),
    "e_shstrndx": ((50, 2), (62, 2)),
}
_SHDR = {
    "sh_name": ((0, 4), (0, 4)),
    "sh_type": ((4, 4), (4, 4)),
    "sh_addr": ((12, 4), (16, 8)),
    "sh_offset": ((16, 4), (24, 8)),
    "sh_size": ((20, 4), (32, 8)),
    "sh_link": ((24, 4), (40, 4)),
    "sh_info": ((28, 4), (44, 4)),
    "sh_entsize": ((36, 4), (56, 8)),
}
_PHDR = {
    "p_type": ((0, 4), (0, 4)),
    "p_offset": ((4, 4), (8, 8)),
    "p_vaddr": ((8, 4), (16, 8)),
    "p_filesz": ((16, 4), (32, 8)),
    "p_memsz": ((20, 4), (40, 8)),
    "p_align": ((28, 4), (48, 8)),
}
_SYM = {
    "st_name": ((0, 4), (0, 4)),
    "st_value": ((4, 4), (8, 8)),
    "st_size": ((8, 4), (16, 8)),
    "st_info": ((12, 1), (4, 1)),
    "st_shndx": ((14, 2), (6, 2)),
}
AIMED_SECTIONS = (".symtab", ".strtab", ".dynsym", ".dynstr", ".shstrtab", ".text")
SYMBOLS_AIMED_AT = 24  # per symbol table, the first entries get aimed fields


def _layout(fields: dict[str, tuple[tuple[int, int], ...]], is64: bool) -> dict[str, tuple]:
    return {name: pair[is64] for name, pair in fields.items()}


def field_map(data: bytes) -> tuple[tuple[Field, ...], tuple[tuple[int, int], ...]]:
    """Where the aimed fields of an intact ELF file are (an independent, minimal reader)."""
    is64, little = data[4] == 2, data[5] == 1

    def num(offset: int, width: int) -> int:
        return int.from_bytes(data[offset : offset + width], "little" if little else "big")

    ehdr = _layout(_EHDR, is64)
    fields = [Field("EI_CLASS", 4, 1), Field("EI_DATA", 5, 1)]
    fields += [Field(name, off, w) for name, (off, w) in ehdr.items()]
    phoff, phentsize, phnum = (num(*ehdr[k]) for k in ("e_phoff", "e_phentsize", "e_phnum"))
    for i in range(phnum):
        base = phoff + i * phentsize
        fields += [
            Field(f"phdr[{i}].{name}", base + off, w)
            for name, (off, w) in _layout(_PHDR, is64).items()
        ]
    shoff, shentsize, shnum = (num(*ehdr[k]) for k in ("e_shoff", "e_shentsize", "e_shnum"))
    shdr = _layout(_SHDR, is64)
    if not shoff:
        return tuple(fields), ()
    headers = [shoff + i * shentsize for i in range(shnum)]
    shstr = headers[num(*ehdr["e_shstrndx"])]
    names_at = num(shstr + shdr["sh_offset"][0], shdr["sh_offset"][1])
    strtabs = []
    # Section 0 holds the real counts when e_shnum, e_shstrndx or e_phnum overflow.
    fields += [Field(f"[0].{f}", headers[0] + off, w) for f, (off, w) in shdr.items()]
    for base in headers:
        name_off = names_at + num(base + shdr["sh_name"][0], 4)
        name = data[name_off : data.index(b"\0", name_off)].decode()
        sh_type = num(base + shdr["sh_type"][0], 4)
        offset = num(base + shdr["sh_offset"][0], shdr["sh_offset"][1])
        size = num(base + shdr["sh_size"][0], shdr["sh_size"][1])
        if name in AIMED_SECTIONS:
            fields += [Field(f"{name}.{f}", base + off, w) for f, (off, w) in shdr.items()]
        if sh_type == 3:  # SHT_STRTAB
            strtabs.append((offset, size))
        if sh_type in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            entsize = 24 if is64 else 16
            for k in range(1, min(size // entsize, SYMBOLS_AIMED_AT)):
                fields += [
                    Field(f"{name}[{k}].{f}", offset + k * entsize + off, w)
                    for f, (off, w) in _layout(_SYM, is64).items()
                ]
    return tuple(fields), tuple(strtabs)


def _seed(name: str, data: bytes) -> Seed:
    fields, strtabs = field_map(data)
    return Seed(name, data, data[5] == 1, fields, strtabs)


TEXT = Sec(".text", 0x1000, 0x800)
SYMS = (
    Sym("main", 0x1000, 0x40),
    Sym("alias_of_main", 0x1000, 0x40, bind=STB_WEAK),
    Sym("_start", 0x1100),  # size 0: to the next symbol
    Sym("outer", 0x1200, 0x200),
    Sym("inner", 0x1210, 0x10, bind=STB_LOCAL),
    Sym("ifn", 0x1400, 0x20, type=STT_GNU_IFUNC),
    Sym("_ZNSt6vectorIiSaIiEE9push_backERKi", 0x1480, 0x30),
    Sym("_RNvCs1234_7mycrate3foo", 0x1500, 0x10),
    Sym("tail", 0x17F0),  # size 0: to the end of .text
    Sym("absolute", 0x5000, 8, section=SHN_ABS),
    Sym("data", 0x1600, 8, type=STT_OBJECT),
)
SPECS = {
    "elf64le": Spec(
        sections=(
            TEXT,
            Sec(".data", 0x3000, 0x100, flags="AW"),
            Sec(".bss", 0x4000, 0x1000, flags="AW", nobits=True),
        ),
        symtab=SYMS,
        dynsym=SYMS[:3],
        build_id=bytes(range(20)),
    ),
    "elf32be-arm": Spec(
        elf_class=32,
        little_endian=False,
        machine=EM_ARM,
        sections=(TEXT,),
        symtab=(*SYMS, Sym("thumb", 0x1701, 0x20)),
    ),
    "elf32le-386": Spec(elf_class=32, machine=EM_386, sections=(TEXT,), dynsym=SYMS),
    "elf64be-s390": Spec(machine=EM_S390, little_endian=False, sections=(TEXT,), symtab=SYMS),
    "elf64le-noshdr": Spec(
        machine=EM_X86_64, symtab=SYMS, section_headers=False, build_id=b"\x01" * 20
    ),
}
BUILT: dict[str, Built] = {name: build(spec) for name, spec in SPECS.items()}
SEEDS: list[Seed] = [_seed(name, b.data) for name, b in BUILT.items()]
for _path in ("/usr/bin/true", "/usr/lib/x86_64-linux-gnu/libc.so.6"):
    if os.path.exists(_path):
        SEEDS.append(_seed(os.path.basename(_path), Path(_path).read_bytes()))


def test_field_map_agrees_with_elfbuild() -> None:
    """The minimal reader above finds the fields where the builder says it put them."""
    for name, built in BUILT.items():
        spec = SPECS[name]
        fields = {f.label: f.offset for f in field_map(built.data)[0]}
        for ehdr_field in ("e_shoff", "e_shnum", "e_shstrndx", "e_phoff", "e_phnum"):
            assert fields[ehdr_field] == built.ehdr_field_offset[ehdr_field], (name, ehdr_field)
        for sec in built.section_header_offset:
            if sec not in AIMED_SECTIONS:
                continue
            for f in ("sh_offset", "sh_size", "sh_link", "sh_entsize"):
                want = shdr_field_offset(built, sec, f, spec.elf_class)
                assert fields[f"{sec}.{f}"] == want, (name, sec, f)


# --- mutations ------------------------------------------------------------------------------


def extremes(width: int, file_size: int) -> list[int]:
    mask = (1 << (8 * width)) - 1
    values = [0, 1, 2, 0x7F, 0xFF, 0xFFFF, 0x10000, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1]
    values += [file_size + d for d in (-64, -24, -16, -8, -1, 0, 1, 8)] + [file_size // 2]
    return sorted({v & mask for v in values})


@dataclass(frozen=True)
class Mutation:
    kind: str  # "field", "flip", "nuls", "truncate"
    offset: int = 0
    width: int = 0
    value: int = 0
    label: str = ""

    def apply(self, data: bytearray, little: bool) -> None:
        if self.kind == "field":
            if self.offset + self.width <= len(data):
                raw = self.value.to_bytes(self.width, "little" if little else "big")
                data[self.offset : self.offset + self.width] = raw
        elif self.kind == "flip":
            if self.offset < len(data):
                data[self.offset] ^= self.value
        elif self.kind == "nuls":
            end = min(len(data), self.offset + self.width)
            data[self.offset : end] = data[self.offset : end].replace(b"\0", b"A")
        elif self.kind == "truncate":
            del data[self.value :]


@st.composite
def mutations(draw: st.DrawFn, seed: Seed) -> Mutation:
    size = len(seed.data)
    kind = draw(st.sampled_from(["field", "field", "field", "flip", "nuls", "truncate"]))
    if kind == "field" or (kind == "nuls" and not seed.strtabs):
        f = draw(st.sampled_from(seed.fields))
        value = draw(
            st.one_of(
                st.sampled_from(extremes(f.width, size)),
                st.integers(0, (1 << (8 * f.width)) - 1),
            )
        )
        return Mutation("field", f.offset, f.width, value, f.label)
    if kind == "flip":
        # Mostly the headers, where a flipped bit changes what is read and where from.
        offset = draw(st.one_of(st.integers(0, min(size, 0x400) - 1), st.integers(0, size - 1)))
        return Mutation("flip", offset, 1, draw(st.integers(1, 255)))
    if kind == "nuls":
        offset, length = draw(st.sampled_from(seed.strtabs))
        return Mutation("nuls", offset, length)
    cut = draw(st.one_of(st.integers(0, min(size, 0x1000)), st.integers(0, size)))
    return Mutation("truncate", value=cut)


@st.composite
def mutated_files(draw: st.DrawFn) -> tuple[str, bytes, list[Mutation]]:
    seed = draw(st.sampled_from(SEEDS))
    muts = draw(st.lists(mutations(seed), min_size=1, max_size=4))
    data = bytearray(seed.data)
    # Truncation last, so that field writes land where the seed's headers said.
    for m in sorted(muts, key=lambda m: m.kind == "truncate"):
        m.apply(data, seed.little)
    return seed.name, bytes(data), muts


# --- the property ---------------------------------------------------------------------------


class ExampleTimeout(BaseException):
    """A BaseException, so that no ``except Exception`` in livesym can swallow it."""


@contextmanager
def guarded() -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise ExampleTimeout(f"example took more than {TIME_LIMIT} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT, f"example allocated {peak / 2**20:.1f} MiB at its peak"


_DIR = tempfile.TemporaryDirectory(prefix="livesym-fuzz-")
_counter = iter(range(1 << 62))


def write(data: bytes) -> Path:
    # A fresh name per example: ElfImage.read checks (dev, ino, size, mtime) against its headers.
    path = Path(_DIR.name) / f"f{next(_counter)}.elf"
    path.write_bytes(data)
    return path


def lookup_addresses(image: ElfImage, table: SymbolTable, extra: list[int]) -> list[int]:
    addrs: list[int] = [0, 1, 2**63, 2**64 - 1, *extra]
    for seg in image.segments:
        addrs += [seg.p_vaddr, seg.p_vaddr + seg.p_memsz // 2, seg.p_vaddr + seg.p_memsz - 1]
    n = len(table)
    for i in sorted({k * n // 8 for k in range(8)} if n else ()):
        start, end = table.start(i), table.end(i)
        addrs += [start, start - 1, end - 1, end, (start + end) // 2]
    return addrs[:LOOKUPS]


def check(path: Path, extra: Sequence[int] = ()) -> str:
    """The property; returns how far the file got, for statistics."""
    try:
        image = load_image(path)
    except LivesymError as e:
        assert "\n" not in str(e), "error messages are one line"
        return "load_image raised"
    try:
        table = load_symbols(image)
    except LivesymError as e:
        assert "\n" not in str(e)
        return "load_symbols raised"
    assert isinstance(table, SymbolTable)
    assert all(isinstance(p, str) for p in table.problems)
    for addr in lookup_addresses(image, table, list(extra)):
        hit = table.lookup(addr)
        i = table.index_of(addr)
        if hit is None:
            assert i is None, addr
            continue
        assert isinstance(hit, SymbolHit) and i is not None
        assert hit.vaddr <= addr < hit.vaddr + hit.size and hit.offset == addr - hit.vaddr
        assert (table.start(i), table.end(i)) == (hit.vaddr, hit.vaddr + hit.size)
        assert table.name(i) == hit.name and table.aliases(i)[0] == hit.name
        assert isinstance(hit.demangled, str)
    for entry in islice(table.entries(), 200):
        assert entry.vaddr < entry.end and entry.name == entry.aliases[0]
    return "symbols loaded"


@settings(FUZZ, max_examples=200)
@given(mutated_files(), st.lists(st.integers(0, 2**64 - 1), max_size=4))
def test_mutated_files_never_crash_or_hang(case, extra) -> None:
    name, data, muts = case
    path = write(data)
    try:
        with guarded():
            event(f"{name}: {check(path, extra)}")
            for m in muts:
                event(f"mutation {m.kind}")
    finally:
        path.unlink()


@settings(FUZZ, max_examples=60)
@given(st.sampled_from(SEEDS), st.data())
def test_truncation_at_any_length(seed: Seed, data: st.DataObject) -> None:
    cut = data.draw(
        st.one_of(st.integers(0, min(len(seed.data), 0x200)), st.integers(0, len(seed.data))),
        label="cut",
    )
    path = write(seed.data[:cut])
    try:
        with guarded():
            event(f"{seed.name}: {check(path)}")
    finally:
        path.unlink()


def _hostile_syms() -> st.SearchStrategy[tuple[Sym, ...]]:
    value = st.one_of(
        st.sampled_from([0, 1, 0x1000, 0x17FF, 0x1800, 2**31, 2**32 - 1, 2**63, 2**64 - 1]),
        st.integers(0x1000, 0x1900),
        st.integers(0, 2**64 - 1),
    )
    size = st.one_of(
        st.sampled_from([0, 1, 0x10, 2**32 - 1, 2**63, 2**64 - 1]), st.integers(0, 0x1000)
    )
    name = st.one_of(
        st.sampled_from(["f", "g", "_Z1fv", "_ZN1a1bEv", "_R", "_ZZZ", "", "@@", "x" * 300]),
        st.binary(max_size=40).filter(lambda b: b"\0" not in b),
    )
    sym = st.builds(
        Sym,
        name=name,
        value=value,
        size=size,
        type=st.sampled_from([2, 2, 2, 10, 1, 0]),
        bind=st.sampled_from([0, 1, 2, 10, 15]),
        section=st.one_of(
            st.just(".text"), st.sampled_from([0, 1, 2, 5, 200, 0xFF00, 0xFFF1, 0xFFFF])
        ),
    )
    return st.lists(sym, max_size=40).map(tuple)


HAVE_READELF = os.access(ref.READELF, os.X_OK)


@settings(FUZZ, max_examples=60)
@given(
    st.sampled_from(
        [(64, True, EM_X86_64), (64, False, EM_S390), (32, True, EM_386), (32, False, EM_ARM)]
    ),
    _hostile_syms(),
    _hostile_syms(),
)
def test_hostile_symbol_tables_never_crash_and_match_readelf(layout, symtab, dynsym) -> None:
    """Valid files with hostile symbols: no crash, and (b) the same tables readelf implies."""
    elf_class, little, machine = layout
    if elf_class == 32:  # ELF32 fields hold 32 bits
        symtab, dynsym = (
            tuple(replace(s, value=s.value & 0xFFFFFFFF, size=s.size & 0xFFFFFFFF) for s in syms)
            for syms in (symtab, dynsym)
        )
    spec = Spec(
        elf_class=elf_class,
        little_endian=little,
        machine=machine,
        sections=(TEXT,),
        symtab=symtab,
        dynsym=dynsym,
    )
    path = write(build(spec).data)
    try:
        with guarded():
            assert check(path) == "symbols loaded"
        if HAVE_READELF:  # the semantics, differentially (see tests/support/readelf_ref.py)
            listing = ref.run_readelf(str(path))
            assert listing.returncode == 0 and not listing.unparsed, listing
            expected = ref.ranges(ref.functions(listing, machine), listing.sections)
            report = ref.compare(load_symbols(load_image(path)), expected)
            assert report.mismatch_count == 0, report.mismatches
    finally:
        path.unlink()


# --- aimed cases ----------------------------------------------------------------------------


WITH_STRTABS = [s for s in SEEDS if s.strtabs]


@pytest.mark.parametrize("seed", WITH_STRTABS, ids=[s.name for s in WITH_STRTABS])
def test_string_tables_without_nuls(seed: Seed) -> None:
    data = bytearray(seed.data)
    for offset, length in seed.strtabs:
        Mutation("nuls", offset, length).apply(data, seed.little)
    path = write(bytes(data))
    try:
        with guarded():
            check(path)
    finally:
        path.unlink()


SMALL_SEEDS = [s for s in SEEDS if len(s.data) < 256 << 10]  # libc: random tests only (time)


@pytest.mark.parametrize("seed", SMALL_SEEDS, ids=[s.name for s in SMALL_SEEDS])
def test_every_aimed_field_at_every_extreme(seed: Seed) -> None:
    """Not random: each aimed header field (not symbol entries) at each extreme value."""
    for f in seed.fields:
        if ".st_" in f.label:
            continue  # symbol entries: covered by the random tests
        for value in extremes(f.width, len(seed.data)):
            data = bytearray(seed.data)
            Mutation("field", f.offset, f.width, value).apply(data, seed.little)
            path = write(bytes(data))
            try:
                with guarded():
                    check(path)
            except BaseException as e:
                raise AssertionError(f"{seed.name}: {f.label} = {value:#x}: {e!r}") from e
            finally:
                path.unlink()


def test_lookup_of_a_demangling_bomb_stays_bounded() -> None:
    """Regression: at 811046f, lookup() demangled eagerly and without bound: 22 levels (222
    bytes) peaked at 104 MiB of Python allocations here."""
    name = substitution_bomb(22)
    spec = Spec(sections=(TEXT,), symtab=(Sym(name, 0x1000, 0x10),))
    path = write(build(spec).data)
    try:
        with guarded():
            table = load_symbols(load_image(path))
            hit = table.lookup(0x1000)
            assert hit is not None and hit.name == name
            assert len(hit.demangled) < 1 << 20
    finally:
        path.unlink()


_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from livesym.elf.image import load_image
from livesym.elf.symtab import load_symbols
hit = load_symbols(load_image(sys.argv[1])).lookup(0x1000)
print(len(hit.demangled))
"""


def test_lookup_of_a_huge_demangling_bomb_finishes() -> None:
    """Regression: 40 levels (402 bytes) would demangle to ~10^12 bytes. At 811046f lookup()
    did not return within 120 s under a 4 GB address-space limit (inside __cxa_demangle, in C,
    where the guard's timer cannot interrupt it; without a limit it eats memory until killed).
    So this runs in a child with a deadline and an address-space limit."""
    spec = Spec(sections=(TEXT,), symtab=(Sym(substitution_bomb(40), 0x1000, 0x10),))
    path = write(build(spec).data)

    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path)],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("lookup() of a 402-byte mangled name ran for more than 20 s")
    finally:
        path.unlink()
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert int(proc.stdout) < 1 << 20


# A minimal ELF64 header for the hand-laid files below: no program or section headers yet.
_EHDR64 = build(Spec(section_headers=False)).data[:64]
NOTE_AREA = 0x1000, 1 << 20  # offset, size: 1 MiB of zeros, livesym's MAX_NOTE_BYTES


def _note_bomb(path: Path, copies: int, via: str) -> None:
    """``copies`` section headers (SHT_NOTE) or PT_NOTEs, all naming one 1 MiB zero note area.

    A zero note header says namesz = descsz = 0, so a note walker steps 12 bytes at a time:
    ~87,000 Python iterations (~20 ms) per copy. At 811046f nothing bounded the copies but
    e_shnum/e_phnum (65535) or, with extended numbering, MAX_SECTIONS (then 1,000,000): 2000
    copies (a 1.2 MB file) took 39 s in load_image, 65535 copies (4.7 MB) would take ~20 min.
    """
    note_off, note_size = NOTE_AREA
    table = note_off + note_size
    ehdr = bytearray(_EHDR64)
    if via == "sections":
        struct.pack_into("<QQ", ehdr, 32, 0, table)  # e_phoff, e_shoff
        struct.pack_into("<HHHH", ehdr, 54, 56, 0, 64, copies + 1)  # e_phnum 0, e_shnum
        struct.pack_into("<H", ehdr, 62, 0)  # e_shstrndx: none
        entry = struct.pack("<IIQQQQIIQQ", 0, 7, 0, 0, note_off, note_size, 0, 0, 4, 0)
        headers = b"\0" * 64 + entry * copies
    else:
        struct.pack_into("<QQ", ehdr, 32, table, 0)  # e_phoff, e_shoff
        struct.pack_into("<HHHH", ehdr, 54, 56, copies, 64, 0)
        headers = struct.pack("<IIQQQQQQ", 4, 4, note_off, 0, 0, note_size, note_size, 4) * copies
    with open(path, "wb") as f:
        f.write(ehdr)
        f.truncate(table)  # sparse: the note area costs no disk
        f.seek(table)
        f.write(headers)


@pytest.mark.parametrize("via", ["sections", "segments"])
def test_many_copies_of_one_note_area_stay_bounded(via: str) -> None:
    path = Path(_DIR.name) / f"notes-{via}.elf"
    _note_bomb(path, 2000, via)
    try:
        with guarded():
            check(path)
    finally:
        path.unlink()


def test_a_million_claimed_section_headers_stay_bounded() -> None:
    """Regression: at 811046f, extended numbering (e_shnum = 0, section 0's sh_size) could claim
    up to MAX_SECTIONS = 1,000,000 headers, each decoded into Python objects: a 64 MB sparse
    file cost load_image ~5 s and ~460 MB (25 s and 650 MiB traced under tracemalloc)."""
    count = 999_999
    shoff = 0x1000
    ehdr = bytearray(_EHDR64)
    struct.pack_into("<QQ", ehdr, 32, 0, shoff)  # e_phoff, e_shoff
    struct.pack_into("<HHHHH", ehdr, 54, 56, 0, 64, 0, 0)  # e_phnum, e_shentsize, e_shnum 0
    path = Path(_DIR.name) / "million.elf"
    with open(path, "wb") as f:
        f.write(ehdr)
        f.truncate(shoff + count * 64)  # sparse zeros: SHT_NULL headers
        f.seek(shoff + 32)  # section 0's sh_size holds the real count
        f.write(struct.pack("<Q", count))
    try:
        with guarded():
            check(path)
    finally:
        path.unlink()
