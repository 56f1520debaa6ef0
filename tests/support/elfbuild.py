"""Build synthetic ELF files for unit tests.

The test machine is x86-64 and its compiler only produces little-endian ELF64 x86-64 objects,
yet livesym must read whatever a profiled process maps: ELF32 and ELF64, either byte order,
other machines (i386, ARM, AArch64, RISC-V, s390x), and files that are truncated or lie about
themselves. This module writes such files byte by byte from a small `Spec`, using only `struct`,
and reports where each header and field landed so that tests can corrupt them with `patch`.

The output is checked against readelf and pyelftools in tests/unit/test_elfbuild.py.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_GNU_IFUNC = 0, 1, 2, 3, 4, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
SHN_UNDEF, SHN_ABS = 0, 0xFFF1
ET_EXEC, ET_DYN, ET_REL = 2, 3, 1
PF_X, PF_W, PF_R = 1, 2, 4
EM_386, EM_ARM, EM_X86_64, EM_AARCH64, EM_RISCV, EM_S390 = 3, 40, 62, 183, 243, 22

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 1, 2, 3, 7, 8, 11
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
PT_LOAD, PT_NOTE = 1, 4
NT_GNU_BUILD_ID = 3
PAGE = 0x1000

# Each record is a list of (field name, struct code for ELF32, struct code for ELF64). Packing
# and the field offsets handed to tests come from the same table, so they cannot disagree.
_Fields = tuple[tuple[str, str, str], ...]
_EHDR: _Fields = (
    ("e_type", "H", "H"),
    ("e_machine", "H", "H"),
    ("e_version", "I", "I"),
    ("e_entry", "I", "Q"),
    ("e_phoff", "I", "Q"),
    ("e_shoff", "I", "Q"),
    ("e_flags", "I", "I"),
    ("e_ehsize", "H", "H"),
    ("e_phentsize", "H", "H"),
    ("e_phnum", "H", "H"),
    ("e_shentsize", "H", "H"),
    ("e_shnum", "H", "H"),
    ("e_shstrndx", "H", "H"),
)
_SHDR: _Fields = (
    ("sh_name", "I", "I"),
    ("sh_type", "I", "I"),
    ("sh_flags", "I", "Q"),
    ("sh_addr", "I", "Q"),
    ("sh_offset", "I", "Q"),
    ("sh_size", "I", "Q"),
    ("sh_link", "I", "I"),
    ("sh_info", "I", "I"),
    ("sh_addralign", "I", "Q"),
    ("sh_entsize", "I", "Q"),
)
# p_flags and the symbol's value/size move between classes, so these differ in order, not
# just in width; an empty code means "absent in this class".
_PHDR: _Fields = (
    ("p_type", "I", "I"),
    ("p_flags", "", "I"),
    ("p_offset", "I", "Q"),
    ("p_vaddr", "I", "Q"),
    ("p_paddr", "I", "Q"),
    ("p_filesz", "I", "Q"),
    ("p_memsz", "I", "Q"),
    ("p_flags", "I", ""),
    ("p_align", "I", "Q"),
)
_SYM: _Fields = (
    ("st_name", "I", "I"),
    ("st_value", "I", ""),
    ("st_size", "I", ""),
    ("st_info", "B", "B"),
    ("st_other", "B", "B"),
    ("st_shndx", "H", "H"),
    ("st_value", "", "Q"),
    ("st_size", "", "Q"),
)
_EHDR_START = 16  # after e_ident


@dataclass(frozen=True)
class Sym:
    name: str | bytes  # bytes go into the string table verbatim, NUL-terminated by the builder
    value: int
    size: int = 0
    type: int = STT_FUNC
    bind: int = STB_GLOBAL
    section: str | int = ".text"  # a section built into the file, or a raw st_shndx
    other: int = 0


@dataclass(frozen=True)
class Sec:
    name: str
    addr: int
    size: int
    flags: str = "AX"  # any of A (alloc), W (write), X (execinstr)
    nobits: bool = False  # like .bss: takes address space but no file space
    data: bytes | None = None  # padded to `size` with 0xCC; longer than `size` is an error
    align: int = 16


@dataclass(frozen=True)
class Load:
    """An explicit PT_LOAD, written verbatim: tests use these for layouts no linker makes."""

    p_offset: int
    p_vaddr: int
    p_filesz: int
    p_memsz: int
    flags: int = PF_R | PF_X
    p_align: int = 0x1000


@dataclass(frozen=True)
class Spec:
    elf_class: int = 64
    little_endian: bool = True
    machine: int = EM_X86_64
    e_type: int = ET_DYN
    entry: int = 0
    sections: tuple[Sec, ...] = (Sec(".text", 0x1000, 0x100),)
    symtab: tuple[Sym, ...] | None = None  # None: no .symtab/.strtab
    dynsym: tuple[Sym, ...] | None = None  # None: no .dynsym/.dynstr
    build_id: bytes | None = None  # adds .note.gnu.build-id and a PT_NOTE
    loads: tuple[Load, ...] | None = None  # None: one PT_LOAD per allocated section
    section_headers: bool = True  # False: e_shoff = e_shnum = 0, as after stripping sections


@dataclass(frozen=True)
class Built:
    data: bytes
    # File offsets of the things tests corrupt:
    section_header_offset: dict[str, int]  # name -> its entry in the section header table
    section_offset: dict[str, int]  # name -> sh_offset
    program_header_offset: int  # e_phoff (0 when there are no program headers)
    ehdr_field_offset: dict[str, int]  # every e_* field after e_ident -> its file offset


@dataclass
class _Section:
    """A section on its way into the file; offset and addr are filled in by the layout."""

    name: str
    sh_type: int
    flags: int
    content: bytes
    size: int
    align: int
    addr: int = 0
    link: str | None = None
    info: int = 0
    entsize: int = 0
    offset: int = 0
    # (symbol, st_name) pairs, packed only once every section has its index
    syms: tuple[tuple[Sym, int], ...] = ()


def _codes(fields: _Fields, elf_class: int) -> list[tuple[str, str]]:
    col = 1 if elf_class == 32 else 2
    return [(f[0], f[col]) for f in fields if f[col]]


def _pack(fields: _Fields, elf_class: int, little: bool, **values: int) -> bytes:
    codes = _codes(fields, elf_class)
    fmt = ("<" if little else ">") + "".join(code for _, code in codes)
    return struct.pack(fmt, *(values[name] for name, _ in codes))


def _field_offset(fields: _Fields, elf_class: int, name: str) -> int:
    offset = 0
    for fname, code in _codes(fields, elf_class):
        if fname == name:
            return offset
        offset += struct.calcsize("<" + code)
    raise ValueError(f"no field {name!r}")


def _size(fields: _Fields, elf_class: int) -> int:
    return struct.calcsize("<" + "".join(code for _, code in _codes(fields, elf_class)))


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment if alignment > 1 else value


def _strtab(names: list[bytes]) -> tuple[bytes, list[int]]:
    table, offsets = bytearray(b"\0"), []
    for name in names:
        offsets.append(len(table) if name else 0)  # empty names share the leading NUL
        if name:
            table += name + b"\0"
    return bytes(table), offsets


def _note(spec: Spec, desc: bytes) -> bytes:
    e = "<" if spec.little_endian else ">"
    pad = b"\0" * (_align(len(desc), 4) - len(desc))
    return struct.pack(e + "III", 4, len(desc), NT_GNU_BUILD_ID) + b"GNU\0" + desc + pad


def _given_section(sec: Sec) -> _Section:
    unknown = set(sec.flags) - set("AWX")
    if unknown:
        raise ValueError(f"section {sec.name}: unknown flags {''.join(sorted(unknown))}")
    flags = (
        ("A" in sec.flags) * SHF_ALLOC
        | ("W" in sec.flags) * SHF_WRITE
        | ("X" in sec.flags) * SHF_EXECINSTR
    )
    data = sec.data or b""
    if len(data) > sec.size:
        raise ValueError(f"section {sec.name}: {len(data)} bytes of data but size {sec.size}")
    content = b"" if sec.nobits else data + b"\xcc" * (sec.size - len(data))
    sh_type = SHT_NOBITS if sec.nobits else SHT_PROGBITS
    return _Section(sec.name, sh_type, flags, content, sec.size, sec.align, addr=sec.addr)


def _symtab_pair(spec: Spec, dynamic: bool, syms: tuple[Sym, ...]) -> list[_Section]:
    # The ELF spec requires locals before everything else; sh_info marks the boundary.
    ordered = tuple(sorted(syms, key=lambda s: s.bind != STB_LOCAL))
    names = [s.name.encode() if isinstance(s.name, str) else s.name for s in ordered]
    strtab, name_offsets = _strtab(names)
    entsize = _size(_SYM, spec.elf_class)
    tab, strname = (".dynsym", ".dynstr") if dynamic else (".symtab", ".strtab")
    flags = SHF_ALLOC if dynamic else 0
    nlocal = sum(s.bind == STB_LOCAL for s in ordered)
    size = entsize * (len(ordered) + 1)
    return [
        _Section(
            tab,
            SHT_DYNSYM if dynamic else SHT_SYMTAB,
            flags,
            b"",
            size,
            spec.elf_class // 8,
            link=strname,
            info=1 + nlocal,
            entsize=entsize,
            syms=tuple(zip(ordered, name_offsets, strict=True)),
        ),
        _Section(strname, SHT_STRTAB, flags, strtab, len(strtab), 1),
    ]


def _pack_symbols(spec: Spec, sec: _Section, index: dict[str, int]) -> bytes:
    out = bytearray(b"\0" * _size(_SYM, spec.elf_class))  # symbol 0 is the null symbol
    for sym, name_off in sec.syms:
        if isinstance(sym.section, str):
            if sym.section not in index:
                raise ValueError(f"symbol {sym.name!r}: no section {sym.section!r}")
            shndx = index[sym.section]
        else:
            shndx = sym.section
        out += _pack(
            _SYM,
            spec.elf_class,
            spec.little_endian,
            st_name=name_off,
            st_value=sym.value,
            st_size=sym.size,
            st_info=(sym.bind << 4) | (sym.type & 0xF),
            st_other=sym.other,
            st_shndx=shndx,
        )
    return bytes(out)


def _layout(
    synthetic: list[_Section], given: list[_Section], trailing: list[_Section], headers_end: int
) -> int:
    """Assign file offsets (and addresses of synthetic sections); return the end of content."""
    cursor = headers_end
    for sec in synthetic:
        sec.offset = cursor = _align(cursor, sec.align)
        cursor += sec.size
    # Synthetic sections share a page-aligned base with the file, as a linker's first PT_LOAD
    # does, so they stay congruent; put them below the given sections if they fit, else above.
    ranges = [(s.addr, s.addr + s.size) for s in given if s.flags & SHF_ALLOC]
    base = 0
    if ranges and synthetic:
        below = (min(lo for lo, _ in ranges) - cursor) // PAGE * PAGE
        base = below if below >= 0 else _align(max(hi for _, hi in ranges), PAGE)
    for sec in synthetic:
        sec.addr = base + sec.offset
    for sec in given:
        if sec.flags & SHF_ALLOC:
            # Loaders map whole pages, so file offset and address must agree modulo the page.
            offset = cursor + (sec.addr - cursor) % PAGE
        else:
            offset = _align(cursor, sec.align)
        sec.offset = offset
        if sec.sh_type != SHT_NOBITS:
            cursor = offset + sec.size
    for sec in trailing:
        sec.offset = cursor = _align(cursor, sec.align)
        cursor += sec.size
    return cursor


def _segment_flags(sh_flags: int) -> int:
    return PF_R | (PF_W if sh_flags & SHF_WRITE else 0) | (PF_X if sh_flags & SHF_EXECINSTR else 0)


def _program_headers(spec: Spec, sections: list[_Section]) -> list[bytes]:
    if spec.loads is not None:
        loads = list(spec.loads)
    else:
        # Sorted by address because the ELF spec requires PT_LOADs in ascending p_vaddr.
        loads = [
            Load(
                s.offset,
                s.addr,
                0 if s.sh_type == SHT_NOBITS else s.size,
                s.size,
                _segment_flags(s.flags),
            )
            for s in sorted(sections, key=lambda s: s.addr)
            if s.flags & SHF_ALLOC
        ]
    out = [
        _pack(
            _PHDR,
            spec.elf_class,
            spec.little_endian,
            p_type=PT_LOAD,
            p_flags=ld.flags,
            p_offset=ld.p_offset,
            p_vaddr=ld.p_vaddr,
            p_paddr=ld.p_vaddr,
            p_filesz=ld.p_filesz,
            p_memsz=ld.p_memsz,
            p_align=ld.p_align,
        )
        for ld in loads
    ]
    for s in sections:
        if s.sh_type == SHT_NOTE:
            out.append(
                _pack(
                    _PHDR,
                    spec.elf_class,
                    spec.little_endian,
                    p_type=PT_NOTE,
                    p_flags=PF_R,
                    p_offset=s.offset,
                    p_vaddr=s.addr,
                    p_paddr=s.addr,
                    p_filesz=s.size,
                    p_memsz=s.size,
                    p_align=4,
                )
            )
    return out


def _count_phdrs(spec: Spec, sections: list[_Section]) -> int:
    nloads = (
        len(spec.loads)
        if spec.loads is not None
        else sum(bool(s.flags & SHF_ALLOC) for s in sections)
    )
    return nloads + (spec.build_id is not None)


def _ident(spec: Spec) -> bytes:
    if spec.elf_class not in (32, 64):
        raise ValueError(f"elf_class must be 32 or 64, not {spec.elf_class}")
    ei_class = 1 if spec.elf_class == 32 else 2
    ei_data = 1 if spec.little_endian else 2
    return b"\x7fELF" + bytes([ei_class, ei_data, 1, 0]) + b"\0" * 8


def build(spec: Spec) -> Built:
    ident = _ident(spec)
    synthetic: list[_Section] = []
    if spec.build_id is not None:
        note = _note(spec, spec.build_id)
        synthetic.append(_Section(".note.gnu.build-id", SHT_NOTE, SHF_ALLOC, note, len(note), 4))
    if spec.dynsym is not None:
        synthetic += _symtab_pair(spec, True, spec.dynsym)
    given = [_given_section(s) for s in spec.sections]
    trailing = _symtab_pair(spec, False, spec.symtab) if spec.symtab is not None else []
    trailing.append(_Section(".shstrtab", SHT_STRTAB, 0, b"", 0, 1))
    sections = synthetic + given + trailing
    names = [s.name for s in sections]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate section names in {names}")
    index = {name: i + 1 for i, name in enumerate(names)}  # index 0 is the null section
    shstrtab, name_offsets = _strtab([n.encode() for n in names])
    sections[-1].content, sections[-1].size = shstrtab, len(shstrtab)

    ehsize, phentsize = len(ident) + _size(_EHDR, spec.elf_class), _size(_PHDR, spec.elf_class)
    phnum = _count_phdrs(spec, sections)
    phoff = ehsize if phnum else 0
    end = _layout(synthetic, given, trailing, ehsize + phnum * phentsize)
    for sec in sections:
        if sec.sh_type in (SHT_SYMTAB, SHT_DYNSYM):
            sec.content = _pack_symbols(spec, sec, index)
    phdrs = _program_headers(spec, sections)
    assert len(phdrs) == phnum, "program header count changed during layout"

    shentsize = _size(_SHDR, spec.elf_class)
    shoff = _align(end, 8)
    shdrs = [b"\0" * shentsize] + [
        _pack(
            _SHDR,
            spec.elf_class,
            spec.little_endian,
            sh_name=name_off,
            sh_type=s.sh_type,
            sh_flags=s.flags,
            sh_addr=s.addr,
            sh_offset=s.offset,
            sh_size=s.size,
            sh_link=index[s.link] if s.link else 0,
            sh_info=s.info,
            sh_addralign=s.align,
            sh_entsize=s.entsize,
        )
        for s, name_off in zip(sections, name_offsets, strict=True)
    ]
    with_shdrs = spec.section_headers
    ehdr = ident + _pack(
        _EHDR,
        spec.elf_class,
        spec.little_endian,
        e_type=spec.e_type,
        e_machine=spec.machine,
        e_version=1,
        e_entry=spec.entry,
        e_phoff=phoff,
        e_shoff=shoff if with_shdrs else 0,
        e_flags=0,
        e_ehsize=ehsize,
        e_phentsize=phentsize,
        e_phnum=phnum,
        e_shentsize=shentsize,
        e_shnum=len(shdrs) if with_shdrs else 0,
        e_shstrndx=index[".shstrtab"] if with_shdrs else 0,
    )

    out = bytearray(ehdr + b"".join(phdrs))
    for sec in sections:
        if sec.content:
            assert sec.offset >= len(out), f"{sec.name} overlaps what precedes it"
            out += b"\0" * (sec.offset - len(out))
            out += sec.content
    if with_shdrs:
        out += b"\0" * (shoff - len(out)) + b"".join(shdrs)
    return Built(
        data=bytes(out),
        section_header_offset={
            s.name: shoff + shentsize * index[s.name] for s in sections if with_shdrs
        },
        section_offset={s.name: s.offset for s in sections},
        program_header_offset=phoff,
        ehdr_field_offset={
            name: _EHDR_START + _field_offset(_EHDR, spec.elf_class, name) for name, _, _ in _EHDR
        },
    )


def patch(data: bytes, offset: int, value: int, size: int, little_endian: bool) -> bytes:
    """Return `data` with the `size`-byte unsigned integer at `offset` replaced by `value`."""
    if offset < 0 or offset + size > len(data):
        raise ValueError(f"patch at {offset}+{size} is outside the {len(data)}-byte file")
    raw = value.to_bytes(size, "little" if little_endian else "big")
    return data[:offset] + raw + data[offset + size :]


def shdr_field_offset(built: Built, section: str, field: str, elf_class: int) -> int:
    """File offset of one field (sh_name ... sh_entsize) of `section`'s header."""
    return built.section_header_offset[section] + _field_offset(_SHDR, elf_class, field)
