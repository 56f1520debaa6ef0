"""``symbolize -e FILE --json`` makes the common rows of a batch in one bound loop
(``_FileRows._fast_loop``). Its rows must be the general way's rows, byte for byte,
wherever the addresses fall: inside functions, in gaps that an FDE bounds or nothing
covers, in a segment whose file offset differs from its vaddr, in zero-filled
memory, outside every segment."""

from __future__ import annotations

import json
import random

import pytest

from livesym.commands.symbolize import _FileRows
from livesym.symbolize.objects import ObjectCache
from livesym.symbolize.sources import SymbolSearch

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def _rows(path: str) -> _FileRows:
    return _FileRows(path, SymbolSearch.of(()), offsets=False, as_json=True, with_lines=False)


def _addresses(path: str, count: int, seed: int) -> list[int]:
    """Uniform over every segment's memory and a margin past it, plus each symbol's
    first and last byte and the byte after it (often a gap)."""
    obj = ObjectCache().load(path)
    assert obj.image is not None and obj.symbols is not None
    top = max(s.p_vaddr + s.p_memsz for s in obj.image.segments)
    rng = random.Random(seed)
    picks = [rng.randrange(0, top + 0x10000) for _ in range(count)]
    st = obj.symbols
    for i in range(0, len(st), max(1, len(st) // 300)):
        picks += [st.start(i), st.end(i) - 1, st.end(i)]
    rng.shuffle(picks)
    return picks


@pytest.mark.parametrize("path", [LIBC, LIBSTDCXX, "/usr/bin/ls", "/usr/bin/python3"])
def test_the_columns_write_the_general_rows_byte_for_byte(path):
    # GIVEN addresses everywhere in a real file, as one chunk of 0x lines
    addresses = _addresses(path, 4000, seed=len(path))
    lines = [hex(a) for a in addresses] + [""]  # as stdin gives it: a newline ends the chunk
    # WHEN the chunk is answered (the loop), and each address alone (the general way)
    batch = _rows(path)
    rows, bad = batch.batch(lines)
    general = _rows(path)
    expected = [general.row(a) for a in addresses]
    # THEN the rows are the same, in the input's order
    assert bad == 0
    assert len(rows) == len(expected)
    for a, got, want in zip(addresses, rows, expected, strict=True):
        assert got == want, hex(a)
    # (and the addresses reached every kind of row the file has)
    kinds = {_kind(json.loads(r)) for r in rows}
    assert {"function", "no function", "outside the segments"} <= kinds
    if path != LIBC:  # stripped: gaps between exported functions that FDEs bound
        assert "unnamed function" in kinds


def _kind(row: dict[str, object]) -> str:
    if row["elf_offset"] is None:
        return "outside the segments"
    if row["symbol"] is not None:
        return "function"
    return "unnamed function" if row["reason"] == "unnamed_function" else "no function"


def test_a_chunk_with_other_input_is_answered_the_general_way_in_order():
    # GIVEN a chunk mixing plain addresses, decimals, blanks and a bad line
    lines = ["0x10", "", "4096", "  0x29dc0  ", "nonsense", "0x29dc0", ""]
    # WHEN it is answered
    rows, bad = _rows(LIBC).batch(lines)
    general = _rows(LIBC)
    # THEN each address has its general row, the bad line its error, the blanks nothing
    assert bad == 1
    assert rows[0] == general.row(0x10)
    assert rows[1] == general.row(4096)
    assert rows[2] == general.row(0x29DC0) == rows[4]
    assert '"error"' in rows[3] and "nonsense" in rows[3]
    assert len(rows) == 5
