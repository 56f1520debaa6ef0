"""Hostile call-frame information through the stack walk: CFA rules that point anywhere,
register rules that read anywhere, expressions of any bytes, over stacks of any bytes.
Every walk ends, within its bounds, saying how; none raises."""

from __future__ import annotations

import time
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.elf.cfi_rules import CfaRule, RegisterRule, Row
from livesym.records import Reason, StackEnd, Unresolved, UserRegisters
from livesym.unwind import walk as walk_module
from livesym.unwind.walk import MAX_FRAMES, StackCopy, SuffixMemo, walk

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


# --- the memo of deep walks ---------------------------------------------------------

FRAME = Row(0, CfaRule(7, 16), {16: RegisterRule("offset", offset=-8),
                                3: RegisterRule("offset", offset=-16)}, False)  # fmt: skip
ROOT = Row(0, CfaRule(7, 16), {16: RegisterRule("undefined")}, False)


def _deep_stack(depth: int, words: list[int]) -> bytes:
    """``depth`` frames of 16 bytes (a saved rbx, then the return address), each return
    address 0x1000 + its frame's number * 16; ``words`` fill the rest."""
    out = bytearray()
    for k in range(depth):
        out += words[k % len(words)].to_bytes(8, "little")
        out += (0x1000 + (k + 1) * 16).to_bytes(8, "little")
    return bytes(out) + b"".join(w.to_bytes(8, "little") for w in words)


@settings(max_examples=200, deadline=None)
@given(
    depth=st.integers(25, 300),
    words=st.lists(WORDS, min_size=1, max_size=16),
    odd=st.dictionaries(st.integers(0, 400), answers, max_size=6),
    changes=st.lists(
        st.tuples(st.integers(0, 8000), WORDS, st.integers(0, 15), WORDS), min_size=1, max_size=6
    ),
    complete=st.booleans(),
)
def test_a_walk_the_memo_finishes_is_the_walk_a_fresh_memo_makes(
    depth, words, odd, changes, complete
):
    """Walks of one deep stack and of copies with words and registers changed, one memo
    kept over all: each gives what a walk with a memo of its own gives, and a walk
    without one (frames, how it ended, exact frames; call sites, steps by frame
    pointer and by return address, with a memo of its own).
    Rules: 16-byte frames to a root ``depth`` frames up, some addresses any rule."""
    by_frame = {0x1000 + k * 16: FRAME for k in range(depth)} | {0x1000 + depth * 16: ROOT}
    odd_rules = {0x1000 + k * 16: rule for k, rule in odd.items()}

    def rules_for(address: int) -> Row | Unresolved | None:
        base = address + 1 if address % 16 == 15 else address  # a caller is looked up at -1
        return odd_rules.get(base, by_frame.get(base))

    base = _deep_stack(depth, words)
    memo = SuffixMemo()
    for offset, word, register, value in [(0, 0, 0, 0), *changes]:
        stack = bytearray(base)
        at = offset - offset % 8
        if at + 8 <= len(stack):
            stack[at : at + 8] = word.to_bytes(8, "little")
        registers = [0] * 16 + [0x1000]
        registers[register if register != 7 else 0] = value
        regs = _regs(registers)
        kept = walk(regs, StackCopy(SP, bytes(stack), complete), rules_for, memo=memo)
        fresh = walk(regs, StackCopy(SP, bytes(stack), complete), rules_for, memo=SuffixMemo())
        bare = walk(regs, StackCopy(SP, bytes(stack), complete), rules_for)
        assert (kept.ips, kept.end, kept.detail, kept.exact) == (
            fresh.ips, fresh.end, fresh.detail, fresh.exact
        ) == (bare.ips, bare.end, bare.detail, bare.exact)  # fmt: skip
        assert kept.call_sites() == fresh.call_sites()
        assert (kept.by_frame_pointer, kept.by_return_address) == (
            fresh.by_frame_pointer, fresh.by_return_address
        )  # fmt: skip


def test_the_memo_finishes_a_deep_walk_seen_before_even_where_a_frame_s_locals_changed():
    """A 500-frame stack walked twice, a word no rule reads (a frame's local) changed
    between: the second walk comes from the memo, and is the first."""
    spill = Row(0, CfaRule(7, 24), {16: RegisterRule("offset", offset=-8)}, False)
    depth = 500
    frames = bytearray()
    for k in range(depth):  # a local, a pad word, then the return address
        frames += (k).to_bytes(8, "little") + bytes(8)
        frames += (0x1000 + (k + 1) * 16).to_bytes(8, "little")
    rules = {0x1000 + k * 16: spill for k in range(depth)} | {0x1000 + depth * 16: ROOT}

    def rules_for(address: int) -> Row | Unresolved | None:
        return rules.get(address + 1 if address % 16 == 15 else address)

    regs = _regs([0] * 16 + [0x1000])
    memo = SuffixMemo()
    first = walk(regs, StackCopy(SP, bytes(frames)), rules_for, memo=memo)
    frames[100 * 24 : 100 * 24 + 8] = (12345).to_bytes(8, "little")  # frame 100's local
    second = walk(regs, StackCopy(SP, bytes(frames)), rules_for, memo=memo)
    assert first.end is StackEnd.ROOT and len(first.ips) == depth + 1
    assert memo.hits == 1
    assert (second.ips, second.end, second.exact) == (first.ips, first.end, first.exact)
    assert second.call_sites() == first.call_sites()
    frames[200 * 24 + 16 : 200 * 24 + 24] = (0x999).to_bytes(8, "little")  # a return address
    third = walk(regs, StackCopy(SP, bytes(frames)), rules_for, memo=memo)
    assert memo.hits == 1 and third.ips[201] == 0x999 and third.end is not StackEnd.ROOT


def _counted_rules(depth: int) -> tuple[Callable[[int], Row | None], list[int]]:
    """The rules of ``_deep_stack``'s frames, to a root ``depth`` frames up, and the
    addresses they are asked for (one a step of the walk)."""
    by_frame = {0x1000 + k * 16: FRAME for k in range(depth)} | {0x1000 + depth * 16: ROOT}
    steps: list[int] = []

    def rules_for(address: int) -> Row | None:
        steps.append(address)
        return by_frame.get(address + 1 if address % 16 == 15 else address)

    return rules_for, steps


def test_a_deep_walk_steps_1_frame_and_24_where_its_middle_changed():
    """The memo is looked in at frame 1 (a call site's first walks try it) and at frame
    8: the first walk keeps the rests from both, so the next walks step 1 frame; where a
    register saved in frame 12 changed, at 1 and 8 the rests do not hold and the walk
    finds its rest at 24. A register changed in frame 4 (read by the rest from 1, not by
    that from 8): 8 steps. Each is the walk a fresh memo makes."""
    depth = 300
    rules_for, steps = _counted_rules(depth)
    regs = _regs([0] * 16 + [0x1000])
    base = _deep_stack(depth, [7])
    memo = SuffixMemo()
    first = walk(regs, StackCopy(SP, base), rules_for, memo=memo)
    assert first.end is StackEnd.ROOT and len(first.ips) == depth + 1
    for hits, count, changed_frame in ((1, 1, None), (2, 1, None), (3, 24, 12), (4, 8, 4)):
        stack = bytearray(base)
        if changed_frame is not None:  # the frame's saved rbx
            stack[changed_frame * 16 : changed_frame * 16 + 8] = (0xABC).to_bytes(8, "little")
        steps.clear()
        kept = walk(regs, StackCopy(SP, bytes(stack)), rules_for, memo=memo)
        assert (memo.hits, len(steps)) == (hits, count), changed_frame
        fresh = walk(regs, StackCopy(SP, bytes(stack)), rules_for, memo=SuffixMemo())
        assert (kept.ips, kept.end, kept.exact) == (fresh.ips, fresh.end, fresh.exact)
        assert kept.call_sites() == fresh.call_sites()


def test_the_memo_keeps_its_bytes_bound_dropping_the_oldest(monkeypatch):
    """Rests over MEMO_BYTES push the oldest out: the first walk's rest is gone, the
    last's is found."""
    monkeypatch.setattr(walk_module, "MEMO_BYTES", 60_000)
    depth = 300  # each walk keeps ~4 rests of ~300 frames and ~4.8 KB spans
    by_frame = {0x1000 + k * 16: FRAME for k in range(depth)} | {0x1000 + depth * 16: ROOT}

    def rules_for(address: int) -> Row | Unresolved | None:
        return by_frame.get(address + 1 if address % 16 == 15 else address)

    memo = SuffixMemo()
    stacks = [_deep_stack(depth, [word]) for word in range(1, 7)]  # saved rbx differ
    regs = _regs([0] * 16 + [0x1000])
    for stack in stacks:
        walk(regs, StackCopy(SP, stack), rules_for, memo=memo)
    assert memo.hits == 0
    walk(regs, StackCopy(SP, stacks[-1]), rules_for, memo=memo)
    assert memo.hits == 1
    walk(regs, StackCopy(SP, stacks[0]), rules_for, memo=memo)  # its rests were dropped
    assert memo.hits == 1


def test_frame_1_is_looked_at_while_that_pays_and_once_in_a_while_after():
    """A call site whose looks at frame 1 miss (an interpreter's registers change from
    walk to walk) is looked at TRIAL_LOOKS times, then once in RETRY_AFTER walks; one
    whose looks find the rest is looked at on every walk."""
    memo = SuffixMemo()
    for _ in range(walk_module.TRIAL_LOOKS):
        assert memo.worth_a_look(0x10)
        memo.looked(0x10, False)
    tried = sum(memo.worth_a_look(0x10) for _ in range(3 * walk_module.RETRY_AFTER))
    assert tried == 3
    for _ in range(2 * walk_module.TRIAL_WINDOW):
        memo.looked(0x20, True)
    assert all(memo.worth_a_look(0x20) for _ in range(3 * walk_module.RETRY_AFTER))
    # ... and one that came to pay half the time is looked at on every walk again
    for _ in range(walk_module.TRIAL_WINDOW):
        memo.looked(0x10, True)
    assert memo.worth_a_look(0x10)
