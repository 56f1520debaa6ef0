"""``symbolize -e FILE --json`` makes the common rows of a batch in one bound loop
(``FastLoops.bind``), in C where the optional extension was built
(livesym/_symrows.c) and in Python where not. Both loops' rows must be the general
way's rows, byte for byte, wherever the addresses fall: inside functions, in gaps
that an FDE bounds or nothing covers, in a segment whose file offset differs from its
vaddr, in zero-filled memory, outside every segment."""

from __future__ import annotations

import json
import random
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livesym.elf.image import load_image
from livesym.elf.symtab import load_symbols
from livesym.symbolize import batch_fast
from livesym.symbolize.batch import FileRows
from livesym.symbolize.objects import ObjectCache
from livesym.symbolize.sources import SymbolSearch

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def _rows(path: str, native: bool = False) -> FileRows:
    if native and batch_fast._symrows is None:
        pytest.skip("livesym._symrows was not built (no compiler or Python headers at install)")
    return FileRows(
        path, SymbolSearch.of(()), offsets=False, as_json=True, with_lines=False, native=native
    )


def _answer(batch: FileRows, lines: list[str]) -> tuple[list[str], int, int]:
    """The batch's rows one by one (the C loop gives its rows as one text)."""
    texts, made, bad = batch.batch(lines)
    return "\n".join(texts).split("\n") if texts else [], made, bad


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


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
@pytest.mark.parametrize("path", [LIBC, LIBSTDCXX, "/usr/bin/ls", "/usr/bin/python3"])
def test_the_loop_writes_the_general_rows_byte_for_byte(path, native):
    # GIVEN addresses everywhere in a real file, as one chunk of 0x lines
    addresses = _addresses(path, 4000, seed=len(path))
    lines = [hex(a) for a in addresses] + [""]  # as stdin gives it: a newline ends the chunk
    # WHEN the chunk is answered (the loop), and each address alone (the general way)
    batch = _rows(path, native)
    rows, made, bad = _answer(batch, lines)
    general = _rows(path)
    expected = [general.row(a) for a in addresses]
    # THEN the rows are the same, in the input's order
    assert bad == 0
    assert len(rows) == len(expected) == made
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


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_a_chunk_with_other_input_is_answered_the_general_way_in_order(native):
    # GIVEN a chunk mixing plain addresses, decimals, blanks, a bad line, lines the
    # loop does not take (17 digits, upper case, a tab, non-ASCII) and ones it does
    lines = ["0x10", "", "4096", "  0x29dc0  ", "nonsense", "0x29dc0", "0x00000000000029dc0",
             "0X29DC0", "0x29dc0\t", "0x29dc0\u00e9", "0x29DC0", ""]  # fmt: skip
    # WHEN it is answered
    rows, made, bad = _answer(_rows(LIBC, native), lines)
    general = _rows(LIBC)
    # THEN each address has its general row, the bad lines their errors, blanks nothing
    assert bad == 2
    assert rows[0] == general.row(0x10)
    assert rows[1] == general.row(4096)
    assert rows[2] == general.row(0x29DC0) == rows[4]
    assert rows[5] == general.row(0x29DC0)  # leading zeros
    assert rows[6] == general.row(0x29DC0)  # 0X, upper case
    assert rows[7] == general.row(0x29DC0)  # a tab after it
    assert '"error"' in rows[3] and "nonsense" in rows[3]
    assert '"error"' in rows[8]
    assert rows[9] == general.row(0x29DC0)
    assert len(rows) == made == 10


_HEXISH = st.text(alphabet="0123456789abcdefABCDEFxX_ \t\r\x00-é\udcff", max_size=24)


@pytest.fixture(scope="module")
def libc_rows() -> tuple[FileRows, FileRows]:
    return _rows(LIBC, native=True), _rows(LIBC, native=False)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(st.one_of(_HEXISH, st.builds(lambda s: "0x" + s, _HEXISH)), max_size=40))
def test_any_lines_get_the_same_rows_from_c_and_python(libc_rows, lines):
    # GIVEN any lines at all, most of them near an address
    native, python = libc_rows
    # WHEN both loops answer them
    # THEN the rows, their count and the bad lines are the same
    assert _answer(native, lines) == _answer(python, lines)


@pytest.mark.parametrize(
    "line",
    ["0x" + "f" * 1_000_000, "0x" + "0" * 100_000 + "1", "0x1" + " " * 100_000, "0x\x00", "0x"],
)
def test_long_and_odd_lines_are_left_to_the_general_way(line):
    # GIVEN a line far longer than any address, or one that only starts like one
    native, python = _rows(LIBC, native=True), _rows(LIBC, native=False)
    # WHEN both loops answer it, THEN they agree (and nothing crashed)
    assert _answer(native, [line, "0x10"]) == _answer(python, [line, "0x10"])


def test_the_c_rows_refuse_wrong_arguments_with_an_exception():
    if batch_fast._symrows is None:
        pytest.skip("livesym._symrows was not built (no compiler or Python headers at install)")
    rows = batch_fast._symrows.rows
    with pytest.raises(TypeError):
        rows([], 0, [])  # too few
    args: list[object] = [["0x10"], 0, [], 0, 1 << 40, 0, [1], [2], [3], {}, str, None, 0, {}]
    args += [str, "FDE at .eh_frame offset ", "unnamed_function", "h", "m", "n", None]
    with pytest.raises(TypeError, match="bytes-like"):
        rows(*args)  # lists where 64-bit arrays belong
    args[1:2] = [-1]
    with pytest.raises(ValueError, match="negative"):
        rows(*args)  # an index before the first line


# Names the C rows must write as fragment() does, or leave to it: JSON's escapes, a byte
# that is not ASCII, a symbol version, Rust's two manglings, a name with many
# back-reference marks, one that does not demangle, one past MAX_NAME_BYTES.
ODD_NAMES = [
    'quote"d', "back\\slash", "new\nline", "tab\tand\x01", "del\x7f", "caf\u00e9",
    "_ZN3foo3barEv", "_ZN3foo3barEv@@VERS_1.0", "_ZN4core3fmt5write17h0123456789abcdefE",
    "_RNvCs1234_7mycrate4main", "_ZN" + "1a_" * 40 + "E", "_Zxyz_not_mangled", "_Z" + "a" * 70_000,
]  # fmt: skip


def test_odd_symbol_names_get_the_same_rows_from_c_and_python(tmp_path):
    # GIVEN a real program whose functions are renamed to odd names
    source = tmp_path / "odd.c"
    source.write_text(
        "".join(f"__attribute__((noinline)) int f{i}(int x) {{ return x * {i + 3}; }}\n"
                for i in range(len(ODD_NAMES)))
        + "int main(void) { return "
        + " + ".join(f"f{i}(1)" for i in range(len(ODD_NAMES))) + "; }\n"
    )  # fmt: skip
    exe = tmp_path / "odd"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(source)], check=True)
    renames = [f"--redefine-sym=f{i}={name}" for i, name in enumerate(ODD_NAMES)]
    subprocess.run(["objcopy", *renames, str(exe)], check=True)
    table = load_symbols(load_image(str(exe)))
    addresses = [a for i in range(len(table)) for a in (table.start(i), table.start(i) + 1)]
    lines = [hex(a) for a in addresses]
    # WHEN both loops answer every function's first bytes
    native, made, bad = _answer(_rows(str(exe), native=True), lines)
    python, _, _ = _answer(_rows(str(exe), native=False), lines)
    # THEN the rows are the same, and every odd name is among them
    assert bad == 0 and made == len(addresses)
    assert native == python
    named = {json.loads(row)["symbol"] for row in native}
    assert {n.encode().decode("utf-8", "backslashreplace") for n in ODD_NAMES[:-1]} <= named
