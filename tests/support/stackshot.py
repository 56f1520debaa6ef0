"""A thread's registers and stack, taken once through ptrace: what an unwinder starts from.

Each thread is seized, interrupted, read (registers; its stack from the stack
pointer to the end of the mapping holding it) and detached, one at a time, so the
process is never stopped for longer than one read.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from livesym.records import UserRegisters
from livesym.sampling import ptrace_abi as abi
from livesym.sampling.base import Sample
from livesym.symbolize.process import ProcessSymbolizer
from livesym.unwind.walk import MACHINES, StackCopy, unwind_copy

MAX_STACK = 1 << 20


@dataclass(frozen=True)
class Shot:
    tid: int
    regs: UserRegisters
    stack: StackCopy


def stack_end(pid: int, sp: int) -> int:
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo <= sp < hi:
            return hi
    raise AssertionError(f"no mapping holds the stack pointer {sp:#x}")


def shoot(pid: int, tid: int) -> Shot:
    arch = abi.arch_for()
    abi.seize(tid)
    try:
        abi.interrupt(tid)
        abi.waitpid(tid, 0)
        regs = abi.dwarf_registers(abi.getregs(tid, arch))
        sp = regs.values[MACHINES[regs.machine].sp]
        assert sp is not None
        end = stack_end(pid, sp)
        size = min(end - sp, MAX_STACK)
        data = abi.process_vm_readv(pid, sp, size)
    finally:
        abi.detach(tid)
    return Shot(tid, regs, StackCopy(sp, data, complete=sp + len(data) >= end))


def unwound(sample: Sample, symbolizer: ProcessSymbolizer) -> Sample:
    """The sample with the stack its registers and stack copy unwind to, as the engine
    unwinds it: a sampler that copies them gives the executing address alone."""
    assert sample.user_regs is not None and sample.user_stack is not None
    pc = sample.user_regs.values[MACHINES[sample.user_regs.machine].pc]
    assert sample.ips == (pc,)
    walked = unwind_copy(
        sample.user_regs,
        sample.user_stack,
        sample.user_stack_complete,
        symbolizer.rules_for,
        symbolizer.code_before,
    )
    return dataclasses.replace(sample, ips=walked.ips)


def shoot_all(pid: int) -> list[Shot]:
    return [shoot(pid, int(t)) for t in sorted(os.listdir(f"/proc/{pid}/task"))]
