"""Source file and line of an ELF vaddr, from the DWARF line table (``.debug_line``).

Only on demand -- ``addr``, ``symbolize --lines``, the dashboard's details --
never per sample: pyelftools is imported on the first question, and a line
table is decoded one compile unit at a time, the unit found through
``.debug_aranges`` (every unit is decoded, once, only for files without it).
Decoded units are cached with their table.

pyelftools is handed windows onto the file (``os.pread``) rather than the
sections' bytes, so a debug file of a gigabyte costs what is read, not its
size in memory. Compressed sections (SHF_COMPRESSED) are inflated, bounded.

The answer is the one addr2line gives: the row with the greatest address at or
below the address in the sequence that covers it, the last of several rows at
one address, and the file as directory + name made absolute with the unit's
DW_AT_comp_dir.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, cast

from livesym.elf.image import SHF_COMPRESSED, SHT_NOBITS, ElfImage, SectionHeader, inflate

if TYPE_CHECKING:
    from elftools.dwarf.dwarfinfo import DWARFInfo
    from elftools.dwarf.lineprogram import LineProgram

__all__ = ["LineTable", "LinesCancelled", "SourceLine", "cancel_on", "has_line_table"]

MAX_INFLATED = 256 << 20
MAX_ROWS = 1_000_000  # over all decoded units of one file
MAX_UNITS_SCANNED = 100_000

_SECTIONS = (
    ".debug_info",
    ".debug_aranges",
    ".debug_abbrev",
    ".debug_str",
    ".debug_line",
    ".debug_line_str",
    ".debug_str_offsets",
    ".debug_addr",
)


@dataclass(frozen=True, slots=True)
class SourceLine:
    """Where an instruction came from: a source file and a 1-based line."""

    file: str
    line: int

    def text(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class _Sequence:
    start: int
    end: int
    addresses: list[int]
    rows: list[tuple[int, int]]  # (file index, line), parallel to addresses
    files: dict[int, str]


def has_line_table(image: ElfImage) -> bool:
    sec = image.section(".debug_line")
    return sec is not None and sec.sh_type != SHT_NOBITS and sec.sh_size > 0


class _Window(io.RawIOBase):
    """A read-only stream over [offset, offset + size) of an open file."""

    def __init__(self, fd: int, offset: int, size: int) -> None:
        super().__init__()
        self._fd, self._base, self._size, self._pos = fd, offset, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        cancel = getattr(_cancel, "event", None)
        if cancel is not None and cancel.is_set():
            raise LinesCancelled
        left = max(0, self._size - self._pos)
        n = left if size is None or size < 0 else min(size, left)
        if n == 0:
            return b""
        data = os.pread(self._fd, n, self._base + self._pos)
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class LinesCancelled(BaseException):
    """A lookup's time ran out (``cancel_on``): stopped at pyelftools' next read. A
    BaseException, as asyncio's CancelledError is: pyelftools turns every Exception
    raised in a read into its own parse error."""


_cancel = threading.local()  # .event: the Event that cancels this thread's lookups


@contextlib.contextmanager
def cancel_on(event: threading.Event) -> Iterator[None]:
    """Lookups on this thread stop (their answer None) once ``event`` is set: a line
    program of one big unit takes pyelftools a second or more, and a lookup left
    behind when its time was up held the interpreter from the session's last work."""
    _cancel.event = event
    try:
        yield
    finally:
        _cancel.event = None


class LineTable:
    """The line table of one file (an object or its debug file); thread-safe."""

    def __init__(self, image: ElfImage) -> None:
        self.path = image.path
        self._image = image
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._dwarf: DWARFInfo | None = None
        self._units: dict[int, list[_Sequence]] = {}  # unit offset -> its sequences
        self._all: tuple[list[int], list[_Sequence]] | None = None  # without aranges
        # .debug_aranges, parsed once: pyelftools parses the whole section on every
        # get_aranges() (0.2 s for libc's debug file), which would be paid per lookup.
        self._aranges: Any = None
        self._aranges_read = False
        self._rows = 0
        self.problem: str | None = None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._dwarf = None
            self._aranges, self._aranges_read = None, False

    def lookup(self, vaddr: int) -> SourceLine | None:
        """The source line of ``vaddr``, or None (no row covers it, or the DWARF is
        unreadable: ``problem`` then says why)."""
        with self._lock:
            if self.problem is not None:
                return None
            try:
                return self._lookup(vaddr)
            except LinesCancelled:
                self._forget_partial()
                return None
            except Exception as e:  # pyelftools on hostile DWARF raises anything
                self.problem = f"{self.path}: DWARF line table unreadable: {type(e).__name__}: {e}"
                return None

    def _forget_partial(self) -> None:
        """After a cancelled lookup: pyelftools' state as it was left mid-parse is
        dropped (the units decoded whole are kept), and opened again when asked."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._dwarf = None
        self._aranges, self._aranges_read = None, False

    def _lookup(self, vaddr: int) -> SourceLine | None:
        dwarf = self._open()
        if dwarf is None:
            return None
        if not self._aranges_read:
            self._aranges_read = True
            self._aranges = dwarf.get_aranges() if dwarf.debug_aranges_sec is not None else None
        aranges = self._aranges
        if aranges is not None and aranges.keys:
            # The unit that holds the address, by .debug_aranges: nothing else is decoded.
            unit = aranges.cu_offset_at_addr(vaddr)
            if unit is None:
                return None
            sequences = self._units.get(unit)
            if sequences is None:
                sequences = self._units[unit] = self._decode(dwarf, dwarf.get_CU_at(unit))
            return _find(vaddr, [s.start for s in sequences], sequences)
        if self._all is None:
            self._all = self._decode_all(dwarf)
        return _find(vaddr, *self._all)

    def _open(self) -> DWARFInfo | None:
        if self._dwarf is not None:
            return self._dwarf
        from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo

        image = self._image
        self._fd = _open_fd(image) if image.data is None else None
        found: dict[str, DebugSectionDescriptor | None] = {}
        for name in _SECTIONS:
            sec = image.section(name)
            found[name] = None
            if sec is not None and sec.sh_type != SHT_NOBITS:
                stream = self._stream(sec)
                descriptor = DebugSectionDescriptor(
                    cast(IO[bytes], stream), name, sec.sh_offset, _size(stream), 0
                )
                found[name] = descriptor
        if found[".debug_info"] is None or found[".debug_line"] is None:
            self.problem = f"{image.path}: no .debug_info/.debug_line"
            return None
        config = DwarfConfig(
            little_endian=image.little_endian,
            machine_arch=image.e_machine,
            default_address_size=image.elf_class // 8,
        )
        self._dwarf = DWARFInfo(
            config=config,
            debug_info_sec=found[".debug_info"],
            debug_aranges_sec=found[".debug_aranges"],
            debug_abbrev_sec=found[".debug_abbrev"],
            debug_frame_sec=None,
            eh_frame_sec=None,
            debug_str_sec=found[".debug_str"],
            debug_loc_sec=None,
            debug_ranges_sec=None,
            debug_line_sec=found[".debug_line"],
            debug_pubtypes_sec=None,
            debug_pubnames_sec=None,
            debug_addr_sec=found[".debug_addr"],
            debug_str_offsets_sec=found[".debug_str_offsets"],
            debug_line_str_sec=found[".debug_line_str"],
            debug_loclists_sec=None,
            debug_rnglists_sec=None,
            debug_sup_sec=None,
            gnu_debugaltlink_sec=None,
            debug_types_sec=None,
        )
        return self._dwarf

    def _stream(self, sec: SectionHeader) -> io.RawIOBase | io.BytesIO:
        image = self._image
        size = max(0, min(sec.sh_size, image.size - sec.sh_offset))
        if sec.sh_flags & SHF_COMPRESSED:
            return io.BytesIO(inflate(image.read(sec.sh_offset, size), image, MAX_INFLATED))
        if image.data is not None:
            return io.BytesIO(image.data[sec.sh_offset : sec.sh_offset + size])
        assert self._fd is not None
        return _Window(self._fd, sec.sh_offset, size)

    def _decode(self, dwarf: DWARFInfo, unit: Any) -> list[_Sequence]:
        program = dwarf.line_program_for_CU(unit)
        if program is None:
            return []
        comp_dir = _comp_dir(unit)
        return self._sequences(program, comp_dir)

    def _decode_all(self, dwarf: DWARFInfo) -> tuple[list[int], list[_Sequence]]:
        everything: list[_Sequence] = []
        for n, unit in enumerate(dwarf.iter_CUs()):
            if n >= MAX_UNITS_SCANNED or self._rows >= MAX_ROWS:
                break
            everything += self._decode(dwarf, unit)
        everything.sort(key=lambda s: s.start)
        return [s.start for s in everything], everything

    def _sequences(self, program: LineProgram, comp_dir: str) -> list[_Sequence]:
        out: list[_Sequence] = []
        addresses: list[int] = []
        rows: list[tuple[int, int]] = []
        for entry in program.get_entries():
            state = entry.state
            if state is None:
                continue
            if state.end_sequence:
                if addresses and state.address > addresses[0]:
                    files = _file_names(program, comp_dir, {f for f, _ in rows})
                    out.append(_Sequence(addresses[0], state.address, addresses, rows, files))
                addresses, rows = [], []
                continue
            if addresses and addresses[-1] == state.address:
                rows[-1] = (state.file, state.line)  # the last row at an address wins
                continue
            if addresses and state.address < addresses[-1]:
                continue  # rows go up within a sequence; a crafted one that does not is cut
            addresses.append(state.address)
            rows.append((state.file, state.line))
            self._rows += 1
            if self._rows >= MAX_ROWS:
                break
        out.sort(key=lambda s: s.start)
        return out


def _find(vaddr: int, starts: list[int], sequences: list[_Sequence]) -> SourceLine | None:
    k = bisect_right(starts, vaddr) - 1
    # Sequences of different units may nest (rarely); look back a little.
    for i in range(k, max(-1, k - 8), -1):
        seq = sequences[i]
        if seq.start <= vaddr < seq.end:
            j = bisect_right(seq.addresses, vaddr) - 1
            file_index, line = seq.rows[j]
            if line <= 0:
                return None
            return SourceLine(seq.files.get(file_index, "??"), line)
    return None


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _comp_dir(unit: Any) -> str:
    attr = unit.get_top_DIE().attributes.get("DW_AT_comp_dir")
    return _text(attr.value) if attr is not None else ""


def _file_names(program: LineProgram, comp_dir: str, wanted: set[int]) -> dict[int, str]:
    """Full paths of the files a sequence uses, as addr2line builds them."""
    version = program["version"]
    entries = program["file_entry"]
    dirs = [_text(d) for d in program["include_directory"]]
    names: dict[int, str] = {}
    for index in wanted:
        k = index if version >= 5 else index - 1
        if not 0 <= k < len(entries):
            continue
        entry = entries[k]
        name = _text(entry.name)
        d = entry.dir_index
        if version >= 5:
            directory = dirs[d] if 0 <= d < len(dirs) else ""
        else:
            directory = comp_dir if d == 0 else (dirs[d - 1] if 0 < d <= len(dirs) else "")
        if not os.path.isabs(name):
            name = os.path.join(directory, name)
        if not os.path.isabs(name) and comp_dir:
            name = os.path.join(comp_dir, name)
        names[index] = name
    return names


def _size(stream: io.RawIOBase | io.BytesIO) -> int:
    size = stream.seek(0, io.SEEK_END)
    stream.seek(0)
    return size


def _open_fd(image: ElfImage) -> int:
    """A descriptor of the very file ``image`` was read from (its path or a fallback)."""
    with image.open_same() as f:
        return os.dup(f.fileno())
