"""Names for a process's raw code addresses, from reference tools alone: the mapping
from /proc/PID/maps, the ELF vaddr through pyelftools' program headers, the name from
llvm-symbolizer (the object's symbols and its debug file by build-id), and for code no
symbol names the function's start from readelf's FDE listing, written as livesym
writes an unnamed function (``libz.so.1 @ 0x2d40``).

py-spy prints a native frame it cannot name as its address (``0x7f9849245249``); a
comparison with it names those the way livesym would, by other tools, so that a
function counts on both sides whoever named it.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from functools import cache

from elftools.elf.elffile import ELFFile

_FDE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                  re.M)  # fmt: skip


@cache
def _loads(path: str) -> tuple[tuple[int, int, int], ...]:
    """(p_offset, p_vaddr, p_filesz) of each PT_LOAD, from pyelftools."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        return tuple(
            (s["p_offset"], s["p_vaddr"], s["p_filesz"])
            for s in elf.iter_segments()
            if s["p_type"] == "PT_LOAD"
        )


@cache
def _fdes(path: str) -> tuple[list[int], list[int]]:
    """Sorted FDE starts and their ends, as readelf lists them."""
    out = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True,
                         text=True, env={"LC_ALL": "C"}, timeout=120).stdout  # fmt: skip
    spans = sorted((int(a, 16), int(b, 16)) for a, b in _FDE.findall(out))
    return [a for a, _ in spans], [b for _, b in spans]


class RawAddressNamer:
    """Names the raw addresses of one running process's code."""

    def __init__(self, pid: int) -> None:
        self.maps: list[tuple[int, int, int, str]] = []
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    self.maps.append((start, end, int(fields[2], 16), fields[5].strip()))

    def where(self, address: int) -> tuple[str, int] | None:
        """(path, ELF vaddr) of a run-time address."""
        for start, end, pgoff, path in self.maps:
            if start <= address < end:
                offset = address - start + pgoff
                for p_offset, p_vaddr, p_filesz in _loads(path):
                    if p_offset <= offset < p_offset + p_filesz:
                        return path, offset - p_offset + p_vaddr
        return None

    def names(self, addresses: list[int]) -> dict[int, str]:
        """Each address's function name (raw, as a symbol table holds it), else its
        unnamed function's label, else the address itself."""
        found = {a: hex(a) for a in addresses}
        by_path: dict[str, list[tuple[int, int]]] = {}
        for a in addresses:
            place = self.where(a)
            if place is not None:
                by_path.setdefault(place[0], []).append((a, place[1]))
        for path, pairs in by_path.items():
            done = subprocess.run(
                ["llvm-symbolizer", f"--obj={path}", "--functions=linkage", "--no-inlines",
                 *(hex(v) for _, v in pairs)], capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            named = done.stdout.split("\n\n")
            for (a, vaddr), block in zip(pairs, named, strict=False):
                name = block.strip().splitlines()[0] if block.strip() else "??"
                if name != "??":
                    found[a] = name
                    continue
                starts, ends = _fdes(path)
                i = bisect.bisect_right(starts, vaddr) - 1
                if i >= 0 and vaddr < ends[i]:
                    found[a] = f"{os.path.basename(path)} @ {starts[i]:#x}"
        return found


def defined_functions(pid: int) -> set[str]:
    """Every function name a symbol table of the process's objects defines (their own
    tables, and their debug files by build-id), as binutils' nm lists them. A name py-spy
    gives that none defines is a function inlined everywhere, named from DWARF's inline
    records: livesym names by symbol tables and shows its caller instead."""
    paths = {m[3] for m in RawAddressNamer(pid).maps}
    names: set[str] = set()
    for path in paths:
        for args in (["nm", "--defined-only"], ["nm", "-D", "--defined-only"]):
            for candidate in (path, _debug_file(path)):
                if candidate is None:
                    continue
                out = subprocess.run([*args, candidate], capture_output=True, text=True,
                                     timeout=120).stdout  # fmt: skip
                names |= {line.split()[-1] for line in out.splitlines() if len(line.split()) >= 3}
    return names


def _debug_file(path: str) -> str | None:
    """The separate debug file of ``path`` under /usr/lib/debug/.build-id, if there is one."""
    note = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                          env={"LC_ALL": "C"}, timeout=60).stdout  # fmt: skip
    match = re.search(r"Build ID: ([0-9a-f]{2})([0-9a-f]+)", note)
    if match is None:
        return None
    debug = f"/usr/lib/debug/.build-id/{match[1]}/{match[2]}.debug"
    return debug if os.path.exists(debug) else None
