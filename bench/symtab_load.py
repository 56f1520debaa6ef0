"""Function symbol table load: livesym against pyelftools, in-process.

livesym: ``load_symbols(load_image(path))`` -- headers, .symtab and .dynsym,
sorted, aliases merged (names decoded lazily, at lookup).
Reference: pyelftools iterating .symtab and .dynsym with the same filter
(STT_FUNC or STT_GNU_IFUNC, defined, non-zero value), collecting
(value, size, name) and sorting.

Both are loaded fresh in every run (a new ELFFile / ElfImage each time), after
one untimed warm-up run each (page cache, imports). An informational third
figure times livesym plus decoding every name, which the reference does
eagerly.

    .venv/bin/python bench/symtab_load.py [--file LIB] [--runs N] [--json]
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import _benchlib as bl

if TYPE_CHECKING:
    from livesym.elf.symtab import SymbolTable

BENCH = "symtab_load"
DEFAULT_FILE = "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1"
TARGET = 10.0  # the bar: at least 10x faster than pyelftools

# (st_value, st_size, name), as the reference collects them.
RefSymbol = tuple[int, int, str]


def livesym_load(path: str) -> SymbolTable:
    from livesym.elf.image import load_image
    from livesym.elf.symtab import load_symbols

    return load_symbols(load_image(path))


def livesym_load_with_names(path: str) -> SymbolTable:
    """livesym, then every name decoded (what the reference pays up front)."""
    table = livesym_load(path)
    for i in range(len(table)):
        table.name(i)
    return table


def pyelftools_load(path: str) -> list[RefSymbol]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    out: list[RefSymbol] = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for name in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(name)
            if not isinstance(sec, SymbolTableSection):
                continue
            for sym in sec.iter_symbols():
                # pyelftools names STT_GNU_IFUNC (10) 'STT_LOOS'.
                if (
                    sym["st_info"]["type"] in ("STT_FUNC", "STT_LOOS")
                    and sym["st_shndx"] != "SHN_UNDEF"
                    and sym["st_value"] != 0
                ):
                    out.append((sym["st_value"], sym["st_size"], sym.name))
    out.sort()
    return out


def compare(table: SymbolTable, ref: list[RefSymbol]) -> dict[str, Any]:
    """Counts on both sides; distinct (value, name) pairs should be the same sets."""
    from livesym.elf.symtab import SOURCE_PLT

    # PLT stubs (printf@plt) are livesym's own naming, not symbols pyelftools can list.
    entries = list(table.entries())
    stubs = sum(e.source == SOURCE_PLT for e in entries)
    ours = {(e.vaddr, alias) for e in entries if e.source != SOURCE_PLT for alias in e.aliases}
    theirs = {(value, name) for value, _size, name in ref}
    only_ours = sorted(ours - theirs)
    only_theirs = sorted(theirs - ours)
    return {
        "livesym_entries": len(table),
        "livesym_plt_stubs": stubs,
        "pyelftools_symbols": len(ref),
        "livesym_distinct_value_name": len(ours),
        "pyelftools_distinct_value_name": len(theirs),
        "only_livesym": len(only_ours),
        "only_pyelftools": len(only_theirs),
        "examples_only_livesym": [[hex(v), n] for v, n in only_ours[:3]],
        "examples_only_pyelftools": [[hex(v), n] for v, n in only_theirs[:3]],
    }


def main() -> int:
    bl.utf8_stdout()
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument("--file", default=DEFAULT_FILE, help=f"ELF file (default {DEFAULT_FILE})")
    args = p.parse_args()
    path: str = args.file
    if not os.path.isfile(path):
        bl.skip(BENCH, f"{path} not found (give another ELF file with --file)", args.json)
    try:
        import elftools  # noqa: F401  (the reference)

        import livesym.elf.symtab  # noqa: F401
    except ImportError as e:
        bl.skip(
            BENCH, f"cannot import {e.name} (run with the project's .venv/bin/python)", args.json
        )

    # Agreement check, untimed.
    table = livesym_load(path)
    ref = pyelftools_load(path)
    counts = compare(table, ref)

    timings = bl.interleaved(
        [
            ("livesym", lambda: livesym_load(path)),
            ("pyelftools", lambda: pyelftools_load(path)),
            ("livesym+names", lambda: livesym_load_with_names(path)),
        ],
        runs=args.runs,
        warmup=args.warmup,
    )
    ours, theirs, named = timings["livesym"], timings["pyelftools"], timings["livesym+names"]
    speedup = theirs.median / ours.median
    speedup_named = theirs.median / named.median
    base = os.path.basename(path)

    if args.json:
        print(
            json.dumps(
                {
                    "benchmark": BENCH,
                    "file": path,
                    "runs": args.runs,
                    "warmup": args.warmup,
                    "livesym": ours.as_json(),
                    "pyelftools": theirs.as_json(),
                    "livesym_with_names": named.as_json(),
                    "speedup": round(speedup, 2),
                    "speedup_with_names": round(speedup_named, 2),
                    "target_speedup": TARGET,
                    "meets_target": speedup >= TARGET,
                    "counts": counts,
                }
            )
        )
        return 0

    print(
        f"symtab load {base}: livesym {bl.secs(ours.median)} ({len(table)} functions), "
        f"pyelftools {bl.secs(theirs.median)} → {speedup:.1f}x faster"
    )
    print(
        f"  median of {args.runs} interleaved runs (min: livesym {bl.secs(ours.min)}, "
        f"pyelftools {bl.secs(theirs.min)})"
    )
    print(
        f"  livesym incl. decoding all {len(table)} names: {bl.secs(named.median)} "
        f"(min {bl.secs(named.min)}) → {speedup_named:.1f}x faster"
    )
    print(
        f"  found: livesym {counts['livesym_entries']} ranges "
        f"({counts['livesym_plt_stubs']} of them PLT stubs), pyelftools "
        f"{counts['pyelftools_symbols']} symbols; distinct (value, name): livesym "
        f"{counts['livesym_distinct_value_name']}, pyelftools "
        f"{counts['pyelftools_distinct_value_name']} (only livesym {counts['only_livesym']}, "
        f"only pyelftools {counts['only_pyelftools']})"
    )
    for side in ("livesym", "pyelftools"):
        for value, name in counts[f"examples_only_{side}"]:
            print(f"    only {side}: {value} {name}")
    verdict = "meets" if speedup >= TARGET else "BELOW"
    print(f"  target ≥ {TARGET:g}x: {verdict}")
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
