"""The stack walk in C (livesym._cfiwalk, livesym.unwind.quick) against the Python walk.

The C walk is the Python walk's step for simple rules only: wherever it gives a walk,
the Python walk, given the same rules and stack, must end at the root with the same
call sites; it may give none (then the caller walks in Python), never a different one.
Rules, registers and stacks are generated here, hostile ones among them: any offsets,
return addresses that point anywhere, stacks of any bytes, rules learnt for addresses
a walk then finds again."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.elf.cfi_rules import CfaRule, RegisterRule, Row
from livesym.records import StackEnd, UserRegisters
from livesym.unwind import quick
from livesym.unwind.quick import LEARN_PER_WALK, QuickWalk, learn
from livesym.unwind.walk import StackCopy, walk

pytestmark = pytest.mark.skipif(
    not quick.available(), reason="livesym._cfiwalk was not built (no compiler or headers)"
)

SP = 0x7FFF_0000
CODE = [0x40_1000 + 0x40 * i for i in range(6)]  # return addresses a stack may hold
SMALL = st.integers(-64, 256)
WORDS = st.integers(0, (1 << 64) - 1)
offsets = st.integers(-64, 64).map(lambda n: n * 8) | SMALL

simple_rows = st.builds(
    Row,
    st.just(0),
    st.builds(CfaRule, st.sampled_from([7, 6]), offsets),
    st.fixed_dictionaries(
        {16: st.builds(RegisterRule, st.just("offset"), offset=offsets)},
        optional={
            6: st.one_of(
                st.builds(RegisterRule, st.just("offset"), offset=offsets),
                st.builds(RegisterRule, st.just("same_value")),
            ),
            3: st.builds(RegisterRule, st.sampled_from(["offset", "val_offset"]), offset=offsets),
            12: st.builds(RegisterRule, st.just("register"), register=st.integers(0, 16)),
            13: st.builds(RegisterRule, st.just("undefined")),
        },
    ),
    st.just(False),
)
root_row = Row(0, CfaRule(7, 8), {16: RegisterRule("undefined")}, False)
# What a walk may be told at an address: a simple row, the root, or something the C
# walk must leave to Python (an expression, a signal frame, no rules).
other_rows = st.one_of(
    st.builds(Row, st.just(0), st.builds(CfaRule, st.just(7), SMALL), st.just({}), st.just(True)),
    st.builds(
        Row,
        st.just(0),
        st.builds(CfaRule, st.none(), st.just(0), st.just((0x77, 8))),
        st.just({16: RegisterRule("offset", offset=-8)}),
        st.just(False),
    ),
    st.builds(
        Row,
        st.just(0),
        st.builds(CfaRule, st.just(3), SMALL),
        st.just({16: RegisterRule("offset", offset=-8)}),
        st.just(False),
    ),
    st.none(),
)
answers = st.one_of(simple_rows, simple_rows, simple_rows, st.just(root_row), other_rows)


def _regs(pc: int, bp: int) -> UserRegisters:
    values = [0] * 17
    values[7], values[6], values[16] = SP, bp, pc
    return UserRegisters("EM_X86_64", tuple(values))


@st.composite
def stacks(draw: st.DrawFn) -> tuple[dict[int, Row | None], bytes, int, bool]:
    """A stack of ``depth`` frames as compilers lay them out, and its rules: frame i's
    CFA is rsp + 8 x its size (or rbp + 16, where rbp was set up there), its return
    address just under it, rbp and rbx perhaps saved under that; the last frame ends
    at the root (an undefined return address, or 0). Then, perhaps, spoilt: words
    overwritten, the copy cut short, a rule replaced by any other. Returns the rules by
    lookup address, the copy, the leaf's rbp, and whether it was spoilt."""
    depth = draw(st.integers(1, len(CODE) - 1))
    table: dict[int, Row | None] = {}
    words: list[int] = []
    sp, bp = SP, draw(st.integers(SP - 64, SP + 512))
    leaf_bp = bp
    saved_at: int | None = None  # the word the frame below saved its caller's rbp in
    for i in range(depth):
        size = draw(st.integers(1, 6))
        cfa = sp + 8 * size
        on_bp = size >= 2 and (i == 0 or saved_at is not None) and draw(st.booleans())
        if on_bp:
            if i == 0:
                leaf_bp = cfa - 16
            else:
                assert saved_at is not None
                words[saved_at] = cfa - 16
        rules = {16: RegisterRule("offset", offset=-8)}
        frame = [draw(st.integers(0, (1 << 64) - 1)) for _ in range(size)]
        # (A frame of one word that says rbp is saved under it: an epilogue that popped
        # it already, rbp holds it again.)
        saves = on_bp or draw(st.booleans())
        saved_at = None
        if saves:
            rules[6] = RegisterRule("offset", offset=-16)
            saved_at = len(words) + size - 2 if size >= 2 else None
        if size >= 3 and draw(st.booleans()):
            rules[3] = RegisterRule("offset", offset=-24)
        last = i == depth - 1
        by_zero = last and draw(st.booleans())
        frame[-1] = 0 if by_zero else CODE[i + 1]
        words += frame
        cfa_rule = CfaRule(6, 16) if on_bp else CfaRule(7, 8 * size)
        table[CODE[0] if i == 0 else CODE[i] - 1] = Row(0, cfa_rule, rules, False)
        if last and not by_zero:
            table[CODE[i + 1] - 1] = root_row
        sp = cfa
    words += draw(st.lists(st.integers(0, (1 << 64) - 1), max_size=4))
    spoilt = False
    for at, word in draw(st.lists(st.tuples(st.integers(0, len(words) - 1), WORDS), max_size=2)):
        words[at], spoilt = word, True
    stack = b"".join(struct.pack("<Q", w) for w in words)
    cut = draw(st.integers(0, 16) | st.just(0))
    if cut:
        stack, spoilt = stack[: max(0, len(stack) - cut)], True
    for address, row in draw(st.lists(st.tuples(st.sampled_from(sorted(table)), answers),
                                      max_size=1)):  # fmt: skip
        table[address], spoilt = row, True
    return table, stack, leaf_bp, spoilt


@settings(max_examples=600, deadline=None)
@given(case=stacks())
def test_a_walk_the_c_walk_gives_is_the_python_walk_s_to_the_root(case):
    table, stack, bp, spoilt = case
    regs = _regs(CODE[0], bp)
    quick_walk = QuickWalk()
    # Taught as the engine teaches it: what the Python walk was given, where simple.
    told = quick_walk.teaching(lambda a: table.get(a), generation=1)
    python = walk(regs, StackCopy(SP, stack, complete=True), told)
    sites = quick_walk.walk(regs, stack, 1, table.get)
    if sites is not None:
        assert python.end is StackEnd.ROOT, python.detail
        assert sites == python.call_sites()
    elif not spoilt:
        # A stack of simple frames, whole: the C walk takes it (it is there to).
        pytest.fail(f"left to Python: {python.end} {python.detail} {python.call_sites()}")


def test_rules_learnt_take_a_frameless_stack_to_its_root_in_c():
    # main -> work -> leaf, each with CFA = rsp + 16 (one push and the return address),
    # rbp saved by main only; _start's row says the root.
    body = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8)}, False)
    saves = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8),
                                    6: RegisterRule("offset", offset=-16)}, False)  # fmt: skip
    leaf, work_ra, main_ra, start_ra = 0x1000, 0x2000, 0x3000, 0x4000
    table = {leaf: body, work_ra - 1: body, main_ra - 1: saves, start_ra - 1: root_row}
    # sp -> [pad][ra=work] [pad][ra=main] [saved rbp][ra=start] [..]
    words = [0, work_ra, 0, main_ra, 0xBEEF, start_ra, 0, 0]
    stack = b"".join(struct.pack("<Q", w) for w in words)
    regs = _regs(leaf, 0x1234)
    python = walk(regs, StackCopy(SP, stack, True), table.get)
    assert python.end is StackEnd.ROOT
    # Learnt as the C walk meets each address: four lookups, then the walk.
    looked: list[int] = []

    def rules_for(address: int) -> Row | None:
        looked.append(address)
        return table.get(address)

    quick_walk = QuickWalk()
    sites = quick_walk.walk(regs, stack, 1, rules_for)
    assert sites == (leaf, work_ra - 1, main_ra - 1, start_ra - 1) == python.call_sites()
    assert looked == list(sites)
    assert quick_walk.size == 4
    assert quick_walk.walk(regs, stack, 1, rules_for) == sites
    assert len(looked) == 4  # nothing looked up again
    # A new maps generation forgets what was learnt: its objects may be others.
    assert quick_walk.walk(regs, stack, 2, lambda a: None) is None
    assert quick_walk.size == 1  # (the leaf's address, left to Python in generation 2)


def test_a_walk_with_more_new_addresses_than_it_learns_at_once_is_left_to_python():
    body = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8)}, False)
    depth = LEARN_PER_WALK + 4
    returns = [0x1000 * (i + 2) for i in range(depth)]
    table: dict[int, Row | None] = {0x1000: body, **{r - 1: body for r in returns[:-1]}}
    table[returns[-1] - 1] = root_row
    stack = b"".join(struct.pack("<QQ", 0, r) for r in returns)
    regs = _regs(0x1000, 0)
    quick_walk = QuickWalk()
    assert quick_walk.walk(regs, stack, 1, table.get) is None
    assert quick_walk.walk(regs, stack, 1, table.get) is not None  # the rest learnt now
    # Taught by the Python walk, the C walk needs no lookup of its own.
    again = QuickWalk()
    python = walk(regs, StackCopy(SP, stack, True), again.teaching(table.get, 1))
    assert again.walk(regs, stack, 1, lambda a: None) == python.call_sites()


def test_a_walk_that_reads_past_the_copy_or_loops_is_left_to_python():
    quick_walk = QuickWalk()
    steps = quick_walk._steps
    body = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8)}, False)
    assert learn(steps, 0x1000, body)
    regs = _regs(0x1000, 0)
    # The return address is at sp + 8: a copy of 12 bytes does not hold it.
    assert quick_walk.walk(regs, b"\0" * 12, 1, lambda a: None) is None
    assert quick_walk.size == 1
    # A caller whose CFA does not move up the stack: the Python walk says it loops,
    # though the next word would lead to the root.
    still = Row(0, CfaRule(7, 0), {16: RegisterRule("offset", offset=8)}, False)
    assert learn(steps, 0x1000 - 1, still)
    assert learn(steps, 0x2000 - 1, root_row)
    stack = struct.pack("<QQQQ", 0, 0x1000, 0, 0x2000)
    rules = {0x1000: body, 0xFFF: still, 0x1FFF: root_row}
    python = walk(regs, StackCopy(SP, stack, True), rules.get)
    assert python.end is StackEnd.LOOP
    assert quick_walk.walk(regs, stack, 1, lambda a: None) is None
    # Offsets no stack has are not kept.
    # Another register saved above the return address, past the copy: the Python walk
    # reads it and stops there.
    above = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8),
                                     3: RegisterRule("offset", offset=8)}, False)  # fmt: skip
    assert learn(steps, 0x3000, above)
    stack = struct.pack("<QQ", 0, 0)
    python = walk(_regs(0x3000, 0), StackCopy(SP, stack, False), {0x3000: above}.get)
    assert python.end is StackEnd.STACK_COPY
    assert quick_walk.walk(_regs(0x3000, 0), stack, 1, lambda a: None) is None
    huge = Row(0, CfaRule(7, 1 << 40), {16: RegisterRule("offset", offset=-8)}, False)
    learn(steps, 0x5000, huge)
    assert quick_walk.walk(_regs(0x5000, 0), b"\0" * 64, 1, lambda a: None) is None


def test_rules_not_of_the_simple_shape_are_not_learnt():
    steps = QuickWalk()._steps
    ra = {16: RegisterRule("offset", offset=-8)}
    assert not learn(steps, 1, Row(0, CfaRule(7, 8), ra, True))  # a signal frame
    assert not learn(steps, 2, Row(0, CfaRule(None, 0, (0x77, 8)), ra, False))
    assert not learn(steps, 3, Row(0, CfaRule(10, 8), ra, False))  # CFA from r10
    assert not learn(steps, 4, Row(0, CfaRule(7, 8), {}, False))  # no return address rule
    moved = {**ra, 6: RegisterRule("register", register=3)}  # rbp kept in rbx
    assert not learn(steps, 5, Row(0, CfaRule(7, 8), moved, False))
    computed = {**ra, 3: RegisterRule("expression", expression=(0x70, 0))}
    assert not learn(steps, 6, Row(0, CfaRule(7, 8), computed, False))
    assert steps.size == 0
    assert learn(steps, 7, root_row)
    assert steps.size == 1


def test_the_table_of_rules_stays_bounded():
    steps = QuickWalk()._steps
    body = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8)}, False)
    for address in range(0x10000, 0x10000 + 200_000):
        learn(steps, address, body)
    assert 0 < steps.size <= 1 << 16
    # The last rules learnt are there; the first were let go when it filled.
    stack = struct.pack("<QQ", 0, 0)  # the return address 0: the root
    assert steps.walk(0x10000 + 199_999, SP, 0, stack) == (0x10000 + 199_999,)
    assert steps.walk(0x10000, SP, 0, stack) == 0x10000  # (no rule there now)


def test_a_walk_deeper_than_its_limit_is_left_to_python():
    body = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8)}, False)
    steps = QuickWalk()._steps
    learn(steps, 0x1000, body)
    learn(steps, 0x1000 - 1, body)  # a recursion: every caller the same call site
    learn(steps, 0x2000 - 1, root_row)
    frames = 40
    stack = b"".join(struct.pack("<QQ", 0, 0x1000) for _ in range(frames - 1))
    stack += struct.pack("<QQ", 0, 0x2000)
    whole = steps.walk(0x1000, SP, 0, stack)
    assert isinstance(whole, tuple) and len(whole) == frames + 1
    assert steps.walk(0x1000, SP, 0, stack, frames + 1) == whole
    assert steps.walk(0x1000, SP, 0, stack, frames) is None
