"""``livesym symbolize``: addresses to function names, in batch.

Input comes from the arguments or from stdin, one address per line. Stdin is
read in chunks and each chunk's answers are flushed before the next read, so
the command works both on a 100,000-line file and as a coprocess that writes
one address and waits for its answer (as llvm-symbolizer is used).

With ``-e`` the per-address work is a segment check, a binary search and a
string format; everything per symbol (names, demangling, JSON escaping) is
done once and cached. The fields and values are the same as the explanation
records ``livesym addr`` prints (tests hold the two paths to that).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator

from livesym.addr.convert import SegmentCursor
from livesym.addr.kinds import U64_MASK, Vma, parse_address
from livesym.elf.cfi import FdeBounds, fde_source, unnamed_function
from livesym.elf.demangle import MAX_DEMANGLED, SUSPECT_REFS, demangle_bytes
from livesym.elf.symtab import MAX_NAME_BYTES, OWN_SOURCES, TABLE_BITS, SymbolTable
from livesym.errors import (
    EXIT_FAILURE,
    EXIT_OK,
    ElfFormatError,
    FileError,
    NotElfError,
    UsageError,
)
from livesym.printable import printable
from livesym.records import Reason, Unresolved, reason_words
from livesym.symbolize.lines import SourceLine
from livesym.symbolize.objects import LoadedObject, ObjectCache, open_object, with_extra_sources
from livesym.symbolize.sources import SymbolSearch

try:  # the common rows in C, where the optional extension was built (pyproject.toml)
    from livesym import _symrows
except ImportError:
    _symrows = None  # type: ignore[assignment]

CHUNK = 1 << 16

# The C string escaper behind json.dumps, without its per-call Python overhead:
# one call per distinct symbol name on the hot path.
_jstr: Callable[[str], str] = json.encoder.encode_basestring_ascii

# Input lines -> output texts (a row each, or several rows joined by newlines), how
# many rows they hold, and how many inputs were not addresses.
BatchFn = Callable[[list[str]], tuple[list[str], int, int]]
# Input lines from an index on, into output rows: the index where the general way is needed.
FastRows = Callable[[list[str], int, list[str]], int]


def run(args: argparse.Namespace) -> int:
    search = SymbolSearch.from_option(args.debug_dir)
    debug_dirs = search.debug_dirs
    if args.exe is not None:
        batch_fn = _file_lines(
            args.exe, search, offsets=args.offset, as_json=args.json, with_lines=args.lines
        )
    else:
        if args.offset:
            raise UsageError("--offset goes with -e FILE (offsets are positions in one file)")
        batch_fn = _process_lines(args.pid, debug_dirs, as_json=args.json, with_lines=args.lines)
    batches: Iterable[list[str]] = [args.addresses] if args.addresses else _stdin_batches()
    total = bad = 0
    sys.stdout.flush()
    out = sys.stdout.buffer  # rows are ASCII (JSON escapes the rest): skip the text layer
    for batch in batches:
        lines, rows, invalid = batch_fn(batch)
        total += rows
        bad += invalid
        if lines:
            if not args.json:
                # Names, paths and the inputs themselves are data: no escape sequences.
                lines = [printable(line) for line in lines]
            lines.append("")
            out.write("\n".join(lines).encode("utf-8", "backslashreplace"))
            out.flush()
    if bad:
        print(f"livesym: {bad} of {total} inputs were not addresses", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _stdin_batches() -> Iterator[list[str]]:
    """Complete lines from stdin, one list per read (a read never waits for a full buffer)."""
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        pending += chunk
        cut = pending.rfind(b"\n") + 1
        if cut:
            yield pending[:cut].decode("utf-8", "replace").split("\n")
            pending = pending[cut:]
    if pending:
        yield [pending.decode("utf-8", "replace")]


def _invalid(text: str, as_json: bool) -> str:
    try:
        parse_address(text)
        why = f"not an address: {text!r} (use hex with 0x, or decimal)"
    except ValueError as e:
        why = str(e)
    if as_json:
        return json.dumps({"address": text, "error": why})
    return f"{text}  [error] {why}"


def _file_lines(
    path: str, search: SymbolSearch, *, offsets: bool, as_json: bool, with_lines: bool = False
) -> BatchFn:
    return _FileRows(path, search, offsets=offsets, as_json=as_json, with_lines=with_lines).batch


class _FileRows:
    """``symbolize -e FILE``: input lines to output rows, with everything per symbol
    (names, demangling, JSON escaping) made once, and the common JSON row (a ``0x``
    address inside the last segment used) one bisect and one format."""

    def __init__(
        self,
        path: str,
        search: SymbolSearch,
        *,
        offsets: bool,
        as_json: bool,
        with_lines: bool,
        native: bool = True,
    ) -> None:
        # The file's own tables, and its debug file or MiniDebugInfo only when it
        # has no .symtab: a file with full symbols costs no search at all.
        self.path = path
        self.search = search
        self.offsets = offsets
        self.as_json = as_json
        self.obj = _open_exe(path, search)
        image = self.obj.image
        assert image is not None
        self.image = image
        self.cursor = SegmentCursor(image.segments)
        self.module_json = json.dumps(path)
        self.line_cache = ObjectCache(search=search) if with_lines else None
        self.fragments: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.unnamed: dict[int, tuple[str, str, str]] = {}  # by FDE offset
        self.native = native  # the C rows where they were built (tests compare both)
        self._tables: tuple[SymbolTable, _Arrays | None] | None = None
        self._take_symbols()

    def _take_symbols(self) -> None:
        symbols = self.symbols = self.obj.symbols
        self.static_problems = list(self.image.problems) + list(symbols.problems if symbols else ())
        self.no_symbols = symbols is None or len(symbols) == 0
        # Whether symbols came from anywhere but the file's own tables (rows then say so).
        self.merged = not set(symbols.sources if symbols else ()) <= OWN_SOURCES
        self.fragments.clear()
        self.texts.clear()

    def complete(self) -> bool:
        """On the first miss: merge in the debug file's or MiniDebugInfo's symbols
        (searched for once). True when that changed the table."""
        if self.obj.searched:
            return False
        before = self.obj.symbols
        self.obj = with_extra_sources(self.obj, self.search)
        if self.obj.symbols is before or self.obj.symbols is None:
            return False
        self._take_symbols()
        return True

    def index_of(self, vaddr: int | None) -> int | None:
        if vaddr is None or self.symbols is None:
            return None
        return self.symbols.index_of(vaddr)

    def origin(self, i: int) -> str:
        """JSON fields naming a symbol's source when it is not the file's own tables."""
        assert self.symbols is not None
        if not self.merged:
            return ""  # the common case: no other source merged in
        source = self.symbols.source(i)
        if source in OWN_SOURCES:
            return ""
        file = self.obj.source_path(source)
        where = f', "symbol_file": {_jstr(file)}' if file else ""
        return f'"symbol_source": "{source}"{where}, '

    def fragment(self, i: int) -> str:
        """The per-symbol part of a JSON row, escaped once."""
        frag = self.fragments.get(i)
        if frag is None:
            symbols = self.symbols
            assert symbols is not None
            raw = symbols.raw_name(i)
            name = raw.decode("utf-8", "backslashreplace")
            start = symbols.starts[i]
            frag = self.fragments[i] = (
                f'"symbol": {_jstr(name)}, "demangled": {_jstr(demangle_bytes(raw, name))}, '
                f'"symbol_vaddr": "{start:#x}", "symbol_size": {symbols.ends[i] - start}, '
                f"{self.origin(i) if self.merged else ''}"
                f'"symbol_offset": '
            )
        return frag

    def source_line(self, vaddr: int) -> SourceLine | None:
        return self.line_cache.source_line(self.obj, vaddr) if self.line_cache else None

    def line_fields(self, vaddr: int | None, index: int | None) -> str:
        """``, "file": …, "line": …`` from DWARF, for --lines (after symbol_offset)."""
        found = self.source_line(vaddr) if vaddr is not None and index is not None else None
        if found is None:
            return ', "file": null, "line": null'
        return f', "file": {_jstr(found.file)}, "line": {found.line}'

    def text_name(self, i: int) -> str:
        name = self.texts.get(i)
        if name is None:
            assert self.symbols is not None
            name = self.texts[i] = self.symbols.demangled(i)
        return name

    def convert(self, value: int) -> tuple[int | None, int | None, Unresolved | None]:
        """(elf_vaddr, elf_offset, problem) of one input (livesym.addr.convert's rules)."""
        if self.offsets:
            return self.cursor.from_offset(value)
        return self.cursor.from_vaddr(value)

    def row(self, value: int) -> str:
        """One input's row, the general way."""
        vaddr, offset, problem = self.convert(value)
        index = self.index_of(vaddr)
        if index is None and vaddr is not None and self.complete():
            index = self.index_of(vaddr)
        if self.as_json:
            return self._json_row(value, vaddr, offset, problem, index)
        if index is not None:
            assert self.symbols is not None and vaddr is not None
            off = vaddr - self.symbols.start(index)
            found = self.source_line(vaddr)
            at = f" at {found.text()}" if found else ""
            return f"{value:#x}  {self.text_name(index)}+{off:#x}{at}  ({self.path})"
        miss, fn = self.miss(vaddr, problem)
        if fn is not None and vaddr is not None:
            name = f"{os.path.basename(self.path)} @ {fn.start:#x}"
            return f"{value:#x}  {name}+{vaddr - fn.start:#x}  ({self.path}; {fn.source()})"
        where = vaddr if vaddr is not None else value
        return f"{value:#x}  [{reason_words(miss.reason)}] {self.path}+{where:#x}"

    def miss(
        self, vaddr: int | None, problem: Unresolved | None
    ) -> tuple[Unresolved, FdeBounds | None]:
        """Why an input has no symbol, and its function's FDE bounds where known."""
        miss = _miss(vaddr, self.no_symbols, problem)
        if vaddr is None:
            return miss, None
        bounds = self.obj.function_bounds(vaddr)
        if not isinstance(bounds, FdeBounds):
            return miss, None
        return unnamed_function(miss, bounds), bounds

    def _json_row(
        self,
        value: int,
        vaddr: int | None,
        offset: int | None,
        problem: Unresolved | None,
        index: int | None,
    ) -> str:
        head = (
            f'{{"address": "{value:#x}", "module": {self.module_json}, '
            f'"elf_vaddr": {_jhex(vaddr)}, "elf_offset": {_jhex(offset)}, '
        )
        tail = self.line_fields(vaddr, index) if self.line_cache else ""
        if index is not None:
            assert self.symbols is not None and vaddr is not None
            body = f"{self.fragment(index)}{vaddr - self.symbols.start(index)}{tail}"
        else:
            miss, fn = self.miss(vaddr, problem)
            if fn is not None and vaddr is not None:  # an unnamed function, bounded
                function = (
                    f'"symbol_vaddr": "{fn.start:#x}", "symbol_size": {fn.end - fn.start}, '
                    f'"symbol_offset": {vaddr - fn.start}, '
                    f'"function_source": {json.dumps(fn.source())}'
                )
            else:
                function = '"symbol_vaddr": null, "symbol_size": null, "symbol_offset": null'
            body = (
                f'"symbol": null, "demangled": null, {function}{tail}, '
                f'"reason": "{miss.reason.value}", "detail": {json.dumps(miss.detail)}'
            )
        # Same order as an explanation record: the conversion's problem, then the file's.
        problems = [] if vaddr is None else ([problem.detail] if problem else [])
        problems += [] if vaddr is None else self.static_problems
        return head + body + (f', "problems": {json.dumps(problems)}}}' if problems else "}")

    def batch(self, lines: list[str]) -> tuple[list[str], int, int]:
        out: list[str] = []
        made = bad = 0
        key, fast = self._fast_loop()
        k, n = 0, len(lines)
        while k < n:
            if fast is not None:
                start = k
                k = fast(lines, k, out)  # the common rows, up to the first it cannot make
                made += k - start  # (a row a line; the C rows come as one text)
                if k >= n:
                    break
            text = lines[k]
            k += 1
            value = _address_of(text)
            if value is None:
                continue  # a blank line
            made += 1
            if value < 0:
                out.append(_invalid(text.strip(), self.as_json))
                bad += 1
                continue
            out.append(self.row(value))
            if key != self._fast_key():  # another segment, or symbols merged in
                key, fast = self._fast_loop()
        return out, made, bad

    def _fast_key(self) -> tuple[object, ...]:
        """What ``fast_rows`` binds: when it changes, the loop is bound again."""
        return (self.cursor.segment, self.symbols, self.obj.searched)

    def _fast_loop(self) -> tuple[tuple[object, ...], FastRows | None]:
        """``fast_rows`` with everything it reads bound once (the per-line cost of a
        100,000-line batch is about a microsecond: attribute look-ups and calls count)."""
        key = self._fast_key()
        seg = self.cursor.segment
        symbols = self.symbols
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
        fragments, fragment = self.fragments, self.fragment
        # Once the other symbol sources were merged in (row() does that on the first
        # miss), a miss is an unnamed function bounded by its FDE, or no function at all:
        # FdeIndex.span, inlined.
        eh_frame = self.obj.eh_frame_alone() if self.obj.searched and not self.no_symbols else None
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
        return '{"address": "', f'", "module": {self.module_json}, "elf_vaddr": "', nothing

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
        fragments, fragment = self.fragments, self.fragment
        head, mid, nothing = texts

        # Names the C side reads itself where no other source was merged in (the rows
        # then say nothing of where a symbol came from), under demangle.py's bounds.
        refs, strtabs, unsettled = symbols.name_columns()
        names = (refs, strtabs, unsettled, TABLE_BITS, MAX_NAME_BYTES, MAX_DEMANGLED, SUSPECT_REFS)

        def native_rows(lines: list[str], k: int, out: list[str]) -> int:
            """The same rows as ``fast_rows``, or fewer (the rest the general way)."""
            return native(lines, k, out, lo, hi, delta, c_starts, c_ends, c_reach,
                          fragments, fragment, *fde, _FDE_SOURCE, _UNNAMED,
                          head, mid, nothing, None if self.merged else names)  # fmt: skip

        return native_rows

    def _native_tables(self, symbols: SymbolTable) -> _Arrays | None:
        """The symbol table's starts, ends and reach as 64-bit arrays for the C rows
        (None: no C rows, or a value that does not fit)."""
        if _symrows is None or not self.native:
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
            f'"function_source": {_jstr(source)}, "reason": "{Reason.UNNAMED_FUNCTION.value}", ',
            f'; the {source} bounds its function: [{start:#x}, {end:#x})"}}',
        )
        return parts

    def _fast_possible(self) -> bool:
        """Whether rows may take ``fast_row``: JSON of vaddrs, no --lines, no problems."""
        return (
            self.as_json
            and not self.offsets
            and self.line_cache is None
            and not self.static_problems
            and self.symbols is not None
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


def _address_of(text: str) -> int | None:
    """An input line's address; None for a blank line, -1 for one that is not an
    address (the fast case first: ``0x`` and hex digits)."""
    if text[:2] == "0x" and "_" not in text:
        try:
            value = int(text, 16)  # tolerates the surrounding white space
        except ValueError:
            value = -1
    else:
        text = text.strip()
        if not text:
            return None
        try:
            value = parse_address(text)
        except ValueError:
            value = -1
    return value if 0 <= value <= U64_MASK else -1


def _open_exe(path: str, search: SymbolSearch) -> LoadedObject:
    """The ``-e`` file. The ELF reader says what is wrong with a file; what to do
    depends on how the file was named, so the remedy is added here."""
    try:
        return open_object(path, search)
    except NotElfError as e:
        raise NotElfError(
            f"{e}; give -e an ELF file: an executable, a shared library or a debug file"
        ) from None
    except ElfFormatError as e:
        raise ElfFormatError(
            f"{e}; the file may be truncated or corrupt: copy it again, or rebuild it"
        ) from None
    except FileError as e:
        if os.path.isfile(path):
            raise  # permissions, or replaced while read: the message says what to do
        raise FileError(f"{e}; check the path given to -e (an ELF file)") from None


def _miss(vaddr: int | None, no_symbols: bool, problem: Unresolved | None) -> Unresolved:
    """Why an input has no symbol: its conversion failed, or no symbol covers it."""
    if vaddr is None:
        return problem or Unresolved(Reason.NO_SEGMENT, "")
    if no_symbols:
        return Unresolved(Reason.NO_SYMBOLS, "the object has no function symbols")
    return Unresolved(Reason.UNKNOWN_ADDRESS, f"no function symbol covers ELF vaddr {vaddr:#x}")


def _jhex(value: int | None) -> str:
    return "null" if value is None else f'"{value:#x}"'


def _process_lines(
    pid: int, debug_dirs: tuple[str, ...], *, as_json: bool, with_lines: bool = False
) -> BatchFn:
    from livesym.symbolize.explain import to_json, with_line
    from livesym.symbolize.process import ProcessSymbolizer
    from livesym.target.process import TargetProcess

    symbolizer = ProcessSymbolizer(TargetProcess(pid, debug_dirs=debug_dirs))

    def batch(lines: list[str]) -> tuple[list[str], int, int]:
        out: list[str] = []
        bad = 0
        for raw in lines:
            text = raw.strip()
            if not text:
                continue
            try:
                value = parse_address(text)
            except ValueError:
                out.append(_invalid(text, as_json))
                bad += 1
                continue
            expl = symbolizer.explain(Vma(value))
            if with_lines:
                expl = with_line(expl, symbolizer.source_line(expl))
            if as_json:
                out.append(json.dumps(to_json(expl, lines=with_lines)))
            else:
                where = f" at {expl.source_line.text()}" if expl.source_line else ""
                out.append(f"{value:#x}  {expl.short()}{where}")
        return out, len(out), bad

    return batch
