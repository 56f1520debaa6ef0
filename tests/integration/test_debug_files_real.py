"""Symbols and lines from separate debug files and MiniDebugInfo, on binaries built here.

spin (built with -g) is split as distributions split it: a stripped copy with
.gnu_debuglink, and its debug file. The debug file is then put in each place
it may be found (beside the binary, in .debug/, under a debug root, in a
.build-id tree), each time checked through ``livesym symbolize -e``; the stripped
copy alone names nothing, so each test fails if its source is not used.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from livesym.elf.image import load_image
from livesym.elf.symtab import SOURCE_PLT, load_symbols
from livesym.sample_targets import TARGETS, compiler, source_dir
from livesym.symbolize.objects import ObjectCache
from livesym.symbolize.sources import SymbolSearch
from tests.integration.test_demangle_real import CXX_SOURCE, RUST_SOURCE, cxxfilt
from tests.support.debugfiles import (
    build_id_of,
    build_id_tree,
    minidebuginfo,
    split_debug,
    with_build_id,
)
from tests.support.spin import HOT


def functions(path: Path) -> dict[str, int]:
    """name -> vaddr of every function symbol (no PLT stub), read by livesym from the
    unstripped file."""
    table = load_symbols(load_image(path))
    return {e.name: e.vaddr for e in table.entries() if e.source != SOURCE_PLT}


def symbolize(cli, path: Path, *addresses: int, options: tuple[str, ...] = ()) -> list[dict]:
    result = cli("symbolize", "-e", str(path), "--json", *options, *map(hex, addresses))
    assert result.code == 0, result.err
    return result.json_lines()


@pytest.fixture
def split(built, tmp_path) -> tuple[Path, Path, dict[str, int]]:
    spin = built("spin")
    stripped, debug = split_debug(spin, tmp_path / "bin")
    return stripped, debug, functions(spin)


def names(rows: list[dict]) -> list[str | None]:
    return [r["symbol"] for r in rows]


def test_stripped_binary_alone_names_none_of_its_functions(split, cli):
    stripped, debug, funcs = split
    debug.unlink()
    rows = symbolize(cli, stripped, *(funcs[f] + 2 for f in sorted(HOT)))
    assert names(rows) == [None] * len(HOT)


@pytest.mark.parametrize("place", ["beside", ".debug", "debug root"])
def test_debug_file_found_by_debuglink(split, cli, tmp_path, place):
    stripped, debug, funcs = split
    options: tuple[str, ...] = ()
    if place == ".debug":
        (stripped.parent / ".debug").mkdir()
        debug = debug.rename(stripped.parent / ".debug" / debug.name)
    elif place == "debug root":
        root = tmp_path / "debugroot"
        target = root / str(stripped.parent).lstrip("/") / debug.name
        target.parent.mkdir(parents=True)
        debug = debug.rename(target)
        options = ("--debug-dir", str(root))
    rows = symbolize(cli, stripped, *(funcs[f] + 2 for f in sorted(HOT)), options=options)
    assert names(rows) == sorted(HOT)
    assert {r["symbol_source"] for r in rows} == {"debuglink"}
    assert {r["symbol_file"] for r in rows} == {str(debug)}


def test_debug_file_found_by_build_id_under_a_debug_dir(split, cli, tmp_path):
    stripped, debug, funcs = split
    root = tmp_path / "debugroot"
    placed = build_id_tree(debug, root, build_id_of(stripped))
    debug.unlink()  # nothing for the debuglink to find
    rows = symbolize(cli, stripped, funcs["leaf_work"] + 1, options=("--debug-dir", str(root)))
    assert names(rows) == ["leaf_work"]
    assert (rows[0]["symbol_source"], rows[0]["symbol_file"]) == ("build-id", str(placed))


def test_debug_file_of_another_build_is_refused(split, cli, tmp_path):
    stripped, debug, funcs = split
    other = with_build_id(debug, tmp_path / "other.debug", "ab" * 20)
    os.replace(other, debug)  # the debuglink's name, another build's contents
    assert names(symbolize(cli, stripped, funcs["hot_beta"] + 1)) == [None]
    obj = ObjectCache().load(stripped)
    refused = [u for u in obj.sources if u.status == "refused"]
    assert [(u.source, u.path) for u in refused] == [("debuglink", str(debug))]
    assert "another build" in refused[0].detail


def test_without_build_ids_the_debuglink_crc_decides(built, cli, tmp_path):
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler")
    spec = TARGETS["spin"]
    exe = tmp_path / "spin-nobid"
    subprocess.run(
        [*shlex.split(cc), *spec.cflags, "-o", str(exe), str(source_dir() / "spin.c"),
         *spec.ldflags, "-Wl,--build-id=none"],
        check=True, capture_output=True,
    )  # fmt: skip
    stripped, debug = split_debug(exe, tmp_path / "bin")
    assert load_image(stripped).build_id is None
    funcs = functions(exe)
    assert names(symbolize(cli, stripped, funcs["hot_gamma"] + 1)) == ["hot_gamma"]
    with debug.open("ab") as f:
        f.write(b"\0")  # one byte more: another file as far as the CRC goes
    assert names(symbolize(cli, stripped, funcs["hot_gamma"] + 1)) == [None]
    refused = [u for u in ObjectCache().load(stripped).sources if u.status == "refused"]
    assert refused and "CRC32" in refused[0].detail


def test_minidebuginfo_names_what_dynsym_lacks(built, cli, tmp_path):
    spin = built("spin")
    mini = minidebuginfo(spin, tmp_path / "spin-mini")
    image = load_image(mini)
    assert image.section(".gnu_debugdata") is not None and image.section(".symtab") is None
    funcs = functions(spin)
    text = image.section(".text")
    assert text is not None
    inside = sorted(n for n, v in funcs.items() if text.holds_addr(v))
    rows = symbolize(cli, mini, *(funcs[n] for n in inside))
    assert names(rows) == inside  # every function in .text, as the unstripped file has it
    assert {r["symbol_source"] for r in rows} == {"minidebuginfo"}
    obj = ObjectCache().load(mini)
    assert obj.symbol_source == "minidebuginfo"
    assert any(u.source == "debug file" and u.status == "absent" for u in obj.sources)


def addr2line(path: Path, addresses: list[int]) -> list[str]:
    out = subprocess.run(
        ["addr2line", "-e", str(path), *map(hex, addresses)],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    return [re.sub(r" \(discriminator \d+\)$", "", line) for line in out]


@pytest.mark.skipif(shutil.which("addr2line") is None, reason="addr2line (binutils) not installed")
def test_lines_match_addr2line_in_the_file_and_through_its_debug_file(split, built, cli):
    spin = built("spin")
    stripped, _debug, funcs = split
    table = load_symbols(load_image(spin))
    addresses = [
        address
        for e in table.entries()
        if e.name in HOT or e.name in ("main", "worker_main")
        for address in range(e.vaddr, e.end, 7)
    ]
    assert len(addresses) > 50
    expected = addr2line(spin, addresses)
    assert sum(not line.startswith("??") for line in expected) > 50
    for path in (spin, stripped):  # its own .debug_line; then the debug file's
        rows = symbolize(cli, path, *addresses, options=("--lines",))
        got = [f"{r['file']}:{r['line']}" if r["file"] else "??:0" for r in rows]
        assert got == [e if not e.startswith("??") else "??:0" for e in expected]
    text = cli("symbolize", "-e", str(stripped), "--lines", hex(funcs["hot_alpha"] + 4))
    assert re.search(r"hot_alpha\+0x4 at \S+/spin\.c:\d+ ", text.out), text.out


@pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("c++filt") is None, reason="needs g++ and c++filt"
)
def test_cxx_names_from_a_build_id_debug_file_match_cxxfilt(cli, tmp_path):
    src = tmp_path / "t.cpp"
    src.write_text(CXX_SOURCE)
    exe = tmp_path / "t"
    subprocess.run(["g++", "-O1", "-g", "-o", str(exe), str(src)], check=True)
    stripped, debug = split_debug(exe, tmp_path / "bin")
    root = tmp_path / "debugroot"
    build_id_tree(debug, root, build_id_of(stripped))
    debug.unlink()
    mangled = {n: v for n, v in functions(exe).items() if n.startswith("_Z")}
    assert len(mangled) >= 3
    order = sorted(mangled)
    rows = symbolize(
        cli, stripped, *(mangled[n] for n in order), options=("--debug-dir", str(root))
    )
    assert names(rows) == order
    assert [r["demangled"] for r in rows] == cxxfilt(order)
    assert {r["symbol_source"] for r in rows} == {"build-id"}


@pytest.mark.skipif(
    shutil.which("rustc") is None or shutil.which("c++filt") is None,
    reason="needs rustc and c++filt",
)
def test_rust_v0_names_from_a_debuglink_debug_file(cli, tmp_path):
    src = tmp_path / "m.rs"
    src.write_text(RUST_SOURCE)
    exe = tmp_path / "m"
    subprocess.run(
        ["rustc", "-O", "-Csymbol-mangling-version=v0", "-o", str(exe), str(src)],
        check=True, capture_output=True,
    )  # fmt: skip
    stripped, _debug = split_debug(exe, tmp_path / "bin")
    own = {n: v for n, v in functions(exe).items() if n.startswith("_R") and "bump" in n}
    assert own, "rustc named no Counter::bump"
    rows = symbolize(cli, stripped, *own.values())
    assert names(rows) == list(own)
    assert all(r["demangled"].endswith("Counter>::bump") for r in rows), rows
    assert {r["symbol_source"] for r in rows} == {"debuglink"}


def test_a_file_with_full_symbols_is_not_searched(built, tmp_path, monkeypatch):
    # symbolize -e on an unstripped file never looks for debug files: no stat of a
    # debug root at all (they cost time on every run).
    spin = built("spin")
    looked: list[str] = []
    real = SymbolSearch.roots

    def spy(self: SymbolSearch, root: str = "") -> list[str]:
        looked.append(root)
        return real(self, root)

    monkeypatch.setattr(SymbolSearch, "roots", spy)
    obj = ObjectCache(search=SymbolSearch((str(tmp_path),))).load(spin)
    assert obj.symbol_source == "symtab" and not obj.searched and looked == []
