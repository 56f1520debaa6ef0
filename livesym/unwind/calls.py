"""Whether an address is a return address: the instruction that ends there is a call.

Used where no call-frame information covers the executing address (JIT code):
a leaf function that keeps no frame has its return address at the stack pointer,
and the frame pointer still belongs to its caller, so stepping by the frame
pointer would skip the caller. The word at the stack pointer is taken as the
return address only when the bytes before it decode as a call that ends exactly
there, so a local variable that merely points into code is not mistaken for one.

x86-64 only: its calls push the return address. (On AArch64 a leaf's return
address stays in the link register; that is not done here.) Written by hand: the
check needs the lengths of two opcodes, not a disassembler.
"""

from __future__ import annotations

CALL_BYTES = 8  # the longest call checked (REX, FF, ModRM, SIB, disp32) and a spare


def x86_64_call_ends_at_end(code: bytes) -> bool:
    """Whether ``code`` ends with a call instruction: ``E8 rel32``, or ``FF /2``
    (call through a register or memory), with or without a REX prefix."""
    if len(code) >= 5 and code[-5] == 0xE8:
        return True
    for length in range(2, 8):
        start = len(code) - length
        if start < 0:
            break
        if code[start] == 0xFF and _ff2_length(code, start) == length:
            return True
    return False


def _ff2_length(code: bytes, at: int) -> int:
    """The length of the ``FF /2`` instruction at ``at`` (opcode, ModRM, SIB and
    displacement), or 0 where the ModRM byte says it is not a call."""
    if at + 1 >= len(code):
        return 0
    modrm = code[at + 1]
    mod, reg, rm = modrm >> 6, (modrm >> 3) & 7, modrm & 7
    if reg != 2:
        return 0
    if mod == 3:
        return 2
    length = 2
    if rm == 4:  # a SIB byte follows
        if at + 2 >= len(code):
            return 0
        length += 1
        if mod == 0 and code[at + 2] & 7 == 5:
            length += 4  # no base: disp32
    elif mod == 0 and rm == 5:
        length += 4  # RIP-relative disp32
    return length + {0: 0, 1: 1, 2: 4}[mod]
