"""``livesym symbolize``: addresses to function names, in batch.

Input comes from the arguments or from stdin, one address per line. Stdin is
read in chunks and each chunk's answers are flushed before the next read, so
the command works both on a 100,000-line file and as a coprocess that writes
one address and waits for its answer (as llvm-symbolizer is used).

With ``-e`` the rows are ``symbolize.batch.FileRows``'s (a segment check, a binary
search and a string format per address; everything per symbol made once); with
``--pid`` each address is explained against the process's maps
(``symbolize.process``). The fields and values are those of the explanation records
``livesym addr`` prints (tests hold the paths to that).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator

from livesym.addr.kinds import Vma, parse_address
from livesym.errors import (
    EXIT_FAILURE,
    EXIT_OK,
    ElfFormatError,
    FileError,
    NotElfError,
    UsageError,
)
from livesym.printable import printable
from livesym.symbolize.batch import FileRows, invalid_row
from livesym.symbolize.objects import LoadedObject, open_object
from livesym.symbolize.sources import SymbolSearch

CHUNK = 1 << 16

# Input lines -> output texts (a row each, or several rows joined by newlines), how
# many rows they hold, and how many inputs were not addresses.
BatchFn = Callable[[list[str]], tuple[list[str], int, int]]


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


def _file_lines(
    path: str, search: SymbolSearch, *, offsets: bool, as_json: bool, with_lines: bool = False
) -> BatchFn:
    rows = FileRows(path, search, offsets=offsets, as_json=as_json, with_lines=with_lines,
                    obj=_open_exe(path, search))  # fmt: skip
    return rows.batch


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
                out.append(invalid_row(text, as_json))
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
