"""Base addresses and the conversions VMA <-> ELF vaddr <-> ELF file offset.

Every function here returns the numbers *and* how they were obtained: a
``Step`` holds the formula, the formula with the numbers filled in, and the
result. The dashboard and ``livesym addr`` print these records; nothing
downstream recomputes them.

The base (load bias) of a mapping [start, end) with file offset pgoff comes
from the PT_LOAD that backs pgoff:

    base = start - (pgoff - p_offset + p_vaddr)

Page alignment makes this exact: the loader maps page_down(p_offset) at
base + page_down(p_vaddr). The seed's form, base = start - page_down(p_vaddr)
(plus how far pgoff lies into the segment), is the same number whenever
p_vaddr and p_offset are congruent modulo the page size; it is computed too
and a disagreement is reported, never silently resolved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from livesym.addr.kinds import Base, ElfOffset, ElfVaddr, Vma
from livesym.addr.maps import MapsEntry
from livesym.addr.segments import PF_W, LoadSegment, segment_for_offset, segment_for_vaddr
from livesym.records import Reason, Unresolved

ET_EXEC = "ET_EXEC"
ET_DYN = "ET_DYN"


@dataclass(frozen=True, slots=True)
class Step:
    """One conversion: ``formula`` = ``substituted`` = ``result``."""

    name: str
    formula: str
    substituted: str
    result: int

    def text(self) -> str:
        if self.substituted:
            return f"{self.formula} = {self.substituted} = {self.result:#x}"
        return f"{self.formula} = {self.result:#x}"


@dataclass(frozen=True, slots=True)
class BaseDerivation:
    """The base address of one mapping, the segment it came from and how."""

    base: Base
    mapping: MapsEntry
    segment: LoadSegment
    e_type: str
    step: Step
    problems: tuple[str, ...] = ()
    # What the mapping itself implies, start - (pgoff - p_offset + p_vaddr); equal
    # to ``base`` except for an ET_EXEC image mapped away from its link address.
    implied: int = 0


def page_down(value: int, page_size: int) -> int:
    return value - value % page_size


def _perm_match(mapping: MapsEntry, seg: LoadSegment) -> bool:
    return mapping.executable == seg.executable and mapping.writable == bool(seg.p_flags & PF_W)


def segments_for_mapping(
    segments: Sequence[LoadSegment], mapping: MapsEntry, page_size: int
) -> list[LoadSegment]:
    """Every PT_LOAD whose file pages include the mapping's ``pgoff``.

    pgoff is page aligned while p_offset need not be, so a segment's file range
    starts at page_down(p_offset). Neighbouring segments can share a file page
    (and after RELRO's mprotect a read-only page of the data segment looks just
    like the read-only segment before it), so there can be more than one.
    """
    pgoff = mapping.pgoff
    return [
        seg
        for seg in segments
        if page_down(seg.p_offset, page_size) <= pgoff < seg.p_offset + seg.p_filesz
    ]


def _derive_from(
    mapping: MapsEntry, seg: LoadSegment, e_type: str, page_size: int
) -> BaseDerivation:
    start, pgoff = mapping.start, mapping.pgoff
    computed = start - (pgoff - seg.p_offset + seg.p_vaddr)
    # The seed's aligned form: the mapping starts page_down(p_vaddr) plus how far
    # pgoff lies past page_down(p_offset) into the segment.
    seed_form = (
        start - (pgoff - page_down(seg.p_offset, page_size)) - page_down(seg.p_vaddr, page_size)
    )
    problems: list[str] = []
    if not seg.aligned:
        problems.append(
            f"PT_LOAD[{seg.index}]: p_vaddr % p_align ({seg.p_vaddr % seg.p_align:#x}) != "
            f"p_offset % p_align ({seg.p_offset % seg.p_align:#x})"
        )
    if computed != seed_form:
        problems.append(
            f"base from p_offset/p_vaddr ({computed:#x}) disagrees with the page-aligned "
            f"form ({seed_form:#x}): p_vaddr and p_offset are not congruent modulo the "
            f"page size {page_size:#x}"
        )
    if e_type == ET_EXEC:
        # An ET_EXEC image runs at its link-time addresses: base 0 by construction.
        if computed != 0:
            problems.append(
                f"ET_EXEC image mapped away from its link address (mapping implies base "
                f"{computed:#x})"
            )
        step = Step("base", "base = 0 (ET_EXEC: runs at its link-time addresses)", "", 0)
        return BaseDerivation(Base(0), mapping, seg, e_type, step, tuple(problems), computed)
    step = Step(
        "base",
        "base = start - (pgoff - p_offset + p_vaddr)",
        f"{start:#x} - ({pgoff:#x} - {seg.p_offset:#x} + {seg.p_vaddr:#x})",
        computed,
    )
    return BaseDerivation(Base(computed), mapping, seg, e_type, step, tuple(problems), computed)


def _matching_perms(mapping: MapsEntry, found: list[BaseDerivation]) -> BaseDerivation:
    """The derivation whose segment's flags match the mapping's permissions, else the first."""
    return next((d for d in found if _perm_match(mapping, d.segment)), found[0])


def derive_base(
    mapping: MapsEntry,
    segments: Sequence[LoadSegment],
    e_type: str,
    page_size: int,
    expected: int | None = None,
) -> BaseDerivation | Unresolved:
    """The base address of ``mapping``, or why there is none.

    ``expected`` is the base the rest of this load of the object implies (from
    its first mapping). When several PT_LOADs cover the mapping's file page,
    the one that agrees with it is used; with none agreeing, the mapping's own
    best reading is kept and the disagreement is reported.
    """
    found = segments_for_mapping(segments, mapping, page_size)
    if not found:
        return Unresolved(
            Reason.NO_SEGMENT, f"no PT_LOAD covers file offset {mapping.pgoff:#x} of this mapping"
        )
    candidates = [_derive_from(mapping, seg, e_type, page_size) for seg in found]
    implied = 0 if e_type == ET_EXEC else expected
    if implied is not None:
        agreeing = [d for d in candidates if d.implied == implied]
        if agreeing:
            return _matching_perms(mapping, agreeing)
    best = _matching_perms(mapping, candidates)
    if expected is not None and best.implied != expected and e_type != ET_EXEC:
        note = (
            f"mapping implies base {best.implied:#x} but this load of the object has base "
            f"{expected:#x}"
        )
        return dataclasses.replace(best, problems=(*best.problems, note))
    return best


def vma_to_elf_vaddr(vma: Vma, base: Base) -> tuple[ElfVaddr, Step]:
    result = vma - base
    step = Step("elf_vaddr", "elf_vaddr = vma - base", f"{vma:#x} - {base:#x}", result)
    return ElfVaddr(result), step


def elf_vaddr_to_vma(vaddr: ElfVaddr, base: Base) -> tuple[Vma, Step]:
    result = vaddr + base
    step = Step("vma", "vma = elf_vaddr + base", f"{vaddr:#x} + {base:#x}", result)
    return Vma(result), step


def no_segment_for_vaddr(vaddr: int) -> Unresolved:
    return Unresolved(Reason.NO_SEGMENT, f"ELF vaddr {vaddr:#x} is in no PT_LOAD segment")


def no_segment_for_offset(offset: int) -> Unresolved:
    return Unresolved(Reason.NO_SEGMENT, f"file offset {offset:#x} is in no PT_LOAD segment")


def in_zero_fill(vaddr: int, seg: LoadSegment) -> Unresolved:
    return Unresolved(
        Reason.ZERO_FILL,
        f"ELF vaddr {vaddr:#x} is in the zero-filled tail of PT_LOAD[{seg.index}] "
        f"(past p_filesz): it has no file offset",
    )


def elf_vaddr_to_offset(
    vaddr: ElfVaddr, segments: Sequence[LoadSegment], prefer: LoadSegment | None = None
) -> tuple[ElfOffset, LoadSegment, Step] | Unresolved:
    """File offset of ``vaddr`` through the PT_LOAD holding it, or why there is none."""
    seg = prefer if prefer is not None and prefer.holds_vaddr(vaddr) else None
    seg = seg or segment_for_vaddr(segments, vaddr)
    if seg is None:
        return no_segment_for_vaddr(vaddr)
    if vaddr - seg.p_vaddr >= seg.p_filesz:
        return in_zero_fill(vaddr, seg)
    result = vaddr - seg.p_vaddr + seg.p_offset
    step = Step(
        "elf_offset",
        "elf_offset = elf_vaddr - p_vaddr + p_offset",
        f"{vaddr:#x} - {seg.p_vaddr:#x} + {seg.p_offset:#x}",
        result,
    )
    return ElfOffset(result), seg, step


def elf_offset_to_vaddr(
    offset: ElfOffset, segments: Sequence[LoadSegment]
) -> tuple[ElfVaddr, LoadSegment, Step] | Unresolved:
    """ELF vaddr of a file offset through the PT_LOAD holding it, or why there is none."""
    seg = segment_for_offset(segments, offset)
    if seg is None:
        return no_segment_for_offset(offset)
    result = offset - seg.p_offset + seg.p_vaddr
    step = Step(
        "elf_vaddr",
        "elf_vaddr = elf_offset - p_offset + p_vaddr",
        f"{offset:#x} - {seg.p_offset:#x} + {seg.p_vaddr:#x}",
        result,
    )
    return ElfVaddr(result), seg, step


class SegmentCursor:
    """The conversions above for a batch of addresses in one file, without their
    explanation steps: the same arithmetic and the same problems, and the last
    segment used is tried first (a batch's addresses cluster)."""

    def __init__(self, segments: Sequence[LoadSegment]) -> None:
        self.segments = segments
        self.segment: LoadSegment | None = None

    def from_vaddr(self, vaddr: int) -> tuple[int, int | None, Unresolved | None]:
        """(elf_vaddr, elf_offset or None, the problem or None)."""
        seg = self.segment
        if seg is None or not seg.holds_vaddr(vaddr):
            seg = segment_for_vaddr(self.segments, ElfVaddr(vaddr))
            if seg is None:
                return vaddr, None, no_segment_for_vaddr(vaddr)
            self.segment = seg
        if vaddr - seg.p_vaddr >= seg.p_filesz:
            return vaddr, None, in_zero_fill(vaddr, seg)
        return vaddr, vaddr - seg.p_vaddr + seg.p_offset, None

    def from_offset(self, offset: int) -> tuple[int | None, int, Unresolved | None]:
        """(elf_vaddr or None, elf_offset, the problem or None)."""
        seg = self.segment
        if seg is None or not seg.holds_offset(offset):
            seg = segment_for_offset(self.segments, ElfOffset(offset))
            if seg is None:
                return None, offset, no_segment_for_offset(offset)
            self.segment = seg
        return offset - seg.p_offset + seg.p_vaddr, offset, None


@dataclass(frozen=True)
class ObjectBaseCheck:
    """Whether all executable mappings of one object agree on its base."""

    bases: tuple[int, ...]
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def agree(self) -> bool:
        return not self.problems


def check_object_bases(derivations: Sequence[BaseDerivation]) -> ObjectBaseCheck:
    """All executable mappings of one loaded object must share one base."""
    exec_bases = sorted({d.base for d in derivations if d.mapping.executable})
    if len(exec_bases) <= 1:
        return ObjectBaseCheck(tuple(exec_bases))
    listing = ", ".join(
        f"{d.mapping.start:#x} (PT_LOAD[{d.segment.index}]) -> {d.base:#x}"
        for d in derivations
        if d.mapping.executable
    )
    return ObjectBaseCheck(
        tuple(exec_bases),
        (f"executable mappings disagree on the base: {listing}",),
    )
