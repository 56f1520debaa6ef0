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
``clone3``, or the return address is 0, or the function is one where a runtime
starts its stacks: Go's ``runtime.goexit``, ``ThreadRoot``), or stops and says why.

Deep stacks (a recursion 2,000 frames deep, a compiler's parser) repeat from
sample to sample: the outer frames are the same bytes at the same addresses. A
walk given a ``SuffixMemo`` looks, at MEMO_DEPTHS frames from the leaf (and at the
first caller, where walks through it were deep before), for the rest of the walk in
it, keyed by what the rest can depend on: the address, the callee-saved registers
(at a call site the others hold nothing the caller may use, so every walk forgets
them at frame 1 and at each of MEMO_DEPTHS, memo or not: a walk is the same with
and without one), whether the copy is complete, and the bytes of the copy from the
stack pointer up. A walk that read below that
stack pointer after the look is not kept. 2,000 frames unwound at 99 Hz on four
threads took 40 % of a core without it (bench/overhead.py --depth 2000).

Written by hand: no maintained Python library unwinds from CFI against a copy
of another process's stack (pyelftools decodes the rules; see
``livesym.elf.cfi_rules``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from livesym.elf.cfi_rules import Row, Rules, ThreadRoot
from livesym.records import StackCopy, StackEnd, Unresolved, UserRegisters
from livesym.unwind.calls import CALL_BYTES, x86_64_call_ends_at_end
from livesym.unwind.expr import ExpressionError, evaluate

# Every frame but a signal frame moves up the stack by a word at least (checked below),
# so a copy of the kernel's largest size (65528 bytes) holds 8191 frames at most: a
# 2,000-deep recursion of 16-byte frames fits, and the bound still ends a walk that loops.
MAX_FRAMES = 8192
MASK = (1 << 64) - 1
# Frames from the leaf where a walk looks for its rest, until it finds it; its rest is
# kept from each of them where it missed. At 8 first: a deep stack's walk took 24 CFI
# steps a sample before its first look (0.2-0.3 ms, most of a deep sample's cost); at
# 24 again, for stacks whose frames 8-24 differ (a saved register, a return address)
# while their outer part does not.
MEMO_DEPTHS = frozenset({8, 24, 256, 1024, 4096})
# A walk this deep makes the walks through its first caller's call site look there, at
# frame 1, first (``SuffixMemo.early``): a 2,000-frame recursion working at its leaf
# steps once, not 8 times (30 us a sample). Not every walk: where frame 1's registers
# differ from sample to sample (an interpreter's), each look missed and kept a rest,
# and shallow walks of python3 and xz took 8-22 % longer.
EARLY_AFTER = 256
MAX_EARLY = 4096  # call sites a memo looks at early
# ... and a shallow walk looks there too where that has paid: each call site is looked
# at in frame 1 on its first TRIAL_LOOKS walks, and on after that while half its looks
# or more found the rest (one look in RETRY_AFTER all the same, its program may have
# settled). A busy loop's walks are the same from its caller up, sample after sample:
# crunch's stepped 5 frames a sample, now 1 (resolving a sample: 56 -> 52 us); where
# frame 1's registers change (an interpreter's), its looks stop after TRIAL_LOOKS
# misses. The counts halve every TRIAL_WINDOW looks: the recent ones count.
TRIAL_LOOKS = 8
TRIAL_WINDOW = 64
RETRY_AFTER = 64
MAX_TRIALS = 4096  # call sites with counts kept
MEMO_ENTRIES = 4096  # frames (address and registers) a memo keeps rests for
MEMO_RESTS = 4  # rests kept for one such frame (its stack above differs)
# Bytes a memo keeps, over all its rests: ~40 a return address (its slot and int), and
# a rest's span three times (its bytes, mask and masked value). A 2,000-frame rest with
# its 32 KiB span is ~180 KB, and a walk keeps one from each look that missed.
MEMO_BYTES = 1 << 26


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
    # Registers a call preserves (the ABI's callee-saved, sp, the return address
    # column): at a call site the others hold nothing the caller may use.
    kept: frozenset[int] = frozenset()


MACHINES = {
    # x86-64: 0..15 rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15; 16 is the return
    # address column, which UserRegisters fills with rip.
    "EM_X86_64": Machine(
        pc=16,
        sp=7,
        fp=6,
        ra=16,
        word=8,
        call_ends=x86_64_call_ends_at_end,
        kept=frozenset({3, 6, 7, 12, 13, 14, 15, 16}),  # rbx rbp rsp r12-r15, ra
    ),
    # AArch64: 0..30 x0..x30 (x29 the frame pointer, x30 the link register), 31 sp;
    # UserRegisters keeps pc at 32.
    "EM_AARCH64": Machine(
        pc=32,
        sp=31,
        fp=29,
        ra=30,
        word=8,
        kept=frozenset({*range(19, 31), 31, 32}),  # x19-x28, fp, lr, sp, pc
    ),
}


@dataclass(frozen=True, slots=True)
class Unwound:
    """Leaf first: the executing address, then return addresses (``ips``: ``head``,
    then ``rest``); how the walk ended."""

    head: tuple[int, ...]  # the frames the walk stepped through (all, without a memo)
    end: StackEnd
    detail: str = ""
    by_frame_pointer: int = 0  # steps taken through frame pointers (no CFI there)
    by_return_address: int = 0  # leaves without CFI stepped by the word at their sp
    # Where ips[i] is the executing instruction, not a return address: the leaf, and
    # the frame a signal interrupted (its pc may be a function's first byte).
    exact: frozenset[int] = frozenset({0})
    # The frames after ``head``, a memo's rest of the walk (``SuffixMemo``), and their
    # call sites, made already: neither joined to the head nor made again for every
    # sample (a 2,000-frame rest).
    rest: tuple[int, ...] = ()
    rest_sites: tuple[int, ...] = ()
    # With ``watch``: the registers (DWARF number, value) of each frame whose address
    # lies in the watched range, leaf first, as the walk recovered them (all of them in
    # the leaf, the callee-saved ones above it).
    watched: tuple[Registers, ...] = ()

    @property
    def ips(self) -> tuple[int, ...]:
        return self.head + self.rest if self.rest else self.head

    @property
    def depth(self) -> int:
        return len(self.head) + len(self.rest)

    def head_sites(self) -> tuple[int, ...]:
        """The call sites of ``head`` (``call_sites``)."""
        return call_sites(self.head, self.exact)

    def call_sites(self) -> tuple[int, ...]:
        """The address to name each frame by: a return address points after its call,
        which may be the next function's first byte, so callers are looked up one
        byte back; an executing instruction is looked up as it is."""
        return self.head_sites() + self.rest_sites


def call_sites(ips: tuple[int, ...], exact: frozenset[int] = frozenset({0})) -> tuple[int, ...]:
    return tuple(ip if i in exact else ip - 1 for i, ip in enumerate(ips))


@dataclass(frozen=True, slots=True)
class _Rest:
    """The rest of a walk from a frame: its return addresses (the frame's own not
    included), which of them are exact (counted from the frame), how it ended, and
    what it read: the ``span`` bytes of the copy from the frame's stack pointer, where
    ``mask`` has ones, were as in ``raw`` (the copy's bytes there when it was kept).
    ``left``: it read past the copy's end, ``left`` bytes on, so only a copy ending
    there too gives the same rest (else None). ``then``: the walk that kept it found
    the rest of it in the memo, ``then_at`` bytes up the copy; its reads count too (a
    walk that looks at frame 1 and finds its rest at frame 8 keeps a rest from 1)."""

    ips: tuple[int, ...]
    exact: frozenset[int]
    end: StackEnd
    detail: str
    by_fp: int
    by_ra: int
    span: int
    mask: int
    raw: bytes
    left: int | None
    then: _Rest | None = None
    then_at: int = 0
    sites: tuple[int, ...] = ()  # the call sites of ``ips``
    value: int | None = None  # ``raw`` & ``mask`` as an integer, made when first needed

    def __post_init__(self) -> None:
        exact = frozenset(i - 1 for i in self.exact)  # counted from the frame's callers
        object.__setattr__(self, "sites", call_sites(self.ips, exact))

    def after(self, ips: tuple[int, ...], exacts: set[int], by_fp: int, by_ra: int) -> Unwound:
        """The whole walk: ``ips`` so far (this rest's frame the last), then this rest."""
        at = len(ips) - 1
        return Unwound(
            ips, self.end, self.detail, by_fp + self.by_fp, by_return_address=by_ra + self.by_ra,
            exact=frozenset(exacts | {at + i for i in self.exact}), rest=self.ips,
            rest_sites=self.sites,
        )  # fmt: skip

    def matches(self, data: bytes, offset: int) -> bool:
        """Whether ``data`` from ``offset`` (the frame's stack pointer) holds what this
        rest read, where it read it."""
        left = len(data) - offset
        if left != self.left if self.left is not None else left < self.span:
            return False
        # The outer frames of a deep stack are suspended: their bytes, read or not, are
        # most often the same as when kept, and one memcmp says so (a 2,000-frame rest's
        # 32 KiB: 1 us, where the masked compare below took 40-60 us a sample).
        if not data.startswith(self.raw, offset):
            # Little-endian integers of the bytes: one AND and one compare in C, where
            # word by word took as long as the walk.
            value = self.value
            if value is None:
                value = int.from_bytes(self.raw, "little") & self.mask
                object.__setattr__(self, "value", value)
            found = int.from_bytes(data[offset : offset + self.span], "little")
            if found & self.mask != value:
                return False
        return self.then is None or self.then.matches(data, offset + self.then_at)


class SuffixMemo:
    """Rests of deep walks, for the walks of one set of unwind rules (one maps
    generation): by the frame's address and callee-saved registers, a few rests each,
    told apart by the words they read; bounded, the oldest dropped first."""

    def __init__(self) -> None:
        self._rests: dict[tuple[object, ...], list[_Rest]] = {}
        self._bytes = 0
        self.hits = 0
        self.early: set[int] = set()  # call sites looked at in frame 1 (EARLY_AFTER)
        # call site -> [looks, looks that found the rest, walks not looked since]
        self._trials: dict[int, list[int]] = {}

    def worth_a_look(self, pc: int) -> bool:
        """Whether a walk looks for its rest at frame 1, at the call site ``pc``:
        where walks through it were deep, or where looks there have paid (TRIAL_LOOKS)."""
        if pc in self.early:
            return True
        trial = self._trials.get(pc)
        if trial is None or trial[0] < TRIAL_LOOKS or 2 * trial[1] >= trial[0]:
            return True
        trial[2] += 1
        return trial[2] % RETRY_AFTER == 0

    def looked(self, pc: int, found: bool) -> None:
        """A walk looked at frame 1, at ``pc``, and found its rest or not."""
        trial = self._trials.get(pc)
        if trial is None:
            if len(self._trials) >= MAX_TRIALS:
                self._trials.clear()
            trial = self._trials[pc] = [0, 0, 0]
        trial[0] += 1
        trial[1] += found
        if trial[0] >= TRIAL_WINDOW:
            trial[0] //= 2
            trial[1] //= 2

    def seen(self, unwound: Unwound) -> Unwound:
        """A walk gave ``unwound`` (returned): where it was deep, walks through its
        frame 1 look there."""
        if unwound.depth >= EARLY_AFTER:
            if len(self.early) >= MAX_EARLY:
                self.early.clear()
            self.early.add(unwound.head[1])  # a walk looks at frame 1 at the earliest
        return unwound

    def find(self, key: tuple[object, ...], data: bytes, offset: int) -> _Rest | None:
        """The rest kept under ``key`` whose reads ``data`` holds from ``offset`` on."""
        for rest in self._rests.get(key, ()):
            if rest.matches(data, offset):
                self.hits += 1
                return rest
        return None

    def put(self, key: tuple[object, ...], rest: _Rest) -> None:
        rests = self._rests
        size = _size(rest)
        if size > MEMO_BYTES:
            return
        while rests and (len(rests) >= MEMO_ENTRIES or self._bytes + size > MEMO_BYTES):
            self._bytes -= sum(map(_size, rests.pop(next(iter(rests)))))
        kept = rests.setdefault(key, [])
        if len(kept) >= MEMO_RESTS:
            self._bytes -= _size(kept.pop(0))
        kept.append(rest)
        self._bytes += size


def _size(rest: _Rest) -> int:
    """About what ``rest`` holds, in bytes (MEMO_BYTES), with what it keeps alive: a
    chain of ``then`` is as long as MEMO_DEPTHS at most (each is found deeper)."""
    own = 40 * len(rest.ips) + 3 * rest.span
    return own if rest.then is None else own + _size(rest.then)


# The rules at a run-time address; None where no object is mapped there.
RulesFor = Callable[[int], Rules | None]
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
    memo: SuffixMemo | None = None,
    watch: tuple[int, int] | None = None,
) -> Unwound:
    """The walk; ``watch`` (a run-time range): see ``Unwound.watched`` (give no
    ``memo`` with it: a memo's rest keeps no registers)."""
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
    looks: list[_Look] = []  # where this walk looked in ``memo`` and missed
    watched: list[Registers] = []

    def done(end: StackEnd, detail: str = "") -> Unwound:
        unwound = Unwound(
            tuple(ips), end, detail, by_fp, by_return_address=by_ra, exact=frozenset(exacts),
            watched=tuple(watched),
        )  # fmt: skip
        return unwound if memo is None else _finish(memo, looks, unwound, stack.data)

    for depth in range(max_frames):
        _watch(watched, watch, pc, values, machine, depth)
        if not exact and (depth == 1 or depth in MEMO_DEPTHS):
            values = {r: v for r, v in values.items() if r in machine.kept}  # module doc
        if memo is not None and _looks_now(depth, exact, pc, memo):
            found = _look(memo, machine, values, stack, depth)
            if isinstance(found, _Rest):
                whole = found.after(tuple(ips), exacts, by_fp, by_ra)
                then = (found, values[machine.sp] - stack.start)
                return _finish(memo, looks, whole, stack.data, then)
            if found is not None:  # the rest is kept from here, as from each miss
                looks.append(found.at_frame(len(ips) - 1, by_fp, by_ra))
                read = _watching(read, found.reads)
        if exact:
            exacts.add(len(ips) - 1)
        lookup = pc if exact else pc - 1
        rules = rules_for(lookup)
        try:
            if isinstance(rules, Row):
                step = _cfi_step(machine, rules, values, read)
                exact = rules.signal_frame
            else:
                step, by_leaf = _no_cfi_step(machine, values, read, code_before, exact, rules)
                by_ra, by_fp = by_ra + by_leaf, by_fp + 1 - by_leaf
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


def _finish(
    memo: SuffixMemo,
    looks: list[_Look],
    unwound: Unwound,
    data: bytes,
    then: tuple[_Rest, int] | None = None,
) -> Unwound:
    """``unwound``, its rests kept from the looks that missed (``then``: the rest the
    walk found in the memo, and where in ``data``), the memo told of it."""
    for look in looks:
        look.keep(memo, unwound, data, then)
    return memo.seen(unwound)


def _looks_now(depth: int, exact: bool, pc: int, memo: SuffixMemo) -> bool:
    """Whether the walk (given a memo) looks in it at this frame: at a checkpoint, or at
    frame 1 where walks through it were deep or looks there paid (``worth_a_look``); at
    a return address."""
    if exact:
        return False
    return depth in MEMO_DEPTHS or (depth == 1 and memo.worth_a_look(pc))


Registers = tuple[tuple[int, int], ...]


def _watch(
    watched: list[Registers],
    watch: tuple[int, int] | None,
    pc: int,
    values: dict[int, int],
    machine: Machine,
    depth: int,
) -> None:
    """Where the frame at ``pc`` is in the watched range, its registers as the walk
    knows them, onto ``watched``: all in the leaf (the sample's), the callee-saved ones
    above it (the others hold nothing the caller may use)."""
    if watch is not None and watch[0] <= pc < watch[1]:
        kept = machine.kept
        watched.append(tuple(sorted((r, v) for r, v in values.items() if not depth or r in kept)))


def unwind_copy(
    regs: UserRegisters,
    stack: bytes,
    complete: bool,
    rules_for: RulesFor,
    code_before: CodeBefore | None = None,
    memo: SuffixMemo | None = None,
    watch: tuple[int, int] | None = None,
) -> Unwound:
    """``walk`` from a sampler's registers and the stack it copied from the stack pointer."""
    copy = stack_copy(regs, stack, complete)
    if copy is None:
        return walk(regs, StackCopy(0, b""), rules_for)  # says why it cannot
    return walk(regs, copy, rules_for, code_before=code_before,
                memo=memo if watch is None else None, watch=watch)  # fmt: skip


def stack_copy(regs: UserRegisters, data: bytes, complete: bool = False) -> StackCopy | None:
    """The copy a sampler took from the stack pointer in ``regs`` up; None where the
    registers give no stack pointer (a machine not unwound here)."""
    machine = MACHINES.get(regs.machine)
    if machine is None or machine.sp >= len(regs.values):
        return None
    sp = regs.values[machine.sp]
    return StackCopy(sp, data, complete) if sp is not None else None


@dataclass(slots=True)
class _Look:
    """A look in a memo that missed: its key, the reads of the walk's rest from then,
    and (``at_frame``) the frame it looked at and the walk's counts then."""

    key: tuple[object, ...]
    reads: _Reads
    frame: int = 0
    by_fp: int = 0
    by_ra: int = 0

    def at_frame(self, frame: int, by_fp: int, by_ra: int) -> _Look:
        self.frame, self.by_fp, self.by_ra = frame, by_fp, by_ra
        return self

    def keep(
        self, memo: SuffixMemo, unwound: Unwound, data: bytes, then: tuple[_Rest, int] | None
    ) -> None:
        """Keep the rest of ``unwound`` from the frame looked at, with what it read of
        ``data`` (not where it read below the frame's stack pointer), and the rest it
        found (``then``: that rest and its offset in ``data``)."""
        reads = self.reads
        offset = reads.offset
        if reads.below or (then is not None and then[1] < offset):
            return
        left = len(data) - offset
        span = min(max(reads.at, default=-8) + 8, left)
        mask = bytearray(span)
        for at in reads.at:
            mask[at : at + 8] = b"\xff" * len(mask[at : at + 8])
        at = self.frame
        rest = _Rest(
            unwound.ips[at + 1 :], frozenset(i - at for i in unwound.exact if i > at),
            unwound.end, unwound.detail, unwound.by_frame_pointer - self.by_fp,
            unwound.by_return_address - self.by_ra, span, int.from_bytes(mask, "little"),
            data[offset : offset + span], left if reads.past else None,
            then[0] if then else None, then[1] - offset if then else 0,
        )  # fmt: skip
        memo.put(self.key, rest)


def _look(
    memo: SuffixMemo, machine: Machine, values: dict[int, int], stack: StackCopy, depth: int
) -> _Rest | _Look | None:
    """The rest of the walk from the call site whose registers are ``values``, at frame
    ``depth``, where ``memo`` has it; else the look to keep it by; None where it cannot
    be kept."""
    pc = values[machine.pc]
    key = _memo_key(machine, pc, values, stack)
    if key is None:
        return None
    sp = values[machine.sp]
    found = memo.find(key, stack.data, sp - stack.start)
    if depth == 1:
        memo.looked(pc, found is not None)
    if found is not None:
        return found
    return _Look(key, _Reads(sp, sp - stack.start, len(stack.data) - (sp - stack.start)))


def _memo_key(
    machine: Machine, pc: int, values: dict[int, int], stack: StackCopy
) -> tuple[object, ...] | None:
    """What the rest of a walk from a call site at ``pc`` depends on (module doc)."""
    sp = values.get(machine.sp)
    if sp is None or not stack.start <= sp <= stack.start + len(stack.data):
        return None
    kept = tuple(sorted((r, v) for r, v in values.items() if r in machine.kept))
    return (pc, kept, stack.complete)


@dataclass(slots=True)
class _Reads:
    """The reads of a walk's rest, from the stack pointer ``sp`` of its first frame
    (``offset`` bytes into the copy, ``left`` bytes before its end): where each read
    began (``at``, bytes from ``sp``); ``past``: a read past the copy's end;
    ``below``: a read below ``sp`` (then the rest is not kept)."""

    sp: int
    offset: int
    left: int
    at: set[int] = field(default_factory=set)
    past: bool = False
    below: bool = False


def _watching(read: Callable[[int], int], reads: _Reads) -> Callable[[int], int]:
    """``read``, noting each address in ``reads``."""
    sp, at, left = reads.sp, reads.at, reads.left

    def watched(address: int) -> int:
        offset = address - sp
        if offset < 0:
            reads.below = True
        elif offset + 8 > left:
            reads.past = True
        else:
            at.add(offset)
        return read(address)

    return watched


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


def _no_cfi_step(
    machine: Machine,
    values: dict[int, int],
    read: Callable[[int], int],
    code_before: CodeBefore | None,
    exact: bool,
    rules: Unresolved | ThreadRoot | None,
) -> tuple[tuple[dict[int, int], int] | None, int]:
    """A step where there is no CFI: by the word at the stack pointer (an executing
    function without a frame; 1), else by the frame pointer (0). At an edge of the
    stack a runtime marks (``ThreadRoot``) the walk ends, at the root or short of it."""
    if isinstance(rules, ThreadRoot):
        raise _Stop(StackEnd.SWITCHED if rules.switched else StackEnd.ROOT, rules.function)
    step = _leaf_step(machine, values, read, code_before) if exact else None
    if step is not None:
        return step, 1
    return _fp_step(machine, values, read, rules), 0


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
