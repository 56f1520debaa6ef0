"""A real process whose executable's name and a symbol hold an escape sequence: the text
outputs of top, maps, addr and symbolize show it escaped, never raw.

spin is copied to a file named ``spin<ESC>[31m`` (the kernel writes such a name
into /proc/PID/maps as it is), and objcopy renames hot_alpha to
``hot<ESC>[31malpha`` in the copy.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from livesym.elf.image import load_image
from livesym.elf.symtab import load_symbols
from tests.support.procs import running

ESC = "\x1b"
NAME = f"spin{ESC}[31m"
SYMBOL = f"hot{ESC}[31malpha"
OBJCOPY = shutil.which("objcopy")


@pytest.fixture(scope="module")
def evil(built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """(the renamed copy of spin, the pid it runs as)."""
    if OBJCOPY is None:
        pytest.skip("objcopy is not installed (binutils) to rename a symbol")
    exe = tmp_path_factory.mktemp("evil") / NAME
    subprocess.run(
        [OBJCOPY, f"--redefine-sym=hot_alpha={SYMBOL}", str(built("spin")), str(exe)], check=True
    )
    with running(exe) as proc:
        yield exe, proc.pid


def symbol_vaddr(exe: Path) -> int:
    symbols = load_symbols(load_image(str(exe)))
    return next(symbols.start(i) for i in range(len(symbols)) if symbols.name(i) == SYMBOL)


def exe_mapping_start(pid: int) -> int:
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].endswith(NAME) and "x" in fields[1]:
            return int(fields[0].split("-")[0], 16)
    raise AssertionError(f"no executable mapping of {NAME!r} in {pid}")


def assert_escaped(result, *shown: str) -> None:
    assert result.code == 0, result.err
    assert ESC not in result.out and ESC not in result.err
    for text in shown:
        assert text in result.out, result.out


def test_maps_escapes_the_object_path(evil, cli):
    _exe, pid = evil
    assert_escaped(cli("maps", str(pid)), "spin\\x1b[31m")


def test_addr_escapes_the_object_path(evil, cli):
    _exe, pid = evil
    addr = exe_mapping_start(pid)
    assert_escaped(cli("addr", str(pid), hex(addr)), "spin\\x1b[31m")


def test_symbolize_escapes_the_symbol_and_the_file_but_json_keeps_them(evil, cli):
    exe, _pid = evil
    vaddr = hex(symbol_vaddr(exe))
    text = cli("symbolize", "-e", str(exe), vaddr)
    assert_escaped(text, "hot\\x1b[31malpha+0x0", "spin\\x1b[31m)")
    (row,) = cli("symbolize", "-e", str(exe), vaddr, "--json").json_lines()
    assert row["symbol"] == SYMBOL and row["module"] == str(exe)


def test_top_escapes_the_function_and_module_names(evil, cli):
    _exe, pid = evil
    result = cli("top", str(pid), "--duration", "1", "--rate", "199")
    # hot_alpha has the largest share of spin's time: a second of samples has it.
    assert_escaped(result, "hot\\x1b[31malpha  (spin\\x1b[31m)")
