"""The capture's contents as data (docs/capture-format.md), independent of JSON.

``FrameRecord`` is an explanation record as a capture stores it: everything a
detail pane shows for one (maps generation, address), so replay needs no
binaries. ``frame_record`` turns a live ``Explanation`` into one, and the
profile's ``Frame`` is derived from either the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from livesym.profile import Frame
from livesym.symbolize.explain import Explanation

FORMAT = "livesym-capture"
VERSION = 1


@dataclass(frozen=True, slots=True)
class FrameRecord:
    id: int
    generation: int
    vma: int
    module: str | None
    object: int | None
    mapping: tuple[int, int, str, int] | None  # start, end, perms, pgoff
    base: int | None
    segment: int | None
    elf_vaddr: int | None
    elf_offset: int | None
    symbol: str | None
    demangled: str | None
    symbol_vaddr: int | None
    symbol_size: int | None
    symbol_offset: int | None
    reason: str | None
    detail: str
    steps: tuple[str, ...]
    problems: tuple[str, ...]

    def frame(self) -> Frame:
        """The profile's unit of aggregation: the function, or why there is none."""
        if self.symbol is not None:
            return Frame(
                symbol=self.symbol,
                demangled=self.demangled,
                module=self.module,
                vaddr=self.symbol_vaddr,
            )
        return Frame(
            symbol=None, demangled=None, module=self.module, reason=self.reason or "unresolved"
        )


def frame_record(
    frame_id: int, generation: int, expl: Explanation, object_id: int | None
) -> FrameRecord:
    sym = expl.symbol
    m = expl.mapping
    return FrameRecord(
        id=frame_id,
        generation=generation,
        vma=expl.input,
        module=expl.path,
        object=object_id,
        mapping=(m.start, m.end, m.perms, m.pgoff) if m is not None else None,
        base=expl.base.base if expl.base is not None else None,
        segment=expl.segment.index if expl.segment is not None else None,
        elf_vaddr=expl.elf_vaddr,
        elf_offset=expl.elf_offset,
        symbol=sym.name if sym else None,
        demangled=sym.demangled if sym else None,
        symbol_vaddr=sym.vaddr if sym else None,
        symbol_size=sym.size if sym else None,
        symbol_offset=sym.offset if sym else None,
        reason=expl.reason.value if expl.reason else None,
        detail=expl.detail,
        steps=tuple(s.text() for s in expl.steps),
        problems=expl.problems,
    )


@dataclass(frozen=True)
class ObjectRecord:
    id: int
    path: str
    build_id: str | None
    e_type: str
    elf_class: int
    machine: str
    segments: tuple[dict[str, object], ...]


@dataclass(frozen=True)
class Capture:
    """A whole capture, read back; samples are (seconds since start, tid, stack, flags)."""

    target: dict[str, object]
    host: dict[str, object]
    sampler: dict[str, object]
    session: dict[str, object]
    maps: tuple[dict[str, object], ...]
    objects: tuple[ObjectRecord, ...]
    frames: tuple[FrameRecord, ...]
    stacks: tuple[tuple[int, ...], ...]
    threads: dict[int, str]
    samples: tuple[tuple[float, int, int, int], ...] = field(repr=False)
