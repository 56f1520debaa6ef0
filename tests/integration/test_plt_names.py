"""PLT stub names (``printf@plt``) against objdump's synthetic ``@plt`` symbols.

objdump (BFD's synthetic symbol table) labels each stub of .plt, .plt.sec and .plt.got with
the name of the symbol its GOT slot is relocated against; that is the reference. Per file:

- every stub objdump labels is a livesym entry at that address, one stub long, with the same
  name -- except ``*ABS*+0xADDR@plt`` (an IRELATIVE slot), which livesym names after the
  function symbol at ADDR when the object has one;
- livesym names no other stubs, but for the lazy-binding stubs of an IBT .plt (objdump leaves
  them unlabelled), which take the name of their .plt.sec twin;
- ``lookup`` of a stub's first and last byte returns it.

The files: churn.c linked every way the linker lays out a PLT (lazy, -z now, non-PIE, IBT,
-fno-plt), and system libraries. A static executable has no dynamic symbols for objdump to
use; its stubs are checked through objdump's jump targets and pyelftools' relocations.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from livesym.elf.image import load_image
from livesym.elf.plt import PLT_SECTIONS
from livesym.elf.symtab import SOURCE_PLT, SymbolEntry, SymbolTable, load_symbols
from livesym.errors import LivesymError
from livesym.sample_targets import compiler, source_dir
from tests.support.parallel import map_in_processes

pytestmark = pytest.mark.skipif(
    shutil.which("objdump") is None, reason="objdump (binutils) is the reference; not installed"
)

LIB = "/usr/lib/x86_64-linux-gnu"
SYSTEM_FILES = (
    f"{LIB}/libc.so.6",  # IRELATIVE stubs for its own ifuncs
    f"{LIB}/libstdc++.so.6",  # mangled names
    f"{LIB}/libLLVM-15.so.1",  # 482 stubs, and 9 MB of .rela.dyn that names none of them
    os.path.realpath("/usr/bin/python3"),  # a non-PIE executable with ~500 stubs
    "/usr/bin/ls",
)
LAYOUTS = {
    "lazy": (),
    "now": ("-Wl,-z,now",),
    "nopie": ("-fno-pie", "-no-pie"),
    "ibt": ("-fcf-protection", "-Wl,-z,ibtplt"),
    "ibt-now": ("-fcf-protection", "-Wl,-z,ibtplt", "-Wl,-z,now"),
    "noplt": ("-fno-plt",),
}
_LABEL = re.compile(r"^([0-9a-f]+) <(.*@plt)>:$")
_JUMP_SLOT = re.compile(r"^\s*([0-9a-f]+):\s.*jmp\s+\*0x[0-9a-f]+\(%rip\)\s+# ([0-9a-f]+)")


def _objdump(path: str, image_sections: list[str]) -> str:
    args = ["objdump", "-d", "--no-show-raw-insn"]
    for name in image_sections:
        args += ["-j", name]
    out = subprocess.run([*args, path], capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


def _plt_sections(path: str) -> list[str]:
    image = load_image(path)
    return [s.name for s in image.sections if s.name in PLT_SECTIONS and s.sh_size]


def _stubs(table: SymbolTable) -> dict[int, SymbolEntry]:
    return {e.vaddr: e for e in table.entries() if e.source == SOURCE_PLT}


def _names_at(table: SymbolTable, addr: int) -> set[str]:
    return {a for e in table.entries() if e.vaddr == addr for a in e.aliases}


def check_against_objdump(path: str) -> list[str]:
    """Mismatches between livesym's PLT entries of ``path`` and objdump's labels."""
    sections = _plt_sections(path)
    listing = _objdump(path, sections)
    theirs = {int(m[1], 16): m[2] for line in listing.splitlines() if (m := _LABEL.match(line))}
    image = load_image(path)
    table = load_symbols(image)
    ours = _stubs(table)
    bad = [f"problem: {p}" for p in table.problems]
    for addr, name in sorted(theirs.items()):
        entry = ours.get(addr)
        if entry is None:
            bad.append(f"{addr:#x}: objdump has {name}, livesym nothing")
            continue
        if name.startswith("*ABS*+0x"):
            target = int(name[len("*ABS*+") : -len("@plt")], 16)
            named = _names_at(table, target)
            ok = entry.name.removesuffix("@plt") in named if named else entry.name == name
        else:
            ok = entry.name == name
        if not ok:
            bad.append(f"{addr:#x}: objdump has {name}, livesym {entry.name}")
        for byte in (addr, entry.end - 1):
            hit = table.lookup(byte)
            if hit is None or hit.name != entry.name or hit.vaddr != addr:
                bad.append(f"lookup({byte:#x}) -> {hit}, expected {entry.name}")
    twins = set(theirs.values())
    lazy_ibt = image.section(".plt") if image.section(".plt.sec") is not None else None
    for addr, entry in sorted(ours.items()):
        if addr in theirs:
            continue
        if lazy_ibt is None or not lazy_ibt.holds_addr(addr) or entry.name not in twins:
            bad.append(f"{addr:#x}: livesym has {entry.name}, objdump nothing")
    if not theirs:
        bad.append(f"objdump labelled no stubs in {sections}: nothing was compared")
    return bad


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler (install gcc) to link the PLT layouts")
    out = tmp_path_factory.mktemp("plt")

    def get(layout: str) -> Path:
        exe = out / f"churn-{layout}"
        if not exe.exists():
            cmd = [*cc.split(), "-O1", "-g", *LAYOUTS[layout], str(source_dir() / "churn.c"),
                   "-ldl", "-o", str(exe)]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if done.returncode:
                pytest.skip(f"this toolchain cannot link the {layout} layout: {done.stderr[:200]}")
        return exe

    return get


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_plt_layout_matches_objdump(layouts: Callable[[str], Path], layout: str) -> None:
    path = str(layouts(layout))
    assert check_against_objdump(path) == []
    names = {e.name for e in _stubs(load_symbols(load_image(path))).values()}
    # churn.c calls these through the PLT unless -fno-plt took every call but the one in crt.
    wanted = {"dlopen@plt", "dlsym@plt", "dlclose@plt", "snprintf@plt"}
    assert names >= wanted if layout != "noplt" else names == {"__cxa_finalize@plt"}


@pytest.mark.parametrize("path", SYSTEM_FILES)
def test_system_files_match_objdump(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not on this machine")
    assert check_against_objdump(path) == []


def test_a_wrong_name_is_caught(
    layouts: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison can fail: with one label of the reference changed, it reports it."""
    path = str(layouts("lazy"))
    real = _objdump

    def relabelled(*args: object) -> str:
        return real(*args).replace("<dlsym@plt>", "<dlerror@plt>")  # type: ignore[arg-type]

    monkeypatch.setattr(__name__ + "._objdump", relabelled)
    bad = check_against_objdump(path)
    assert any("objdump has dlerror@plt, livesym dlsym@plt" in b for b in bad), bad


def test_static_executable_stubs_name_their_ifuncs(built: Callable[[str], Path]) -> None:
    """spin-static's .plt holds only IRELATIVE stubs. Each one's slot (objdump's jump
    target) has a relocation (pyelftools) whose addend is a function livesym names the stub
    after."""
    path = str(built("spin-static"))
    slots = {
        int(m[1], 16): int(m[2], 16)
        for line in _objdump(path, [".plt"]).splitlines()
        if (m := _JUMP_SLOT.match(line))
    }
    with open(path, "rb") as f:
        rela = ELFFile(f).get_section_by_name(".rela.plt")
        assert isinstance(rela, RelocationSection)
        addend = {r["r_offset"]: r["r_addend"] for r in rela.iter_relocations()}
    table = load_symbols(load_image(path))
    ours = _stubs(table)
    assert len(slots) == len(addend) > 0
    assert sorted(ours) == sorted(slots)
    for stub, slot in slots.items():
        assert ours[stub].name.removesuffix("@plt") in _names_at(table, addend[slot])


def _check_files(paths: list[str]) -> tuple[int, list[str]]:
    """(files compared, what was wrong) over ``paths``: a worker's part of the test below."""
    compared = 0
    bad: list[str] = []
    for path in paths:
        try:
            image = load_image(path)
        except LivesymError as e:
            # A file with ELF magic livesym refuses is counted, not passed over: binutils
            # must refuse it too (a damaged or foreign file), else it is livesym's failure.
            refused = subprocess.run(["readelf", "-h", path], capture_output=True, timeout=60)
            if refused.returncode == 0 and not refused.stderr:
                bad.append(f"{path}: livesym cannot read it ({e}); readelf can")
            continue
        if image.e_type == "ET_REL" or not _plt_sections(path):
            continue
        found = check_against_objdump(path)
        # A PLT of only a header (the -fno-plt case) gives objdump nothing to label.
        if found == [f"objdump labelled no stubs in {_plt_sections(path)}: nothing was compared"]:
            continue
        compared += 1
        bad += [f"{path}: {b}" for b in found]
    return compared, bad


@pytest.mark.slow
def test_every_system_elf_file_matches_objdump() -> None:
    """Every ELF file under /usr/lib/x86_64-linux-gnu and /usr/bin with a PLT."""
    from tests.support.readelf_ref import iter_elf_files

    compared = 0
    bad: list[str] = []
    for n, found in map_in_processes(_check_files, list(iter_elf_files((LIB, "/usr/bin")))):
        compared += n
        bad += found
    assert compared > 100
    assert bad == [], "\n".join(bad[:50])
