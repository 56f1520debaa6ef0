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
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator

from livesym.addr.kinds import U64_MASK, ElfOffset, ElfVaddr, Vma, parse_address
from livesym.addr.segments import LoadSegment, segment_for_offset, segment_for_vaddr
from livesym.commands.text import printable
from livesym.elf.demangle import demangle_bytes
from livesym.elf.symtab import OWN_SOURCES
from livesym.errors import (
    EXIT_FAILURE,
    EXIT_OK,
    ElfFormatError,
    FileError,
    NotElfError,
    UsageError,
)
from livesym.symbolize.objects import LoadedObject, ObjectCache, open_object, with_extra_sources
from livesym.symbolize.reasons import Reason
from livesym.symbolize.sources import SymbolSearch

CHUNK = 1 << 16

# The C string escaper behind json.dumps, without its per-call Python overhead:
# one call per distinct symbol name on the hot path.
_jstr: Callable[[str], str] = json.encoder.encode_basestring_ascii

# Input lines -> output lines, and how many inputs were not addresses.
BatchFn = Callable[[list[str]], tuple[list[str], int]]
# One converted input: (elf_vaddr, elf_offset, problem, segment used).
_Converted = tuple[int | None, int | None, str | None, LoadSegment | None]
_UNKNOWN = Reason.UNKNOWN_ADDRESS.value


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
        lines, invalid = batch_fn(batch)
        total += len(lines)
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
    # The file's own tables, and its debug file or MiniDebugInfo only when it
    # has no .symtab: a file with full symbols costs no search at all.
    obj = _open_exe(path, search)
    image = obj.image
    assert image is not None
    symbols = obj.symbols
    segments = image.segments
    module_json = json.dumps(path)
    static_problems = list(image.problems) + list(symbols.problems if symbols else ())
    no_symbols = symbols is None or len(symbols) == 0
    index_of = symbols.index_of if symbols is not None else None
    enclosing = symbols.enclosing if symbols is not None else (lambda _i, _v: None)
    fragments: dict[int, str] = {}
    texts: dict[int, str] = {}
    line_cache = ObjectCache(search=search) if with_lines else None
    # Whether symbols came from anywhere but the file's own tables (then rows say so).
    merged = not set(symbols.sources if symbols else ()) <= OWN_SOURCES

    def complete() -> bool:
        """On the first miss: merge in the debug file's or MiniDebugInfo's symbols
        (searched for once). True when that changed the table."""
        nonlocal obj, symbols, static_problems, no_symbols, index_of, enclosing, merged
        if obj.searched:
            return False
        before = obj.symbols
        obj = with_extra_sources(obj, search)
        if obj.symbols is before or obj.symbols is None:
            return False
        symbols = obj.symbols
        static_problems = list(image.problems) + list(symbols.problems)
        no_symbols = len(symbols) == 0
        index_of, enclosing = symbols.index_of, symbols.enclosing
        merged = not set(symbols.sources) <= OWN_SOURCES
        fragments.clear()
        texts.clear()
        return True

    def origin(i: int) -> str:
        """JSON fields naming a symbol's source when it is not the file's own tables."""
        assert symbols is not None
        if not merged:
            return ""  # the common case: no other source merged in
        source = symbols.source(i)
        if source in OWN_SOURCES:
            return ""
        file = obj.source_path(source)
        where = f', "symbol_file": {_jstr(file)}' if file else ""
        return f'"symbol_source": "{source}"{where}, '

    def fragment(i: int) -> str:
        """The per-symbol part of a JSON row, escaped once."""
        assert symbols is not None
        frag = fragments.get(i)
        if frag is None:
            raw = symbols.raw_name(i)
            name = raw.decode("utf-8", "backslashreplace")
            frag = fragments[i] = (
                f'"symbol": {_jstr(name)}, "demangled": {_jstr(demangle_bytes(raw, name))}, '
                f'"symbol_vaddr": "{symbols.start(i):#x}", '
                f'"symbol_size": {symbols.end(i) - symbols.start(i)}, '
                f"{origin(i)}"
                f'"symbol_offset": '
            )
        return frag

    def line_fields(vaddr: int | None, index: int | None) -> str:
        """``, "file": …, "line": …`` from DWARF, for --lines (after symbol_offset)."""
        found = None
        if line_cache is not None and vaddr is not None and index is not None:
            found = line_cache.source_line(obj, vaddr)
        if found is None:
            return ', "file": null, "line": null'
        return f', "file": {_jstr(found.file)}, "line": {found.line}'

    def text_name(i: int) -> str:
        assert symbols is not None
        name = texts.get(i)
        if name is None:
            name = texts[i] = symbols.demangled(i)
        return name

    def convert(value: int, seg: LoadSegment | None) -> _Converted:
        """(elf_vaddr, elf_offset, problem, segment) for one input value."""
        if offsets:
            if seg is None or not seg.holds_offset(value):
                seg = segment_for_offset(segments, ElfOffset(value))
            if seg is None:
                return None, value, f"file offset {value:#x} is in no PT_LOAD segment", None
            return value - seg.p_offset + seg.p_vaddr, value, None, seg
        if seg is None or not seg.holds_vaddr(value):
            seg = segment_for_vaddr(segments, ElfVaddr(value))
        if seg is None:
            return value, None, f"ELF vaddr {value:#x} is in no PT_LOAD segment", None
        if value - seg.p_vaddr >= seg.p_filesz:
            problem = (
                f"ELF vaddr {value:#x} is in the zero-filled tail of PT_LOAD[{seg.index}] "
                "(past p_filesz): it has no file offset"
            )
            return value, None, problem, seg
        return value, value - seg.p_vaddr + seg.p_offset, None, seg

    def row(value: int, conv: _Converted) -> str:
        vaddr, offset, problem, _seg = conv
        index = index_of(vaddr) if index_of is not None and vaddr is not None else None
        if index is None and vaddr is not None and complete():
            index = index_of(vaddr) if index_of is not None else None
        if not as_json:
            if index is not None:
                assert symbols is not None and vaddr is not None
                off = vaddr - symbols.start(index)
                at = ""
                if line_cache is not None:
                    found = line_cache.source_line(obj, vaddr)
                    at = f" at {found.text()}" if found else ""
                return f"{value:#x}  {text_name(index)}+{off:#x}{at}  ({path})"
            reason, _detail = _miss(vaddr, no_symbols, problem)
            where = vaddr if vaddr is not None else value
            return f"{value:#x}  [{reason.value}] {path}+{where:#x}"
        head = (
            f'{{"address": "{value:#x}", "module": {module_json}, '
            f'"elf_vaddr": {_jhex(vaddr)}, "elf_offset": {_jhex(offset)}, '
        )
        tail = line_fields(vaddr, index) if with_lines else ""
        if index is not None:
            assert symbols is not None and vaddr is not None
            body = f"{fragment(index)}{vaddr - symbols.start(index)}{tail}"
        else:
            reason, detail = _miss(vaddr, no_symbols, problem)
            body = (
                '"symbol": null, "demangled": null, "symbol_vaddr": null, '
                f'"symbol_size": null, "symbol_offset": null{tail}, '
                f'"reason": "{reason.value}", "detail": {json.dumps(detail)}'
            )
        # Same order as an explanation record: the conversion's problem, then the file's.
        problems = [] if vaddr is None else ([problem] if problem else []) + static_problems
        return head + body + (f', "problems": {json.dumps(problems)}}}' if problems else "}")

    def batch(lines: list[str]) -> tuple[list[str], int]:
        out: list[str] = []
        bad = 0
        seg: LoadSegment | None = None
        starts = symbols.starts if symbols is not None else []
        ends = symbols.ends if symbols is not None else []
        # The common case inline: a 0x address inside the file range of the last
        # segment used, with or without a symbol -- a bisect and one format.
        fast = (
            as_json
            and not offsets
            and not with_lines
            and not static_problems
            and index_of is not None
        )
        head = '{"address": "'
        mid = f'", "module": {module_json}, "elf_vaddr": "'
        miss = (
            '", "symbol": null, "demangled": null, "symbol_vaddr": null, "symbol_size": null, '
            f'"symbol_offset": null, "reason": "{_UNKNOWN}", '
            '"detail": "no function symbol covers ELF vaddr '
        )
        for text in lines:
            if text[:2] == "0x" and "_" not in text:
                try:
                    value = int(text, 16)  # tolerates the surrounding white space
                except ValueError:
                    value = -1
            else:
                text = text.strip()
                if not text:
                    continue
                try:
                    value = parse_address(text)
                except ValueError:
                    value = -1
            if not 0 <= value <= U64_MASK:
                out.append(_invalid(text.strip(), as_json))
                bad += 1
                continue
            if fast and seg is not None and seg.p_vaddr <= value < seg.p_vaddr + seg.p_filesz:
                h = hex(value)
                offset = value - seg.p_vaddr + seg.p_offset
                off = h if offset == value else hex(offset)
                # SymbolTable.index_of inlined: one bisect, then the nesting walk on a miss.
                index: int | None = bisect_right(starts, value) - 1
                if index is not None and (index < 0 or value >= ends[index]):
                    index = enclosing(index, value)
                if index is not None:
                    frag = fragments.get(index) or fragment(index)
                    out.append(
                        f'{head}{h}{mid}{h}", "elf_offset": "{off}", '
                        f"{frag}{value - starts[index]}}}"
                    )
                    continue
                if obj.searched:
                    out.append(f'{head}{h}{mid}{h}", "elf_offset": "{off}{miss}{h}"}}')
                    continue
                # The first miss: row() merges in the debug file's or MiniDebugInfo's
                # symbols, and the rest of the batch uses the merged table.
                out.append(row(value, convert(value, seg)))
                fast = not static_problems and index_of is not None
                starts = symbols.starts if symbols is not None else []
                ends = symbols.ends if symbols is not None else []
                continue
            conv = convert(value, seg)
            seg = conv[3] or seg
            out.append(row(value, conv))
        return out, bad

    return batch


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


def _miss(vaddr: int | None, no_symbols: bool, problem: str | None) -> tuple[Reason, str]:
    if vaddr is None:
        return Reason.NO_SEGMENT, problem or ""
    if no_symbols:
        return Reason.NO_SYMBOLS, "the object has no function symbols"
    return Reason.UNKNOWN_ADDRESS, f"no function symbol covers ELF vaddr {vaddr:#x}"


def _jhex(value: int | None) -> str:
    return "null" if value is None else f'"{value:#x}"'


def _process_lines(
    pid: int, debug_dirs: tuple[str, ...], *, as_json: bool, with_lines: bool = False
) -> BatchFn:
    from livesym.symbolize.explain import to_json, with_line
    from livesym.symbolize.process import ProcessSymbolizer
    from livesym.target.process import TargetProcess

    symbolizer = ProcessSymbolizer(TargetProcess(pid, debug_dirs=debug_dirs))

    def batch(lines: list[str]) -> tuple[list[str], int]:
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
        return out, bad

    return batch
