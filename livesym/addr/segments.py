"""PT_LOAD program headers, with the spec's field names, and the lookups on them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PF_X = 0x1
PF_W = 0x2
PF_R = 0x4


@dataclass(frozen=True, slots=True)
class LoadSegment:
    """One PT_LOAD entry; ``index`` is its position in the program header table."""

    index: int
    p_offset: int
    p_vaddr: int
    p_filesz: int
    p_memsz: int
    p_align: int
    p_flags: int

    @property
    def executable(self) -> bool:
        return bool(self.p_flags & PF_X)

    @property
    def flags_text(self) -> str:
        """Flags as readelf prints them: ``R E``, ``RW ``."""
        return (
            ("R" if self.p_flags & PF_R else " ")
            + ("W" if self.p_flags & PF_W else " ")
            + ("E" if self.p_flags & PF_X else " ")
        )

    @property
    def aligned(self) -> bool:
        """The spec's rule p_vaddr % p_align == p_offset % p_align (p_align 0 or 1: no rule)."""
        if self.p_align <= 1:
            return True
        return self.p_vaddr % self.p_align == self.p_offset % self.p_align

    def holds_vaddr(self, vaddr: int) -> bool:
        return self.p_vaddr <= vaddr < self.p_vaddr + self.p_memsz

    def holds_offset(self, offset: int) -> bool:
        return self.p_offset <= offset < self.p_offset + self.p_filesz

    def describe(self) -> str:
        return (
            f"PT_LOAD[{self.index}] p_offset={self.p_offset:#x} p_vaddr={self.p_vaddr:#x} "
            f"p_filesz={self.p_filesz:#x} p_memsz={self.p_memsz:#x} "
            f"p_align={self.p_align:#x} flags={self.flags_text.strip() or '-'}"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "p_offset": hex(self.p_offset),
            "p_vaddr": hex(self.p_vaddr),
            "p_filesz": hex(self.p_filesz),
            "p_memsz": hex(self.p_memsz),
            "p_align": hex(self.p_align),
            "flags": self.flags_text.replace(" ", ""),
        }


def segment_for_vaddr(segments: Sequence[LoadSegment], vaddr: int) -> LoadSegment | None:
    """The PT_LOAD whose [p_vaddr, p_vaddr + p_memsz) holds ``vaddr``."""
    for seg in segments:
        if seg.holds_vaddr(vaddr):
            return seg
    return None


def segment_for_offset(segments: Sequence[LoadSegment], offset: int) -> LoadSegment | None:
    """The PT_LOAD whose [p_offset, p_offset + p_filesz) holds ``offset``.

    Adjacent segments can share a file page; an executable segment wins a tie,
    since offsets come from code addresses far more often than from data.
    """
    found = [seg for seg in segments if seg.holds_offset(offset)]
    if not found:
        return None
    return next((seg for seg in found if seg.executable), found[0])
