"""Addresses of one ELF file to rows, in batch: what ``livesym symbolize -e FILE`` prints.

Each input (a line: an ELF virtual address, or a file offset with ``offsets``) is
converted by its segment (``addr.convert``), looked up in the file's symbol table, and
where no symbol covers it, bounded by its FDE as an unnamed function; the fields and
values are those of the explanation records ``livesym addr`` prints
(``symbolize.explain``), as JSON or text. The common rows take a loop bound once
(``batch_fast``); the rest take ``FileRows.row``. A first miss merges in the symbols of
the file's debug file or MiniDebugInfo (searched for once).
"""

from __future__ import annotations

import json
import os

from livesym.addr.convert import SegmentCursor
from livesym.addr.kinds import U64_MASK, parse_address
from livesym.elf.cfi import FdeBounds
from livesym.elf.demangle import demangle_bytes
from livesym.elf.symtab import OWN_SOURCES
from livesym.records import Reason, Unresolved, reason_words
from livesym.symbolize.batch_fast import FastLoops, jstr
from livesym.symbolize.explain import why_unnamed
from livesym.symbolize.lines import SourceLine
from livesym.symbolize.objects import LoadedObject, ObjectCache, open_object, with_extra_sources
from livesym.symbolize.sources import SymbolSearch


class FileRows:
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
        obj: LoadedObject | None = None,
    ) -> None:
        # The file's own tables, and its debug file or MiniDebugInfo only when it
        # has no .symtab: a file with full symbols costs no search at all.
        self.path = path
        self.search = search
        self.offsets = offsets
        self.as_json = as_json
        self.obj = obj if obj is not None else open_object(path, search)
        image = self.obj.image
        assert image is not None
        self.image = image
        self.cursor = SegmentCursor(image.segments)
        self.module_json = json.dumps(path)
        self.line_cache = ObjectCache(search=search) if with_lines else None
        self.fragments: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.native = native  # the C rows where they were built (tests compare both)
        self.loops = FastLoops(self)
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
        where = f', "symbol_file": {jstr(file)}' if file else ""
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
                f'"symbol": {jstr(name)}, "demangled": {jstr(demangle_bytes(raw, name))}, '
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
        return f', "file": {jstr(found.file)}, "line": {found.line}'

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
        """Why an input has no symbol (its conversion failed, or ``explain.why_unnamed``),
        and its function's FDE bounds where known."""
        if vaddr is None:
            return problem or Unresolved(Reason.NO_SEGMENT, ""), None
        return why_unnamed(self.obj, vaddr)

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
        key, fast = self.loops.bind()
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
            value = address_of(text)
            if value is None:
                continue  # a blank line
            made += 1
            if value < 0:
                out.append(invalid_row(text.strip(), self.as_json))
                bad += 1
                continue
            out.append(self.row(value))
            if key != self.fast_key():  # another segment, or symbols merged in
                key, fast = self.loops.bind()
        return out, made, bad

    def fast_key(self) -> tuple[object, ...]:
        """What ``fast_rows`` binds: when it changes, the loop is bound again."""
        return (self.cursor.segment, self.symbols, self.obj.searched)


def address_of(text: str) -> int | None:
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


def invalid_row(text: str, as_json: bool) -> str:
    """The row of an input that is not an address, saying why."""
    try:
        parse_address(text)
        why = f"not an address: {text!r} (use hex with 0x, or decimal)"
    except ValueError as e:
        why = str(e)
    if as_json:
        return json.dumps({"address": text, "error": why})
    return f"{text}  [error] {why}"


def _jhex(value: int | None) -> str:
    return "null" if value is None else f'"{value:#x}"'
