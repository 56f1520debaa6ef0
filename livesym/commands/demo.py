"""``livesym demo``: build the bundled target, start it, and show its addresses.

Until the live engine exists, the demo shows what every later screen stands
on: the target's mappings with their base addresses, and the full conversion
chain (mapping -> PT_LOAD -> base -> ELF vaddr -> file offset -> symbol) for an
instruction inside each of its hot functions, as ``livesym addr`` prints it.
"""

from __future__ import annotations

import argparse
import select
import subprocess
import sys
import time
from pathlib import Path

from livesym.addr.convert import BaseDerivation, elf_vaddr_to_vma
from livesym.addr.kinds import ElfVaddr
from livesym.commands.addr import render_text
from livesym.commands.maps import render_table
from livesym.errors import EXIT_OK, LivesymError
from livesym.symbolize.process import ProcessSymbolizer
from livesym.target.process import TargetProcess

TARGET = "spin"
READY_TIMEOUT = 10.0


class DemoError(LivesymError):
    """The demo target could not be built or started."""


def run(args: argparse.Namespace) -> int:
    exe = _build()
    proc = _start(exe)
    try:
        _show(proc.pid, exe)
    finally:
        if args.keep:
            print(f"\nthe target keeps running as pid {proc.pid}; stop it with: kill {proc.pid}")
        else:
            proc.terminate()
            proc.wait(timeout=5)
    return EXIT_OK


def _build() -> Path:
    from livesym.sample_targets import TARGETS, BuildError, build

    hot = ", ".join(name for name, _share in TARGETS[TARGET].hot_functions)
    print(f"building the sample target '{TARGET}' (threads burning CPU in {hot})")
    try:
        exe: Path = build(TARGET)
    except BuildError as e:
        raise DemoError(f"cannot build the demo target: {e}") from None
    return exe


def _start(exe: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT)
    line = proc.stdout.readline() if ready else b""
    if not line.startswith(b"ready"):
        proc.kill()
        proc.wait()
        raise DemoError(f"the demo target {exe} did not start; run it by hand to see why")
    time.sleep(0.2)  # let its threads reach their busy loops
    return proc


def _show(pid: int, exe: Path) -> None:
    from livesym.sample_targets import TARGETS

    symbolizer = ProcessSymbolizer(TargetProcess(pid))
    out = sys.stdout
    out.write(f"\nstarted {exe.name} as pid {pid}\n\n$ livesym maps {pid}\n")
    rows = [r for r in symbolizer.mappings() if r.entry.file_backed or r.entry.path]
    out.write(render_table(rows))
    exec_row = next(
        (r for r in rows if r.entry.executable and Path(r.entry.path).name == exe.name), None
    )
    if exec_row is None or not isinstance(exec_row.base, BaseDerivation) or exec_row.obj is None:
        raise DemoError(f"could not find the executable mapping of {exe.name} in pid {pid}")
    symbols = exec_row.obj.symbols
    assert symbols is not None
    for name, share in TARGETS[TARGET].hot_functions:
        start = next((e.vaddr for e in symbols.entries() if e.name == name), None)
        if start is None:
            continue
        # An address a few bytes into the function, as a sampled IP would be.
        vma, _ = elf_vaddr_to_vma(ElfVaddr(start + 4), exec_row.base.base)
        out.write(f"\n$ livesym addr {pid} {vma:#x}    # inside {name} (~{share:.0%} of CPU)\n")
        out.write(render_text(symbolizer.explain(vma)))
