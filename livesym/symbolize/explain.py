"""Explanation records: an address, every conversion applied to it, and its symbol.

An ``Explanation`` is the single source of the numbers the user sees for one
address -- ``livesym addr`` prints it, the dashboard's detail pane shows it,
captures store it. It holds the inputs, the mapping and PT_LOAD used, each
formula with its numbers, the result, and when unresolved, why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from livesym.addr.convert import (
    BaseDerivation,
    Step,
    derive_base,
    elf_offset_to_vaddr,
    elf_vaddr_to_offset,
    vma_to_elf_vaddr,
)
from livesym.addr.kinds import ElfOffset, ElfVaddr, Vma, hex_or_none
from livesym.addr.maps import MapKind, MapsEntry
from livesym.addr.segments import LoadSegment
from livesym.elf.cfi import FdeBounds, unnamed_function
from livesym.elf.demangle import demangle_bytes
from livesym.elf.symtab import OWN_SOURCES, SymbolHit
from livesym.records import Reason, Unresolved, reason_words
from livesym.symbolize.lines import SourceLine
from livesym.symbolize.objects import LoadedObject
from livesym.symbolize.perfmap import JitSymbol

SOURCE_PERF_MAP = "perf-map"
# Symbol sources that are files other than the object: their path is shown.
_SEPARATE_SOURCES = ("build-id", "debuglink")


# Which address kind an explanation started from.
InputKind = Literal["vma", "elf_vaddr", "elf_offset"]


@dataclass(frozen=True)
class Explanation:
    """Everything known about one address, and how it was worked out."""

    input_kind: InputKind
    input: int  # of input_kind
    path: str | None
    vma: Vma | None = None
    mapping: MapsEntry | None = None
    base: BaseDerivation | None = None
    segment: LoadSegment | None = None
    elf_vaddr: ElfVaddr | None = None
    elf_offset: ElfOffset | None = None
    symbol: SymbolHit | None = None
    reason: Reason | None = None
    detail: str = ""
    steps: tuple[Step, ...] = ()
    problems: tuple[str, ...] = ()
    build_id: str | None = None
    e_type: str | None = None
    # The file the symbol came from when it is not the object itself (a debug
    # file, a perf map); None otherwise.
    symbol_file: str | None = None
    # File and line from DWARF, filled in only on demand (with_line).
    source_line: SourceLine | None = None
    # Where no symbol covers the address: the function's bounds from its FDE.
    function: FdeBounds | None = None

    @property
    def resolved(self) -> bool:
        return self.symbol is not None

    def short(self) -> str:
        """One line: ``name+0xoff (module)`` or ``[reason] module+0xvaddr``."""
        module = self.path or "?"
        if self.symbol is not None:
            return f"{self.symbol.demangled}+{self.symbol.offset:#x}  ({module})"
        where = self.elf_vaddr if self.elf_vaddr is not None else self.input
        label = reason_words(self.reason)
        return f"[{label}] {module}+{where:#x}"


@dataclass(frozen=True)
class _Where:
    """The conversion facts gathered before the symbol lookup."""

    input_kind: InputKind
    input: int
    vma: Vma | None = None
    mapping: MapsEntry | None = None
    base: BaseDerivation | None = None
    segment: LoadSegment | None = None
    elf_offset: ElfOffset | None = None


def _finish(
    obj: LoadedObject, vaddr: ElfVaddr, where: _Where, steps: list[Step], problems: list[str]
) -> Explanation:
    """Look the ELF vaddr up in the object's symbols and close the record."""
    symbols = obj.symbols
    hit = symbols.lookup(vaddr) if symbols is not None else None
    reason: Reason | None = None
    detail = ""
    function = None
    if hit is None:
        miss, function = why_unnamed(obj, vaddr)
        reason, detail = miss.reason, miss.detail
    if obj.image is not None:
        problems = problems + list(obj.image.problems)
    if symbols is not None:
        problems = problems + list(symbols.problems)
    separate = hit is not None and hit.source in _SEPARATE_SOURCES
    return Explanation(
        input_kind=where.input_kind,
        input=where.input,
        path=obj.path,
        vma=where.vma,
        mapping=where.mapping,
        base=where.base,
        segment=where.segment,
        elf_vaddr=vaddr,
        elf_offset=where.elf_offset,
        symbol=hit,
        reason=reason,
        detail=detail,
        steps=tuple(steps),
        problems=tuple(problems),
        build_id=obj.image.build_id_hex if obj.image else None,
        e_type=obj.image.e_type if obj.image else None,
        symbol_file=obj.source_path(hit.source) if hit is not None and separate else None,
        function=function,
    )


def why_unnamed(obj: LoadedObject, vaddr: int) -> tuple[Unresolved, FdeBounds | None]:
    """Why no symbol of ``obj`` names ELF vaddr ``vaddr``, and its function's bounds where
    an FDE gives them (still no name, but one function: an unnamed function). The one
    answer ``livesym addr``, the sessions and ``symbolize -e`` give."""
    symbols = obj.symbols
    if symbols is None or len(symbols) == 0:
        miss = Unresolved(Reason.NO_SYMBOLS, "the object has no function symbols")
    else:
        miss = Unresolved(Reason.UNKNOWN_ADDRESS, f"no function symbol covers ELF vaddr {vaddr:#x}")
    bounds = obj.function_bounds(vaddr)
    if isinstance(bounds, FdeBounds):
        return unnamed_function(miss, bounds), bounds
    return miss, None


def _unresolved(obj: LoadedObject | None, where: _Where, why: Unresolved) -> Explanation:
    image = obj.image if obj is not None else None
    return Explanation(
        input_kind=where.input_kind,
        input=where.input,
        path=obj.path
        if obj is not None
        else (where.mapping.path if where.mapping else None) or None,
        vma=where.vma,
        mapping=where.mapping,
        elf_offset=where.elf_offset,
        reason=why.reason,
        detail=why.detail,
        build_id=image.build_id_hex if image else None,
        e_type=image.e_type if image else None,
    )


def _unreadable(obj: LoadedObject, where: _Where) -> Explanation:
    reason = Reason.NOT_ELF if obj.not_elf or obj.damaged else Reason.FILE_UNAVAILABLE
    return _unresolved(obj, where, Unresolved(reason, obj.error or ""))


def explain_elf_vaddr(obj: LoadedObject, vaddr: ElfVaddr) -> Explanation:
    """An ELF virtual address in a file: its file offset and symbol."""
    where = _Where("elf_vaddr", vaddr)
    if obj.image is None:
        return _unreadable(obj, where)
    converted = elf_vaddr_to_offset(vaddr, obj.image.segments)
    if isinstance(converted, Unresolved):
        # No file offset (e.g. .bss), but a symbol lookup still means something.
        return _finish(obj, vaddr, where, [], [converted.detail])
    offset, seg, step = converted
    return _finish(
        obj, vaddr, _Where("elf_vaddr", vaddr, segment=seg, elf_offset=offset), [step], []
    )


def explain_elf_offset(obj: LoadedObject, offset: ElfOffset) -> Explanation:
    """A file offset: the ELF vaddr it loads at and its symbol."""
    where = _Where("elf_offset", offset, elf_offset=offset)
    if obj.image is None:
        return _unreadable(obj, where)
    converted = elf_offset_to_vaddr(offset, obj.image.segments)
    if isinstance(converted, Unresolved):
        return _unresolved(obj, where, converted)
    vaddr, seg, step = converted
    return _finish(
        obj, vaddr, _Where("elf_offset", offset, segment=seg, elf_offset=offset), [step], []
    )


def _mapping_reason(mapping: MapsEntry) -> Unresolved:
    if mapping.kind in (
        MapKind.ANON, MapKind.HEAP, MapKind.STACK, MapKind.ANON_INODE, MapKind.SHMEM
    ):  # fmt: skip
        detail = f"address is in an anonymous mapping ({mapping.path or 'anon'})"
        return Unresolved(Reason.ANONYMOUS, detail)
    return Unresolved(Reason.SPECIAL, f"address is in the special mapping {mapping.path}")


def explain_vma(
    vma: Vma,
    mapping: MapsEntry | None,
    obj: LoadedObject | None,
    page_size: int,
    base: BaseDerivation | Unresolved | None = None,
) -> Explanation:
    """A run-time address: mapping -> base -> ELF vaddr -> file offset -> symbol.

    ``base`` may be passed in when the caller already derived it for this mapping.
    """
    where = _Where("vma", vma, vma=vma, mapping=mapping)
    if mapping is None:
        return _unresolved(None, where, Unresolved(Reason.UNMAPPED, f"no mapping holds {vma:#x}"))
    if obj is None:
        return _unresolved(None, where, _mapping_reason(mapping))
    if obj.image is None:
        return _unreadable(obj, where)
    image = obj.image
    if base is None:
        base = derive_base(mapping, image.segments, image.e_type, page_size)
    if isinstance(base, Unresolved):
        return _unresolved(obj, where, base)
    vaddr, step_vaddr = vma_to_elf_vaddr(vma, base.base)
    steps = [base.step, step_vaddr]
    problems = list(base.problems)
    converted = elf_vaddr_to_offset(vaddr, image.segments, prefer=base.segment)
    offset: ElfOffset | None = None
    segment = base.segment
    if isinstance(converted, Unresolved):
        problems.append(converted.detail)
    else:
        offset, segment, step_offset = converted
        steps.append(step_offset)
    where = _Where("vma", vma, vma, mapping, base, segment, offset)
    return _finish(obj, vaddr, where, steps, problems)


def explain_jit(vma: Vma, mapping: MapsEntry, jit: JitSymbol, perf_map: str) -> Explanation:
    """A run-time address in JIT code, named by the process's perf map.

    No ELF describes JIT code: there is no base, ELF vaddr or file offset, and
    the perf map's addresses are run-time addresses (the symbol's ``vaddr``
    here is one).
    """
    raw = jit.name.encode("utf-8", "surrogateescape")
    hit = SymbolHit(
        name=jit.name,
        demangled=demangle_bytes(raw, jit.name),
        vaddr=ElfVaddr(jit.start),
        size=jit.size,
        declared_size=jit.size,
        offset=vma - jit.start,
        source=SOURCE_PERF_MAP,
    )
    step = Step("offset", "offset = vma - start", f"{vma:#x} - {jit.start:#x}", vma - jit.start)
    return Explanation(
        input_kind="vma",
        input=vma,
        path=perf_map,
        vma=vma,
        mapping=mapping,
        symbol=hit,
        detail=f"JIT code named by {perf_map} (line {jit.line}: start {jit.start:#x}, "
        f"size {jit.size:#x})",
        steps=(step,),
        symbol_file=perf_map,
    )


def with_line(e: Explanation, line: SourceLine | None) -> Explanation:
    return dataclasses.replace(e, source_line=line)


def to_json(e: Explanation, *, full: bool = False, lines: bool = False) -> dict[str, object]:
    """The record as JSON fields; ``full`` adds the mapping, segment and steps (``addr``),
    ``lines`` (or ``full``) the source ``file`` and ``line``."""
    sym = e.symbol
    out: dict[str, object] = {"address": hex(e.input)}
    if e.input_kind == "vma":
        out["vma"] = hex(e.input)
        out["base"] = hex_or_none(e.base.base if e.base else None)
    out["module"] = e.path
    out["elf_vaddr"] = hex_or_none(e.elf_vaddr)
    out["elf_offset"] = hex_or_none(e.elf_offset)
    out["symbol"] = sym.name if sym else None
    out["demangled"] = sym.demangled if sym else None
    out["symbol_vaddr"] = hex(sym.vaddr) if sym else None
    out["symbol_size"] = sym.size if sym else None
    if sym is not None and (sym.source not in OWN_SOURCES or full):
        # Where the symbol came from, when not the object's own tables (or asked).
        out["symbol_source"] = sym.source
        if e.symbol_file:
            out["symbol_file"] = e.symbol_file
    out["symbol_offset"] = sym.offset if sym else None
    if e.function is not None and e.elf_vaddr is not None:
        out["symbol_vaddr"] = hex(e.function.start)
        out["symbol_size"] = e.function.end - e.function.start
        out["symbol_offset"] = e.elf_vaddr - e.function.start
        out["function_source"] = e.function.source()
    if lines or full:
        out["file"] = e.source_line.file if e.source_line else None
        out["line"] = e.source_line.line if e.source_line else None
    if e.reason is not None:
        out["reason"] = e.reason.value
        out["detail"] = e.detail
    if full:
        m = e.mapping
        out["path"] = e.path
        out["mapping"] = (
            {"start": hex(m.start), "end": hex(m.end), "perms": m.perms, "pgoff": hex(m.pgoff)}
            if m
            else None
        )
        out["segment"] = e.segment.as_json() if e.segment else None
        out["e_type"] = e.e_type
        out["build_id"] = e.build_id
        out["steps"] = [s.text() for s in e.steps]
    if e.problems:
        out["problems"] = list(e.problems)
    return out
