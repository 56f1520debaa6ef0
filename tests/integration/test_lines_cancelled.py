"""A source-line lookup cancelled mid-parse (``symbolize.lines.cancel_on``): it stops at
pyelftools' next read, answers nothing, leaves no problem and no descriptor behind, and
the next lookup of the same table answers as addr2line does. The object is real: a
program of 3,000 functions built here with -g, one unit whose line program is long."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from livesym.elf.image import load_image
from livesym.symbolize.lines import LineTable, cancel_on

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("addr2line") is None,
    reason="gcc builds the program, addr2line is the reference",
)


class SetAfter(threading.Event):
    """An event that reads as set from its ``reads``-th look on: a cancellation that
    lands mid-parse, at the same point in every run."""

    def __init__(self, reads: int) -> None:
        super().__init__()
        self.left = reads

    def is_set(self) -> bool:
        self.left -= 1
        return self.left < 0 or super().is_set()


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lines")
    source = out / "many.c"
    source.write_text("\n".join(
        f"int f{i}(int a) {{\n  int b = a * {i};\n  if (b > {i}) b -= a;\n  return b + 1;\n}}"
        for i in range(3000)
    ) + "\nint main(void) { return f2999(1); }\n")  # fmt: skip
    exe = out / "many"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(exe), str(source)], check=True)
    return exe


def _address_of(program: Path, name: str) -> int:
    out = subprocess.run(["nm", str(program)], capture_output=True, text=True, check=True)
    return next(int(a, 16) for a, _, n in (ln.split() for ln in out.stdout.splitlines()
                                           if len(ln.split()) == 3) if n == name)  # fmt: skip


def _addr2line(program: Path, vaddr: int) -> tuple[str, int]:
    out = subprocess.run(["addr2line", "-e", str(program), f"{vaddr:#x}"],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    file, _, line = out.rpartition(":")
    return file, int(line.split()[0])


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_cancelled_lookup_stops_and_the_table_answers_after(program: Path) -> None:
    vaddr = _address_of(program, "f2998") + 4
    table = LineTable(load_image(str(program)))
    before = _descriptors()
    for reads in (0, 50, 5000):  # before the first read, in the unit's header, mid-program
        with cancel_on(SetAfter(reads)):
            assert table.lookup(vaddr) is None, reads
        assert table.problem is None
        assert _descriptors() == before, "a cancelled lookup left its descriptor open"
    found = table.lookup(vaddr)
    assert found is not None and table.problem is None
    assert (Path(found.file).name, found.line) == (lambda f, n: (Path(f).name, n))(
        *_addr2line(program, vaddr)
    )
    table.close()


def test_a_lookup_whose_event_was_never_set_is_not_cancelled(program: Path) -> None:
    vaddr = _address_of(program, "f17") + 4
    table = LineTable(load_image(str(program)))
    with cancel_on(threading.Event()):
        found = table.lookup(vaddr)
    assert found is not None
    file, line = _addr2line(program, vaddr)
    assert (Path(found.file).name, found.line) == (Path(file).name, line)
    table.close()
