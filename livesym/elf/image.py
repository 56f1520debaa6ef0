"""An ELF file's headers, PT_LOADs, section headers and build-id, read defensively.

pyelftools parses the ELF header and decodes program and section header
entries (its ``structs`` know every class and byte order). Everything it would
read in bulk -- symbol tables, string tables, notes -- is read here with
explicit bounds instead: every offset and count is checked against the file
size before anything is allocated, so a crafted file yields an ``ElfFormatError``
or a problem note, never a crash, a hang or a huge allocation.

pyelftools' ``iter_sections``/``iter_segments`` are avoided on purpose: they
build full section objects (parsing all of .gnu.hash on a large library costs
tens of milliseconds), where only the headers are needed.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from livesym.addr.segments import LoadSegment
from livesym.errors import ElfFormatError, FileError, NotElfError

ELF_MAGIC = b"\x7fELF"
PT_LOAD = 1
PT_NOTE = 4
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_NOTE = 7
SHT_NOBITS = 8
SHT_DYNSYM = 11
NT_GNU_BUILD_ID = 3

# Bounds against crafted headers. Real files have a few dozen program headers
# and at most tens of thousands of sections (huge -ffunction-sections objects).
MAX_SEGMENTS = 65_536
MAX_SECTIONS = 1_000_000
MAX_NOTE_BYTES = 1 << 20
MAX_BUILD_ID = 64


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """What makes two opens the same file: a replaced library is a new identity."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class SectionHeader:
    index: int
    name: str
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_info: int
    sh_addralign: int
    sh_entsize: int

    def holds_addr(self, addr: int) -> bool:
        return self.sh_addr <= addr < self.sh_addr + self.sh_size


@dataclass(frozen=True)
class ElfImage:
    """The parts of one ELF file that address conversion and symbolization need."""

    path: str
    identity: FileIdentity
    elf_class: int  # 32 or 64
    little_endian: bool
    e_type: str  # "ET_DYN", "ET_EXEC", ... (pyelftools' names)
    e_machine: str  # "EM_X86_64", ...
    machine_code: int
    entry: int
    segments: tuple[LoadSegment, ...]
    sections: tuple[SectionHeader, ...]
    build_id: bytes | None
    problems: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.identity.size

    @property
    def build_id_hex(self) -> str | None:
        return self.build_id.hex() if self.build_id is not None else None

    @property
    def class_name(self) -> str:
        return f"ELF{self.elf_class}"

    def section(self, name: str) -> SectionHeader | None:
        return next((s for s in self.sections if s.name == name), None)

    def read(self, offset: int, size: int) -> bytes:
        """Read ``size`` bytes at ``offset`` of the very file the headers came from.

        Raise ElfFormatError if the range is past the end, FileError if the file
        was replaced since its headers were read (never mix two files' data).
        """
        with _open(self.path) as f:
            if FileIdentity.of(os.fstat(f.fileno())) != self.identity:
                raise FileError(f"{self.path}: changed on disk while in use; run again")
            return read_exact(f, self.identity.size, offset, size, self.path)


def open_error(path: str, e: OSError) -> FileError:
    """The one-line error for a file that cannot be opened or stat'ed."""
    if isinstance(e, FileNotFoundError):
        return FileError(f"{path}: no such file")
    if isinstance(e, PermissionError):
        return FileError(f"{path}: permission denied; run as its owner or as root")
    if isinstance(e, IsADirectoryError):
        return FileError(f"{path}: is a directory, not an ELF file")
    return FileError(f"{path}: cannot open: {e.strerror}")


def _open(path: str) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as e:
        raise open_error(path, e) from None


def read_exact(f: BinaryIO, file_size: int, offset: int, size: int, path: str) -> bytes:
    """A bounded read: the range must lie inside the file, checked before reading."""
    if offset < 0 or size < 0 or offset + size > file_size:
        raise ElfFormatError(
            f"{path}: damaged ELF file: wants bytes {offset:#x}..{offset + size:#x} "
            f"but the file has {file_size:#x}"
        )
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ElfFormatError(f"{path}: file shrank while being read")
    return data


def load_image(path: str | Path) -> ElfImage:
    """Read an ELF file's headers; raise FileError/ElfFormatError with a one-line reason."""
    path = str(path)
    with _open(path) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{path}: not a regular file")
        head = f.read(4)
        if head != ELF_MAGIC:
            what = "empty file" if st.st_size == 0 else "no ELF magic"
            raise NotElfError(f"{path}: not an ELF file ({what})")
        f.seek(0)
        try:
            return _parse(f, path, FileIdentity.of(st))
        except (ElfFormatError, FileError):
            raise
        except Exception as e:
            raise ElfFormatError(f"{path}: damaged ELF file: {type(e).__name__}: {e}") from None


def _parse(f: BinaryIO, path: str, ident: FileIdentity) -> ElfImage:
    from elftools.common.utils import struct_parse
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(f)
    hdr = elf.header
    size = ident.size
    problems: list[str] = []

    segments = _read_load_segments(elf, struct_parse, f, size, path, problems)
    sections = _read_section_headers(elf, struct_parse, f, size, path, problems)
    build_id = _find_build_id(f, size, path, elf.little_endian, sections, elf, problems)
    e_type = hdr["e_type"]
    e_machine = hdr["e_machine"]
    return ElfImage(
        path=path,
        identity=ident,
        elf_class=elf.elfclass,
        little_endian=elf.little_endian,
        e_type=e_type if isinstance(e_type, str) else f"ET_{e_type:#x}",
        e_machine=e_machine if isinstance(e_machine, str) else f"EM_{e_machine}",
        machine_code=_machine_code(f, elf.little_endian),
        entry=hdr["e_entry"],
        segments=tuple(segments),
        sections=tuple(sections),
        build_id=build_id,
        problems=tuple(problems),
    )


def _machine_code(f: BinaryIO, little_endian: bool) -> int:
    f.seek(18)
    raw = f.read(2)
    return int(struct.unpack("<H" if little_endian else ">H", raw)[0])


def _table_bounds(
    what: str, offset: int, count: int, entsize: int, expect: int, size: int, path: str
) -> None:
    if count and entsize < expect:
        raise ElfFormatError(f"{path}: damaged ELF file: {what} entry size {entsize} < {expect}")
    if offset + count * entsize > size:
        raise ElfFormatError(
            f"{path}: damaged ELF file: {what} table ({count} entries at {offset:#x}) "
            f"runs past the end of the file ({size:#x} bytes)"
        )


def _read_load_segments(
    elf: Any, struct_parse: Any, f: BinaryIO, size: int, path: str, problems: list[str]
) -> list[LoadSegment]:
    hdr = elf.header
    count = elf.num_segments()
    if count > MAX_SEGMENTS:
        raise ElfFormatError(f"{path}: damaged ELF file: {count} program headers")
    expect = 32 if elf.elfclass == 32 else 56
    phoff, entsize = hdr["e_phoff"], hdr["e_phentsize"]
    if count == 0:
        return []
    _table_bounds("program header", phoff, count, entsize, expect, size, path)
    segments: list[LoadSegment] = []
    for i in range(count):
        ph = struct_parse(elf.structs.Elf_Phdr, f, phoff + i * entsize)
        if ph["p_type"] != "PT_LOAD":
            continue
        seg = LoadSegment(
            index=i,
            p_offset=ph["p_offset"],
            p_vaddr=ph["p_vaddr"],
            p_filesz=ph["p_filesz"],
            p_memsz=ph["p_memsz"],
            p_align=ph["p_align"],
            p_flags=ph["p_flags"],
        )
        if seg.p_offset + seg.p_filesz > size:
            problems.append(f"PT_LOAD[{i}] extends past the end of the file (truncated file?)")
        if not seg.aligned:
            problems.append(
                f"PT_LOAD[{i}]: p_vaddr % p_align != p_offset % p_align "
                f"({seg.p_vaddr:#x}, {seg.p_offset:#x}, align {seg.p_align:#x})"
            )
        segments.append(seg)
    return segments


def _read_section_headers(
    elf: Any, struct_parse: Any, f: BinaryIO, size: int, path: str, problems: list[str]
) -> list[SectionHeader]:
    hdr = elf.header
    shoff, entsize = hdr["e_shoff"], hdr["e_shentsize"]
    if shoff == 0:
        return []
    count = elf.num_sections()
    if count > MAX_SECTIONS:
        raise ElfFormatError(f"{path}: damaged ELF file: {count} section headers")
    expect = 40 if elf.elfclass == 32 else 64
    try:
        _table_bounds("section header", shoff, count, entsize, expect, size, path)
    except ElfFormatError as e:
        # Section headers are optional at run time; the image stays usable without them.
        problems.append(str(e).split(": ", 1)[-1])
        return []
    raw = [struct_parse(elf.structs.Elf_Shdr, f, shoff + i * entsize) for i in range(count)]
    names = _section_names(elf, raw, f, size, path, problems)
    return [
        SectionHeader(
            index=i,
            name=names[i],
            sh_type=_sh_type_code(sh["sh_type"]),
            sh_flags=sh["sh_flags"],
            sh_addr=sh["sh_addr"],
            sh_offset=sh["sh_offset"],
            sh_size=sh["sh_size"],
            sh_link=sh["sh_link"],
            sh_info=sh["sh_info"],
            sh_addralign=sh["sh_addralign"],
            sh_entsize=sh["sh_entsize"],
        )
        for i, sh in enumerate(raw)
    ]


_SH_TYPES = {
    "SHT_NULL": 0,
    "SHT_PROGBITS": 1,
    "SHT_SYMTAB": SHT_SYMTAB,
    "SHT_STRTAB": SHT_STRTAB,
    "SHT_RELA": 4,
    "SHT_HASH": 5,
    "SHT_DYNAMIC": 6,
    "SHT_NOTE": SHT_NOTE,
    "SHT_NOBITS": SHT_NOBITS,
    "SHT_REL": 9,
    "SHT_DYNSYM": SHT_DYNSYM,
}


def _sh_type_code(value: object) -> int:
    """pyelftools names known types; keep the numbers, which is what the spec defines."""
    if isinstance(value, int):
        return value
    return _SH_TYPES.get(str(value), -1)


def _section_names(
    elf: Any, raw: list[Any], f: BinaryIO, size: int, path: str, problems: list[str]
) -> list[str]:
    count = len(raw)
    try:
        idx = elf.get_shstrndx()
    except Exception:
        idx = 0
    if not 0 < idx < count:
        problems.append("no section name table (e_shstrndx out of range)")
        return [""] * count
    sh = raw[idx]
    off, length = sh["sh_offset"], sh["sh_size"]
    if off + length > size:
        problems.append("section name table runs past the end of the file")
        return [""] * count
    f.seek(off)
    table = f.read(length)
    return [_cstring(table, sh_["sh_name"]) for sh_ in raw]


def _cstring(table: bytes, offset: int) -> str:
    if not 0 <= offset < len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "backslashreplace")


def _find_build_id(
    f: BinaryIO,
    size: int,
    path: str,
    little_endian: bool,
    sections: list[SectionHeader],
    elf: Any,
    problems: list[str],
) -> bytes | None:
    """NT_GNU_BUILD_ID from note sections, or from PT_NOTE segments when sections are gone."""
    ranges = [(s.sh_offset, s.sh_size) for s in sections if s.sh_type == SHT_NOTE]
    if not ranges:
        ranges = _note_segments(elf, f, size)
    for off, length in ranges:
        if off + length > size or length > MAX_NOTE_BYTES:
            problems.append(f"note at {off:#x} runs past the end of the file")
            continue
        f.seek(off)
        found = parse_build_id_note(f.read(length), little_endian)
        if found is not None:
            return found
    return None


def _note_segments(elf: Any, f: BinaryIO, size: int) -> list[tuple[int, int]]:
    from elftools.common.utils import struct_parse

    hdr = elf.header
    count = min(elf.num_segments(), MAX_SEGMENTS)
    phoff, entsize = hdr["e_phoff"], hdr["e_phentsize"]
    if count == 0 or phoff + count * entsize > size:
        return []
    out = []
    for i in range(count):
        ph = struct_parse(elf.structs.Elf_Phdr, f, phoff + i * entsize)
        if ph["p_type"] == "PT_NOTE":
            out.append((ph["p_offset"], ph["p_filesz"]))
    return out


def parse_build_id_note(data: bytes, little_endian: bool) -> bytes | None:
    """Walk a note area (4-byte aligned entries) for the GNU build-id."""
    fmt = "<III" if little_endian else ">III"
    pos, end = 0, len(data)
    while pos + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from(fmt, data, pos)
        name_at = pos + 12
        desc_at = name_at + _align4(namesz)
        nxt = desc_at + _align4(descsz)
        if nxt > end:
            return None
        if ntype == NT_GNU_BUILD_ID and data[name_at : name_at + namesz] == b"GNU\0":
            if 0 < descsz <= MAX_BUILD_ID:
                return data[desc_at : desc_at + descsz]
            return None
        pos = nxt
    return None


def _align4(n: int) -> int:
    return (n + 3) & ~3
