"""The stack walk: registers + a copy of the stack -> return addresses, and how it ended.

Each step finds the rules for the current address (``rules_for``: the FDE of
the object mapped there, decoded), computes the canonical frame address (CFA),
restores the caller's registers from where the rules say they were saved, and
takes the return address as the next address. Callers are looked up at their
return address minus one (the call instruction; a call may be a function's
last instruction), except right after a signal frame, whose "return address"
is the interrupted instruction itself.

Frame pointers are the fallback, where an address has no call-frame
information (JIT code, hand-written assembly without CFI): the saved frame
pointer and return address at the frame pointer. Before that, for the leaf
(or a frame a signal interrupted) only: where the word at the stack pointer is
a return address (the code before it is a call, ``livesym.unwind.calls``), the
function keeps no frame of its own, or has not set it up yet, and that word is
its caller; the frame pointer would skip that caller. A walk ends at the thread's
root (the return address rule is undefined, as glibc marks ``_start`` and
``clone3``, or the return address is 0), or stops and says why.

Written by hand: no maintained Python library unwinds from CFI against a copy
of another process's stack (pyelftools decodes the rules; see
``livesym.elf.cfi_rules``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from livesym.elf.cfi_rules import Row
from livesym.records import StackEnd, Unresolved, UserRegisters
from livesym.unwind.calls import CALL_BYTES, x86_64_call_ends_at_end
from livesym.unwind.expr import ExpressionError, evaluate

MAX_FRAMES = 512
MASK = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Machine:
    """DWARF register numbers an unwinder needs on one machine."""

    pc: int  # where UserRegisters keeps the executing address
    sp: int
    fp: int
    ra: int  # the return address column of the CFI
    word: int
    # Whether code that ends at an address is a call; None: calls keep the return
    # address in a register, not on the stack.
    call_ends: Callable[[bytes], bool] | None = None


MACHINES = {
    # x86-64: 0..15 rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15; 16 is the return
    # address column, which UserRegisters fills with rip.
    "EM_X86_64": Machine(pc=16, sp=7, fp=6, ra=16, word=8, call_ends=x86_64_call_ends_at_end),
    # AArch64: 0..30 x0..x30 (x29 the frame pointer, x30 the link register), 31 sp;
    # UserRegisters keeps pc at 32.
    "EM_AARCH64": Machine(pc=32, sp=31, fp=29, ra=30, word=8),
}


@dataclass(frozen=True, slots=True)
class StackCopy:
    """The user stack as copied at a sample: ``data`` from address ``start`` (the
    stack pointer) up. ``complete``: the copy reaches the end of the stack mapping,
    so a read past it is past the stack, not past what was copied."""

    start: int
    data: bytes
    complete: bool = False


@dataclass(frozen=True, slots=True)
class Unwound:
    """Leaf first: the executing address, then return addresses; how the walk ended."""

    ips: tuple[int, ...]
    end: StackEnd
    detail: str = ""
    by_frame_pointer: int = 0  # steps taken through frame pointers (no CFI there)
    by_return_address: int = 0  # leaves without CFI stepped by the word at their sp
    # Where ips[i] is the executing instruction, not a return address: the leaf, and
    # the frame a signal interrupted (its pc may be a function's first byte).
    exact: frozenset[int] = frozenset({0})

    def call_sites(self) -> tuple[int, ...]:
        """The address to name each frame by: a return address points after its call,
        which may be the next function's first byte, so callers are looked up one
        byte back; an executing instruction is looked up as it is."""
        return call_sites(self.ips, self.exact)


def call_sites(ips: tuple[int, ...], exact: frozenset[int] = frozenset({0})) -> tuple[int, ...]:
    return tuple(ip if i in exact else ip - 1 for i, ip in enumerate(ips))


# The rules at a run-time address; None where no object is mapped there.
RulesFor = Callable[[int], Row | Unresolved | None]
# The bytes of code (this many) that end at a run-time address; None where unreadable.
CodeBefore = Callable[[int, int], bytes | None]


class _Stop(Exception):
    def __init__(self, end: StackEnd, detail: str) -> None:
        super().__init__(detail)
        self.end = end
        self.detail = detail


def walk(
    regs: UserRegisters,
    stack: StackCopy,
    rules_for: RulesFor,
    max_frames: int = MAX_FRAMES,
    code_before: CodeBefore | None = None,
) -> Unwound:
    machine = MACHINES.get(regs.machine)
    if machine is None:
        return Unwound((), StackEnd.NO_CFI, f"unwinding {regs.machine} is not supported")
    values = {i: v for i, v in enumerate(regs.values) if v is not None}
    pc = values.get(machine.pc)
    if pc is None or machine.sp not in values:
        return Unwound((), StackEnd.UNREADABLE, "the sample has no pc or stack pointer")
    read = _reader(stack)
    ips = [pc]
    exact = True  # the leaf, or the frame under a signal frame: pc is not a return address
    exacts = {0}
    by_fp = by_ra = 0

    def done(end: StackEnd, detail: str = "") -> Unwound:
        return Unwound(
            tuple(ips), end, detail, by_fp, by_return_address=by_ra, exact=frozenset(exacts)
        )

    for _ in range(max_frames):
        if exact:
            exacts.add(len(ips) - 1)
        lookup = pc if exact else pc - 1
        rules = rules_for(lookup)
        try:
            if isinstance(rules, Row):
                step = _cfi_step(machine, rules, values, read)
                exact = rules.signal_frame
            else:
                step = _leaf_step(machine, values, read, code_before) if exact else None
                if step is None:
                    step = _fp_step(machine, values, read, rules)
                    by_fp += 1
                else:
                    by_ra += 1
                exact = False
        except _Stop as stop:
            return done(stop.end, stop.detail)
        if step is None:
            return done(StackEnd.ROOT)
        new_values, cfa = step
        ra = new_values.get(machine.ra)
        if not ra:
            return done(StackEnd.ROOT, "return address 0")
        # A frame moves up the stack; only the executing function's may be empty (an
        # AArch64 leaf keeps its return address in the link register: CFA == sp).
        sp = values[machine.sp]
        moved = cfa > sp or (cfa == sp and lookup == pc)
        if not moved and not (isinstance(rules, Row) and rules.signal_frame):
            return done(
                StackEnd.LOOP, f"the frame at {pc:#x} does not move up the stack (CFA {cfa:#x})"
            )
        values = new_values
        values[machine.pc] = pc = ra
        ips.append(pc)
    return done(StackEnd.DEPTH, f"{max_frames} frames")


def unwind_copy(
    regs: UserRegisters,
    stack: bytes,
    complete: bool,
    rules_for: RulesFor,
    code_before: CodeBefore | None = None,
) -> Unwound:
    """``walk`` from a sampler's registers and the stack it copied from the stack pointer."""
    machine = MACHINES.get(regs.machine)
    sp = regs.values[machine.sp] if machine is not None and machine.sp < len(regs.values) else None
    if sp is None:
        return walk(regs, StackCopy(0, b""), rules_for)  # says why it cannot
    return walk(regs, StackCopy(sp, stack, complete), rules_for, code_before=code_before)


def _reader(stack: StackCopy) -> Callable[[int], int]:
    data, start = stack.data, stack.start
    end = start + len(data)

    def read(address: int) -> int:
        if start <= address and address + 8 <= end:
            at = address - start
            return int.from_bytes(data[at : at + 8], "little")
        if address >= start and not stack.complete:
            raise _Stop(StackEnd.STACK_COPY, f"{address:#x} is past the {len(data)} bytes copied")
        raise _Stop(StackEnd.UNREADABLE, f"{address:#x} is outside the thread's stack")

    return read


def _cfi_step(
    machine: Machine, row: Row, values: dict[int, int], read: Callable[[int], int]
) -> tuple[dict[int, int], int] | None:
    """The caller's registers and this frame's CFA; None at the root."""
    try:
        if row.cfa.expression is not None:
            cfa = evaluate(row.cfa.expression, values, read)
        elif row.cfa.register in values:
            cfa = (values[row.cfa.register] + row.cfa.offset) & MASK
        else:
            raise _Stop(StackEnd.NO_CFI, f"the CFA is based on unknown register {row.cfa.register}")
        ra_rule = row.registers.get(machine.ra)
        if ra_rule is not None and ra_rule.kind == "undefined":
            return None  # the thread's outermost frame
        caller = dict(values)  # registers no rule names keep their value
        for reg, rule in row.registers.items():
            if rule.kind == "undefined":
                caller.pop(reg, None)
            elif rule.kind == "offset":
                slot = (cfa + rule.offset) & MASK
                if slot < values[machine.sp] and reg != machine.ra and reg in values:
                    # Below the stack pointer: an epilogue has popped it back already
                    # (GCC's CFI moves the CFA there, not the saved registers), so the
                    # register holds the saved value, and the copy starts at sp.
                    continue
                caller[reg] = read(slot)
            elif rule.kind == "val_offset":
                caller[reg] = (cfa + rule.offset) & MASK
            elif rule.kind == "register":
                if rule.register in values:
                    caller[reg] = values[rule.register]
                else:
                    caller.pop(reg, None)
            elif rule.kind == "expression":
                caller[reg] = read(evaluate(rule.expression, values, read, (cfa,)))
            elif rule.kind == "val_expression":
                caller[reg] = evaluate(rule.expression, values, read, (cfa,))
    except ExpressionError as e:
        raise _Stop(StackEnd.NO_CFI, f"a CFI expression: {e}") from None
    caller[machine.sp] = cfa
    return caller, cfa


def _leaf_step(
    machine: Machine,
    values: dict[int, int],
    read: Callable[[int], int],
    code_before: CodeBefore | None,
) -> tuple[dict[int, int], int] | None:
    """The caller of a function without CFI that keeps no frame (or has not set it
    up yet): the word at the stack pointer, where the code before it is a call."""
    if code_before is None or machine.call_ends is None:
        return None
    sp = values[machine.sp]
    try:
        ra = read(sp)
    except _Stop:
        return None
    code = code_before(ra, CALL_BYTES)
    if code is None or len(code) != CALL_BYTES or not machine.call_ends(code):
        return None
    caller = dict(values)
    caller[machine.ra] = ra
    cfa = (sp + machine.word) & MASK
    caller[machine.sp] = cfa
    return caller, cfa


def _fp_step(
    machine: Machine,
    values: dict[int, int],
    read: Callable[[int], int],
    why: Unresolved | None,
) -> tuple[dict[int, int], int]:
    """The caller through the frame pointer: [fp] is the caller's fp, [fp + 8] the
    return address. Only where it points up the stack into the copy."""
    fp = values.get(machine.fp)
    sp = values[machine.sp]
    reason = why.detail if why is not None else "no object is mapped there"
    if fp is None or fp < sp or fp % machine.word:
        raise _Stop(StackEnd.NO_CFI, f"no call-frame information ({reason}), no frame pointer")
    try:
        saved_fp, ra = read(fp), read(fp + machine.word)
    except _Stop:
        raise _Stop(
            StackEnd.NO_CFI, f"no call-frame information ({reason}), no frame pointer"
        ) from None
    caller = dict(values)
    caller[machine.fp] = saved_fp
    caller[machine.ra] = ra
    cfa = fp + 2 * machine.word
    caller[machine.sp] = cfa
    return caller, cfa
