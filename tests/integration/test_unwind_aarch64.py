"""Unwinding AArch64 stacks from their call-frame information, against gdb.

This machine is x86-64, so deep (sample_targets/deep.c, main thread only) is built
for AArch64 with Debian's cross compiler (static, -O2 -fomit-frame-pointer), run
under qemu-user, and stopped by gdb-multiarch through qemu's gdb stub at three
points of one pause() call: its first instruction (the return address still in the
link register, the CFA the stack pointer), after its prologue, and at its system
call. At each, gdb records the registers, the stack and its own backtrace
(tests/support/gdb_snap.py); livesym unwinds the same registers and stack with the
executable's .eh_frame alone. Every return address must be gdb's, and every stack
must end at _start, whose CFI marks the link register undefined.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from livesym.elf.cfi import CallFrames
from livesym.elf.image import load_image
from livesym.elf.symtab import load_symbols
from livesym.records import StackEnd, UserRegisters
from livesym.sample_targets import TARGETS, source_dir
from livesym.unwind.walk import StackCopy, walk

CC, QEMU, GDB = "aarch64-linux-gnu-gcc", "qemu-aarch64", "gdb-multiarch"
pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in (CC, QEMU, GDB)),
    reason="gcc-aarch64-linux-gnu, qemu-user and gdb-multiarch (installed by .ci/run) run "
    "AArch64 code here",
)
REGISTERS = [*(f"x{i}" for i in range(31)), "sp", "pc"]  # DWARF 0..30, then 31 and pc
SNAP = Path(__file__).resolve().parents[1] / "support" / "gdb_snap.py"


@pytest.fixture(scope="module")
def deep_aarch64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aarch64") / "deep"
    spec = TARGETS["deep"]
    subprocess.run([CC, *spec.cflags, "-static", "-o", str(out),
                    str(source_dir() / "deep.c"), *spec.ldflags],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gdb_states(exe: Path, out: Path) -> list[dict[str, Any]]:
    """Three stops in pause(), each recorded by gdb: entry, after prologue, at svc."""
    port = free_port()
    qemu = subprocess.Popen([QEMU, "-g", str(port), str(exe), "--one"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    regs = json.dumps(REGISTERS)
    try:
        time.sleep(0.3)  # qemu listening
        commands = [
            "set debuginfod enabled off", "set backtrace past-main on", "set pagination off",
            f"source {SNAP}", f"target remote 127.0.0.1:{port}",
            "break *pause", "continue", f"python snap({regs})",
            "stepi", f"python snap({regs})",
            "python gdb.execute(f'break *{first_instruction(\"pause\", \"svc\")}')",
            "continue", f"python snap({regs})", f"python save({str(out)!r})", "kill",
        ]  # fmt: skip
        argv = [GDB, "-nx", "-batch", str(exe)]
        for command in commands:
            argv += ["-ex", command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})  # fmt: skip
    finally:
        qemu.kill()
        qemu.wait()
    assert out.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    states: list[dict[str, Any]] = json.loads(out.read_text())
    assert len(states) == 3, done.stdout[-2000:]
    return states


def test_every_return_address_is_gdbs_and_every_stack_reaches_start(deep_aarch64, tmp_path):
    image = load_image(str(deep_aarch64))
    assert image.e_machine == "EM_AARCH64" and image.e_type == "ET_EXEC"  # vaddr == address
    frames = CallFrames(image)
    symbols = load_symbols(image)
    entry, after_prologue, at_svc = gdb_states(deep_aarch64, tmp_path / "states.json")
    assert len({s["registers"][32] for s in (entry, after_prologue, at_svc)}) == 3
    for state in (entry, after_prologue, at_svc):
        regs = UserRegisters("EM_AARCH64", tuple(state["registers"]))
        stack = StackCopy(state["sp"], bytes.fromhex(state["stack"]), state["complete"])
        # WHEN livesym unwinds gdb's registers and stack by the executable's CFI
        unwound = walk(regs, stack, frames.rules_at)
        # THEN it finds gdb's frames, at gdb's addresses, down to _start
        gdb_pcs = [pc for pc, _ in state["frames"]]
        assert list(unwound.ips) == gdb_pcs, (unwound, state["frames"])
        assert unwound.end is StackEnd.ROOT and unwound.by_frame_pointer == 0, unwound
        named = []
        for site in unwound.call_sites():
            hit = symbols.lookup(site)
            named.append(hit.name if hit is not None else None)
        assert named[0] in ("pause", "__libc_pause"), named  # one function, two names
        assert named[1:6] == ["park", "chain_c", "chain_b", "chain_a", "main"], named
        assert named[-1] == "_start"
