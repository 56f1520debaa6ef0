"""Run inside gdb (``source``): ``snap()`` records the selected thread as it is stopped --
its registers, its stack from the stack pointer up to where it can no longer be read
(at most 64 KiB), and gdb's backtrace (pc and name of each frame); ``save(path)``
writes what was recorded as JSON. For gdb attached to targets livesym cannot sample
itself (another architecture, under qemu-user's gdb stub)."""

from __future__ import annotations

import json
from typing import Any

import gdb  # type: ignore[import-not-found]

MASK = (1 << 64) - 1
MAX_STACK = 1 << 16
STATES: list[dict[str, Any]] = []


def _register(name: str) -> int:
    return int(gdb.parse_and_eval(f"${name}")) & MASK


def snap(registers: list[str]) -> None:
    frames = []
    frame = gdb.newest_frame()
    while frame is not None and len(frames) < 128:
        frames.append([int(frame.pc()) & MASK, frame.name()])
        frame = frame.older()
    sp = _register("sp")
    inferior = gdb.selected_inferior()
    data = b""
    complete = False
    while len(data) < MAX_STACK:
        try:
            data += bytes(inferior.read_memory(sp + len(data), 256))
        except gdb.MemoryError:
            complete = True
            break
    STATES.append(
        {
            "registers": [_register(r) for r in registers],
            "sp": sp,
            "stack": data.hex(),
            "complete": complete,
            "frames": frames,
        }
    )


def first_instruction(function: str, mnemonic: str) -> int:
    """The address of the first ``mnemonic`` instruction of ``function``."""
    start = int(gdb.parse_and_eval(f"(long) &{function}")) & MASK
    arch = gdb.selected_frame().architecture()
    for insn in arch.disassemble(start, count=200):
        if insn["asm"].split()[0] == mnemonic:
            return int(insn["addr"])
    raise gdb.GdbError(f"no {mnemonic} in {function}")


def save(path: str) -> None:
    with open(path, "w") as f:
        json.dump(STATES, f)
