"""``livesym addr PID ADDR...``: the whole conversion chain for run-time addresses."""

from __future__ import annotations

import argparse
import json
import sys

from livesym.addr.kinds import Vma, parse_address
from livesym.errors import EXIT_OK, UsageError
from livesym.symbolize.explain import Explanation, to_json
from livesym.symbolize.process import ProcessSymbolizer
from livesym.target.process import TargetProcess


def run(args: argparse.Namespace) -> int:
    try:
        addresses = [parse_address(a) for a in args.addresses]
    except ValueError as e:
        raise UsageError(str(e)) from None
    symbolizer = ProcessSymbolizer(TargetProcess(args.pid))
    out = sys.stdout
    for n, vma in enumerate(addresses):
        expl = symbolizer.explain(Vma(vma))
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
        lines.append(f"            at ELF vaddr {s.vaddr:#x}, {size}, from .{s.source}")
    elif e.reason is not None:
        lines.append(f"unresolved  {e.reason.value}: {e.detail}")
    for problem in e.problems:
        lines.append(f"problem     {problem}")
    return "\n".join(lines) + "\n"
