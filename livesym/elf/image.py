"""An ELF file's headers, PT_LOADs, section headers and build-id, read defensively.

Every offset and count taken from the file is checked against the file size
before anything is read or allocated, so a crafted file yields an
``ElfFormatError`` or a problem note, never a crash, a hang or a huge
allocation. The fixed-layout header tables are decoded in ``headers``; the
bulk tables (symbols, strings, notes) are read here with one bounded read each.
"""

from __future__ import annotations

import dataclasses
import io
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from livesym.addr.segments import LoadSegment
from livesym.elf.headers import (
    PN_XNUM,
    SHN_XINDEX,
    ElfHeader,
    HeaderError,
    RawPhdr,
    ShdrFields,
    parse_ehdr,
    parse_phdr,
    parse_shdr,
)
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
MAX_SECTIONS = 1 << 16
MAX_NOTE_BYTES = 1 << 20  # one note area
MAX_NOTE_TOTAL = 1 << 20  # all note areas together
MAX_NOTE_AREAS = 64
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
    e_type: str  # "ET_DYN", "ET_EXEC", ... (the spec's names)
    e_machine: str  # "EM_X86_64", ...
    machine_code: int
    entry: int
    segments: tuple[LoadSegment, ...]
    sections: tuple[SectionHeader, ...]
    build_id: bytes | None
    problems: tuple[str, ...]
    # The whole file, for an image that exists only in memory (MiniDebugInfo's
    # embedded ELF, a vdso read from the target); None for a file on disk.
    data: bytes | None = field(default=None, repr=False, compare=False)
    # Other paths that named this very file (same identity) when it was loaded: a
    # file opened through /proc/PID/root is gone from there when PID exits, while
    # the same file by its path in livesym's own view still opens (``also_at``).
    fallbacks: tuple[str, ...] = field(default=(), repr=False, compare=False)

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
        if self.data is not None:
            return read_exact(io.BytesIO(self.data), len(self.data), offset, size, self.path)
        with self.open_same() as f:
            return read_exact(f, self.identity.size, offset, size, self.path)

    def open_same(self) -> BinaryIO:
        """The file the headers came from, open: by its path, else by a fallback that
        still names it. Raise FileError if none does (gone, or replaced since)."""
        first: FileError | None = None
        for path in (self.path, *self.fallbacks):
            try:
                f = _open(path)
            except FileError as e:
                first = first or e
                continue
            if FileIdentity.of(os.fstat(f.fileno())) == self.identity:
                return f
            f.close()
            first = first or FileError(f"{self.path}: changed on disk while in use; run again")
        raise first or FileError(f"{self.path}: no such file")

    def also_at(self, path: str | None) -> ElfImage:
        """This image, able to fall back on ``path`` where that is the same file now."""
        if path is None or path == self.path or path in self.fallbacks or self.data is not None:
            return self
        try:
            same = FileIdentity.of(os.stat(path)) == self.identity
        except OSError:
            same = False
        return dataclasses.replace(self, fallbacks=(*self.fallbacks, path)) if same else self


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
        head = f.read(64)
        if head[:4] != ELF_MAGIC:
            what = "empty file" if st.st_size == 0 else "no ELF magic"
            raise NotElfError(f"{path}: not an ELF file ({what})")
        try:
            header = parse_ehdr(head)
        except HeaderError as e:
            raise ElfFormatError(f"{path}: damaged ELF file: {e}") from None
        return _parse(f, path, FileIdentity.of(st), header)


def load_image_bytes(data: bytes, name: str) -> ElfImage:
    """An ELF image held in memory; ``name`` says where it came from in messages."""
    if data[:4] != ELF_MAGIC:
        raise NotElfError(f"{name}: not an ELF image (no ELF magic)")
    try:
        header = parse_ehdr(data[:64])
    except HeaderError as e:
        raise ElfFormatError(f"{name}: damaged ELF image: {e}") from None
    ident = FileIdentity(0, 0, len(data), 0)
    image = _parse(io.BytesIO(data), name, ident, header)
    return dataclasses.replace(image, data=data)


SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB = 1
INFLATE_STEP = 1 << 20  # bytes inflated a call


def inflate(data: bytes, image: ElfImage, limit: int) -> bytes:
    """An SHF_COMPRESSED section's contents (Elf_Chdr, then zlib), at most ``limit``
    bytes inflated (ValueError past it, or on another compression)."""
    import zlib

    order = "<" if image.little_endian else ">"
    fmt = order + ("IIQQ" if image.elf_class == 64 else "III")
    head = struct.calcsize(fmt)
    if len(data) < head:
        raise ValueError("compressed section shorter than its header")
    ch_type, *_rest = struct.unpack_from(fmt, data)
    if ch_type != ELFCOMPRESS_ZLIB:
        raise ValueError(f"compression type {ch_type} is not supported (zlib only)")
    # A megabyte of output a call: between calls other threads get the interpreter (one
    # call for a debug file's 20 MB .debug_info held a dashboard's event loop up for tens
    # of milliseconds); each call is bounded, and so is the whole.
    decoder = zlib.decompressobj()
    parts: list[bytes] = []
    size = 0
    pending = data[head:]
    try:
        while pending:
            part = decoder.decompress(pending, min(INFLATE_STEP, limit - size + 1))
            parts.append(part)
            size += len(part)
            if size > limit:
                raise ValueError(f"inflates to more than {limit >> 20} MiB")
            pending = decoder.unconsumed_tail
            if not part and pending:
                break  # (no progress: the stream ended, its tail is not zlib's)
    except zlib.error as e:
        raise ValueError(f"does not inflate: {e}") from None
    return b"".join(parts)


def section_contents(image: ElfImage, sec: SectionHeader, limit: int) -> bytes:
    """``section_bytes``, inflated where the section is compressed (debug files are,
    as Debian ships them), both sizes bounded by ``limit``."""
    data = section_bytes(image, sec, limit)
    if not sec.sh_flags & SHF_COMPRESSED:
        return data
    try:
        return inflate(data, image, limit)
    except ValueError as e:
        raise ElfFormatError(f"{image.path}: {sec.name}: {e}") from None


def section_bytes(image: ElfImage, sec: SectionHeader, limit: int) -> bytes:
    """A section's contents, refused (ElfFormatError) when larger than ``limit`` or
    when it has none in the file (SHT_NOBITS)."""
    if sec.sh_type == SHT_NOBITS:
        raise ElfFormatError(f"{image.path}: {sec.name} has no contents in the file")
    if sec.sh_size > limit:
        raise ElfFormatError(
            f"{image.path}: {sec.name} is {sec.sh_size} bytes, more than the {limit} read"
        )
    return image.read(sec.sh_offset, sec.sh_size)


def _parse(f: BinaryIO, path: str, ident: FileIdentity, header: ElfHeader) -> ElfImage:
    size = ident.size
    problems: list[str] = []
    section0 = _section_zero(f, header, size)
    segments = _read_load_segments(f, header, section0, size, path, problems)
    sections = _read_section_headers(f, header, section0, size, path, problems)
    build_id = _find_build_id(f, header, section0, sections, size, problems)
    return ElfImage(
        path=path,
        identity=ident,
        elf_class=header.elf_class,
        little_endian=header.little_endian,
        e_type=header.type_name,
        e_machine=header.machine_name,
        machine_code=header.e_machine,
        entry=header.e_entry,
        segments=tuple(segments),
        sections=tuple(sections),
        build_id=build_id,
        problems=tuple(problems),
    )


def _section_zero(f: BinaryIO, header: ElfHeader, size: int) -> SectionHeader | None:
    """Section header 0, which holds the real counts when they overflow the ELF header."""
    if header.e_shoff == 0 or header.e_shoff + header.shdr_size > size:
        return None
    if header.e_shentsize < header.shdr_size:
        return None
    f.seek(header.e_shoff)
    return SectionHeader(0, "", *parse_shdr(header, f.read(header.shdr_size))[1:])


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


def _phdrs(
    f: BinaryIO, header: ElfHeader, section0: SectionHeader | None, size: int, path: str
) -> list[RawPhdr]:
    count = header.e_phnum
    if count == PN_XNUM and section0 is not None:
        count = section0.sh_info
    if count == 0:
        return []
    if count > MAX_SEGMENTS:
        raise ElfFormatError(f"{path}: damaged ELF file: {count} program headers")
    entsize = header.e_phentsize
    _table_bounds("program header", header.e_phoff, count, entsize, header.phdr_size, size, path)
    f.seek(header.e_phoff)
    table = f.read(count * entsize)
    return [parse_phdr(header, table, i * entsize) for i in range(count)]


def _read_load_segments(
    f: BinaryIO,
    header: ElfHeader,
    section0: SectionHeader | None,
    size: int,
    path: str,
    problems: list[str],
) -> list[LoadSegment]:
    segments: list[LoadSegment] = []
    for i, ph in enumerate(_phdrs(f, header, section0, size, path)):
        if ph.p_type != PT_LOAD:
            continue
        seg = LoadSegment(i, ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, ph.p_align,
                          ph.p_flags)  # fmt: skip
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
    f: BinaryIO,
    header: ElfHeader,
    section0: SectionHeader | None,
    size: int,
    path: str,
    problems: list[str],
) -> list[SectionHeader]:
    if header.e_shoff == 0:
        return []
    count = header.e_shnum
    if count == 0 and section0 is not None:
        count = section0.sh_size
    if count > MAX_SECTIONS:
        # Extended numbering lets a file claim millions; linked objects have dozens.
        problems.append(f"{count} section headers claimed; section headers ignored")
        return []
    entsize = header.e_shentsize
    try:
        _table_bounds(
            "section header", header.e_shoff, count, entsize, header.shdr_size, size, path
        )
    except ElfFormatError as e:
        # Section headers are optional at run time; the image stays usable without them.
        problems.append(str(e).split(": ", 1)[-1])
        return []
    f.seek(header.e_shoff)
    table = f.read(count * entsize)
    raw = [parse_shdr(header, table, i * entsize) for i in range(count)]
    strndx = header.e_shstrndx
    if strndx == SHN_XINDEX and section0 is not None:
        strndx = section0.sh_link
    names = _section_names(raw, strndx, f, size, problems)
    return [SectionHeader(i, names[i], *fields[1:]) for i, fields in enumerate(raw)]


def _section_names(
    raw: list[ShdrFields], strndx: int, f: BinaryIO, size: int, problems: list[str]
) -> list[str]:
    count = len(raw)
    if not 0 < strndx < count:
        problems.append("no section name table (e_shstrndx out of range)")
        return [""] * count
    _name, _type, _flags, _addr, offset, length, *_rest = raw[strndx]
    if offset + length > size:
        problems.append("section name table runs past the end of the file")
        return [""] * count
    f.seek(offset)
    table = f.read(length)
    return [_cstring(table, fields[0]) for fields in raw]


def string_at(table: bytes, offset: int, limit: int) -> bytes:
    """The NUL-terminated string at ``offset`` of a string table, at most ``limit``
    bytes long: a table without NULs yields no multi-megabyte "name"."""
    if offset >= len(table):
        return b""
    end = table.find(b"\0", offset, offset + limit)
    if end < 0:
        end = min(len(table), offset + limit)
    return table[offset:end]


def _cstring(table: bytes, offset: int) -> str:
    if not 0 <= offset < len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "backslashreplace")


def _find_build_id(
    f: BinaryIO,
    header: ElfHeader,
    section0: SectionHeader | None,
    sections: list[SectionHeader],
    size: int,
    problems: list[str],
) -> bytes | None:
    """NT_GNU_BUILD_ID from note sections, or from PT_NOTE segments when sections are gone."""
    ranges = [(s.sh_offset, s.sh_size) for s in sections if s.sh_type == SHT_NOTE]
    if not ranges:
        try:
            phdrs = _phdrs(f, header, section0, size, "")
        except ElfFormatError:
            phdrs = []
        ranges = [(ph.p_offset, ph.p_filesz) for ph in phdrs if ph.p_type == PT_NOTE]
    budget = MAX_NOTE_TOTAL
    for n, (off, length) in enumerate(ranges):
        if n >= MAX_NOTE_AREAS or length > budget:
            problems.append("too many or too large note areas; the rest were not searched")
            break
        if off + length > size or length > MAX_NOTE_BYTES:
            problems.append(f"note at {off:#x} runs past the end of the file")
            continue
        budget -= length
        f.seek(off)
        found = parse_build_id_note(f.read(length), header.little_endian)
        if found is not None:
            return found
    return None


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
