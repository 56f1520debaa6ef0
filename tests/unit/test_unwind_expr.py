"""DWARF expressions of CFI rules: the PLT's CFA, and hostile ones that must stop."""

from __future__ import annotations

import pytest

from livesym.unwind.expr import MAX_OPS, ExpressionError, evaluate

# glibc's PLT: CFA = rsp + 8 + ((rip & 15) >= 11) * 8, as GNU ld emits it (read from
# libc.so.6's .eh_frame): breg7 8, breg16 0, lit15, and, lit11, ge, lit3, shl, plus.
PLT_CFA = (0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22)


def no_memory(address: int) -> int:
    raise AssertionError(f"read {address:#x}")


@pytest.mark.parametrize(("rip", "cfa"), [(0x4010, 0x1008), (0x401A, 0x1008), (0x401B, 0x1010)])
def test_the_plt_cfa_depends_on_where_in_the_stub_the_thread_is(rip, cfa):
    assert evaluate(PLT_CFA, {7: 0x1000, 16: rip}, no_memory) == cfa


def test_deref_reads_the_copy_and_the_initial_value_is_the_cfa():
    memory = {0x2008: 0xABCD}
    # A signal frame's register rule: [CFA + 8]
    assert evaluate((0x23, 8, 0x06), {}, memory.__getitem__, (0x2000,)) == 0xABCD


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ((0x22,), "ran empty"),  # plus on an empty stack
        ((0x75, 0), "register 5 is not known"),
        ((0x0E, 1, 2), "runs past"),  # const8u cut short
        ((0x96,), "not supported"),  # DW_OP_nop's neighbour, call_frame_cfa: not here
        ((0x30,) * (MAX_OPS + 1), "too long"),
        ((0x10, *([0x80] * 12)), "LEB128"),
    ],
)
def test_a_hostile_expression_stops_with_a_reason(code, why):
    with pytest.raises(ExpressionError, match=why):
        evaluate(code, {7: 0x1000}, no_memory)
