"""Functions without symbols, bounded by their FDEs: against readelf's listing of
.eh_frame, and against the symbol table the stripped copy lost.

Real files: Debian's stripped liblzma, sample targets built with the machine's gcc
(with and without a .eh_frame_hdr search table), and copies of them with .eh_frame
bytes flipped (a bad entry costs a lookup, never the session).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from livesym.addr.kinds import ElfVaddr
from livesym.elf.cfi import DEBUG_FRAME, EH_FRAME, CallFrames, FdeBounds, FdeIndex, Flavor
from livesym.elf.cfi_rules import Row
from livesym.elf.image import load_image
from livesym.elf.symtab import load_symbols
from livesym.records import Reason, Unresolved
from livesym.symbolize.explain import explain_elf_vaddr
from livesym.symbolize.objects import ObjectCache
from livesym.symbolize.records import frame_record
from tests.support.debugfiles import run, split_debug

LIBLZMA = Path("/lib/x86_64-linux-gnu/liblzma.so.5")
FDE_LINE = re.compile(
    r"^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", re.M
)

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf is the reference")


def readelf_fdes(path: Path, section: str = ".eh_frame") -> list[tuple[int, int, int]]:
    """(start, end, offset in ``section``) of every FDE, as binutils' readelf lists them."""
    # (readelf exits 1 on a debug file, whose PT_INTERP has no contents: still listed)
    out = subprocess.run(["readelf", "-wf", str(path)], capture_output=True, text=True,
                         check=False, env={"LC_ALL": "C"}).stdout  # fmt: skip
    assert "Contents of the" in out, path
    parts = re.split(r"^Contents of the (\S+) section:", out, flags=re.M)
    pairs = zip(parts[1::2], parts[2::2], strict=True)
    listing = "".join(body for name, body in pairs if name == section)
    return [(int(a, 16), int(b, 16), int(o, 16)) for o, a, b in FDE_LINE.findall(listing)]


def agree_with_readelf(path: Path, sample: int = 3000, flavor: Flavor = EH_FRAME) -> int:
    index = FdeIndex(load_image(str(path)), flavor)
    assert index.problems == []
    fdes = readelf_fdes(path, flavor.section)
    assert len(index) == len(fdes) > 0
    rng = random.Random(7)
    for start, end, offset in rng.sample(fdes, min(sample, len(fdes))):
        for vaddr in {start, end - 1, rng.randrange(start, end)}:
            found = index.lookup(vaddr)
            assert isinstance(found, FdeBounds), (hex(vaddr), found)
            assert (found.start, found.end, found.fde_offset) == (start, end, offset)
    # Past every function: no FDE, said so.
    last = max(end for _, end, _ in fdes)
    assert isinstance(index.lookup(last + 0x100000), Unresolved)
    return len(fdes)


@pytest.mark.skipif(not LIBLZMA.exists(), reason="Debian's liblzma (xz-utils) is not installed")
def test_a_stripped_distro_library_s_fdes_agree_with_readelf():
    assert load_image(str(LIBLZMA)).section(".symtab") is None  # stripped: FDEs are all
    assert agree_with_readelf(LIBLZMA) > 100


def test_without_a_search_table_the_fdes_are_scanned_and_agree(
    tmp_path: Path, built: Callable[[str], Path]
):
    # GIVEN spin relinked without .eh_frame_hdr (the search table the lookups use)
    source = Path(__file__).resolve().parents[2] / "livesym" / "sample_targets" / "spin.c"
    exe = tmp_path / "spin-nohdr"
    subprocess.run(["gcc", "-O2", "-pthread", "-Wl,--no-eh-frame-hdr", "-o", str(exe),
                    str(source), "-I", str(source.parent)], check=True)  # fmt: skip
    image = load_image(str(exe))
    assert image.section(".eh_frame_hdr") is None
    # THEN every FDE is found all the same
    assert agree_with_readelf(exe) >= 5
    assert agree_with_readelf(built("spin")) >= 5


def test_a_stripped_programs_functions_are_bounded_as_its_symbols_were(
    tmp_path: Path, built: Callable[[str], Path]
):
    # GIVEN spin and a copy stripped of every symbol
    exe = built("spin")
    stripped = tmp_path / "spin-stripped"
    subprocess.run(["strip", "--strip-all", "-o", str(stripped), str(exe)], check=True)
    symbols = load_symbols(load_image(str(exe)))
    cache = ObjectCache()
    obj = cache.load(str(stripped))
    assert obj.symbols is not None
    functions = [
        (symbols.start(i), symbols.declared_size(i)) for i in range(len(symbols))
        if symbols.declared_size(i) > 16
        and symbols.name(i).startswith(("hot_", "leaf_", "worker"))
    ]  # fmt: skip
    assert len(functions) >= 4
    labels = set()
    for start, size in functions:
        # WHEN an address inside each of the lost functions is explained
        expl = explain_elf_vaddr(obj, ElfVaddr(start + size // 2))
        # THEN no symbol names it, but its FDE bounds it exactly as its symbol did
        assert expl.symbol is None and expl.reason is Reason.UNNAMED_FUNCTION
        assert expl.function is not None
        assert (expl.function.start, expl.function.end) == (start, start + size)
        assert ".eh_frame offset" in expl.detail
        record = frame_record(0, 1, expl, None)
        assert record.symbol_vaddr == start and record.symbol_offset == size // 2
        frame = record.frame()
        assert not frame.resolved
        labels.add(frame.label)
    # ... and each function is its own row, named by its module and start
    assert len(labels) == len(functions)
    assert all(re.fullmatch(r"spin-stripped @ 0x[0-9a-f]+", label) for label in labels)


def test_debug_frame_fdes_agree_with_readelf_in_the_object_and_in_its_debug_file(
    tmp_path: Path, built: Callable[[str], Path]
):
    # GIVEN a program built without unwind tables: its functions' CFI is in .debug_frame
    exe = built("deep-debugframe")
    fdes = readelf_fdes(exe, ".debug_frame")
    own = {start for start, _, _ in readelf_fdes(exe)}
    functions = [(s, e, o) for s, e, o in fdes if s not in own]
    assert len(functions) >= 8
    # THEN its .debug_frame is read as readelf reads it
    assert agree_with_readelf(exe, flavor=DEBUG_FRAME) == len(fdes)
    # ... and an object's call frames fall back on it where .eh_frame has nothing
    frames = CallFrames(load_image(str(exe)))
    for start, end, offset in functions:
        found = frames.lookup(start + (end - start) // 2)
        assert isinstance(found, FdeBounds), found
        assert (found.start, found.end, found.fde_offset) == (start, end, offset)
        assert found.section == ".debug_frame" and found.file is None
        assert isinstance(frames.rules_at(start), Row)
    # GIVEN the program stripped, its debug file beside it (debuglink), then compressed
    # as Debian ships debug files (SHF_COMPRESSED, zlib)
    stripped, debug = split_debug(exe, tmp_path / "split")
    assert load_image(str(stripped)).section(".debug_frame") is None
    run("objcopy", "--compress-debug-sections=zlib", debug)
    assert "C" in run("readelf", "-SW", debug).split(".debug_frame", 1)[1].splitlines()[0]
    assert agree_with_readelf(debug, flavor=DEBUG_FRAME) == len(fdes)
    # WHEN the stripped program is loaded, its debug file found
    obj = ObjectCache().load(stripped)
    assert obj.debug_file is not None
    # THEN its functions' bounds and rules come from the debug file's .debug_frame
    for start, end, offset in functions:
        found = obj.function_bounds(start)
        assert isinstance(found, FdeBounds), found
        assert (found.start, found.end, found.fde_offset) == (start, end, offset)
        assert found.file == str(debug) and f".debug_frame offset {offset:#x} of" in found.source()
        assert isinstance(obj.rules_at(start), Row)


@pytest.mark.parametrize("section", [".eh_frame", ".eh_frame_hdr"])
def test_flipped_cfi_bytes_cost_a_lookup_never_the_session(
    tmp_path: Path, built: Callable[[str], Path], section: str
):
    exe = built("spin")
    image = load_image(str(exe))
    sec = image.section(section)
    assert sec is not None
    original = exe.read_bytes()
    fdes = readelf_fdes(exe)
    rng = random.Random(section)
    started = time.monotonic()
    refused = 0
    for case in range(120):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            at = sec.sh_offset + rng.randrange(sec.sh_size)
            data[at] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        path = tmp_path / f"case{case}"
        path.write_bytes(bytes(data))
        index = FdeIndex(load_image(str(path)))
        for start, end, _ in fdes:
            found = index.lookup(start + (end - start) // 2)
            assert isinstance(found, FdeBounds | Unresolved)
            if isinstance(found, FdeBounds):  # whatever it says holds the address
                assert found.holds(start + (end - start) // 2)
                # ... and its unwind rules decode, or say why not (pyelftools on bad bytes)
                rules = index.rules_at(start + (end - start) // 2)
                assert isinstance(rules, Row | Unresolved)
            else:
                assert found.reason is Reason.NO_CFI and "\n" not in found.detail
                refused += 1
    assert time.monotonic() - started < 60
    assert refused > 0  # the flips did reach what the lookups read


@pytest.mark.skipif(not LIBLZMA.exists(), reason="Debian's liblzma (xz-utils) is not installed")
def test_symbolize_and_addr_name_an_unnamed_function_by_its_fde(cli):
    # GIVEN addresses inside liblzma's functions (it has .dynsym only: most are unnamed)
    fdes = readelf_fdes(LIBLZMA)
    obj = ObjectCache().load(str(LIBLZMA))
    assert obj.symbols is not None
    middle = [(s + (e - s) // 2, (s, e, o)) for s, e, o in fdes]
    picked = [(a, fde) for a, fde in middle if obj.symbols.lookup(a) is None][:50]
    assert len(picked) >= 20
    addresses = [a for a, _ in picked]
    unnamed = [fde for _, fde in picked]
    # WHEN livesym symbolize reads them (JSON and text)
    rows = cli("symbolize", "-e", str(LIBLZMA), "--json", *map(hex, addresses)).json_lines()
    text = cli("symbolize", "-e", str(LIBLZMA), *map(hex, addresses[:3])).out.splitlines()
    # THEN each row is its function, bounded by the FDE readelf lists
    for row, (start, end, offset) in zip(rows, unnamed, strict=True):
        assert row["symbol"] is None and row["reason"] == "unnamed_function"
        assert int(row["symbol_vaddr"], 16) == start and row["symbol_size"] == end - start
        assert row["function_source"] == f"FDE at .eh_frame offset {offset:#x}"
    assert all(f"liblzma.so.5 @ {unnamed[i][0]:#x}+" in line for i, line in enumerate(text))


@pytest.mark.skipif(not LIBLZMA.exists(), reason="Debian's liblzma (xz-utils) is not installed")
def test_xz_s_time_in_stripped_liblzma_is_one_row_per_function(cli, xz):
    # WHEN livesym samples xz -9 for a few seconds
    # (user time: xz -9 starts by faulting in its dictionary, kernel time that is no
    # function of liblzma's)
    result = cli("top", str(xz.pid), "--duration", "3", "--json", "--limit", "100",
                 "--no-kernel")  # fmt: skip
    assert result.code == 0, result.err
    rows = json.loads(result.out)["functions"]
    lzma = [r for r in rows if r["module"] and "liblzma" in r["module"]]
    # THEN liblzma's time is spread over its functions, each named by its FDE's start
    # (readelf's listing), not lumped into one row for the whole library
    starts = {s for s, _, _ in readelf_fdes(LIBLZMA)}
    unnamed = [r for r in lzma if r["symbol"] is None]
    assert len(unnamed) >= 3, lzma
    for row in unnamed:
        match = re.fullmatch(r"liblzma\.so\.[\d.]+ @ (0x[0-9a-f]+)", row["demangled"])
        assert match, row
        assert int(match.group(1), 16) in starts
    assert sum(r["self_pct"] for r in lzma) > 50  # xz's work is in there
    assert not [r for r in lzma if r["demangled"].startswith("[no symbol here]")]
    # ... and livesym addr on the hottest one says where its bounds came from
    hottest = unnamed[0]
    vaddr = int(re.findall(r"0x[0-9a-f]+", hottest["demangled"])[0], 16)
    base = _load_base(xz.pid, "liblzma")
    addr = cli("addr", str(xz.pid), hex(base + vaddr + 1))
    assert addr.code == 0, addr.err
    assert "function    unnamed+0x1: no symbol names it" in addr.out
    assert "from the FDE at .eh_frame offset 0x" in addr.out


def _load_base(pid: int, name: str) -> int:
    """The load address of a library: the start of its first mapping (offset 0)."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and name in fields[5] and int(fields[2], 16) == 0:
            return int(fields[0].split("-")[0], 16)
    raise AssertionError(f"{name} is not mapped by {pid}")


@pytest.mark.skipif(not LIBLZMA.exists(), reason="Debian's liblzma (xz-utils) is not installed")
@pytest.mark.skipif(shutil.which("go") is None, reason="go tool pprof is the reference reader")
def test_pprof_keeps_liblzma_s_unnamed_functions_apart_as_report_does(cli, xz, tmp_path):
    # GIVEN a recording of xz -9, its time in liblzma's unnamed functions
    capture, out = tmp_path / "xz.json", tmp_path / "xz.pb.gz"
    assert (
        cli("record", str(xz.pid), "--duration", "2", "--no-kernel", "-o", str(capture)).code == 0
    )
    doc = json.loads(cli("report", str(capture), "--json").out)
    report = doc["functions"]
    unnamed = {r["demangled"]: r["self"] for r in report if r["symbol"] is None and r["self"]}
    assert len(unnamed) >= 3, report[:8]
    # WHEN it is exported to pprof and go tool pprof lists it
    assert cli("export", str(capture), "--format", "pprof", "-o", str(out)).code == 0
    listed = subprocess.run(["go", "tool", "pprof", "-top", "-nodecount=1000", "-unit=ms",
                             str(out)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    # THEN each unnamed function is a row of its own, with the samples report gives it
    # (a sample weighs one period: flat ms / period is the count)
    rows = {}
    for line in listed.stdout.splitlines():
        match = re.match(r"\s*([\d.]+)ms\s+[\d.]+%\s+[\d.]+%\s+[\d.]+ms\s+[\d.]+%\s+(.+)$", line)
        if match:
            rows[match[2].strip()] = float(match[1])
    period = 1000 / doc["rate_hz"]
    for name, samples in unnamed.items():
        assert name in rows, (name, sorted(rows)[:20])
        assert round(rows[name] / period) == samples, (name, rows[name], samples)
    assert not any(re.fullmatch(r"\[liblzma[^\]]*\]", name) for name in rows), sorted(rows)
