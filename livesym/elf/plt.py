"""Names for an object's PLT stubs -- ``clock_gettime@plt`` -- as perf and objdump give them.

A call from one object into another goes through a small stub in .plt (or
.plt.sec, .plt.got) that jumps through a GOT slot. No symbol covers the stubs,
so without this a sample in one reads "no symbol covers the address", and a
program that calls libc in a tight loop has a few percent of its samples there.

Each stub is decoded, not counted: its indirect jump names the GOT slot, and
the slot's relocation (JUMP_SLOT in .rela.plt, GLOB_DAT in .rela.dyn for
.plt.got) names the symbol in .dynsym. A lazy-binding stub of an IBT-enabled
.plt has no jump of its own; its ``push $index`` is the slot's index in
.rela.plt. An IRELATIVE slot (an ifunc of the object itself, such as libc's own
calls to memcpy) has no symbol: its addend is the resolver's address, named by
the object's own function symbol there, else ``*ABS*+0x...`` as objdump writes it.

x86-64 only: the stub layouts are per machine, and other machines' objects
simply get no PLT names.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from livesym.elf.image import (
    SHT_DYNSYM,
    SHT_NOBITS,
    ElfImage,
    SectionHeader,
    section_bytes,
    string_at,
)
from livesym.errors import ElfFormatError

EM_X86_64 = 62
SHT_RELA = 4
R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_IRELATIVE = 6, 7, 37

PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got", ".plt.bnd")
SUFFIX = b"@plt"
# A PLT of 64k stubs is already far beyond any real object (libLLVM has ~6k).
MAX_PLT_BYTES = 1 << 20
MAX_RELA_PLT_BYTES = 4 << 20
MAX_RELA_BYTES = 64 << 20
MAX_DYNSYM_BYTES = 64 << 20
MAX_NAME_BYTES = 4096

_ENDBR64 = b"\xf3\x0f\x1e\xfa"
_BND = 0xF2
_JMP_RIP = b"\xff\x25"  # jmp *disp32(%rip)
_PUSH_IMM32 = 0x68
_NOP2 = b"\x66\x90"  # xchg %ax,%ax
_RELA64 = struct.Struct("<QQq")
_Reloc = tuple[int, int, int]  # (type, symbol index, addend)


class PltStub(NamedTuple):
    start: int
    size: int
    name: bytes  # with the @plt suffix
    section: int  # index of the section holding the stub


# A function symbol at an address, by the object's own tables (for IRELATIVE).
NameAt = Callable[[int], bytes | None]


def plt_stubs(
    image: ElfImage, dynstr: bytes, name_at: NameAt, problems: list[str]
) -> list[PltStub]:
    """Every PLT stub of ``image`` whose target could be named.

    ``dynstr``: the string table of .dynsym, as the symbol table already read it.
    A damaged section is skipped with a note in ``problems``; nothing here raises
    but FileError (the file changed meanwhile).
    """
    if image.machine_code != EM_X86_64 or image.elf_class != 64 or not image.little_endian:
        return []
    plts = [
        s for s in image.sections
        if s.name in PLT_SECTIONS and s.sh_type != SHT_NOBITS and s.sh_size
    ]  # fmt: skip
    if not plts:
        return []
    relocs = _Relocations(image, dynstr, problems)
    stubs: list[PltStub] = []
    for sec in plts:
        try:
            code = section_bytes(image, sec, MAX_PLT_BYTES)
        except ElfFormatError as e:
            problems.append(str(e))
            continue
        step = _entry_size(code, sec.sh_entsize)
        for at in range(0, len(code) - step + 1, step):
            slot = _decode(code, at, step, sec.sh_addr)
            name = relocs.name(slot, name_at) if slot is not None else None
            if name is not None:
                stubs.append(PltStub(sec.sh_addr + at, step, name + SUFFIX, sec.index))
    return stubs


# What a stub refers to: ("got", slot address) or ("index", .rela.plt index).
_Slot = tuple[str, int]


def _entry_size(code: bytes, sh_entsize: int) -> int:
    if sh_entsize in (8, 16):
        return sh_entsize
    # A static executable's .plt (its IRELATIVE stubs) says 0: its stubs are a
    # jump and a two-byte nop, 8 bytes each.
    if code.startswith(_JMP_RIP) and code.startswith(_NOP2, 6):
        return 8
    return 16


def _decode(code: bytes, at: int, size: int, base: int) -> _Slot | None:
    """The GOT slot one stub jumps through, or its .rela.plt index; None for the
    PLT's header or anything else."""
    p = at
    end = at + size
    if code.startswith(_ENDBR64, p):
        p += 4
    if p < end and code[p] == _BND:
        p += 1
    if code.startswith(_JMP_RIP, p) and p + 6 <= end:
        disp = int.from_bytes(code[p + 2 : p + 6], "little", signed=True)
        return ("got", (base + p + 6 + disp) & ((1 << 64) - 1))
    if p == at + 4 and p + 5 <= end and code[p] == _PUSH_IMM32:
        return ("index", int.from_bytes(code[p + 1 : p + 5], "little"))
    return None


class _Relocations:
    """The dynamic relocations that name GOT slots, read on first need.

    .rela.plt (one entry per stub) is decoded whole. .rela.dyn can be megabytes of
    RELATIVE entries (9 MB in libLLVM) for the few GLOB_DAT slots .plt.got uses, so
    it is searched for each of those slots' address instead.
    """

    def __init__(self, image: ElfImage, dynstr: bytes, problems: list[str]) -> None:
        self._image = image
        self._dynstr = dynstr
        self._problems = problems
        self._plt: dict[int, _Reloc] | None = None  # slot -> relocation, from .rela.plt
        self._plt_order: list[int] = []  # .rela.plt's slots in order
        self._others: list[bytes] | None = None  # the other RELA sections, raw
        self._dynsym: bytes | None = None

    def name(self, slot: _Slot, name_at: NameAt) -> bytes | None:
        kind, value = slot
        plt = self._load_plt()
        if kind == "index":
            if value >= len(self._plt_order):
                return None
            value = self._plt_order[value]
        reloc = plt.get(value) or self._search_others(value)
        if reloc is None:
            return None
        r_type, sym, addend = reloc
        if r_type == R_X86_64_IRELATIVE:
            return name_at(addend) or f"*ABS*+{addend:#x}".encode()
        if r_type in (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT) and sym:
            return self._symbol_name(sym)
        return None

    def _rela_sections(self) -> list[SectionHeader]:
        return [
            s for s in self._image.sections
            if s.sh_type == SHT_RELA and s.sh_entsize == _RELA64.size
        ]  # fmt: skip

    def _load_plt(self) -> dict[int, _Reloc]:
        if self._plt is None:
            self._plt = {}
            for sec in self._rela_sections():
                if sec.name != ".rela.plt":
                    continue
                data = self._read(sec, MAX_RELA_PLT_BYTES)
                whole = len(data) - len(data) % _RELA64.size
                for offset, info, addend in _RELA64.iter_unpack(data[:whole]):
                    self._plt_order.append(offset)
                    self._plt.setdefault(offset, (info & 0xFFFFFFFF, info >> 32, addend))
        return self._plt

    def _search_others(self, slot: int) -> _Reloc | None:
        if self._others is None:
            self._others = [
                self._read(sec, MAX_RELA_BYTES)
                for sec in self._rela_sections()
                if sec.name != ".rela.plt"
            ]
        needle = slot.to_bytes(8, "little")
        for data in self._others:
            at = data.find(needle)
            while at >= 0:
                if at % _RELA64.size == 0 and at + _RELA64.size <= len(data):
                    _offset, info, addend = _RELA64.unpack_from(data, at)
                    r_type = info & 0xFFFFFFFF
                    if r_type in (R_X86_64_GLOB_DAT, R_X86_64_IRELATIVE):
                        return (r_type, info >> 32, addend)
                at = data.find(needle, at + 1)
        return None

    def _symbol_name(self, index: int) -> bytes | None:
        if self._dynsym is None:
            dynsym = next((s for s in self._image.sections if s.sh_type == SHT_DYNSYM), None)
            self._dynsym = self._read(dynsym, MAX_DYNSYM_BYTES) if dynsym is not None else b""
        entry = index * 24
        if entry + 24 > len(self._dynsym):
            return None
        st_name = int.from_bytes(self._dynsym[entry : entry + 4], "little")
        return string_at(self._dynstr, st_name, MAX_NAME_BYTES) or None

    def _read(self, sec: SectionHeader, limit: int) -> bytes:
        try:
            return section_bytes(self._image, sec, limit)
        except ElfFormatError as e:  # too big, no contents, past the end
            self._problems.append(str(e))
            return b""
