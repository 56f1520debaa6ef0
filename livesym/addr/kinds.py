"""The three address kinds, kept apart by type.

``Vma`` is a run-time address in the target; ``ElfVaddr`` lives in the ELF's
own p_vaddr space (symbols are there); ``ElfOffset`` is a byte position in the
file. mypy keeps them from being mixed up, e.g. a file offset added to a base.
"""

from __future__ import annotations

from typing import NewType

Vma = NewType("Vma", int)
ElfVaddr = NewType("ElfVaddr", int)
ElfOffset = NewType("ElfOffset", int)

# Load bias of one object in one process: vma = elf_vaddr + base.
Base = NewType("Base", int)

U64_MASK = (1 << 64) - 1


def hex_or_none(value: int | None) -> str | None:
    """An address as JSON carries it: lower-case hex with 0x, or None when absent."""
    return hex(value) if value is not None else None


def parse_address(text: str) -> int:
    """Parse ``0x``-prefixed hex or decimal; raise ValueError with the text on failure."""
    s = text.strip()
    if not s:
        raise ValueError("empty address")
    try:
        value = int(s, 16) if s[:2].lower() == "0x" else int(s, 10)
    except ValueError:
        raise ValueError(f"not an address: {s!r} (use hex with 0x, or decimal)") from None
    if value < 0 or value > U64_MASK:
        raise ValueError(f"address out of range: {s!r} (addresses are 0 to 0xffffffffffffffff)")
    return value
