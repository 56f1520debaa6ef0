"""perf as the reference for callers: ``perf record --call-graph dwarf`` beside livesym.

``children`` samples a process with perf (user-space cpu-clock, DWARF unwinding with the
largest stack copy the kernel allows) while the caller samples it with livesym, and
returns perf's TOTAL (children) % per function, for functions at or above a share.
Inlined frames (perf expands them from DWARF; livesym does not) and addresses perf could
not name are left out; names are compared without return type and parameter list.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

ROW = re.compile(r"^\s+([0-9.]+)%\s+([0-9.]+)%\s+\[\.\]\s+(.*?)\s+-\s+-\s*$")


def base_name(name: str) -> str:
    """A function's qualified name alone (no return type, no parameters)."""
    depth, start, end = 0, 0, len(name)
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            start = i + 1
        elif c == "(" and depth == 0 and i > 0:
            end = i
            break
    return name[start:end].replace(" >", ">").strip()


def start_perf(pid: int, seconds: float, data: Path, rate: int = 99) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["perf", "record", "-q", "-e", "cpu-clock:u", "--call-graph", "dwarf,32768",
         "-F", str(rate), "-p", str(pid), "-o", str(data), "--", "sleep", str(seconds)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def children(data: Path, min_share: float) -> dict[str, float]:
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--children", "--stdio", "--sort", "symbol",
         "-g", "none", "--percent-limit", str(min_share)],
        capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    found: dict[str, float] = {}
    for line in report.splitlines():
        m = ROW.match(line)
        if m and "(inlined)" not in m.group(3) and not m.group(3).startswith("0x"):
            name = base_name(m.group(3))
            found[name] = max(found.get(name, 0.0), float(m.group(1)))
    return found


def temp_data() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory()
