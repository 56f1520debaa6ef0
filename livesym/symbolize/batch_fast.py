"""The common rows of ``symbolize -e``, made in a loop bound once (``symbolize.batch``).

A 100,000-line batch of a file's addresses is mostly JSON rows of a ``0x`` address in
the segment the last one fell in: a bisect in the symbol table and one format each,
everything per symbol (names, demangling, JSON escaping) made once. The loop is in C
where the optional extension was built (livesym/_symrows.c says why), else in Python;
both stop at the first line they cannot make, and ``FileRows.row`` makes it the general
way. Tests hold the rows of both loops to the general way's, field for field.
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_right
from collections.abc import Callable
from typing import Protocol

from livesym.addr.convert import SegmentCursor
from livesym.elf.cfi import fde_source
from livesym.elf.demangle import MAX_DEMANGLED, SUSPECT_REFS
from livesym.elf.symtab import MAX_NAME_BYTES, TABLE_BITS, SymbolTable
from livesym.records import Reason
from livesym.symbolize.objects import LoadedObject, ObjectCache

try:  # the common rows in C, where the optional extension was built (pyproject.toml)
    from livesym import _symrows
except ImportError:
    _symrows = None  # type: ignore[assignment]

# The C string escaper behind json.dumps, without its per-call Python overhead:
# one call per distinct symbol name on the hot path.
jstr: Callable[[str], str] = json.encoder.encode_basestring_ascii
# Input lines from an index on, into output rows: the index where the general way is needed.
FastRows = Callable[[list[str], int, list[str]], int]


class _Rows(Protocol):
    """What the loops read of ``batch.FileRows``: its options, its symbols and the
    per-symbol parts of its rows."""

    as_json: bool
    offsets: bool
    native: bool
    cursor: SegmentCursor
    fragments: dict[int, str]
    line_cache: ObjectCache | None
    merged: bool
    module_json: str
    no_symbols: bool
    obj: LoadedObject
    static_problems: list[str]
    symbols: SymbolTable | None

    def fragment(self, i: int) -> str: ...

    def fast_key(self) -> tuple[object, ...]: ...


class FastLoops:
    """The fast loops of one ``FileRows``, bound to what they read (bound again when
    that changes: another segment, symbols merged in)."""

    def __init__(self, rows: _Rows) -> None:
        self.rows = rows
        self.unnamed: dict[int, tuple[str, str, str]] = {}  # by FDE offset
        self._tables: tuple[SymbolTable, _Arrays | None] | None = None

    def bind(self) -> tuple[tuple[object, ...], FastRows | None]:
        """``fast_rows`` with everything it reads bound once (the per-line cost of a
        100,000-line batch is about a microsecond: attribute look-ups and calls count)."""
        key = self.rows.fast_key()
        seg = self.rows.cursor.segment
        symbols = self.rows.symbols
        if not self._fast_possible() or seg is None or symbols is None:
            return key, None
        lo, hi = seg.p_vaddr, seg.p_vaddr + seg.p_filesz
        delta = seg.p_offset - seg.p_vaddr
        starts, ends, reach, enclosing = (
            symbols.starts,
            symbols.ends,
            symbols.reach,
            symbols.enclosing,
        )
        fragments, fragment = self.rows.fragments, self.rows.fragment
        # Once the other symbol sources were merged in (row() does that on the first
        # miss), a miss is an unnamed function bounded by its FDE, or no function at all:
        # FdeIndex.span, inlined.
        obj = self.rows.obj
        merged_in = obj.searched and not self.rows.no_symbols
        eh_frame = obj.eh_frame_alone() if merged_in else None
        if eh_frame is not None:
            fde_starts, fde_base, spans, span_of = eh_frame.span_table()
        unnamed, unnamed_parts = self.unnamed, self.unnamed_parts
        head, mid, nothing = self._row_texts()
        fde: _FdeTable = eh_frame.span_table() if eh_frame is not None else _NO_FDES
        native = self._native_loop((lo, hi, delta), symbols, fde, (head, mid, nothing))
        if native is not None:
            return key, native

        def fast_rows(lines: list[str], k: int, out: list[str]) -> int:
            """The common JSON rows (a ``0x`` vaddr in the file range of the last segment
            used) from ``lines[k]`` on, into ``out``: a bisect and one format each.
            Returns where the general way is needed (or the end)."""
            append = out.append
            n = len(lines)
            while k < n:
                text = lines[k]
                if text[:2] != "0x" or "_" in text:
                    return k
                try:
                    value = int(text, 16)  # tolerates the surrounding white space
                except ValueError:
                    return k
                if not lo <= value < hi:
                    return k
                index: int | None = bisect_right(starts, value) - 1
                if index is not None and (index < 0 or value >= ends[index]):
                    # SymbolTable.index_of, inlined: most misses end at reach[]
                    index = None if index < 0 or reach[index] <= value else enclosing(index, value)
                h = hex(value)
                off = h if delta == 0 else hex(value + delta)
                if index is not None:
                    frag = fragments.get(index) or fragment(index)
                    at = value - starts[index]
                    append(f'{head}{h}{mid}{h}", "elf_offset": "{off}", {frag}{at}}}')
                    k += 1
                    continue
                if eh_frame is None:
                    return k  # row() merges in other sources, or finds the FDE elsewhere
                i = bisect_right(fde_starts, value - fde_base) - 1
                found = (spans.get(i) or span_of(i)) if i >= 0 else None
                if found is None or not found[0] <= value < found[1]:
                    append(f'{head}{h}{mid}{h}", "elf_offset": "{off}", {nothing}{h}"}}')
                    k += 1
                    continue
                start, _, fde = found
                size, source, bounds = unnamed.get(fde) or unnamed_parts(found)
                append(
                    f'{head}{h}{mid}{h}", "elf_offset": "{off}", "symbol": null, "demangled": '
                    f'null, "symbol_vaddr": "{start:#x}", {size}"symbol_offset": {value - start}, '
                    f'{source}"detail": "no function symbol covers ELF vaddr {h}{bounds}'
                )
                k += 1
            return k

        return key, fast_rows

    def _row_texts(self) -> tuple[str, str, str]:
        """The fixed parts of the loop's rows: before the address, between it and the
        vaddr, and a row's fields where no function covers the address."""
        nothing = (
            '"symbol": null, "demangled": null, "symbol_vaddr": null, "symbol_size": null, '
            f'"symbol_offset": null, "reason": "{Reason.UNKNOWN_ADDRESS.value}", "detail": '
            '"no function symbol covers ELF vaddr '
        )
        return '{"address": "', f'", "module": {self.rows.module_json}, "elf_vaddr": "', nothing

    def _native_loop(
        self,
        segment: tuple[int, int, int],
        symbols: SymbolTable,
        fde: _FdeTable,
        texts: tuple[str, str, str],
    ) -> FastRows | None:
        """``fast_rows`` in C (livesym/_symrows.c), bound as the Python loop is; None
        where the extension was not built."""
        tables = self._native_tables(symbols)
        if tables is None or _symrows is None:
            return None
        native = _symrows.rows
        lo, hi, delta = segment
        c_starts, c_ends, c_reach = tables
        fragments, fragment = self.rows.fragments, self.rows.fragment
        head, mid, nothing = texts

        # Names the C side reads itself where no other source was merged in (the rows
        # then say nothing of where a symbol came from), under demangle.py's bounds.
        refs, strtabs, unsettled = symbols.name_columns()
        names = (refs, strtabs, unsettled, TABLE_BITS, MAX_NAME_BYTES, MAX_DEMANGLED, SUSPECT_REFS)

        def native_rows(lines: list[str], k: int, out: list[str]) -> int:
            """The same rows as ``fast_rows``, or fewer (the rest the general way)."""
            return native(lines, k, out, lo, hi, delta, c_starts, c_ends, c_reach,
                          fragments, fragment, *fde, _FDE_SOURCE, _UNNAMED,
                          head, mid, nothing, None if self.rows.merged else names)  # fmt: skip

        return native_rows

    def _native_tables(self, symbols: SymbolTable) -> _Arrays | None:
        """The symbol table's starts, ends and reach as 64-bit arrays for the C rows
        (None: no C rows, or a value that does not fit)."""
        if _symrows is None or not self.rows.native:
            return None
        if self._tables is None or self._tables[0] is not symbols:
            arrays: _Arrays | None
            try:
                arrays = (
                    array("Q", symbols.starts),
                    array("Q", symbols.ends),
                    array("Q", symbols.reach),
                )
            except OverflowError:
                arrays = None
            self._tables = (symbols, arrays)
        return self._tables[1]

    def unnamed_parts(self, found: tuple[int, int, int]) -> tuple[str, str, str]:
        """The per-function parts of an unnamed function's JSON row, made once: as
        ``_json_row`` writes it for ``unnamed_function(miss, bounds)``."""
        start, end, fde = found
        source = fde_source(fde)  # (FdeBounds(start, end, fde).source(), made once a function)
        parts = self.unnamed[fde] = (
            f'"symbol_size": {end - start}, ',
            f'"function_source": {jstr(source)}, "reason": "{Reason.UNNAMED_FUNCTION.value}", ',
            f'; the {source} bounds its function: [{start:#x}, {end:#x})"}}',
        )
        return parts

    def _fast_possible(self) -> bool:
        """Whether rows may take the fast loop: JSON of vaddrs, no --lines, no problems."""
        return (
            self.rows.as_json
            and not self.rows.offsets
            and self.rows.line_cache is None
            and not self.rows.static_problems
            and self.rows.symbols is not None
        )


def _no_span(i: int) -> tuple[int, int, int]:
    raise AssertionError("the C rows asked for an FDE where there is no .eh_frame")


# What the C rows read of a symbol table (starts, ends, reach) and of an .eh_frame.
_Arrays = tuple["array[int]", "array[int]", "array[int]"]
_FdeTable = tuple[
    "array[int] | None", int, dict[int, tuple[int, int, int]], Callable[[int], tuple[int, int, int]]
]
_NO_FDES: _FdeTable = (None, 0, {}, _no_span)
# An unnamed function's source is this and its FDE's offset (fde_source); where that
# ever stops being so, a quote leaves those rows to the Python loop (the C rows write
# only texts that need no escape).
_FDE_SOURCE = fde_source(0).removesuffix("0x0")
if fde_source(0x1234) != f"{_FDE_SOURCE}0x1234":
    _FDE_SOURCE = '"'
_UNNAMED = Reason.UNNAMED_FUNCTION.value
