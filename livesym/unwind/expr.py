"""DWARF expressions as CFI rules use them: a small bounded stack machine.

A CFA or register rule may be an expression instead of register + offset: the
PLT's CFA depends on where in the stub the thread is (``rsp + 8 + ((rip & 15) >=
11) * 8``), and a signal frame's registers are read from the ucontext on the
stack. The operations those use are here; anything else makes the rule
unusable (one frame lost, not the walk). Written by hand: pyelftools decodes the
bytes into operations but does not evaluate them against registers and memory.

Hostile input: at most MAX_OPS operations and MAX_STACK entries, no branches
(a loop is impossible), every value kept to 64 bits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from livesym.elf import leb128

MAX_OPS = 64
MAX_STACK = 64
MASK = (1 << 64) - 1


class ExpressionError(Exception):
    """The expression cannot be evaluated here; the message says why."""


def _leb(code: Sequence[int], at: int, signed: bool) -> tuple[int, int]:
    try:
        return leb128.decode(code, at, signed)
    except ValueError as e:
        raise ExpressionError(str(e)) from None


_CONST = {  # DW_OP_const*: (bytes, signed)
    0x08: (1, False), 0x09: (1, True), 0x0A: (2, False), 0x0B: (2, True),
    0x0C: (4, False), 0x0D: (4, True), 0x0E: (8, False), 0x0F: (8, True),
}  # fmt: skip

_BINARY: dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b,  # and
    0x1C: lambda a, b: a - b,  # minus
    0x1E: lambda a, b: a * b,  # mul
    0x21: lambda a, b: a | b,  # or
    0x22: lambda a, b: a + b,  # plus
    0x24: lambda a, b: a << (b & 63),  # shl
    0x25: lambda a, b: a >> (b & 63),  # shr
    0x27: lambda a, b: a ^ b,  # xor
    0x29: lambda a, b: int(a == b),  # eq
    0x2A: lambda a, b: int(_signed(a) >= _signed(b)),  # ge
    0x2B: lambda a, b: int(_signed(a) > _signed(b)),  # gt
    0x2C: lambda a, b: int(_signed(a) <= _signed(b)),  # le
    0x2D: lambda a, b: int(_signed(a) < _signed(b)),  # lt
    0x2E: lambda a, b: int(a != b),  # ne
}


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


_UNARY: dict[int, Callable[[int], int]] = {
    0x1F: lambda a: -a,  # neg
    0x20: lambda a: ~a,  # not
}


def evaluate(
    code: Sequence[int],
    registers: Mapping[int, int],
    read: Callable[[int], int],
    initial: Sequence[int] = (),
) -> int:
    """The value ``code`` leaves on top of the stack. ``read`` fetches a 64-bit word
    (raising what it raises when the address is not in the copy)."""
    stack = [v & MASK for v in initial]
    at = ops = 0
    while at < len(code):
        ops += 1
        if ops > MAX_OPS or len(stack) > MAX_STACK:
            raise ExpressionError("expression too long")
        op = code[at]
        at = _operand(op, code, at + 1, stack, registers)
        if at < 0:
            at = -at
            _operate(op, stack, read)
    _need(stack, 1)
    return stack[-1]


def _operand(
    op: int, code: Sequence[int], at: int, stack: list[int], registers: Mapping[int, int]
) -> int:
    """Push what an operation with operands pushes; return where the next one starts,
    negated when ``op`` is not one of these (then it works on the stack)."""
    if 0x30 <= op <= 0x4F:  # lit0..lit31
        stack.append(op - 0x30)
    elif 0x70 <= op <= 0x8F:  # breg0..breg31 SLEB
        offset, at = _leb(code, at, True)
        if op - 0x70 not in registers:
            raise ExpressionError(f"register {op - 0x70} is not known")
        stack.append((registers[op - 0x70] + offset) & MASK)
    elif op in _CONST:
        size, signed = _CONST[op]
        if at + size > len(code):
            raise ExpressionError("constant runs past the expression")
        value = int.from_bytes(bytes(code[at : at + size]), "little", signed=signed)
        stack.append(value & MASK)
        at += size
    elif op in (0x10, 0x11):  # constu, consts
        value, at = _leb(code, at, op == 0x11)
        stack.append(value & MASK)
    elif op == 0x23:  # plus_uconst
        value, at = _leb(code, at, False)
        _need(stack, 1)
        stack.append((stack.pop() + value) & MASK)
    else:
        return -at
    return at


def _operate(op: int, stack: list[int], read: Callable[[int], int]) -> None:
    """An operation on the stack alone."""
    if op in _BINARY:
        _need(stack, 2)
        b, a = stack.pop(), stack.pop()
        stack.append(_BINARY[op](a, b) & MASK)
    elif op in _UNARY:
        _need(stack, 1)
        stack.append(_UNARY[op](stack.pop()) & MASK)
    elif op == 0x06:  # deref
        _need(stack, 1)
        stack.append(read(stack.pop()) & MASK)
    elif op == 0x12:  # dup
        _need(stack, 1)
        stack.append(stack[-1])
    elif op == 0x13:  # drop
        _need(stack, 1)
        stack.pop()
    elif op == 0x16:  # swap
        _need(stack, 2)
        stack[-1], stack[-2] = stack[-2], stack[-1]
    else:
        raise ExpressionError(f"DWARF operation {op:#x} is not supported in CFI")


def _need(stack: list[int], n: int) -> None:
    if len(stack) < n:
        raise ExpressionError("the expression's stack ran empty")
