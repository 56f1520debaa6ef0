"""Check tests/support/elfbuild.py against two independent ELF readers: readelf and pyelftools.

If the builder and livesym shared a misunderstanding of the format, tests built on the builder
would pass for the wrong reason; these readers are the outside opinion.
"""

from __future__ import annotations

import io
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection, Section, Symbol, SymbolTableSection
from elftools.elf.segments import NoteSegment
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.elfbuild import (
    EM_386,
    EM_AARCH64,
    EM_ARM,
    EM_RISCV,
    EM_S390,
    EM_X86_64,
    ET_EXEC,
    PF_R,
    PF_W,
    PF_X,
    SHN_ABS,
    SHN_UNDEF,
    STB_GLOBAL,
    STB_LOCAL,
    STB_WEAK,
    STT_FILE,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
    STT_OBJECT,
    STT_SECTION,
    Load,
    Sec,
    Spec,
    Sym,
    build,
    patch,
    shdr_field_offset,
)

READELF = "/usr/bin/readelf"
PAGE = 0x1000
BUILD_ID = bytes.fromhex("0123456789abcdef0011223344556677deadbeef")

CASES = [
    (32, True, EM_386),
    (32, True, EM_ARM),
    (32, True, EM_RISCV),
    (64, True, EM_X86_64),
    (64, True, EM_AARCH64),
    (64, True, EM_RISCV),
    (64, False, EM_S390),
    (32, False, EM_ARM),  # big-endian ARM: readelf still decodes it
]
CASE_IDS = [f"elf{c}-{'le' if le else 'be'}-{m}" for c, le, m in CASES]

READELF_MACHINE = {
    EM_386: "Intel 80386",
    EM_ARM: "ARM",
    EM_X86_64: "Advanced Micro Devices X86-64",
    EM_AARCH64: "AArch64",
    EM_RISCV: "RISC-V",
    EM_S390: "IBM S/390",
}
PYELF_MACHINE = {
    EM_386: "EM_386",
    EM_ARM: "EM_ARM",
    EM_X86_64: "EM_X86_64",
    EM_AARCH64: "EM_AARCH64",
    EM_RISCV: "EM_RISCV",
    EM_S390: "EM_S390",
}
TYPE_NAME = {
    STT_NOTYPE: "NOTYPE",
    STT_OBJECT: "OBJECT",
    STT_FUNC: "FUNC",
    STT_SECTION: "SECTION",
    STT_FILE: "FILE",
}
BIND_NAME = {STB_LOCAL: "LOCAL", STB_GLOBAL: "GLOBAL", STB_WEAK: "WEAK"}

SECTIONS = (
    Sec(".text", 0x1000, 0x100),
    Sec(".hot", 0x2040, 0x30),  # starts mid-page: its file offset must follow suit
    Sec(".data", 0x3010, 0x40, "AW"),
    Sec(".bss", 0x3050, 0x200, "AW", nobits=True),
    Sec(".comment", 0, 8, ""),
)
# Locals are interleaved on purpose: the builder must move them to the front.
SYMTAB = (
    Sym("main", 0x1000, 0x40),
    Sym("helper", 0x1040, 0x10, bind=STB_LOCAL),
    Sym("hot_loop", 0x2040, 0x30, section=".hot"),
    Sym("counter", 0x3010, 8, STT_OBJECT, STB_WEAK, ".data"),
    Sym("buffer", 0x3050, 0x200, STT_OBJECT, STB_LOCAL, ".bss"),
    Sym("prog.c", 0, 0, STT_FILE, STB_LOCAL, SHN_ABS),
    Sym("puts", 0, 0, STT_NOTYPE, section=SHN_UNDEF),
    Sym(".text", 0x1000, 0, STT_SECTION, STB_LOCAL),
)
DYNSYM = (Sym("main", 0x1000, 0x40), Sym("puts", 0, 0, section=SHN_UNDEF))


def rich_spec(elf_class: int, little: bool, machine: int) -> Spec:
    return Spec(
        elf_class=elf_class,
        little_endian=little,
        machine=machine,
        entry=0x1000,
        sections=SECTIONS,
        symtab=SYMTAB,
        dynsym=DYNSYM,
        build_id=BUILD_ID,
    )


def locals_first(syms: tuple[Sym, ...]) -> list[Sym]:
    return [s for s in syms if s.bind == STB_LOCAL] + [s for s in syms if s.bind != STB_LOCAL]


# --- readelf -------------------------------------------------------------------------------


@dataclass
class ReadelfSection:
    nr: int
    name: str
    type: str
    addr: int
    offset: int
    size: int
    entsize: int
    flags: str
    link: int
    info: int
    align: int


@dataclass
class ReadelfView:
    header: dict[str, str]
    sections: dict[str, ReadelfSection]
    segments: list[tuple[str, int, int, int, int, str, int]]  # type off vaddr filesz memsz flg al
    symbols: dict[str, list[tuple[int, int, str, str, str, str]]]  # value size type bind ndx name
    build_id: str | None
    stderr: str


def run_readelf(data: bytes, tmp_path: Path) -> ReadelfView:
    if not Path(READELF).exists():
        pytest.skip(f"{READELF} (binutils) is not installed")
    path = tmp_path / "built.elf"
    path.write_bytes(data)
    proc = subprocess.run(
        [READELF, "-hlSsnW", str(path)], capture_output=True, text=True, check=False
    )
    return parse_readelf(proc.stdout, proc.stderr)


# value, size, type (which may be "<OS specific>: 10"), bind, visibility, ndx, name (may be empty)
SYMBOL_LINE = re.compile(
    r"\s*\d+: ([0-9a-f]+)\s+(\S+) (<OS specific>: \d+|\S+)\s+(\S+)\s+\S+\s+(\S+) ?(.*)$"
)


def parse_readelf(out: str, err: str) -> ReadelfView:
    header: dict[str, str] = {}
    sections: dict[str, ReadelfSection] = {}
    segments: list[tuple[str, int, int, int, int, str, int]] = []
    symbols: dict[str, list[tuple[int, int, str, str, str, str]]] = {}
    block, table = "", ""
    for line in out.splitlines():
        if line.startswith(("ELF Header:", "Section Headers:", "Program Headers:")):
            block = line.split(":")[0]
        elif m := re.match(r"Symbol table '(\S+)' contains", line):
            block, table = "symbols", m.group(1)
            symbols[table] = []
        elif not line.strip() or not line.startswith(" "):
            block = ""
        elif block == "ELF Header" and ":" in line:
            key, value = line.split(":", 1)
            header[key.strip()] = value.strip()
        elif block == "Section Headers" and (m := re.match(r"\s*\[\s*(\d+)\]", line)):
            fields = line[m.end() :].split()
            if int(m.group(1)) == 0:
                continue
            name, typ, addr, off, size, es, *rest = fields
            flags = rest[0] if len(rest) == 4 else ""
            link, info, align = (int(x) for x in rest[-3:])
            sections[name] = ReadelfSection(
                int(m.group(1)),
                name,
                typ,
                int(addr, 16),
                int(off, 16),
                int(size, 16),
                int(es, 16),
                flags,
                link,
                info,
                align,
            )
        elif block == "Program Headers" and re.match(r"\s+[A-Z]", line) and "Offset" not in line:
            t = line.split()  # the flag column may contain spaces ("R E")
            segments.append(
                (
                    t[0],
                    int(t[1], 16),
                    int(t[2], 16),
                    int(t[4], 16),
                    int(t[5], 16),
                    "".join(t[6:-1]),
                    int(t[-1], 16),
                )
            )
        elif block == "symbols" and (m := SYMBOL_LINE.match(line)):
            value, size, typ, bind, ndx, name = m.groups()
            symbols[table].append((int(value, 16), int(size, 0), typ, bind, ndx, name))
    build_id = re.search(r"Build ID: ([0-9a-f]+)", out)
    return ReadelfView(
        header, sections, segments, symbols, build_id.group(1) if build_id else None, err
    )


def readelf_rows(syms: tuple[Sym, ...], view: ReadelfView) -> list[tuple[Any, ...]]:
    def ndx(section: str | int) -> str:
        if isinstance(section, str):
            return str(view.sections[section].nr)
        return {SHN_UNDEF: "UND", SHN_ABS: "ABS"}.get(section, str(section))

    null = (0, 0, "NOTYPE", "LOCAL", "UND", "")
    return [null] + [
        (s.value, s.size, TYPE_NAME[s.type], BIND_NAME[s.bind], ndx(s.section), s.name)
        for s in locals_first(syms)
    ]


@pytest.mark.parametrize(("elf_class", "little", "machine"), CASES, ids=CASE_IDS)
def test_readelf_decodes_header_sections_segments_symbols_and_build_id(
    elf_class: int, little: bool, machine: int, tmp_path: Path
) -> None:
    spec = rich_spec(elf_class, little, machine)
    view = run_readelf(build(spec).data, tmp_path)

    assert view.stderr == ""  # readelf warns on anything inconsistent
    assert view.header["Class"] == f"ELF{elf_class}"
    assert view.header["Data"].endswith("little endian" if little else "big endian")
    assert view.header["Machine"] == READELF_MACHINE[machine]
    assert view.header["Type"].startswith("DYN")
    assert int(view.header["Entry point address"], 16) == 0x1000
    assert view.header["OS/ABI"] == "UNIX - System V"

    secs = view.sections
    for sec in SECTIONS:
        got = secs[sec.name]
        assert (got.addr, got.size) == (sec.addr, sec.size)
        assert got.type == ("NOBITS" if sec.nobits else "PROGBITS")
        assert set(got.flags) == set(sec.flags)
        if "A" in sec.flags:
            assert got.offset % PAGE == sec.addr % PAGE
    entsize = 16 if elf_class == 32 else 24
    nlocal = sum(s.bind == STB_LOCAL for s in SYMTAB)
    assert (secs[".symtab"].link, secs[".symtab"].info) == (secs[".strtab"].nr, 1 + nlocal)
    assert (secs[".dynsym"].link, secs[".dynsym"].info) == (secs[".dynstr"].nr, 1)
    assert secs[".symtab"].entsize == secs[".dynsym"].entsize == entsize
    assert "A" in secs[".dynsym"].flags and "A" not in secs[".symtab"].flags
    assert secs[".note.gnu.build-id"].type == "NOTE" and secs[".note.gnu.build-id"].align == 4
    assert int(view.header["Section header string table index"]) == secs[".shstrtab"].nr

    given_ranges = [(s.addr, s.addr + s.size) for s in SECTIONS if "A" in s.flags]
    for name in (".dynsym", ".dynstr", ".note.gnu.build-id"):
        lo, hi = secs[name].addr, secs[name].addr + secs[name].size
        assert lo > 0 and all(hi <= a or lo >= b for a, b in given_ranges), name

    expected_loads = sorted(
        (
            "LOAD",
            s.offset,
            s.addr,
            0 if s.type == "NOBITS" else s.size,
            s.size,
            "R" + "W" * ("W" in s.flags) + "E" * ("X" in s.flags),
            PAGE,
        )
        for s in secs.values()
        if "A" in s.flags
    )
    assert sorted(seg for seg in view.segments if seg[0] == "LOAD") == expected_loads
    note = secs[".note.gnu.build-id"]
    assert ("NOTE", note.offset, note.addr, note.size, note.size, "R", 4) in view.segments

    assert view.symbols[".symtab"] == readelf_rows(SYMTAB, view)
    assert view.symbols[".dynsym"] == readelf_rows(DYNSYM, view)
    assert view.build_id == BUILD_ID.hex()


@pytest.mark.parametrize(("elf_class", "little", "machine"), CASES, ids=CASE_IDS)
def test_file_contents_never_overlap_headers_or_each_other(
    elf_class: int, little: bool, machine: int, tmp_path: Path
) -> None:
    data = build(rich_spec(elf_class, little, machine)).data
    view = run_readelf(data, tmp_path)
    ehsize, phentsize = (52, 32) if elf_class == 32 else (64, 56)
    shoff, shnum = int(view.header["Start of section headers"].split()[0]), len(view.sections)
    spans = sorted(
        (s.offset, s.offset + s.size)
        for s in view.sections.values()
        if s.type != "NOBITS" and s.size
    )
    previous_end = ehsize + phentsize * len(view.segments)
    for start, end in spans:
        assert start >= previous_end
        previous_end = end
    assert shoff >= previous_end and shoff % 8 == 0
    assert len(data) == shoff + (shnum + 1) * (40 if elf_class == 32 else 64)


# --- pyelftools ----------------------------------------------------------------------------


def section(elf: ELFFile, name: str) -> Section:
    sec = elf.get_section_by_name(name)
    assert sec is not None, f"pyelftools finds no {name}"
    return sec


def section_index(elf: ELFFile, name: str) -> int:
    index = elf.get_section_index(name)
    assert index is not None, f"pyelftools finds no {name}"
    return index


def symbols(elf: ELFFile, table: str) -> list[Symbol]:
    sec = section(elf, table)
    assert isinstance(sec, SymbolTableSection)
    return list(sec.iter_symbols())


def pyelf_rows(syms: tuple[Sym, ...], elf: ELFFile) -> list[tuple[Any, ...]]:
    def ndx(section: str | int) -> str | int:
        if isinstance(section, str):
            return section_index(elf, section)
        return {SHN_UNDEF: "SHN_UNDEF", SHN_ABS: "SHN_ABS"}.get(section, section)

    null = ("", 0, 0, "STT_NOTYPE", "STB_LOCAL", "SHN_UNDEF")
    return [null] + [
        (
            s.name,
            s.value,
            s.size,
            f"STT_{TYPE_NAME[s.type]}",
            f"STB_{BIND_NAME[s.bind]}",
            ndx(s.section),
        )
        for s in locals_first(syms)
    ]


def symbol_rows(elf: ELFFile, table: str) -> list[tuple[Any, ...]]:
    return [
        (
            s.name,
            s["st_value"],
            s["st_size"],
            s["st_info"]["type"],
            s["st_info"]["bind"],
            s["st_shndx"],
        )
        for s in symbols(elf, table)
    ]


@pytest.mark.parametrize(("elf_class", "little", "machine"), CASES, ids=CASE_IDS)
def test_pyelftools_decodes_header_sections_segments_symbols_and_build_id(
    elf_class: int, little: bool, machine: int
) -> None:
    elf = ELFFile(io.BytesIO(build(rich_spec(elf_class, little, machine)).data))

    assert (elf.elfclass, elf.little_endian) == (elf_class, little)
    assert (elf["e_machine"], elf["e_type"], elf["e_entry"]) == (
        PYELF_MACHINE[machine],
        "ET_DYN",
        0x1000,
    )
    assert elf["e_ident"]["EI_VERSION"] == "EV_CURRENT" and elf["e_version"] == "EV_CURRENT"

    names = [s.name for s in elf.iter_sections()]
    assert names[0] == "" and elf.get_section(elf["e_shstrndx"]).name == ".shstrtab"
    assert {s.name for s in SECTIONS} | {".symtab", ".strtab", ".dynsym", ".dynstr"} <= set(names)
    for sec in SECTIONS:
        got = section(elf, sec.name)
        assert (got["sh_addr"], got["sh_size"]) == (sec.addr, sec.size)
        if not sec.nobits:
            assert got.data() == b"\xcc" * sec.size

    symtab = section(elf, ".symtab")
    assert symtab["sh_link"] == section_index(elf, ".strtab")
    assert symtab["sh_info"] == 1 + sum(s.bind == STB_LOCAL for s in SYMTAB)
    assert symtab["sh_entsize"] == (16 if elf_class == 32 else 24)
    assert symbol_rows(elf, ".symtab") == pyelf_rows(SYMTAB, elf)
    assert symbol_rows(elf, ".dynsym") == pyelf_rows(DYNSYM, elf)

    loads = sorted(
        (
            seg["p_offset"],
            seg["p_vaddr"],
            seg["p_paddr"],
            seg["p_filesz"],
            seg["p_memsz"],
            seg["p_flags"],
            seg["p_align"],
        )
        for seg in elf.iter_segments()
        if seg["p_type"] == "PT_LOAD"
    )
    expected = sorted(
        (
            s["sh_offset"],
            s["sh_addr"],
            s["sh_addr"],
            0 if s["sh_type"] == "SHT_NOBITS" else s["sh_size"],
            s["sh_size"],
            PF_R | (PF_W if s["sh_flags"] & 1 else 0) | (PF_X if s["sh_flags"] & 4 else 0),
            PAGE,
        )
        for s in elf.iter_sections()
        if s["sh_flags"] & 2
    )
    assert loads == expected

    note_section = section(elf, ".note.gnu.build-id")
    assert isinstance(note_section, NoteSection)
    (note,) = note_section.iter_notes()
    assert (note["n_name"], note["n_type"], note["n_desc"]) == (
        "GNU",
        "NT_GNU_BUILD_ID",
        BUILD_ID.hex(),
    )
    (pt_note,) = (seg for seg in elf.iter_segments() if seg["p_type"] == "PT_NOTE")
    assert isinstance(pt_note, NoteSegment)
    assert [n["n_desc"] for n in pt_note.iter_notes()] == [BUILD_ID.hex()]


# --- explicit loads, missing section headers, odd symbols ----------------------------------


def test_explicit_loads_are_written_verbatim(tmp_path: Path) -> None:
    # Incongruent offset/address, memsz < filesz and a huge alignment: nothing a linker makes.
    loads = (
        Load(0, 0x400000, 0x1100, 0x2000, PF_R | PF_X, 0x200000),
        Load(0x1234, 0x600000, 0x80, 0x40, PF_R | PF_W, 0x10),
    )
    for elf_class, little in ((64, True), (32, False)):
        built = build(Spec(elf_class=elf_class, little_endian=little, e_type=ET_EXEC, loads=loads))
        got = [
            (s["p_offset"], s["p_vaddr"], s["p_filesz"], s["p_memsz"], s["p_flags"], s["p_align"])
            for s in ELFFile(io.BytesIO(built.data)).iter_segments()
        ]
        assert got == [
            (ld.p_offset, ld.p_vaddr, ld.p_filesz, ld.p_memsz, ld.flags, ld.p_align) for ld in loads
        ]
        view = run_readelf(built.data, tmp_path)
        assert view.segments == [
            ("LOAD", 0, 0x400000, 0x1100, 0x2000, "RE", 0x200000),
            ("LOAD", 0x1234, 0x600000, 0x80, 0x40, "RW", 0x10),
        ]


def test_without_section_headers_shnum_is_zero_and_the_note_is_still_found(
    tmp_path: Path,
) -> None:
    built = build(Spec(section_headers=False, build_id=BUILD_ID, symtab=DYNSYM))
    elf = ELFFile(io.BytesIO(built.data))
    assert (elf["e_shoff"], elf["e_shnum"], elf.num_sections()) == (0, 0, 0)
    assert built.section_header_offset == {}
    view = run_readelf(built.data, tmp_path)
    assert view.header["Number of section headers"] == "0"
    assert view.header["Start of section headers"].startswith("0 ")
    assert view.sections == {} and view.build_id == BUILD_ID.hex()


def test_nobits_section_gets_a_load_with_zero_filesz() -> None:
    spec = Spec(sections=(Sec(".text", 0x1000, 0x10), Sec(".bss", 0x2000, 0x3000, "AW", True)))
    elf = ELFFile(io.BytesIO(build(spec).data))
    bss = section(elf, ".bss")
    (seg,) = (s for s in elf.iter_segments() if s["p_vaddr"] == 0x2000)
    assert (seg["p_filesz"], seg["p_memsz"], seg["p_offset"]) == (0, 0x3000, bss["sh_offset"])
    assert bss["sh_offset"] % PAGE == 0


def test_symbol_name_bytes_are_written_verbatim() -> None:
    raw = b"caf\xc3\xa9 \xff\x01odd"
    built = build(Spec(symtab=(Sym(raw, 0x1000), Sym("", 0x1004))))
    elf = ELFFile(io.BytesIO(built.data))
    strtab = section(elf, ".strtab").data()
    first, second = symbols(elf, ".symtab")[1:]
    assert strtab[first["st_name"] :].split(b"\0")[0] == raw
    assert second["st_name"] == 0


def test_unknown_symbol_section_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"\.nowhere"):
        build(Spec(symtab=(Sym("f", 0x1000, section=".nowhere"),)))


def test_raw_section_index_is_written_as_is() -> None:
    built = build(Spec(symtab=(Sym("f", 0x1000, section=0x1234),)))
    (_, sym) = symbols(ELFFile(io.BytesIO(built.data)), ".symtab")
    assert sym["st_shndx"] == 0x1234


def test_ifunc_shows_as_os_specific_until_osabi_is_gnu(tmp_path: Path) -> None:
    # readelf names type 10 "IFUNC" only for OSABI GNU/FreeBSD; the builder writes OSABI 0,
    # and pyelftools calls it STT_LOOS either way.
    built = build(Spec(symtab=(Sym("memcpy", 0x1000, 8, STT_GNU_IFUNC),)))
    assert run_readelf(built.data, tmp_path).symbols[".symtab"][1][2] == "<OS specific>: 10"
    gnu = patch(built.data, 7, 3, 1, True)  # e_ident[EI_OSABI] = ELFOSABI_GNU
    assert run_readelf(gnu, tmp_path).symbols[".symtab"][1][2] == "IFUNC"
    (_, sym) = symbols(ELFFile(io.BytesIO(gnu)), ".symtab")
    assert sym["st_info"]["type"] == "STT_LOOS"


# --- patch / field offsets ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("elf_class", "little"), [(32, True), (32, False), (64, True), (64, False)]
)
def test_patched_strtab_size_shows_in_readelf_section_listing(
    elf_class: int, little: bool, tmp_path: Path
) -> None:
    built = build(Spec(elf_class=elf_class, little_endian=little, symtab=DYNSYM))
    before = run_readelf(built.data, tmp_path).sections[".strtab"]
    width = 4 if elf_class == 32 else 8
    off = shdr_field_offset(built, ".strtab", "sh_size", elf_class)
    after = run_readelf(patch(built.data, off, 3, width, little), tmp_path).sections[".strtab"]
    assert before.size > 3 and after.size == 3
    assert (after.offset, after.addr, after.link) == (before.offset, before.addr, before.link)

    off = shdr_field_offset(built, ".text", "sh_addr", elf_class)
    moved = run_readelf(patch(built.data, off, 0x5000, width, little), tmp_path)
    assert moved.sections[".text"].addr == 0x5000


@pytest.mark.parametrize(("elf_class", "little"), [(32, False), (64, True)])
def test_patched_ehdr_fields_show_in_readelf_header(
    elf_class: int, little: bool, tmp_path: Path
) -> None:
    built = build(Spec(elf_class=elf_class, little_endian=little))
    fields = built.ehdr_field_offset
    data = patch(built.data, fields["e_machine"], EM_AARCH64, 2, little)
    data = patch(data, fields["e_type"], ET_EXEC, 2, little)
    data = patch(data, fields["e_shnum"], 0, 2, little)
    view = run_readelf(data, tmp_path)
    assert view.header["Machine"] == "AArch64" and view.header["Type"].startswith("EXEC")
    # e_shnum 0 with e_shoff set means "count is in section 0's sh_size" (extended numbering);
    # readelf shows that second value in parentheses.
    assert view.header["Number of section headers"] == "0 (0)"
    assert built.program_header_offset == (52 if elf_class == 32 else 64)


def test_section_offsets_point_at_content_and_headers() -> None:
    data = bytes(range(256)) * 2
    built = build(
        Spec(elf_class=32, little_endian=False, sections=(Sec(".text", 0x10080, 0x200, data=data),))
    )
    start = built.section_offset[".text"]
    assert built.data[start : start + 0x200] == data and start % PAGE == 0x80
    addr_at = shdr_field_offset(built, ".text", "sh_addr", 32)
    assert int.from_bytes(built.data[addr_at : addr_at + 4], "big") == 0x10080


def test_patch_writes_in_the_given_byte_order_and_refuses_to_grow_the_file() -> None:
    assert patch(b"\0" * 4, 0, 0x0102, 2, True) == b"\x02\x01\0\0"
    assert patch(b"\0" * 4, 2, 0x0102, 2, False) == b"\0\0\x01\x02"
    with pytest.raises(ValueError):
        patch(b"\0" * 4, 3, 1, 2, True)


# --- layout invariants over random section sets ---------------------------------------------


@st.composite
def section_sets(draw: st.DrawFn) -> tuple[Sec, ...]:
    secs, addr = [], draw(st.integers(0, 0x20)) * PAGE
    for i in range(draw(st.integers(1, 6))):
        addr += draw(st.integers(0, 3 * PAGE))
        size = draw(st.integers(0, 2 * PAGE))
        nobits = draw(st.booleans())
        flags = draw(st.sampled_from(["A", "AX", "AW", "AWX", ""]))
        secs.append(Sec(f".s{i}", addr, size, flags, nobits, align=1))
        addr += size
    return tuple(secs)


@settings(max_examples=60, deadline=None)
@given(
    secs=section_sets(),
    elf_class=st.sampled_from([32, 64]),
    little=st.booleans(),
    with_dyn=st.booleans(),
)
def test_layout_keeps_alloc_sections_congruent_and_disjoint(
    secs: tuple[Sec, ...], elf_class: int, little: bool, with_dyn: bool
) -> None:
    syms = (Sym("f", secs[0].addr, section=secs[0].name),)
    spec = Spec(
        elf_class=elf_class,
        little_endian=little,
        sections=secs,
        symtab=syms,
        dynsym=syms if with_dyn else None,
        build_id=BUILD_ID if with_dyn else None,
    )
    built = build(spec)
    elf = ELFFile(io.BytesIO(built.data))
    headers_end = elf["e_phoff"] + elf["e_phnum"] * elf["e_phentsize"]
    spans = []
    for s in list(elf.iter_sections())[1:]:
        assert s["sh_offset"] == built.section_offset[s.name]
        if s["sh_flags"] & 2:
            assert s["sh_offset"] % PAGE == s["sh_addr"] % PAGE
        if s["sh_type"] != "SHT_NOBITS" and s["sh_size"]:
            spans.append((s["sh_offset"], s["sh_offset"] + s["sh_size"]))
    previous_end = max(headers_end, elf.header["e_ehsize"])
    for start, end in sorted(spans):
        assert start >= previous_end
        previous_end = end
    assert len(list(elf.iter_segments())) == elf["e_phnum"]
