"""perf as the reference for callers: ``perf record --call-graph dwarf`` beside livesym.

``workload`` runs one of the real programs compared on; ``start_perf`` samples a
process with perf (user-space cpu-clock, DWARF unwinding) while the caller samples it
with livesym; ``children`` returns perf's TOTAL % per function over perf's samples
whose stack reached the thread's root, for functions at or above a share.
Inlined frames (perf expands them from DWARF; livesym does not) and addresses perf could
not name are left out; names are compared without return type and parameter list.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The real programs both the tests and bench/unwind_vs_perf.py compare on.
LLVM = Path("/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1")
FIB = "def fib(n): return n if n < 2 else fib(n-1) + fib(n-2)\nwhile True: fib(25)\n"
# An endless stream of addresses in libLLVM's text for llvm-symbolizer to demangle.
ADDRESS_FEEDER = (
    "import random, sys\nr = random.Random(1)\nwhile True:\n"
    "    sys.stdout.write(''.join(hex(r.randrange(0x1000000, 0x5000000)) + '\\n'"
    " for _ in range(1000)))\n"
)


def livesym_totals(doc: dict[str, Any]) -> tuple[dict[str, float], float]:
    """From ``livesym top --json``: TOTAL % per function (named as ``base_name`` names
    them), and the share of samples whose stack ended early."""
    total: dict[str, float] = {}
    for f in doc["functions"]:
        name = base_name(f["demangled"] or f["symbol"] or "")
        total[name] = max(total.get(name, 0.0), f["total_pct"])
    cut = sum(f["total_pct"] for f in doc["functions"] if f["kind"] == "truncated")
    return total, cut


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


_VERSION = re.compile(r"@@?[A-Za-z0-9_.]+$")  # a dynamic symbol's version: GLIBC_2.34


def perf_stacks(data: Path) -> list[list[tuple[str, str]]]:
    """``perf script``'s stacks, leaf first, each frame (ip, symbol name without its
    version). ``--no-inline``: a frame is a return address, named by its symbol as
    livesym names it; with inline resolution perf printed some frames under an inlined
    callee's name alone (``__libc_start_main_impl (inlined)`` for __libc_start_main's
    frame), and resolving them took perf 14 s of a test's 25 on libLLVM (0.1 s without)."""
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,sym", "--no-inline"],
        capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    stacks = []
    for block in script.split("\n\n"):
        frames = [line.split(None, 1) for line in block.splitlines() if line.strip()]
        named = [(f[0], _VERSION.sub("", f[1].strip())) for f in frames if len(f) == 2]
        if named:
            stacks.append(named)
    return stacks


def children(data: Path, min_share: float) -> tuple[dict[str, float], float]:
    """perf's TOTAL % per function over its samples whose stack reached the thread's
    root (perf's own copy of 32 KiB cuts deeper stacks short: those are left out, as
    the comparison is "where perf's stack reached the root"), at or above
    ``min_share``; and the share of perf's samples that reached their root.

    A stack reached its root when its outermost address is one where at least a tenth
    of the stacks end (``_start``'s, ``clone3``'s): stacks cut short end anywhere.
    Names cannot tell, as perf leaves a stripped program's ``_start`` unnamed."""
    stacks = perf_stacks(data)
    ends: dict[str, int] = {}
    for frames in stacks:
        ends[frames[-1][0]] = ends.get(frames[-1][0], 0) + 1
    roots = {ip for ip, n in ends.items() if n >= 0.1 * len(stacks)}
    whole = [frames for frames in stacks if frames[-1][0] in roots]
    counts: dict[str, int] = {}
    for frames in whole:
        for name in {base_name(n) for _, n in frames if not n.startswith("[unknown]")}:
            counts[name] = counts.get(name, 0) + 1
    found = {n: 100.0 * c / len(whole) for n, c in counts.items() if whole}
    return {n: v for n, v in found.items() if v >= min_share}, 100.0 * len(whole) / max(
        len(stacks), 1
    )


def paths_below(data: Path, function: str) -> dict[tuple[str, ...], float]:
    """perf's share (%) of all its samples per path from ``function``'s outermost call
    towards the leaf: ``("dispatch", "parse")`` holds every sample whose stack runs
    dispatch -> parse, whatever is below."""
    samples = 0
    counts: dict[tuple[str, ...], int] = {}
    for frames in perf_stacks(data):
        names = [base_name(name) for _, name in frames]
        samples += 1
        outward = names[::-1]  # root first
        if function not in outward:
            continue
        path = tuple(outward[outward.index(function) :])
        for n in range(1, len(path) + 1):
            counts[path[:n]] = counts.get(path[:n], 0) + 1
    return {p: 100.0 * c / samples for p, c in counts.items()} if samples else {}


def temp_data() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory()


@contextmanager
def workload(name: str) -> Iterator[int | None]:
    """A running process of the workload (its pid), or None where it cannot run here."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if name == "frameless":
            from livesym.sample_targets import build

            procs.append(subprocess.Popen([str(build("frameless"))], stdout=subprocess.PIPE))
        elif name == "python3":
            procs.append(subprocess.Popen([sys.executable, "-c", FIB]))
        elif name == "xz" and shutil.which("xz"):
            feed = subprocess.Popen(["yes", "livesym unwinds liblzma 0123456789"],
                                    stdout=subprocess.PIPE)  # fmt: skip
            procs.append(feed)
            procs.append(subprocess.Popen(["xz", "-9", "-T1", "-c"], stdin=feed.stdout,
                                          stdout=subprocess.DEVNULL))  # fmt: skip
        elif name == "llvm-symbolizer" and shutil.which("llvm-symbolizer") and LLVM.exists():
            feed = subprocess.Popen([sys.executable, "-c", ADDRESS_FEEDER],
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)  # fmt: skip
            procs.append(feed)
            procs.append(subprocess.Popen(
                ["llvm-symbolizer", f"--obj={LLVM}", "--functions=linkage"],
                stdin=feed.stdout, stdout=subprocess.DEVNULL,
            ))  # fmt: skip
        else:
            yield None
            return
        time.sleep(1.0)  # past start-up: the steady work
        yield procs[-1].pid
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()


@dataclass(frozen=True)
class SelfShares:
    """``perf report --no-children``: self % of all samples per symbol and per object."""

    samples: int
    by_symbol: dict[str, float]
    by_object: dict[str, float]

    def symbol(self, name: str) -> float:
        return self.by_symbol.get(name, 0.0)

    def object(self, fragment: str) -> float:
        return sum(v for k, v in self.by_object.items() if fragment in k)


def record_self(pid: int, seconds: float, data: Path, rate: int = 99) -> subprocess.Popen[bytes]:
    """``perf record`` of ``pid``'s on-CPU time (cpu-clock, user and kernel, as livesym's
    perf sampler takes as root), for ``seconds``, without stacks: self shares only."""
    return subprocess.Popen(
        ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(rate), "-p", str(pid),
         "-o", str(data), "--", "sleep", str(seconds)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def self_shares(data: Path) -> SelfShares:
    """perf's self shares of a recording, by symbol and by object (its file name)."""

    def report(sort: str) -> dict[str, float]:
        out = subprocess.run(
            ["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", sort,
             "-q", "--percent-limit", "0"], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[:400]
        shares: dict[str, float] = {}
        for line in out.stdout.splitlines():
            match = re.match(r"^\s*([\d.]+)%\s+(?:\[[.k]\]\s+)?(.+?)\s*$", line)
            if match:
                shares[match[2]] = shares.get(match[2], 0.0) + float(match[1])
        return shares

    listed = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip"],
                            capture_output=True, text=True, timeout=120).stdout  # fmt: skip
    return SelfShares(len(listed.splitlines()), report("sym"), report("dso"))
