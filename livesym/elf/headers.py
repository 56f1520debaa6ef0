"""The ELF header, program headers and section headers, decoded with ``struct``.

These three tables have fixed layouts per class and byte order, so decoding
them is a handful of ``struct`` formats. livesym reads them here rather than
through pyelftools because importing pyelftools costs ~35 ms (it pulls in its
construct library, pdb and the DWARF modules) -- a tenth of the time budget of
a whole ``symbolize`` run -- for three tables. pyelftools remains the
independent reference these decoders are tested against, and it reads DWARF.

Every count and offset is checked against the file size by the caller before
a table is read; extended numbering (e_shnum/e_phnum/e_shstrndx overflowing
into section 0) is followed as the gABI specifies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

EI_CLASS, EI_DATA = 4, 5
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2
SHN_XINDEX = 0xFFFF
PN_XNUM = 0xFFFF

E_TYPES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
# The machines a profiler meets; others print as EM_<number>.
E_MACHINES = {
    2: "EM_SPARC",
    3: "EM_386",
    8: "EM_MIPS",
    20: "EM_PPC",
    21: "EM_PPC64",
    22: "EM_S390",
    40: "EM_ARM",
    42: "EM_SH",
    43: "EM_SPARCV9",
    50: "EM_IA_64",
    62: "EM_X86_64",
    183: "EM_AARCH64",
    243: "EM_RISCV",
    247: "EM_BPF",
    258: "EM_LOONGARCH",
}


class HeaderError(ValueError):
    """The bytes are not a well-formed ELF header."""


@dataclass(frozen=True, slots=True)
class ElfHeader:
    elf_class: int  # 32 or 64
    little_endian: bool
    e_type: int
    e_machine: int
    e_entry: int
    e_phoff: int
    e_shoff: int
    e_phentsize: int
    e_phnum: int
    e_shentsize: int
    e_shnum: int
    e_shstrndx: int

    @property
    def order(self) -> str:
        return "<" if self.little_endian else ">"

    @property
    def type_name(self) -> str:
        return E_TYPES.get(self.e_type, f"ET_{self.e_type:#x}")

    @property
    def machine_name(self) -> str:
        return E_MACHINES.get(self.e_machine, f"EM_{self.e_machine}")

    @property
    def phdr_size(self) -> int:
        return 32 if self.elf_class == 32 else 56

    @property
    def shdr_size(self) -> int:
        return 40 if self.elf_class == 32 else 64


@dataclass(frozen=True, slots=True)
class RawPhdr:
    p_type: int
    p_flags: int
    p_offset: int
    p_vaddr: int
    p_filesz: int
    p_memsz: int
    p_align: int


EHDR_SIZE = {32: 52, 64: 64}


def parse_ehdr(data: bytes) -> ElfHeader:
    """Decode the ELF header from the file's first bytes (at least 64)."""
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise HeaderError("no ELF magic")
    cls = {ELFCLASS32: 32, ELFCLASS64: 64}.get(data[EI_CLASS])
    if cls is None:
        raise HeaderError(f"unknown ELF class {data[EI_CLASS]}")
    little = {ELFDATA2LSB: True, ELFDATA2MSB: False}.get(data[EI_DATA])
    if little is None:
        raise HeaderError(f"unknown ELF data encoding {data[EI_DATA]}")
    if len(data) < EHDR_SIZE[cls]:
        raise HeaderError("file ends inside the ELF header")
    order = "<" if little else ">"
    fmt = "HHIIIIIHHHHHH" if cls == 32 else "HHIQQQIHHHHHH"
    (e_type, e_machine, _version, entry, phoff, shoff, _flags, _ehsize, phentsize, phnum,
     shentsize, shnum, shstrndx) = struct.unpack_from(order + fmt, data, 16)  # fmt: skip
    return ElfHeader(
        cls,
        little,
        e_type,
        e_machine,
        entry,
        phoff,
        shoff,
        phentsize,
        phnum,
        shentsize,
        shnum,
        shstrndx,
    )


def parse_phdr(header: ElfHeader, data: bytes, at: int = 0) -> RawPhdr:
    if header.elf_class == 32:
        p_type, off, vaddr, _paddr, filesz, memsz, flags, align = struct.unpack_from(
            header.order + "IIIIIIII", data, at
        )
    else:
        p_type, flags, off, vaddr, _paddr, filesz, memsz, align = struct.unpack_from(
            header.order + "IIQQQQQQ", data, at
        )
    return RawPhdr(p_type, flags, off, vaddr, filesz, memsz, align)


ShdrFields = tuple[int, int, int, int, int, int, int, int, int, int]


def parse_shdr(header: ElfHeader, data: bytes, at: int = 0) -> ShdrFields:
    """(sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info,
    sh_addralign, sh_entsize) of the section header at ``at``."""
    fmt = "IIIIIIIIII" if header.elf_class == 32 else "IIQQQQIIQQ"
    fields: ShdrFields = struct.unpack_from(header.order + fmt, data, at)
    return fields
