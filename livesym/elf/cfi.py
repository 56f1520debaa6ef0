"""Call-frame information: which function an address is in, from the FDEs of
``.eh_frame`` and ``.debug_frame``.

Every function the compiler emits unwind information for has an FDE (frame
description entry) giving its bounds ``[pc_begin, pc_begin + pc_range)``; a
stripped library keeps them (they are needed at run time for exceptions), so
they name the extent of code no symbol covers. ``FdeIndex`` answers "which FDE
covers this ELF vaddr" through ``.eh_frame_hdr``'s sorted search table, read in
bulk, then decodes that one FDE's header (and its CIE's, cached) to check the
answer. Without a search table the FDE headers are scanned once into one.

``.debug_frame`` is the same information in DWARF's own layout (CIE id
0xffffffff, CIE pointers from the section's start, absolute addresses, CIE
version 4's address size): code built ``-fno-asynchronous-unwind-tables`` has
only that, and a stripped program's debug file may hold it. It has no search
table: its FDE headers are scanned once, on the first address ``.eh_frame``
does not cover. ``CallFrames`` asks an object's sources in order: its
``.eh_frame``, its ``.debug_frame``, its debug file's ``.debug_frame``.
(MiniDebugInfo as distributions build it is ``objcopy -S`` of the debug file:
it never holds CFI.)

Written by hand rather than through pyelftools: pyelftools parses a whole
``.eh_frame`` eagerly, instructions included (15 s for libLLVM's 95,000 entries),
while a lookup here needs one table read in bulk and two small headers. The
decoding of the instructions (for unwinding) is a separate concern.

Hostile input: every length, offset, count and encoding is checked against the
section it points into; a bad entry costs that lookup (an ``Unresolved``), never
the session; sizes are bounded (``MAX_SECTION``, ``MAX_FDES``).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from livesym.addr.kinds import ElfVaddr
from livesym.elf import leb128
from livesym.elf.cfi_rules import Row, RuleDecoder
from livesym.elf.image import ElfImage, section_bytes, section_contents
from livesym.errors import LivesymError
from livesym.records import Reason, Unresolved

MAX_SECTION = 64 << 20  # bytes of .eh_frame or .eh_frame_hdr read (libLLVM's: 5 MB, 0.8 MB)
MAX_FDES = 4_000_000  # entries of a search table, or FDEs scanned without one
MAX_CIES = 65_536  # CIEs remembered per object

# DWARF pointer encodings (DW_EH_PE_*): the low nibble is the format, the high
# bits how the value applies.
_OMIT = 0xFF
_ABSPTR, _ULEB, _UDATA2, _UDATA4, _UDATA8 = 0x00, 0x01, 0x02, 0x03, 0x04
_SLEB, _SDATA2, _SDATA4, _SDATA8 = 0x09, 0x0A, 0x0B, 0x0C
_PCREL, _DATAREL = 0x10, 0x30
_INDIRECT = 0x80


class _Bad(Exception):
    """Malformed CFI: the message says where."""


@dataclass(frozen=True, slots=True)
class Flavor:
    """Where FDEs are kept, and the layout that differs between the two sections."""

    section: str
    eh: bool  # .eh_frame: CIE id 0, CIE pointers relative, pointer encodings
    cie_id: int
    versions: tuple[int, ...]


EH_FRAME = Flavor(".eh_frame", True, 0, (1, 3))
DEBUG_FRAME = Flavor(".debug_frame", False, 0xFFFF_FFFF, (1, 3, 4))


@dataclass(frozen=True, slots=True)
class FdeBounds:
    """A function's extent as its FDE gives it, and where that FDE is."""

    start: ElfVaddr
    end: ElfVaddr
    fde_offset: int  # of the FDE in its section
    section: str = ".eh_frame"
    file: str | None = None  # the debug file it is in; None: the object itself

    def holds(self, vaddr: int) -> bool:
        return self.start <= vaddr < self.end

    def source(self) -> str:
        return fde_source(self.fde_offset, self.section, self.file)


def fde_source(fde_offset: int, section: str = ".eh_frame", file: str | None = None) -> str:
    """Where a function's bounds came from, as rows and details say it."""
    where = f" of {file}" if file else ""
    return f"FDE at {section} offset {fde_offset:#x}{where}"


def unnamed_function(miss: Unresolved, bounds: FdeBounds) -> Unresolved:
    """What is said of an address no symbol covers, once its FDE bounds its function."""
    return Unresolved(
        Reason.UNNAMED_FUNCTION,
        f"{miss.detail}; the {bounds.source()} bounds its function: "
        f"[{bounds.start:#x}, {bounds.end:#x})",
    )


@dataclass(frozen=True, slots=True)
class _Cie:
    fde_encoding: int
    augmented: bool  # "z": FDEs carry an augmentation length


class _Reader:
    """Little cursor over one section's bytes, at the section's address."""

    def __init__(self, data: bytes, address: int, little: bool, wide: bool) -> None:
        self.data = data
        self.address = address  # sh_addr of the section
        self.order = "<" if little else ">"
        self.wide = wide  # 64-bit ELF: an absolute pointer is 8 bytes
        # An FDE's length, CIE pointer, pc_begin and pc_range as GCC and LLVM write them
        # (pcrel|sdata4): one unpack for the common case of every lookup.
        self.head = struct.Struct(self.order + "IIii")

    def fixed(self, at: int, fmt: str) -> tuple[int, int]:
        size = struct.calcsize(fmt)
        if not 0 <= at <= len(self.data) - size:
            raise _Bad(f"read past the end at offset {at:#x}")
        return struct.unpack_from(self.order + fmt, self.data, at)[0], at + size

    def leb(self, at: int, signed: bool) -> tuple[int, int]:
        try:
            return leb128.decode(self.data, at, signed)
        except ValueError as e:
            raise _Bad(str(e)) from None

    def pointer(self, at: int, encoding: int, data_base: int = 0) -> tuple[int, int]:
        """A pointer in ``encoding``, applied (pc-relative, data-relative)."""
        value, end = self.value(at, encoding & 0x0F)
        how = encoding & 0x70
        if how == _PCREL:
            value += self.address + at
        elif how == _DATAREL:
            value += data_base
        elif how != 0:
            raise _Bad(f"pointer encoding {encoding:#x} is not supported")
        if encoding & _INDIRECT:
            raise _Bad(f"indirect pointer encoding {encoding:#x} in CFI")
        return value & 0xFFFF_FFFF_FFFF_FFFF, end

    def value(self, at: int, fmt: int) -> tuple[int, int]:
        """A value in a pointer encoding's format, not applied (FDE ranges)."""
        if fmt == _ABSPTR:
            return self.fixed(at, "Q" if self.wide else "I")
        if fmt == _ULEB:
            return self.leb(at, False)
        if fmt == _SLEB:
            return self.leb(at, True)
        code = {_UDATA2: "H", _UDATA4: "I", _UDATA8: "Q", _SDATA2: "h", _SDATA4: "i", _SDATA8: "q"}
        if fmt not in code:
            raise _Bad(f"pointer format {fmt:#x} is not a DWARF one")
        return self.fixed(at, code[fmt])


class FdeIndex:
    """Which FDE of one image's ``.eh_frame`` (or ``.debug_frame``) covers an ELF
    vaddr. Built on first use, per image; ``file`` names a debug file's."""

    def __init__(self, image: ElfImage, flavor: Flavor = EH_FRAME, file: str | None = None) -> None:
        self.problems: list[str] = []
        self.flavor = flavor
        self.file = file
        self._eh: _Reader | None = None
        # Sorted function starts and the FDE offset of each, as the search table holds
        # them: relative to a base each, so a 100,000-entry table is taken as it is (no
        # Python-level pass over it) and each lookup adds the base.
        self._starts: array[int] = array("q")
        self._start_base = 0
        self._fdes: array[int] = array("q")
        self._fde_base = 0
        self._cies: dict[int, _Cie] = {}
        self._spans: dict[int, tuple[int, int, int]] = {}  # by position, decoded by span()
        self._decoder: RuleDecoder | None = None
        try:
            self._load(image)
        except (LivesymError, _Bad) as e:
            self.problems.append(f"{flavor.section} unusable: {e}")
            self._starts, self._fdes, self._start_base, self._fde_base = (
                array("q"),
                array("q"),
                0,
                0,
            )

    @property
    def available(self) -> bool:
        return self._eh is not None and len(self._starts) > 0

    def __len__(self) -> int:
        return len(self._starts)

    def _load(self, image: ElfImage) -> None:
        sec = image.section(self.flavor.section)
        if sec is None or sec.sh_size == 0:
            return
        little, wide = image.little_endian, image.elf_class == 64
        if not self.flavor.eh:
            # Not loaded: addresses in it are absolute, never relative to where it is.
            data = section_contents(image, sec, MAX_SECTION)
            self._eh = _Reader(data, 0, little, wide)
            self._scan()
            return
        self._eh = _Reader(section_bytes(image, sec, MAX_SECTION), sec.sh_addr, little, wide)
        hdr = image.section(".eh_frame_hdr")
        if hdr is not None and hdr.sh_size > 0:
            reader = _Reader(section_bytes(image, hdr, MAX_SECTION), hdr.sh_addr, little, wide)
            try:
                self._read_search_table(reader)
                return
            except _Bad as e:
                self.problems.append(f".eh_frame_hdr unusable ({e}); FDEs scanned instead")
        self._scan()

    def _read_search_table(self, hdr: _Reader) -> None:
        """The sorted (initial location, FDE address) pairs of .eh_frame_hdr, in bulk."""
        version, at = hdr.fixed(0, "B")
        if version != 1:
            raise _Bad(f"version {version}")
        ptr_enc, count_enc, table_enc = hdr.data[1], hdr.data[2], hdr.data[3]
        _, at = hdr.pointer(4, ptr_enc, hdr.address)
        if count_enc == _OMIT or table_enc != _DATAREL | _SDATA4:
            raise _Bad(f"search table encoding {table_enc:#x} (expected datarel sdata4)")
        count, at = hdr.pointer(at, count_enc, hdr.address)
        if not 0 < count <= MAX_FDES or at + 8 * count > len(hdr.data):
            raise _Bad(f"{count} entries do not fit in {len(hdr.data)} bytes")
        table = array("i")
        table.frombytes(hdr.data[at : at + 8 * count])
        if (hdr.order == "<") != (array("i", [1]).tobytes()[0] == 1):
            table.byteswap()
        assert self._eh is not None
        # datarel values are from the header's start; FDE offsets are in .eh_frame
        self._starts, self._start_base = table[0::2], hdr.address
        self._fdes, self._fde_base = table[1::2], hdr.address - self._eh.address

    def _scan(self) -> None:
        """Every FDE header of the section, where there is no search table."""
        eh = self._eh
        assert eh is not None
        found: list[tuple[int, int]] = []
        at = 0
        while at + 4 <= len(eh.data) and len(found) < MAX_FDES:
            length, body = eh.fixed(at, "I")
            if length == 0:
                break  # the terminator
            if length == 0xFFFF_FFFF:
                length, body = eh.fixed(body, "Q")
            end = body + length
            if end > len(eh.data):
                raise _Bad(f"entry at {at:#x} runs past the section")
            cie_id, _ = eh.fixed(body, "I")
            if cie_id != self.flavor.cie_id:
                try:
                    start, _, _ = self._fde_header(at)
                    found.append((start, at))
                except _Bad as e:
                    if len(self.problems) < 10:
                        self.problems.append(f"FDE at {at:#x}: {e}")
            at = end
        found.sort()
        self._starts = array("q", [s for s, _ in found])
        self._fdes = array("q", [f for _, f in found])

    def lookup(self, vaddr: int) -> FdeBounds | Unresolved:
        """The bounds of the function holding ``vaddr``, or why none are known."""
        if not self.available:
            why = self.problems[0] if self.problems else f"no {self.flavor.section}"
            return Unresolved(Reason.NO_CFI, why)
        i = bisect_right(self._starts, vaddr - self._start_base) - 1
        if i < 0:
            return Unresolved(Reason.NO_CFI, f"no FDE covers ELF vaddr {vaddr:#x}")
        offset = self._fdes[i] + self._fde_base
        section = self.flavor.section
        try:
            start, size, _ = self._fde_header(offset)
        except _Bad as e:
            return Unresolved(Reason.NO_CFI, f"the FDE at {section} offset {offset:#x}: {e}")
        bounds = FdeBounds(ElfVaddr(start), ElfVaddr(start + size), offset, section, self.file)
        if not bounds.holds(vaddr):
            return Unresolved(Reason.NO_CFI, f"no FDE covers ELF vaddr {vaddr:#x}")
        return bounds

    def rules_at(self, vaddr: int) -> Row | Unresolved:
        """The unwind rules that hold at ``vaddr``: its FDE found, then decoded (once)."""
        bounds = self.lookup(vaddr)
        if isinstance(bounds, Unresolved):
            return bounds
        return self.rules_in(bounds, vaddr)

    def rules_in(self, bounds: FdeBounds, vaddr: int) -> Row | Unresolved:
        """The rules at ``vaddr`` from the FDE ``lookup`` found for it."""
        eh = self._eh
        assert eh is not None
        if self._decoder is None:
            self._decoder = RuleDecoder(
                eh.data, eh.address, eh.order == "<", eh.wide, self.flavor.section
            )
        return self._decoder.row_at(bounds.fde_offset, vaddr)

    def span(self, vaddr: int) -> tuple[int, int, int] | None:
        """(start, end, FDE offset) of the function holding ``vaddr``; None where
        ``lookup`` would say why not. For batches: no record is made, and each FDE's
        header is decoded once (a batch meets most functions several times)."""
        i = bisect_right(self._starts, vaddr - self._start_base) - 1
        if i < 0:
            return None
        found = self._spans.get(i)
        if found is None:
            found = self._span_of(i)
        return found if found[0] <= vaddr < found[1] else None

    def span_table(
        self,
    ) -> tuple[
        array[int], int, dict[int, tuple[int, int, int]], Callable[[int], tuple[int, int, int]]
    ]:
        """What ``span`` reads, for a batch loop that inlines it: the starts, their base,
        the spans decoded so far by position, and the decoder of one."""
        return self._starts, self._start_base, self._spans, self._span_of

    def _span_of(self, i: int) -> tuple[int, int, int]:
        """The i-th FDE's (start, end, offset); (0, 0, offset) when its header is bad."""
        offset = self._fdes[i] + self._fde_base
        try:
            start, size, _ = self._fde_header(offset)
            found = (start, start + size, offset)
        except _Bad:
            found = (0, 0, offset)
        if len(self._spans) < MAX_FDES:
            self._spans[i] = found
        return found

    def _fde_header(self, offset: int) -> tuple[int, int, int]:
        """(pc_begin, pc_range, offset of what follows) of the FDE at ``offset``."""
        eh = self._eh
        assert eh is not None
        data = eh.data
        if self.flavor.eh and 0 <= offset <= len(data) - 16:
            # The common case in one unpack: a CIE already read that encodes pc_begin
            # and pc_range as pcrel|sdata4. The checks are the general path's.
            length, cie_pointer, begin, size = eh.head.unpack_from(data, offset)
            cie = self._cies.get(offset + 4 - cie_pointer)
            if (
                cie is not None
                and cie.fde_encoding == _PCREL | _SDATA4
                and 12 <= length < 0xFFFF_FFFF
                and offset + 4 + length <= len(data)
                and cie_pointer != 0
                and size > 0
            ):
                start = (begin + eh.address + offset + 8) & 0xFFFF_FFFF_FFFF_FFFF
                return start, size, offset + 16
        length, at = eh.fixed(offset, "I")
        if length == 0xFFFF_FFFF:
            raise _Bad("64-bit DWARF CFI entries are not used by GCC or LLVM")
        if length == 0 or offset + 4 + length > len(eh.data):
            raise _Bad(f"length {length} runs past the section")
        cie_pointer, after = eh.fixed(at, "I")
        if cie_pointer == self.flavor.cie_id:
            raise _Bad("is a CIE, not an FDE")
        # .eh_frame: back from here; .debug_frame: from the section's start.
        cie = self._cie(at - cie_pointer if self.flavor.eh else cie_pointer)
        start, after = eh.pointer(after, cie.fde_encoding)
        size, after = eh.value(after, cie.fde_encoding & 0x0F)
        if not 0 < size < 1 << 32:
            raise _Bad(f"pc_range {size:#x}")
        return start, size, after

    def _cie(self, offset: int) -> _Cie:
        found = self._cies.get(offset)
        if found is None:
            found = self._parse_cie(offset)
            if len(self._cies) < MAX_CIES:
                self._cies[offset] = found
        return found

    def _parse_cie(self, offset: int) -> _Cie:
        eh = self._eh
        assert eh is not None
        length, at = eh.fixed(offset, "I")
        end = at + length
        if length in (0, 0xFFFF_FFFF) or end > len(eh.data):
            raise _Bad(f"the CIE at {offset:#x} has length {length}")
        cie_id, at = eh.fixed(at, "I")
        version, at = eh.fixed(at, "B")
        if cie_id != self.flavor.cie_id or version not in self.flavor.versions:
            raise _Bad(f"no CIE at {offset:#x} (id {cie_id:#x}, version {version})")
        nul = eh.data.find(b"\0", at, end)
        if nul < 0:
            raise _Bad(f"the CIE at {offset:#x} has an unterminated augmentation")
        augmentation = eh.data[at:nul].decode("ascii", "replace")
        at = nul + 1
        if "eh" in augmentation:
            at += 8 if eh.wide else 4
        if version == 4:  # address size, segment selector size
            size, at = eh.fixed(at, "B")
            if size != (8 if eh.wide else 4):
                raise _Bad(f"the CIE at {offset:#x} has {size}-byte addresses")
            at += 1
        _, at = eh.leb(at, False)  # code alignment
        _, at = eh.leb(at, True)  # data alignment
        if version == 1:
            at += 1  # return address register
        else:
            _, at = eh.leb(at, False)
        encoding = _ABSPTR
        if augmentation.startswith("z"):
            _, at = eh.leb(at, False)  # augmentation data length
            for letter in augmentation[1:]:
                if letter == "R":
                    encoding, at = eh.fixed(at, "B")
                elif letter == "P":
                    personality, at = eh.fixed(at, "B")
                    _, at = eh.pointer(at, personality & 0x7F)
                elif letter == "L":
                    at += 1
                elif letter not in "SB":
                    break  # unknown letters end what can be read; R usually came first
                if at > end:
                    raise _Bad(f"the CIE at {offset:#x} augmentation runs past it")
        return _Cie(encoding, augmentation.startswith("z"))


class CallFrames:
    """Every source of call-frame information for one object, asked in order: its
    ``.eh_frame``, its ``.debug_frame``, its debug file's ``.debug_frame``. The later
    ones are read on the first address the earlier ones do not cover."""

    def __init__(self, image: ElfImage, debug: tuple[str, ElfImage] | None = None) -> None:
        self._image = image
        self._debug = debug
        self._indexes = [FdeIndex(image)]
        self._rest: list[FdeIndex] | None = None

    def lookup(self, vaddr: int) -> FdeBounds | Unresolved:
        """The bounds of the function holding ``vaddr``, from the first source that
        covers it; else why the first could not."""
        return self._find(vaddr)[1]

    def span(self, vaddr: int) -> tuple[int, int, int] | None:
        """``.eh_frame``'s (start, end, FDE offset) of the function holding ``vaddr``,
        or None (then ``lookup`` looks further, and says why)."""
        return self._indexes[0].span(vaddr)

    @property
    def eh_frame(self) -> FdeIndex:
        return self._indexes[0]

    def eh_frame_only(self) -> bool:
        """Whether ``.eh_frame`` is the only source (the others read and found empty):
        then ``span`` is the whole answer, None meaning no function is known."""
        return not self._more()

    def rules_at(self, vaddr: int) -> Row | Unresolved:
        index, found = self._find(vaddr)
        if isinstance(found, Unresolved):
            return found
        assert index is not None
        return index.rules_in(found, vaddr)  # the FDE found once, not looked up again

    def _find(self, vaddr: int) -> tuple[FdeIndex | None, FdeBounds | Unresolved]:
        first = self._indexes[0]
        found = first.lookup(vaddr)
        if isinstance(found, FdeBounds):
            return first, found
        for index in self._more():
            other = index.lookup(vaddr)
            if isinstance(other, FdeBounds):
                return index, other
        return None, found  # why .eh_frame could not: the section most code has

    def _more(self) -> list[FdeIndex]:
        """The sources after .eh_frame, read on the first address it missed (most
        objects never need them). Two threads may both read them: one list is kept."""
        if self._rest is None:
            rest = [FdeIndex(self._image, DEBUG_FRAME)]
            if self._debug is not None:
                path, image = self._debug
                rest.append(FdeIndex(image, DEBUG_FRAME, path))
            self._rest = [index for index in rest if index.available]
        return self._rest
