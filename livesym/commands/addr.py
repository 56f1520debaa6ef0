"""``livesym addr PID ADDR...``: the whole conversion chain for run-time addresses."""

from __future__ import annotations

import argparse
import json
import sys

from livesym.addr.kinds import Vma, parse_address
from livesym.commands.text import text_lines
from livesym.errors import EXIT_OK, UsageError
from livesym.records import reason_words
from livesym.symbolize.explain import Explanation, to_json, with_line
from livesym.symbolize.process import ProcessSymbolizer
from livesym.symbolize.sources import checked_debug_dirs
from livesym.target.process import TargetProcess


def run(args: argparse.Namespace) -> int:
    try:
        addresses = [parse_address(a) for a in args.addresses]
    except ValueError as e:
        raise UsageError(str(e)) from None
    target = TargetProcess(args.pid, debug_dirs=checked_debug_dirs(args.debug_dir))
    symbolizer = ProcessSymbolizer(target)
    out = sys.stdout
    for n, vma in enumerate(addresses):
        expl = symbolizer.explain(Vma(vma))
        # One address at a time, asked for: worth the DWARF line lookup.
        expl = with_line(expl, symbolizer.source_line(expl))
        if args.json:
            out.write(json.dumps(to_json(expl, full=True)) + "\n")
        else:
            if n:
                out.write("\n")
            out.write(render_text(expl))
    return EXIT_OK


def render_text(e: Explanation) -> str:
    """The chain as a person reads it, one fact per line, formulas with numbers."""
    lines = [f"address     {e.input:#x}"]
    m = e.mapping
    if m is not None:
        lines.append(f"mapping     {m.describe()}")
    if e.path:
        facts = ", ".join(
            x for x in (e.e_type, f"build-id {e.build_id}" if e.build_id else None) if x
        )
        lines.append(f"object      {e.path}" + (f" ({facts})" if facts else ""))
    if e.segment is not None:
        lines.append(f"segment     {e.segment.describe()}")
    for step in e.steps:
        lines.append(f"{step.name:<11} {step.text()}")
    if e.symbol is not None:
        s = e.symbol
        lines.append(f"symbol      {s.demangled}+{s.offset:#x}")
        if s.demangled != s.name:
            lines.append(f"raw name    {s.name}")
        size = f"size {s.size:#x}" + ("" if s.size == s.declared_size else " (to next symbol)")
        where = "at" if e.elf_vaddr is None else "at ELF vaddr"
        lines.append(f"            {where} {s.vaddr:#x}, {size}, from {_origin(e)}")
        if e.source_line is not None:
            lines.append(f"source      {e.source_line.text()}")
    elif e.function is not None and e.elf_vaddr is not None:
        fn = e.function
        lines.append(f"function    unnamed+{e.elf_vaddr - fn.start:#x}: no symbol names it")
        lines.append(f"            [{fn.start:#x}, {fn.end:#x}) from the {fn.source()}")
    elif e.reason is not None:
        lines.append(f"unresolved  {reason_words(e.reason)}: {e.detail}")
    if e.symbol is not None and e.detail:
        lines.append(f"            {e.detail}")
    for problem in e.problems:
        lines.append(f"problem     {problem}")
    return text_lines(lines)


_ORIGINS = {
    "symtab": ".symtab",
    "dynsym": ".dynsym",
    "build-id": ".symtab of the debug file found by build-id",
    "debuglink": ".symtab of the debug file named by .gnu_debuglink",
    "minidebuginfo": ".symtab in .gnu_debugdata (MiniDebugInfo)",
    "perf-map": "the perf map",
}


def _origin(e: Explanation) -> str:
    """Which symbol table named the address, in words."""
    assert e.symbol is not None
    what = _ORIGINS.get(e.symbol.source, e.symbol.source)
    return f"{what} {e.symbol_file}" if e.symbol_file else what
