"""Hostile call-frame information through the stack walk: CFA rules that point anywhere,
register rules that read anywhere, expressions of any bytes, over stacks of any bytes.
Every walk ends, within its bounds, saying how; none raises."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.elf.cfi_rules import CfaRule, RegisterRule, Row
from livesym.records import Reason, StackEnd, Unresolved, UserRegisters
from livesym.unwind.walk import MAX_FRAMES, StackCopy, walk

SP = 0x7FFF_0000
WORDS = st.integers(0, (1 << 64) - 1)
SMALL = st.integers(-4096, 4096)
REGISTERS = st.integers(0, 20)
EXPRESSIONS = st.lists(st.integers(0, 255), max_size=24).map(tuple)

cfa_rules = st.one_of(
    st.builds(CfaRule, REGISTERS, SMALL),
    st.builds(CfaRule, st.none(), st.just(0), EXPRESSIONS),
)
register_rules = st.one_of(
    st.builds(RegisterRule, st.sampled_from(["offset", "val_offset"]), offset=SMALL),
    st.builds(RegisterRule, st.just("register"), register=REGISTERS),
    st.builds(
        RegisterRule, st.sampled_from(["expression", "val_expression"]), expression=EXPRESSIONS
    ),
    st.builds(RegisterRule, st.sampled_from(["undefined", "same_value"])),
)
rows = st.builds(
    Row,
    st.just(0),
    cfa_rules,
    st.dictionaries(REGISTERS, register_rules, max_size=6),
    st.booleans(),
)
answers = st.one_of(rows, st.none(), st.just(Unresolved(Reason.NO_CFI, "no FDE")))


def _regs(values: list[int]) -> UserRegisters:
    full: list[int | None] = [*values[:7], SP, *values[8:16], values[16]]
    return UserRegisters("EM_X86_64", tuple(full))


@settings(max_examples=400, deadline=None)
@given(
    answers=st.lists(answers, min_size=1, max_size=8),
    registers=st.lists(WORDS | st.integers(SP - 64, SP + 4096), min_size=17, max_size=17),
    stack=st.binary(max_size=2048),
    complete=st.booleans(),
)
def test_any_rules_over_any_stack_end_within_bounds_and_say_how(
    answers, registers, stack, complete
):
    # Each address gets one of the drawn answers: a row, no object, or no CFI.
    def rules_for(address: int) -> Row | Unresolved | None:
        return answers[address % len(answers)]

    def code_before(address: int, size: int) -> bytes | None:
        return bytes([0xE8, *([0] * (size - 1))])[-size:] if address % 3 == 0 else None

    started = time.monotonic()
    unwound = walk(_regs(registers), StackCopy(SP, stack, complete), rules_for,
                   code_before=code_before)  # fmt: skip
    assert time.monotonic() - started < 2.0
    assert 1 <= len(unwound.ips) <= MAX_FRAMES + 1
    assert isinstance(unwound.end, StackEnd)
    assert "\n" not in unwound.detail
    assert all(0 <= ip < 1 << 64 for ip in unwound.ips)
    assert 0 in unwound.exact and max(unwound.exact) < len(unwound.ips)


def test_a_cfa_that_never_moves_up_is_a_loop_not_a_hang():
    # CFA = rsp, return address at CFA - 8: the same frame again and again
    row = Row(0, CfaRule(7, 0), {16: RegisterRule("offset", offset=-8)}, False)
    stack = (0x401000).to_bytes(8, "little") * 4
    unwound = walk(_regs([0] * 16 + [0x401000]), StackCopy(SP - 8, stack), lambda _: row)
    # (the executing function's frame may be empty, an AArch64 leaf's is: once only)
    assert unwound.end is StackEnd.LOOP and len(unwound.ips) == 2


def test_a_stack_of_return_addresses_stops_at_the_depth_limit():
    # Every frame 16 bytes up, every return address non-zero: only the limit stops it
    row = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8)}, False)
    stack = (0x401000).to_bytes(8, "little") * (2 * MAX_FRAMES + 8)
    unwound = walk(_regs([0] * 16 + [0x401000]), StackCopy(SP, stack), lambda _: row)
    assert unwound.end is StackEnd.DEPTH and len(unwound.ips) == MAX_FRAMES + 1
