"""The conversion chain of one sampled address, as the detail pane shows it.

Everything comes from the explanation record the engine kept (a
``FrameRecord``) and its object's program headers (an ``ObjectRecord``);
nothing is recomputed here, the formulas are the record's own lines.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from livesym.printable import printable
from livesym.records import (
    KIND_KERNEL,
    KIND_NATIVE,
    KIND_PYTHON,
    KIND_TRUNCATED,
    FrameRecord,
    ObjectRecord,
    Reason,
    reason_words,
)
from livesym.ui.format import hex_or_dash

LABEL_WIDTH = 11


def segment_text(obj: ObjectRecord | None, index: int | None) -> str | None:
    """The PT_LOAD the record used, with its fields by their ELF names."""
    if index is None:
        return None
    if obj is not None:
        for seg in obj.segments:
            if seg.get("index") == index:
                fields = " ".join(
                    f"{name}={seg.get(name, '?')}"
                    for name in ("p_offset", "p_vaddr", "p_filesz", "p_memsz", "p_align")
                )
                return f"PT_LOAD[{index}] {fields} flags={seg.get('flags', '?') or '-'}"
    return f"PT_LOAD[{index}] (program headers not recorded)"


def chain_lines(
    record: FrameRecord, obj: ObjectRecord | None, source: tuple[str, int] | None = None
) -> list[tuple[str, str]]:
    """(label, value) pairs: address -> mapping -> PT_LOAD -> base -> vaddr -> offset -> symbol
    (-> source line, from the record or ``source``, when DWARF had one)."""
    if record.kind != KIND_NATIVE:
        return _other_lines(record)
    lines: list[tuple[str, str]] = []
    if record.named:
        lines.append(("function", record.symbol or "?"))
        lines.append(("note", record.detail))
        return lines
    lines.append(("address", f"{record.vma:#x}  (maps generation {record.generation})"))
    if record.mapping is not None:
        start, end, perms, pgoff = record.mapping
        lines.append(("mapping", f"{start:#x}-{end:#x} {perms} pgoff {pgoff:#x}"))
    if record.module:
        facts = []
        if obj is not None:
            facts.append(obj.e_type)
            if obj.build_id:
                facts.append(f"build-id {obj.build_id}")
        lines.append(("object", record.module + (f" ({', '.join(facts)})" if facts else "")))
    segment = segment_text(obj, record.segment)
    if segment is not None:
        lines.append(("segment", segment))
    steps = {step.partition(" = ")[0]: step for step in record.steps}
    lines.append(("base", steps.pop("base", hex_or_dash(record.base))))
    lines.append(("elf_vaddr", steps.pop("elf_vaddr", hex_or_dash(record.elf_vaddr))))
    lines.append(("elf_offset", steps.pop("elf_offset", hex_or_dash(record.elf_offset))))
    lines += [(name, text) for name, text in steps.items()]
    if record.symbol is not None:
        name = record.demangled or record.symbol
        lines.append(("symbol", f"{name}+{record.symbol_offset or 0:#x}"))
        if record.demangled and record.demangled != record.symbol:
            lines.append(("raw name", record.symbol))
        size = "" if record.symbol_size is None else f", size {record.symbol_size:#x}"
        lines.append(("", f"at ELF vaddr {hex_or_dash(record.symbol_vaddr)}{size}"))
        if record.source_file is not None and record.line is not None:
            source = (record.source_file, record.line)
        if source is not None:
            lines.append(("source", f"{source[0]}:{source[1]}"))
    elif record.reason is Reason.UNNAMED_FUNCTION and record.symbol_vaddr is not None:
        # No name, but the function's extent is known: its FDE says where it starts.
        lines.append(("function", f"unnamed+{record.symbol_offset or 0:#x}"))
        lines.append(("", record.detail))
    else:
        reason = reason_words(record.reason)
        lines.append(("unresolved", f"{reason}: {record.detail}" if record.detail else reason))
    lines += [("problem", p) for p in record.problems]
    return lines


def _other_lines(record: FrameRecord) -> list[tuple[str, str]]:
    """A frame that is not native code in a mapped object: no conversion chain."""
    if record.kind == KIND_PYTHON:
        where = f"{record.module or '?'}:{record.line}" if record.line else record.module or "?"
        return [("function", record.symbol or "?"), ("source", where), ("note", record.detail)]
    if record.kind == KIND_TRUNCATED:
        return [("stack", f"ends early: {record.symbol}"), ("note", record.detail)]
    if record.kind == KIND_KERNEL:
        return _kernel_lines(record)
    return [("unknown", reason_words(record.reason)), ("note", record.detail)]


def _kernel_lines(record: FrameRecord) -> list[tuple[str, str]]:
    """A kernel address has no mapping, object or ELF conversion: it is its symbol's
    own address, named from /proc/kallsyms. Kernel time seen from outside (a system
    call, an estimate) has no address at all."""
    lines = [("address", f"{record.vma:#x}  (kernel)")] if record.vma else []
    if record.symbol is not None and record.symbol_vaddr is None:
        name = record.demangled or record.symbol
        return [("system call", name), ("module", record.module or "[kernel]"),
                ("note", record.detail)]  # fmt: skip
    if record.symbol is None:
        reason = reason_words(record.reason)
        lines.append(("unresolved", f"{reason}: {record.detail}" if record.detail else reason))
        return lines
    lines.append(("symbol", f"{record.symbol}+{record.symbol_offset or 0:#x}"))
    size = "" if record.symbol_size is None else f", size {record.symbol_size:#x}"
    lines.append(("", f"at {hex_or_dash(record.symbol_vaddr)}{size}"))
    lines.append(("module", record.module or "[kernel]"))
    lines.append(("note", record.detail))
    return lines


def chain_table(
    record: FrameRecord, obj: ObjectRecord | None, source: tuple[str, int] | None = None
) -> Table:
    """The chain as a two-column grid: labels bold, values literal, long values
    wrapped under their own column."""
    return label_grid(chain_lines(record, obj, source))


def label_grid(lines: list[tuple[str, str]]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=LABEL_WIDTH, no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    for label, value in lines:
        grid.add_row(Text(label, end=""), Text(printable(value), end=""))
    return grid
