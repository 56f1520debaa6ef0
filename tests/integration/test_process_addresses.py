"""maps / addr / symbolize -p on real processes built from sample_targets/.

Ground truth comes from the binaries themselves, read with pyelftools (an
independent reader), and from gdb where it is installed.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from tests.support.debugfiles import build_id_of

PAGE = os.sysconf("SC_PAGE_SIZE")


def symbol_value(path: Path, name: str) -> int:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for section_name in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(section_name)
            if sec is None:
                continue
            found = sec.get_symbol_by_name(name)
            if found:
                return int(found[0]["st_value"])
    raise AssertionError(f"{name} not in {path}")


def load_segment_for(path: Path, vaddr: int) -> dict[str, int]:
    with open(path, "rb") as f:
        for seg in ELFFile(f).iter_segments():
            h = seg.header
            if h["p_type"] == "PT_LOAD" and h["p_vaddr"] <= vaddr < h["p_vaddr"] + h["p_memsz"]:
                return {k: int(h[k]) for k in ("p_offset", "p_vaddr", "p_filesz", "p_align")}
    raise AssertionError(f"no PT_LOAD holds {vaddr:#x} in {path}")


def own_rows(rows: list[dict], exe: Path) -> list[dict]:
    real = os.path.realpath(exe)
    return [r for r in rows if r["path"] and os.path.realpath(r["path"]) == real]


@pytest.mark.parametrize(
    ("target", "e_type"),
    [("spin", "ET_DYN"), ("spin-nopie", "ET_EXEC"), ("spin-static", "ET_EXEC")],
)
def test_maps_reports_one_base_per_object_with_type_and_build_id(
    run_target, built, cli, target, e_type
):
    proc = run_target(target)
    result = cli("maps", str(proc.pid), "--json")
    assert result.code == 0, result.err
    rows = own_rows(result.json_lines(), built(target))
    assert len(rows) >= 2
    bases = {r["base"] for r in rows}
    assert len(bases) == 1
    base = int(bases.pop(), 16)
    if e_type == "ET_EXEC":
        assert base == 0
    else:
        # The first PT_LOAD has p_vaddr 0 and p_offset 0: base is where the file starts.
        assert base == int(rows[0]["start"], 16)
    for row in rows:
        assert row["e_type"] == e_type
        assert row["build_id"] == build_id_of(built(target))
        assert row["problems"] == []
        assert "symtab" in row["symbol_source"]


@pytest.mark.parametrize("target", ["spin", "spin-nopie", "spin-static"])
def test_addr_chain_for_a_hot_function_matches_the_binary(run_target, built, cli, target):
    exe = built(target)
    proc = run_target(target)
    rows = own_rows(cli("maps", str(proc.pid), "--json").json_lines(), exe)
    base = int(rows[0]["base"], 16)
    value = symbol_value(exe, "hot_beta")
    vma = base + value + 3
    result = cli("addr", str(proc.pid), hex(vma), "--json")
    assert result.code == 0, result.err
    (rec,) = result.json_lines()
    seg = load_segment_for(exe, value)
    assert rec["symbol"] == "hot_beta"
    assert rec["symbol_offset"] == 3
    assert int(rec["base"], 16) == base
    assert int(rec["elf_vaddr"], 16) == value + 3
    assert int(rec["elf_offset"], 16) == value + 3 - seg["p_vaddr"] + seg["p_offset"]
    assert rec["mapping"]["perms"] == "r-xp"
    assert int(rec["segment"]["p_offset"], 16) == seg["p_offset"]
    steps = "\n".join(rec["steps"])
    assert f"elf_vaddr = vma - base = {vma:#x} - {base:#x} = {value + 3:#x}" in steps
    assert "elf_offset = elf_vaddr - p_vaddr + p_offset" in steps
    assert "problems" not in rec


def test_second_executable_segment_with_unaligned_offset_gets_the_same_base(run_target, built, cli):
    exe = built("twoseg")
    proc = run_target("twoseg")
    rows = own_rows(cli("maps", str(proc.pid), "--json").json_lines(), exe)
    exec_rows = [r for r in rows if r["perms"] == "r-xp"]
    assert len(exec_rows) == 2
    assert len({r["base"] for r in rows}) == 1
    assert all(r["problems"] == [] for r in rows)
    hot = next(r for r in exec_rows if r["segment"]["p_vaddr"] == "0x801234")
    assert hot["segment"]["p_offset"] == "0x3234"  # not page aligned: the BOLT-like case
    base = int(hot["base"], 16)

    vma = base + 0x801234 + 4
    (rec,) = cli("addr", str(proc.pid), hex(vma), "--json").json_lines()
    assert rec["symbol"] == "hot_section_work" and rec["symbol_offset"] == 4
    assert rec["elf_offset"] == hex(0x3234 + 4)
    assert f"- {0x3234:#x} + {0x801234:#x})" in rec["steps"][0]


def test_function_in_a_shared_library(run_target, built, cli):
    proc = run_target("uselib")
    rows = cli("maps", str(proc.pid), "--json").json_lines()
    lib_rows = [r for r in rows if r["path"] and r["path"].endswith("/libhot.so")]
    assert lib_rows and all(r["problems"] == [] for r in lib_rows)
    base = int(lib_rows[0]["base"], 16)
    lib = Path(lib_rows[0]["path"])
    vma = base + symbol_value(lib, "hot_in_lib") + 1
    result = cli("symbolize", "-p", str(proc.pid), hex(vma), "--json")
    (rec,) = result.json_lines()
    assert rec["symbol"] == "hot_in_lib" and rec["symbol_offset"] == 1
    assert rec["module"].endswith("/libhot.so")


def test_dlopened_libraries_are_never_misattributed(run_target, built, cli):
    proc = run_target("churn")
    funcs = {"libchurn_a.so": "churn_a_work", "libchurn_b.so": "churn_b_work"}
    resolved = 0
    deadline = time.monotonic() + 20
    while resolved < 3 and time.monotonic() < deadline:
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        found = re.search(r"^([0-9a-f]+)-\S+ r-xp (\S+) .* (\S+/(libchurn_[ab]\.so))$", maps, re.M)
        if not found:
            continue
        start, pgoff, path, name = int(found[1], 16), int(found[2], 16), found[3], found[4]
        value = symbol_value(Path(path), funcs[name])
        seg = load_segment_for(Path(path), value)
        vma = start - pgoff + seg["p_offset"] - seg["p_vaddr"] + value + 2
        (rec,) = cli("addr", str(proc.pid), hex(vma), "--json").json_lines()
        if rec["symbol"] is None:
            # Unloaded between our read and the CLI's: it must say unmapped, not guess.
            assert rec["reason"] in ("unmapped", "anonymous_mapping"), rec
            continue
        module = Path(rec["path"]).name
        assert rec["symbol"] == funcs[module], rec
        resolved += 1
    assert resolved >= 3


def test_symbolize_pid_resolves_a_libc_function_of_this_process(cli):
    libc = ctypes.CDLL("libc.so.6")
    address = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    assert address is not None
    result = cli("symbolize", "-p", str(os.getpid()), hex(address + 1), "--json")
    (rec,) = result.json_lines()
    assert "getpid" in rec["symbol"]
    assert rec["symbol_offset"] == 1
    assert rec["module"].endswith("libc.so.6")


def test_addr_text_output_shows_every_step(run_target, built, cli):
    exe = built("spin")
    proc = run_target("spin")
    base = int(own_rows(cli("maps", str(proc.pid), "--json").json_lines(), exe)[0]["base"], 16)
    vma = base + symbol_value(exe, "hot_gamma")
    result = cli("addr", str(proc.pid), hex(vma))
    assert result.code == 0
    for label in (
        "address",
        "mapping",
        "object",
        "segment",
        "base",
        "elf_vaddr",
        "elf_offset",
        "symbol",
    ):
        assert re.search(rf"^{label}\s", result.out, re.M), (label, result.out)
    assert "hot_gamma+0x0" in result.out


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
def test_gdb_names_the_same_functions(run_target, built, cli):
    exe = built("uselib")
    proc = run_target("uselib")
    rows = cli("maps", str(proc.pid), "--json").json_lines()
    lib_row = next(r for r in rows if r["path"] and r["path"].endswith("/libhot.so"))
    exe_row = own_rows(rows, exe)[0]
    addresses = [
        int(lib_row["base"], 16) + symbol_value(Path(lib_row["path"]), "hot_in_lib") + 5,
        int(exe_row["base"], 16) + symbol_value(exe, "main") + 2,
    ]
    ours = cli("symbolize", "-p", str(proc.pid), *map(hex, addresses), "--json").json_lines()
    gdb = subprocess.run(
        [
            "gdb",
            "-batch",
            "-nx",
            "-p",
            str(proc.pid),
            *[arg for a in addresses for arg in ("-ex", f"info symbol {a:#x}")],
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    names = re.findall(r"^(\S+) \+ (\d+) in section", gdb.stdout, re.M)
    assert len(names) == 2, gdb.stdout + gdb.stderr
    assert [(r["symbol"], r["symbol_offset"]) for r in ours] == [(n, int(o)) for n, o in names]
    # gdb detached: the target must still be running, not left stopped.
    state = Path(f"/proc/{proc.pid}/stat").read_text().split(")")[1].split()[0]
    assert state in ("R", "S")


def test_deleted_executable_is_read_through_map_files(built, cli, tmp_path):
    exe = tmp_path / "spin-copy"
    exe.write_bytes(built("spin").read_bytes())
    exe.chmod(0o755)
    value = symbol_value(exe, "hot_alpha")
    from tests.support.procs import running

    with running(exe) as proc:
        exe.unlink()
        rows = cli("maps", str(proc.pid), "--json").json_lines()
        mine = [r for r in rows if r["path"] == str(exe)]
        assert mine and all(r["deleted"] for r in mine)
        assert all(r["opened_via"] == "map_files" for r in mine)
        base = int(mine[0]["base"], 16)
        (rec,) = cli("addr", str(proc.pid), hex(base + value + 1), "--json").json_lines()
        assert rec["symbol"] == "hot_alpha" and rec["symbol_offset"] == 1
