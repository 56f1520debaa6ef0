"""The common walk in C (``livesym._cfiwalk``), with the rules the Python walk uses.

Most of a sample's frames step by rules of one shape: the CFA is rsp or rbp plus an
offset, the return address and rbp are saved at offsets from it (or rbp is kept), and
nothing is an expression. ``QuickWalk`` keeps such rules in C by the address a walk
looks them up at and walks a sample through them in C. Where the C walk meets an
address it has no rule for, the rule is looked up there (the same ``rules_for`` the
Python walk is given) and kept, and the walk is taken again, a few times a walk at
most (LEARN_PER_WALK: an interpreter's loop has a new leaf address now and then). A
walk it cannot take whole to the root (an unusual rule, a read outside the copy, a
signal frame, a stack with many new frames) is ``None``, and the caller walks in
Python, whose lookups are kept too (``teaching``): a deep stack is learnt in one walk.

The rules are those of one maps generation: a new generation empties them, as does a
debug file that arrived (its ``.debug_frame`` may hold rules the Python walk did not
have). The extension is optional (livesym/_cfiwalk.c says why it is C): where it was
not built, or on a machine other than x86-64, every walk is in Python.
"""

from __future__ import annotations

from livesym.elf.cfi_rules import Row, Rules
from livesym.records import UserRegisters
from livesym.unwind.walk import RulesFor

try:
    from livesym import _cfiwalk
except ImportError:  # built where a compiler and Python's headers were there
    _cfiwalk = None  # type: ignore[assignment]

MACHINE = "EM_X86_64"
PC, SP, BP, RA = 16, 7, 6, 16  # DWARF numbers (livesym.unwind.walk.MACHINES)
# Rules looked up and kept in one walk, at most, before it is left to the Python walk.
LEARN_PER_WALK = 8
# Deeper walks are the Python walk's: its memo hands over the rest of a deep stack and
# its frame ids made once (walk.SuffixMemo), where the C walk's 2,000 call sites were
# each named again (a 2,000-frame recursion: 0.96 s of CPU in 6 s against 0.88).
MAX_QUICK_FRAMES = 128
# Rule kinds on other registers the C walk may pass over: no read (the Python walk
# reads "offset" slots, which the C walk checks are in the copy), nothing rbp or the
# CFA of a later frame depends on (rules of those are looked at themselves).
_PASSED = frozenset({"offset", "undefined", "same_value", "val_offset", "register"})


def available() -> bool:
    """Whether walks can be taken in C here (the extension was built)."""
    return _cfiwalk is not None


class QuickWalk:
    """Simple CFI rules by lookup address, for one maps generation, and walks through
    them in C."""

    def __init__(self) -> None:
        assert _cfiwalk is not None
        self._steps = _cfiwalk.Steps()
        self._generation: int | None = None
        self.walks = 0  # walks taken in C
        self.misses = 0  # walks left to Python

    def walk(
        self, regs: UserRegisters, copy: bytes, generation: int, rules_for: RulesFor
    ) -> tuple[int, ...] | None:
        """The walk's call sites, leaf first (``Unwound.call_sites``), ending at the
        root; None: walk in Python (with ``teaching``). ``rules_for``: the rules of
        maps generation ``generation``."""
        self._in(generation)
        values = regs.values
        if regs.machine != MACHINE or len(values) <= PC:
            return None
        pc, sp, bp = values[PC], values[SP], values[BP]
        if pc is None or sp is None or bp is None:
            return None
        steps = self._steps
        for _ in range(LEARN_PER_WALK):
            found = steps.walk(pc, sp, bp, copy, MAX_QUICK_FRAMES)
            if not isinstance(found, int):
                break
            rules = rules_for(found)
            if not isinstance(rules, Row) or not learn(steps, found, rules):
                steps.put_other(found)
        else:
            found = None
        if isinstance(found, tuple):
            self.walks += 1
            return found
        self.misses += 1
        return None

    def teaching(self, rules_for: RulesFor, generation: int) -> RulesFor:
        """``rules_for`` (the rules of maps generation ``generation``), each simple rule
        it gives kept for later walks."""
        self._in(generation)
        steps = self._steps

        def rules(address: int) -> Rules | None:
            found = rules_for(address)
            if isinstance(found, Row) and not learn(steps, address, found):
                steps.put_other(address)
            return found

        return rules

    def _in(self, generation: int) -> None:
        """Rules of ``generation`` from now on: those of another are forgotten."""
        if generation != self._generation:
            if self._generation is not None:
                self.forget()
            self._generation = generation

    def forget(self) -> None:
        """Forget every rule (a debug file arrived; a new generation)."""
        self._steps.clear()

    @property
    def size(self) -> int:
        """Rules held."""
        return int(self._steps.size)


def learn(steps: _cfiwalk.Steps, address: int, row: Row) -> bool:
    """Keep ``row`` for walks at ``address`` where it is simple (module doc); whether it was."""
    cfa = row.cfa
    if row.signal_frame or cfa.expression is not None or cfa.register not in (SP, BP):
        return False
    registers = row.registers
    ra = registers.get(RA)
    if ra is not None and ra.kind == "undefined":
        steps.put_root(address)
        return True
    if ra is None or ra.kind != "offset":
        return False
    bp = registers.get(BP)
    if bp is not None and bp.kind not in ("offset", "same_value"):
        return False
    saved = bp.offset if bp is not None and bp.kind == "offset" else None
    others = []
    for reg, rule in registers.items():
        if reg in (RA, BP):  # (an rsp rule is applied, then rsp is the CFA)
            continue
        if rule.kind not in _PASSED:
            return False
        if rule.kind == "offset":
            others.append(rule.offset)
    low, high = (min(others), max(others)) if others else (None, None)
    steps.put(address, cfa.register == BP, cfa.offset, ra.offset, saved, low, high)
    return True
