"""The unwind rules of one FDE: how to find the caller's frame at an address.

pyelftools decodes CFI instructions into a table of rows (CFA rule and register
rules per address range), and can parse a single entry at a known offset; the
FDE search (``livesym.elf.cfi``) gives that offset. So one FDE is decoded on
first use (about 0.1-0.3 ms with its CIE) and kept, never a whole ``.eh_frame``
(pyelftools needs 15 s for libLLVM's 95,000 entries). pyelftools' rule types
are turned into livesym's frozen ones here, so nothing above this module sees
pyelftools.

Hostile input: pyelftools raises many kinds of errors (and asserts) on bad
bytes; any of them makes that FDE unusable (an ``Unresolved``), never the
session. An FDE longer than MAX_FDE_BYTES is not decoded.
"""

from __future__ import annotations

import io
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Literal

from livesym.records import Reason, Unresolved

MAX_FDE_BYTES = 1 << 16  # instructions of one FDE decoded, at most
MAX_DECODED = 8192  # FDEs kept decoded per object

RuleKind = Literal[
    "undefined", "same_value", "offset", "val_offset", "register", "expression", "val_expression"
]
_KINDS: dict[str, RuleKind] = {
    "UNDEFINED": "undefined",
    "SAME_VALUE": "same_value",
    "OFFSET": "offset",
    "VAL_OFFSET": "val_offset",
    "REGISTER": "register",
    "EXPRESSION": "expression",
    "VAL_EXPRESSION": "val_expression",
}


@dataclass(frozen=True, slots=True)
class RegisterRule:
    """Where a register's value in the caller is: ``offset`` N: saved at CFA + N;
    ``register`` R: in register R; ``expression``: saved at the address the
    expression computes; ``undefined``: lost (for the return address: the root)."""

    kind: RuleKind
    offset: int = 0
    register: int = -1
    expression: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ThreadRoot:
    """No rule is needed here: the function is where its runtime starts a stack, so
    the walk ends with it, as at an undefined return address (Go's ``runtime.goexit``
    under every goroutine, ``runtime.mstart`` under a thread's system stack: Go's
    CFI and frame pointers go on past them into whatever lies above). ``switched``:
    where it moves to another stack instead (``runtime.systemstack``): the walk
    ends there too, but short of the root."""

    function: str
    switched: bool = False


@dataclass(frozen=True, slots=True)
class CfaRule:
    """The canonical frame address: register + offset, or an expression."""

    register: int | None
    offset: int
    expression: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """The rules that hold from ELF vaddr ``start`` to the next row."""

    start: int
    cfa: CfaRule
    registers: dict[int, RegisterRule]
    signal_frame: bool  # the CIE's "S": the frame of a signal handler's return


class RuleDecoder:
    """Decodes FDEs of one ``.eh_frame`` (or ``.debug_frame``) on demand and keeps them."""

    def __init__(
        self, data: bytes, address: int, little: bool, wide: bool, section: str = ".eh_frame"
    ) -> None:
        self._data = data
        self._address = address
        self._little = little
        self._wide = wide
        self._section = section
        self._cfi: Any = None
        self._tables: dict[int, tuple[list[int], list[Row]] | Unresolved] = {}

    def row_at(self, fde_offset: int, vaddr: int) -> Row | Unresolved:
        table = self._tables.get(fde_offset)
        if table is None:
            table = self._decode(fde_offset)
            if len(self._tables) >= MAX_DECODED:
                self._tables.clear()
            self._tables[fde_offset] = table
        if isinstance(table, Unresolved):
            return table
        starts, rows = table
        i = bisect_right(starts, vaddr) - 1
        if i < 0:
            return Unresolved(Reason.NO_CFI, f"the FDE has no row for {vaddr:#x}")
        return rows[i]

    def _decode(self, fde_offset: int) -> tuple[list[int], list[Row]] | Unresolved:
        try:
            fde = self._entry(fde_offset)
            length = int(fde.header.length)
            if length > MAX_FDE_BYTES:
                return Unresolved(Reason.NO_CFI, f"the FDE at {fde_offset:#x} is {length} bytes")
            decoded = fde.get_decoded()
            signal = b"S" in bytes(fde.cie.header.get("augmentation") or b"")
            rows = [_row(line, signal) for line in decoded.table]
        except Exception as e:  # pyelftools on bad bytes: any error, and asserts
            why = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            where = f"{self._section} offset {fde_offset:#x}"
            return Unresolved(Reason.NO_CFI, f"the FDE at {where}: {why}")
        if not rows:
            return Unresolved(Reason.NO_CFI, f"the FDE at {fde_offset:#x} has no rules")
        rows.sort(key=lambda r: r.start)
        return [r.start for r in rows], rows

    def _entry(self, offset: int) -> Any:
        from elftools.dwarf.callframe import FDE, CallFrameInfo
        from elftools.dwarf.structs import DWARFStructs

        if self._cfi is None:
            structs = DWARFStructs(
                little_endian=self._little,
                dwarf_format=32,
                address_size=8 if self._wide else 4,
            )
            stream = io.BytesIO(self._data)
            self._cfi = CallFrameInfo(
                stream,
                len(self._data),
                self._address,
                structs,
                for_eh_frame=self._section == ".eh_frame",
            )
        entry = self._cfi._parse_entry_at(offset)
        if not isinstance(entry, FDE):
            raise ValueError("not an FDE")
        return entry


def _row(line: dict[Any, Any], signal: bool) -> Row:
    cfa = line["cfa"]
    expression = tuple(int(b) for b in cfa.expr) if cfa.expr is not None else None
    rule = CfaRule(cfa.reg, int(cfa.offset or 0), expression)
    registers: dict[int, RegisterRule] = {}
    for key, value in line.items():
        if not isinstance(key, int):
            continue
        kind = _KINDS.get(value.type)
        if kind is None:
            continue  # ARCHITECTURAL: nothing portable to do with it
        arg = value.arg
        if kind in ("expression", "val_expression"):
            registers[key] = RegisterRule(kind, expression=tuple(int(b) for b in arg))
        elif kind == "register":
            registers[key] = RegisterRule(kind, register=int(arg))
        else:
            registers[key] = RegisterRule(kind, offset=int(arg or 0))
    return Row(int(line["pc"]), rule, registers, signal)


# What an unwinder is told at an address: the rules, an edge of the stack, or why none.
Rules = Row | ThreadRoot | Unresolved
