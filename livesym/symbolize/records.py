"""Records from the symbolizer's findings: a frame record from an explanation, a
mapping record from a mapping's facts. The record types themselves are plain data
in ``livesym.records``; building them needs the symbolizer's types, so it is here.
"""

from __future__ import annotations

from livesym.addr.convert import BaseDerivation
from livesym.addr.kinds import Vma
from livesym.records import FrameRecord, MappingRecord
from livesym.symbolize.explain import Explanation
from livesym.symbolize.process import MappingFacts


def frame_record(
    frame_id: int, generation: int, expl: Explanation, object_id: int | None
) -> FrameRecord:
    sym = expl.symbol
    m = expl.mapping
    fn = expl.function  # an unnamed function's bounds, from its FDE
    return FrameRecord(
        id=frame_id,
        generation=generation,
        vma=Vma(expl.input),  # the engine resolves run-time addresses only
        module=expl.path,
        object=object_id,
        mapping=(m.start, m.end, m.perms, m.pgoff) if m is not None else None,
        base=expl.base.base if expl.base is not None else None,
        segment=expl.segment.index if expl.segment is not None else None,
        elf_vaddr=expl.elf_vaddr,
        elf_offset=expl.elf_offset,
        symbol=sym.name if sym else None,
        demangled=sym.demangled if sym else None,
        symbol_vaddr=sym.vaddr if sym else fn.start if fn else None,
        symbol_size=sym.size if sym else fn.end - fn.start if fn else None,
        symbol_offset=(
            sym.offset
            if sym
            else expl.elf_vaddr - fn.start
            if fn and expl.elf_vaddr is not None
            else None
        ),
        reason=expl.reason,
        detail=expl.detail,
        steps=tuple(s.text() for s in expl.steps),
        problems=expl.problems,
    )


def mapping_record(facts: MappingFacts, object_id: int | None) -> MappingRecord:
    e = facts.entry
    obj = facts.obj
    image = obj.image if obj is not None else None
    base = facts.base if isinstance(facts.base, BaseDerivation) else None
    e_type = image.e_type if image else ("not ELF" if obj is not None and obj.not_elf else None)
    return MappingRecord(
        start=e.start,
        end=e.end,
        perms=e.perms,
        pgoff=e.pgoff,
        dev=f"{e.dev_major:02x}:{e.dev_minor:02x}",
        inode=e.inode,
        path=e.path,
        deleted=e.deleted,
        object=object_id,
        base=base.base if base else None,
        base_formula=base.step.text() if base else None,
        e_type=e_type,
        build_id=image.build_id_hex if image else None,
        symbol_source=obj.symbol_source if obj is not None and image is not None else None,
        problems=tuple(facts.problems),
    )
