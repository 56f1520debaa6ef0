"""``livesym maps PID``: every mapping with its object, base address and checks."""

from __future__ import annotations

import argparse
import json
import sys

from livesym.addr.convert import BaseDerivation
from livesym.commands.text import text_lines
from livesym.errors import EXIT_OK
from livesym.printable import printable
from livesym.symbolize.process import MappingFacts, ProcessSymbolizer
from livesym.symbolize.sources import checked_debug_dirs
from livesym.target.process import TargetProcess


def run(args: argparse.Namespace) -> int:
    target = TargetProcess(args.pid, debug_dirs=checked_debug_dirs(args.debug_dir))
    symbolizer = ProcessSymbolizer(target)
    rows = list(symbolizer.mappings())
    out = sys.stdout
    if args.json:
        for row in rows:
            out.write(json.dumps(mapping_json(row)) + "\n")
    else:
        out.write(render_table(rows))
    for error in symbolizer.maps.errors:
        print(printable(f"livesym: skipped a maps line: {error}"), file=sys.stderr)
    return EXIT_OK


def mapping_json(row: MappingFacts) -> dict[str, object]:
    e = row.entry
    image = row.obj.image if row.obj else None
    base = row.base if isinstance(row.base, BaseDerivation) else None
    return {
        "start": hex(e.start),
        "end": hex(e.end),
        "perms": e.perms,
        "pgoff": hex(e.pgoff),
        "dev": f"{e.dev_major:02x}:{e.dev_minor:02x}",
        "inode": e.inode,
        "path": e.path or None,
        "deleted": e.deleted,
        "kind": e.kind.value,
        "opened_via": row.object_path.via if row.object_path else None,
        "base": hex(base.base) if base else None,
        "base_formula": base.step.text() if base else None,
        "segment": base.segment.as_json() if base else None,
        "e_type": image.e_type if image else ("not ELF" if row.obj and row.obj.not_elf else None),
        "elf_class": image.class_name if image else None,
        "machine": image.e_machine if image else None,
        "build_id": image.build_id_hex if image else None,
        "symbol_source": row.obj.symbol_source if row.obj and row.obj.image else None,
        # Every source tried, in order: which one was used, or why none was.
        "symbol_sources": [u.as_json() for u in row.obj.sources] if row.obj else [],
        "symbols": len(row.obj.symbols) if row.obj and row.obj.symbols else 0,
        "problems": row.problems,
    }


def render_table(rows: list[MappingFacts]) -> str:
    """The mappings as a table; each field as ``mapping_json`` gives it, made here for the
    few the table shows (a process may have tens of thousands of anonymous mappings)."""
    header = (
        f"{'START':>16} {'END':>16} PERM {'PGOFF':>8} {'BASE':>16} {'TYPE':<7} "
        f"{'SYMBOLS':<20} {'BUILD-ID':<12} OBJECT"
    )
    lines = [header]
    # The columns of a mapping with no object, base or check (anonymous memory: most
    # rows of a big process), as the general format below writes them.
    nothing = f"{'-':>16} {'-':<7} {'-':<20} {'-':<12} "
    for row in rows:
        e = row.entry
        name = (e.path or f"[{e.kind.value}]") + (" (deleted)" if e.deleted else "")
        if (
            row.obj is None
            and row.base is None
            and row.object_check is None
            and (row.object_path is None)
        ):
            lines.append(f"{e.start:>16x} {e.end:>16x} {e.perms} {e.pgoff:>8x} {nothing}{name}")
            continue
        obj = row.obj
        base = row.base.base if isinstance(row.base, BaseDerivation) else None
        image = obj.image if obj else None
        etype = image.e_type if image else ("not ELF" if obj and obj.not_elf else "-")
        # The sources without their paths (the JSON has them, and symbol_sources).
        tables = obj.symbols.sources if obj and obj.symbols else ()
        source = "+".join(tables) or ("none" if obj and obj.image else "-")
        build = (image.build_id_hex if image and image.build_id_hex else "-")[:12]
        problems = row.problems
        lines.append(
            f"{e.start:>16x} {e.end:>16x} {e.perms} {e.pgoff:>8x} "
            f"{hex(base) if base is not None else '-':>16} {etype.removeprefix('ET_'):<7} "
            f"{source:<20} {build:<12} {name}{'  !' if problems else ''}"
        )
        lines += [f"{'':>16} ! {problem}" for problem in problems]
    return text_lines(lines)
