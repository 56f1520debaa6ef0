"""The capture's contents as data (docs/capture-format.md), independent of JSON.

``FrameRecord`` is an explanation record as a capture stores it: everything a
detail pane shows for one (maps generation, address), so replay needs no
binaries. ``frame_record`` turns a live ``Explanation`` into one, and the
profile's ``Frame`` is derived from either the same way.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from livesym.addr.convert import BaseDerivation
from livesym.profile import KIND_NATIVE, KIND_PYTHON, Frame
from livesym.symbolize.explain import Explanation
from livesym.symbolize.process import MappingFacts

FORMAT = "livesym-capture"
VERSION = 1


@dataclass(frozen=True, slots=True)
class FrameRecord:
    """One distinct frame of a session, with everything its detail pane shows.

    A native frame is one run-time address (``vma``) in one maps generation.
    A frame a sampler named itself carries its name instead: a Python function
    (``kind`` "python", ``symbol`` the function, ``module`` the source file,
    ``line``), or a native function py-spy named without an address (``vma``
    0, ``reason`` None, ``symbol`` set, no mapping).
    """

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
    kind: str = KIND_NATIVE
    line: int | None = None  # Python frames: py-spy's line; native: DWARF's, with source_file
    source_file: str | None = None  # native frames: the source file DWARF names

    @property
    def key(self) -> tuple[Hashable, ...]:
        """What makes two records the same frame, whatever their ids."""
        if self.kind == KIND_PYTHON:
            return (KIND_PYTHON, self.symbol, self.module, self.line)
        if self.named:
            return ("named", self.symbol, self.module, self.line)
        return ("address", self.generation, self.vma)

    @property
    def named(self) -> bool:
        """A native function the sampler named without an address to explain."""
        return self.kind == KIND_NATIVE and self.mapping is None and self.symbol is not None

    def frame(self) -> Frame:
        """The profile's unit of aggregation: the function, or why there is none."""
        if self.kind == KIND_PYTHON:
            # A Python function is its name and file; lines are its hot spots.
            return Frame(
                symbol=self.symbol, demangled=self.demangled, module=self.module, kind=KIND_PYTHON
            )
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


def python_frame_record(function: str, file: str | None, line: int | None) -> FrameRecord:
    """A Python frame as a sampler reports it (the engine assigns the id)."""
    where = f"{file}:{line}" if file and line else (file or "?")
    return FrameRecord(
        id=-1, generation=0, vma=0, module=file, object=None, mapping=None, base=None,
        segment=None, elf_vaddr=None, elf_offset=None, symbol=function, demangled=None,
        symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=None,
        detail=f"Python function {function} at {where}, named by the sampler",
        steps=(), problems=(), kind=KIND_PYTHON, line=line,
    )  # fmt: skip


def named_frame_record(name: str, module: str | None, line: int | None) -> FrameRecord:
    """A native function the sampler named without an address (py-spy's own symbols)."""
    return FrameRecord(
        id=-1, generation=0, vma=0, module=module, object=None, mapping=None, base=None,
        segment=None, elf_vaddr=None, elf_offset=None, symbol=name, demangled=None,
        symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=None,
        detail=f"native function {name} named by the sampler (no address to explain)",
        steps=(), problems=(), line=line,
    )  # fmt: skip


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
    symbol_source: str | None = None  # "symtab", "dynsym", "symtab+dynsym", "none"


@dataclass(frozen=True, slots=True)
class MappingRecord:
    """One line of the maps with what livesym worked out about it (a ``maps`` row)."""

    start: int
    end: int
    perms: str
    pgoff: int
    dev: str
    inode: int
    path: str
    deleted: bool
    object: int | None = None  # ObjectRecord id
    base: int | None = None
    base_formula: str | None = None
    e_type: str | None = None  # also "not ELF" for mapped data files
    build_id: str | None = None
    symbol_source: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[int, int, str, int, str]:
        """The same mapping across generations."""
        return (self.start, self.end, self.perms, self.pgoff, self.path)


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


@dataclass(frozen=True)
class GenerationRecord:
    """One numbered maps generation: when it was read and its mappings."""

    number: int
    time: float  # seconds on the session's clock (the same clock as samples)
    mappings: tuple[MappingRecord, ...]


@dataclass(frozen=True, slots=True)
class ProcessStat:
    """The target as the OS saw it at one moment (psutil)."""

    time: float  # seconds on the session's clock
    cpu_pct: float  # of one core: 250 means two and a half cores busy
    rss: int  # bytes
    threads: int


@dataclass(frozen=True)
class Capture:
    """A whole capture, read back; samples are (seconds since start, tid, stack, flags)."""

    target: dict[str, object]
    host: dict[str, object]
    sampler: dict[str, object]
    session: dict[str, object]
    maps: tuple[GenerationRecord, ...]
    objects: tuple[ObjectRecord, ...]
    frames: tuple[FrameRecord, ...]
    stacks: tuple[tuple[int, ...], ...]
    threads: dict[int, str]
    samples: tuple[tuple[float, int, int, int], ...] = field(repr=False)
    process: tuple[ProcessStat, ...] = ()
