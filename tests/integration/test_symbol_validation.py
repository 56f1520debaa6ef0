"""livesym's function symbol tables against GNU readelf on the real files of this machine.

For every regular ELF file under /usr/lib/x86_64-linux-gnu and /usr/bin (each inode once),
``readelf -sSW`` is the reference (parsed by tests/support/readelf_ref.py). From its listing the
function symbols are selected and their ranges resolved per livesym's documented semantics
(STT_FUNC/STT_GNU_IFUNC, defined, non-zero value; a size-0 symbol ends at the next function
start or its section's end; equal ranges merge into aliases). Then, per file:

(a) the set of (start, end, name) over livesym's entries and their aliases equals the
    reference's -- so the distinct (start, name) pairs agree, and so do sizes and the resolved
    ends of size-0 symbols;
(b) ``lookup(start)`` of every reference range returns the innermost range there (the shortest
    one starting at ``start``) with the name among its aliases, and ``lookup(end - 1)`` returns
    the innermost reference range covering that byte (greatest start, then shortest);
(c) livesym raises on none of the files.

The slow test covers every file; the fast one a dozen named files, so CI without ``-m slow``
still validates. The tests at the top check the reference parser itself: on a synthetic file
with every listing quirk, against pyelftools, and that a wrong table is caught.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from livesym.elf.gopclntab import SOURCE_GOPCLNTAB
from livesym.elf.image import load_image
from livesym.elf.symtab import load_symbols, merge_parts, symbol_parts
from tests.support import readelf_ref as ref
from tests.support.elfbuild import (
    SHN_ABS,
    STB_LOCAL,
    STB_WEAK,
    STT_GNU_IFUNC,
    STT_OBJECT,
    Sec,
    Spec,
    Sym,
    build,
)
from tests.support.parallel import map_in_processes

ROOTS = ("/usr/lib/x86_64-linux-gnu", "/usr/bin")
LIB = "/usr/lib/x86_64-linux-gnu"
# Chosen for coverage: IFUNCs (libc, libm, libmvec, libatomic), huge C++ tables with nested
# and same-start symbols (libstdc++, libLLVM), .symtab next to .dynsym (libtsan), thousands of
# size-0 symbols (libGL), hidden versions (libattr), a relocatable object (crt1.o).
NAMED_FILES = (
    f"{LIB}/libc.so.6",
    f"{LIB}/libstdc++.so.6",
    f"{LIB}/libLLVM-15.so.1",
    os.path.realpath("/usr/bin/python3"),
    f"{LIB}/libm.so.6",
    f"{LIB}/libmvec.so.1",
    f"{LIB}/libatomic.so.1",
    f"{LIB}/libGL.so.1",
    f"{LIB}/libattr.so.1",
    f"{LIB}/libtsan.so.2",
    f"{LIB}/crt1.o",
    "/usr/bin/true",
)
READELF_WORKERS = 2  # readelf runs in other processes; the main thread parses with livesym

needs_readelf = pytest.mark.skipif(
    not os.access(ref.READELF, os.X_OK), reason="binutils readelf not installed"
)


@dataclass
class Totals:
    files: int = 0
    function_symbols: int = 0
    lookups: int = 0
    mismatches: int = 0  # (a) and (b)
    livesym_raised: int = 0  # (c)
    reference_unusable: int = 0  # readelf failed, or printed a symbol line the parser missed
    failures: list[str] = field(default_factory=list)  # one line per problem, capped per file

    def as_dict(self) -> dict[str, int]:
        return {
            "files": self.files,
            "function_symbols": self.function_symbols,
            "lookups": self.lookups,
            "mismatches": self.mismatches,
            "livesym_raised": self.livesym_raised,
            "reference_unusable": self.reference_unusable,
        }

    def add(self, other: Totals) -> None:
        self.files += other.files
        self.function_symbols += other.function_symbols
        self.lookups += other.lookups
        self.mismatches += other.mismatches
        self.livesym_raised += other.livesym_raised
        self.reference_unusable += other.reference_unusable
        self.failures += other.failures

    @property
    def ok(self) -> bool:
        return not (self.mismatches or self.livesym_raised or self.reference_unusable)


def _listings(paths: list[str]) -> Iterator[tuple[str, ref.Listing]]:
    """readelf listings in order, at most a few runs ahead (a listing can be 100 MB of text)."""
    with ThreadPoolExecutor(READELF_WORKERS) as pool:
        ahead: deque[tuple[str, Future[ref.Listing]]] = deque()
        todo = iter(paths)
        for path in todo:
            ahead.append((path, pool.submit(ref.run_readelf, path)))
            if len(ahead) >= 2 * READELF_WORKERS:
                break
        while ahead:
            path, fut = ahead.popleft()
            nxt = next(todo, None)
            if nxt is not None:
                ahead.append((nxt, pool.submit(ref.run_readelf, nxt)))
            yield path, fut.result()


def validate(paths: list[str]) -> Totals:
    totals = Totals()
    for path, listing in _listings(paths):
        totals.files += 1
        if listing.returncode or listing.unparsed:
            totals.reference_unusable += 1
            totals.failures.append(
                f"{path}: reference unusable: readelf exit {listing.returncode}, "
                f"stderr {listing.stderr[:200]!r}, unparsed {listing.unparsed[:3]!r}"
            )
            continue
        try:
            # The symbol tables readelf lists: a stripped Go program's functions from its
            # .gopclntab are held to nm and its DWARF in tests/unit/test_gopclntab.py.
            parts = symbol_parts(load_image(path))
            table = merge_parts([p for p in parts if p.source != SOURCE_GOPCLNTAB])
        except Exception as e:  # (c): any exception, LivesymError included, is a failure
            totals.livesym_raised += 1
            totals.failures.append(f"{path}: livesym raised {type(e).__name__}: {e}")
            continue
        expected = ref.ranges(ref.functions(listing, ref.e_machine(path)), listing.sections)
        report = ref.compare(table, expected)
        totals.function_symbols += report.symbols
        totals.lookups += report.lookups
        totals.mismatches += report.mismatch_count
        totals.failures += [f"{path}: {m}" for m in report.mismatches]
    return totals


def _report(totals: Totals, seconds: float, record_property) -> None:
    counts = totals.as_dict()
    for key, value in counts.items():
        record_property(key, value)
    record_property("seconds", round(seconds, 1))
    print(
        f"\nsymbol validation: {counts['files']} files, {counts['function_symbols']} function "
        f"symbols, {counts['lookups']} lookups, {counts['mismatches']} mismatches, "
        f"{counts['livesym_raised']} files livesym raised on, "
        f"{counts['reference_unusable']} files without a usable reference, {seconds:.1f} s"
    )
    for line in totals.failures[:200]:
        print("  " + line)


# --- the reference parser itself ------------------------------------------------------------

QUIRKS = Spec(
    sections=(Sec(".text", 0x1000, 0x20000), Sec(".other", 0x40000, 0x100)),
    symtab=(
        Sym("plain", 0x1000, 0x10),
        Sym(b"ctl\x01\x1f\x7fx", 0x1010, 4),
        Sym("sp ace", 0x1020, 4),
        Sym("caf\u00e9", 0x1030, 4),
        Sym(b"bad\xff\xfeend", 0x1040, 4),
        Sym("ifn", 0x1050, 4, type=STT_GNU_IFUNC),
        Sym("big", 0x2000, 100_000),  # printed as 0x186a0
        Sym("big2", 0x3000, 99_999),  # printed in decimal
        Sym("uniq", 0x4000, 4, bind=10),  # STB_GNU_UNIQUE
        Sym("oth", 0x5000, 4, other=0x88),  # Vis then "[<other>: 88]"
        Sym("absf", 0x6000, 4, section=SHN_ABS),
        Sym("badidx", 0x7000, 4, section=200),
        Sym("osr", 0x8000, 4, section=0xFF20),
        Sym("prc", 0x9000, 4, section=0xFF01),
        Sym("xidx", 0xB000, 4, section=0xFFFF),
        Sym("at@foo", 0xD000, 4),
        Sym("hid", 0xE000, 4, other=2),
        Sym("loc", 0xF000, 8, bind=STB_LOCAL),
        Sym("zero_a", 0x10000),  # size 0: up to zero_b
        Sym("zero_b", 0x10040, bind=STB_WEAK),  # size 0: up to the end of .text
        Sym("zero_alias", 0x10040),
        Sym("zero_other", 0x40080, section=".other"),  # size 0: the end of .other
        Sym("outer", 0xF100, 0x100),
        Sym("inner", 0xF100, 0x10),  # same start, shorter: lookup(0xf100) is inner
        Sym("nested", 0xF120, 0x10),
        Sym("data", 0x12000, 8, type=STT_OBJECT),
        Sym("undef", 0, 0, section=0),
    ),
    # No .gnu.version here, so readelf appends no version and an '@' in .dynsym is the name's.
    dynsym=(Sym("plain", 0x1000, 0x10), Sym("dynonly", 0x1100, 0x20), Sym("dyn@at", 0x1200, 4)),
)


@needs_readelf
@pytest.mark.parametrize("osabi", [0, 3], ids=["sysv", "gnu"])
def test_reference_parser_handles_every_listing_quirk(tmp_path: Path, osabi: int) -> None:
    data = bytearray(build(QUIRKS).data)
    data[7] = osabi  # EI_OSABI: IFUNC/UNIQUE are printed as "<OS specific>: 10" unless GNU
    path = tmp_path / "quirks.elf"
    path.write_bytes(bytes(data))
    listing = ref.run_readelf(str(path))
    assert listing.returncode == 0 and listing.unparsed == []
    raw = subprocess.run(
        [ref.READELF, "-sW", str(path)], capture_output=True, env={"LC_ALL": "C"}, check=True
    ).stdout
    assert (b"<OS specific>: 10 GLOBAL" in raw) == (osabi == 0)  # the IFUNC, blanks and all
    assert (b" IFUNC " in raw) == (osabi == 3)
    assert b"0x186a0 FUNC" in raw and b"DEFAULT [<other>: 88]" in raw
    tables = {name: syms for name, _t, syms in listing.tables}
    assert set(tables) == {b".symtab", b".dynsym"}
    by_name = {s.name: s for s in tables[b".symtab"]}
    assert len(by_name) == len(QUIRKS.symtab or ()) + 1  # every symbol line parsed, and null
    assert by_name[b"ctl^A^_^\xbfx"].value == 0x1010
    assert by_name[b"caf\xc3\xa9"].size == 4
    assert by_name[b"bad\xff\xfeend"].value == 0x1040
    assert by_name[b"sp ace"].value == 0x1020
    assert by_name[b"ifn"].type == STT_GNU_IFUNC
    assert by_name[b"uniq"].bind == 10
    assert (by_name[b"big"].size, by_name[b"big2"].size) == (100_000, 99_999)
    assert by_name[b"oth"].ndx.isdigit() and by_name[b"hid"].ndx.isdigit()
    assert by_name[b"absf"].ndx == b"ABS"
    assert by_name[b"badidx"].ndx == b"bad section index[200]"
    assert by_name[b"osr"].ndx == b"OS [0xff20]"
    assert by_name[b"prc"].ndx == b"PRC[0xff01]"
    assert by_name[b"xidx"].ndx == b"RSV[0xffff]"
    assert by_name[b"at@foo"].value == 0xD000  # .symtab names keep their '@'
    assert by_name[b"undef"].ndx == b"UND"
    assert {s.name for s in tables[b".dynsym"]} == {b"", b"plain", b"dynonly", b"dyn@at"}

    # livesym agrees with the reference on this file too, names with control bytes included.
    table = load_symbols(load_image(path))
    expected = ref.ranges(ref.functions(listing, ref.e_machine(str(path))), listing.sections)
    assert (0x10000, 0x10040, "zero_a") in expected
    assert (0x10040, 0x21000, "zero_b") in expected
    assert (0x40080, 0x40100, "zero_other") in expected
    assert (0x1010, 0x1014, "ctl^A^_^\\xbfx") in expected
    assert (0x1040, 0x1044, "bad\\xff\\xfeend") in expected
    report = ref.compare(table, expected)
    assert report.mismatch_count == 0, report.mismatches
    assert report.symbols == len(expected) and report.lookups >= len(expected)


@needs_readelf
def test_reference_parser_strips_dynsym_versions_only() -> None:
    libattr = f"{LIB}/libattr.so.1"
    if not os.path.exists(libattr) or not os.path.exists(f"{LIB}/libc.so.6"):
        pytest.skip("libattr.so.1 or libc.so.6 not present")
    raw = subprocess.run([ref.READELF, "-sW", libattr], capture_output=True, check=True).stdout
    assert b" getxattr@ATTR_1.0\n" in raw  # a hidden version: one '@'
    listing = ref.run_readelf(libattr)
    dyn = next(syms for _n, t, syms in listing.tables if t == "DYNSYM")
    names = {s.name for s in dyn}
    assert b"getxattr" in names and not any(b"@" in n for n in names)
    libc = ref.run_readelf(f"{LIB}/libc.so.6")
    dyn = next(syms for _n, t, syms in libc.tables if t == "DYNSYM")
    names = {s.name for s in dyn}
    assert {b"strcpy", b"memcpy", b"__tls_get_addr"} <= names  # @@GLIBC_2.2.5, @GLIBC_2.3 (41)
    assert sum(s.type == STT_GNU_IFUNC for s in dyn) > 20


def _pyelftools_functions(path: str) -> list[tuple[int, int, str, str]]:
    """The same selection from pyelftools (which names STT_GNU_IFUNC "STT_LOOS")."""
    out = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for want, source in (("SHT_SYMTAB", "symtab"), ("SHT_DYNSYM", "dynsym")):
            sec = next((s for s in elf.iter_sections() if s["sh_type"] == want), None)
            if sec is None:
                continue
            for s in sec.iter_symbols():
                if s["st_info"]["type"] not in ("STT_FUNC", "STT_LOOS", "STT_GNU_IFUNC"):
                    continue
                if s["st_shndx"] == "SHN_UNDEF" or s["st_value"] == 0:
                    continue
                name = ref.readelf_name(s.name)
                out.append((s["st_value"], s["st_size"], name, source))
    return sorted(out)


@needs_readelf
@pytest.mark.parametrize(
    "path",
    [f"{LIB}/libsframe.so.0", f"{LIB}/libattr.so.1", f"{LIB}/libatomic.so.1", f"{LIB}/libm.so.6"],
)
def test_reference_parser_agrees_with_pyelftools(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    listing = ref.run_readelf(path)
    mine = sorted(
        (f.start, f.size, f.name, f.source) for f in ref.functions(listing, ref.e_machine(path))
    )
    assert mine and mine == _pyelftools_functions(path)


@needs_readelf
def test_compare_catches_a_wrong_table() -> None:
    """The checker is not vacuous: a reference that differs by one byte or name is flagged."""
    path = f"{LIB}/libm.so.6"
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    listing = ref.run_readelf(path)
    table = load_symbols(load_image(path))
    expected = ref.ranges(ref.functions(listing, ref.e_machine(path)), listing.sections)
    assert ref.compare(table, expected).mismatch_count == 0
    start, end, name = sorted(expected)[len(expected) // 2]
    for wrong in ((start, end + 1, name), (start, end, name + "x"), (start + 1, end, name)):
        altered = (expected - {(start, end, name)}) | {wrong}
        assert ref.compare(table, altered).mismatch_count > 0, wrong


# --- validation -----------------------------------------------------------------------------


@needs_readelf
def test_named_files_match_readelf(record_property) -> None:
    paths = [p for p in NAMED_FILES if os.path.exists(p)]
    assert len(paths) >= 6, "too few of the named system files exist to validate anything"
    t0 = time.monotonic()
    totals = validate(paths)
    _report(totals, time.monotonic() - t0, record_property)
    assert totals.function_symbols > 10_000
    assert totals.ok, "\n".join(totals.failures[:50])


@pytest.mark.slow
@needs_readelf
def test_every_system_elf_file_matches_readelf(record_property) -> None:
    t0 = time.monotonic()
    paths = list(ref.iter_elf_files(ROOTS))
    totals = Totals()
    for part in map_in_processes(validate, paths):
        totals.add(part)
    _report(totals, time.monotonic() - t0, record_property)
    assert totals.files > 100
    assert totals.ok, "\n".join(totals.failures[:50])
