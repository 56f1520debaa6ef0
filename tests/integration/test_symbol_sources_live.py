"""Symbol sources of live processes: JIT perf maps (a C target and node), the vdso read
from memory, a chrooted static target, a target in its own mount namespace (paths that
exist only inside its root), and a deleted executable rebuilt at the same path."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from elftools.elf.elffile import ELFFile

from livesym.addr.kinds import Vma
from livesym.symbolize.perfmap import RECHECK_S
from livesym.symbolize.process import ProcessSymbolizer
from livesym.symbolize.resolver import AddressResolver
from livesym.target.maps_watcher import MapsWatcher
from livesym.target.process import TargetProcess
from tests.integration.test_process_addresses import own_rows, symbol_value
from tests.support.debugfiles import build_id_of, split_debug, with_build_id
from tests.support.procs import running


def perf_map_entries(path: Path) -> dict[str, tuple[int, int]]:
    """name -> (start, size) of a perf map's well-formed lines, read independently."""
    found = {}
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split(maxsplit=2)
        try:
            found[parts[2]] = (int(parts[0], 16), int(parts[1], 16))
        except (IndexError, ValueError):
            continue
    return found


def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def top(cli, pid: int, seconds: str = "1") -> dict[str, dict]:
    result = cli("top", str(pid), "--duration", seconds, "--json", "--limit", "50")
    assert result.code == 0, result.err
    return {f["demangled"]: f for f in json.loads(result.out)["functions"]}


def test_jit_code_is_named_by_the_perf_map_and_the_map_is_reread_as_it_grows(run_target, cli):
    proc = run_target("jitmap")
    perf_map = Path(f"/tmp/perf-{proc.pid}.map")
    start, size = perf_map_entries(perf_map)["jit_alpha"]
    (row,) = cli("symbolize", "-p", str(proc.pid), "--json", hex(start + 4)).json_lines()
    assert (row["symbol"], row["symbol_offset"], row["symbol_size"]) == ("jit_alpha", 4, size)
    assert (row["module"], row["symbol_source"]) == (str(perf_map), "perf-map")
    assert row["elf_vaddr"] is None and row["base"] is None

    # One symbolizer for the whole session: jit_beta appears after it read the map.
    symbolizer = ProcessSymbolizer(TargetProcess(proc.pid))
    assert symbolizer.explain(Vma(start)).symbol.name == "jit_alpha"  # type: ignore[union-attr]
    os.kill(proc.pid, signal.SIGUSR1)
    wait_for(lambda: "jit_beta" in perf_map_entries(perf_map))
    beta, _ = perf_map_entries(perf_map)["jit_beta"]
    symbolizer = ProcessSymbolizer(TargetProcess(proc.pid), cache=symbolizer.cache)  # new maps
    time.sleep(RECHECK_S)
    assert symbolizer.explain(Vma(beta + 1)).symbol.name == "jit_beta"  # type: ignore[union-attr]
    assert symbolizer.perf_map().skipped == 1  # the malformed first line

    # Sampled: the samples land in anonymous memory, and the perf map names them.
    hot = top(cli, proc.pid)
    assert hot["jit_alpha"]["self_pct"] + hot.get("jit_beta", {}).get("self_pct", 0) > 60, hot


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_perf_basic_prof_names_a_hot_js_function(cli, tmp_path):
    script = tmp_path / "hot.js"
    script.write_text(
        "function hotLoop(n) { let s = 0; for (let i = 0; i < n; i++) "
        "{ s = (s + i * i) % 1000003; } return s; }\n"
        "let t = 0; console.log('ready ' + process.pid);\n"
        "while (true) { t += hotLoop(1e6); }\n"
    )
    node = Path(shutil.which("node") or "node")
    # --perf-basic-prof also writes V8's log; keep it out of the working directory.
    log = ("--no-logfile-per-isolate", f"--logfile={tmp_path / 'v8.log'}")
    with running(node, "--perf-basic-prof", *log, str(script)) as proc:
        try:
            time.sleep(0.5)  # optimised code replaces the interpreted one, and is named
            hot = top(cli, proc.pid, "1.5")
        finally:
            Path(f"/tmp/perf-{proc.pid}.map").unlink(missing_ok=True)
    js = {name: f for name, f in hot.items() if "hotLoop" in name}
    assert sum(f["self_pct"] for f in js.values()) > 40, hot
    assert {f["module"] for f in js.values()} == {f"/tmp/perf-{proc.pid}.map"}


def vdso_symbols(pid: int, tmp_path: Path) -> tuple[int, dict[str, int]]:
    """(start of [vdso], its dynamic symbols) read independently: bytes from
    /proc/PID/mem, symbols by pyelftools."""
    line = next(x for x in Path(f"/proc/{pid}/maps").read_text().splitlines() if "[vdso]" in x)
    start, end = (int(x, 16) for x in line.split()[0].split("-"))
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        image = tmp_path / "vdso.so"
        image.write_bytes(mem.read(end - start))
    with open(image, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        return start, {s.name: s["st_value"] for s in dynsym.iter_symbols() if s["st_value"]}


def test_vdso_is_read_from_memory_and_symbolized(run_target, cli, tmp_path):
    proc = run_target("spin")
    try:
        start, symbols = vdso_symbols(proc.pid, tmp_path)
    except (OSError, StopIteration) as e:
        pytest.skip(f"cannot read the vdso of a child here: {e}")
    rows = cli("maps", str(proc.pid), "--json").json_lines()
    (vdso,) = [r for r in rows if r["path"] == "[vdso]"]
    assert (vdso["opened_via"], vdso["symbol_source"]) == ("memory", "dynsym")
    assert vdso["symbols"] > 0 and vdso["e_type"] == "ET_DYN"
    assert vdso["symbol_sources"][0]["source"] == "memory"
    wanted = [n for n in ("__vdso_clock_gettime", "__vdso_gettimeofday") if n in symbols]
    assert wanted, symbols
    base = int(vdso["base"], 16)
    assert base == start  # the vdso's PT_LOAD is at p_vaddr 0, p_offset 0
    addresses = [base + symbols[n] + 1 for n in wanted]
    out = cli("symbolize", "-p", str(proc.pid), "--json", *map(hex, addresses)).json_lines()
    assert [(r["symbol"], r["symbol_offset"], r["module"]) for r in out] == [
        (n, 1, "[vdso]") for n in wanted
    ]


def can_chroot() -> str | None:
    if os.geteuid() != 0:
        return "chroot needs root"
    if shutil.which("chroot") is None:
        return "chroot is not installed"
    return None


def skip_if_denied(e: RuntimeError, what: str) -> NoReturn:
    """Skip where the kernel refused (EPERM, EACCES: a container without the capability);
    any other failure to start is the test's to report."""
    if "Operation not permitted" in str(e) or "Permission denied" in str(e):
        pytest.skip(f"{what}: {e}")
    raise e


@pytest.fixture
def chroot_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def test_chrooted_static_target_with_a_perf_map_inside_its_root(built, cli, chroot_dir):
    why = can_chroot()
    if why:
        pytest.skip(why)
    exe = built("jitmap-static")
    (chroot_dir / "bin").mkdir()
    (chroot_dir / "tmp").mkdir()
    # Named like a host program: reading the host's /bin/true would give other symbols.
    shutil.copy2(exe, chroot_dir / "bin" / "true")
    try:
        ctx = running(Path(shutil.which("chroot") or "chroot"), str(chroot_dir), "/bin/true")
        proc = ctx.__enter__()
    except RuntimeError as e:
        skip_if_denied(e, "chroot is not permitted here")
    try:
        perf_map = chroot_dir / "tmp" / f"perf-{proc.pid}.map"
        assert not Path(f"/tmp/perf-{proc.pid}.map").exists()  # only inside the root
        start, _size = perf_map_entries(perf_map)["jit_alpha"]
        make_jit = symbol_value(exe, "make_jit")  # ET_EXEC: run-time address = vaddr
        rows = cli("symbolize", "-p", str(proc.pid), "--json", hex(make_jit + 1), hex(start))
        elf, jit = rows.json_lines()
        assert (elf["symbol"], elf["symbol_offset"], elf["base"]) == ("make_jit", 1, "0x0")
        assert (jit["symbol"], jit["module"]) == ("jit_alpha", f"/tmp/perf-{proc.pid}.map")
        mine = [r for r in cli("maps", str(proc.pid), "--json").json_lines()
                if r["path"] and r["path"].endswith("/bin/true")]  # fmt: skip
        assert mine and {r["build_id"] for r in mine} == {build_id_of(exe)}
        # maps shows the file as livesym's root sees it: the chroot's own path.
        assert {r["opened_via"] for r in mine} == {"path"}
    finally:
        ctx.__exit__(None, None, None)


def test_target_whose_files_exist_only_in_its_own_mount_namespace(built, cli, tmp_path):
    # A tmpfs mounted in the target's private mount namespace, as a container's files
    # are: the stripped spin and its debug file are reachable only through
    # /proc/PID/root, and the debuglink is followed there.
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    spin = built("spin")
    stripped, _debug = split_debug(spin, tmp_path / "staging")
    mount = tmp_path / "mnt"
    mount.mkdir()
    script = (
        f"mount -t tmpfs none {mount} && cp {stripped} {stripped}.debug {mount}/ "
        f"&& exec {mount}/{stripped.name}"
    )
    try:
        ctx = running(Path(shutil.which("unshare") or "unshare"), "--mount",
                      "--propagation", "private", "sh", "-c", script)  # fmt: skip
        proc = ctx.__enter__()
    except RuntimeError as e:
        skip_if_denied(e, "a private mount namespace is not permitted here")
    try:
        assert not (mount / stripped.name).exists()  # not from here
        rows = cli("maps", str(proc.pid), "--json").json_lines()
        mine = [r for r in rows if r["path"] == f"{mount}/{stripped.name}"]
        assert mine and {r["opened_via"] for r in mine} == {"root"}
        assert mine[0]["symbol_source"] == f"debuglink:/proc/{proc.pid}/root{mount}/spin.debug"
        base = int(mine[0]["base"], 16)
        (row,) = cli("addr", str(proc.pid), hex(base + symbol_value(spin, "hot_beta") + 3),
                     "--json").json_lines()  # fmt: skip
        assert (row["symbol"], row["symbol_offset"], row["symbol_source"]) == (
            "hot_beta",
            3,
            "debuglink",
        )
        assert row["file"].endswith("/spin.c") and row["line"] > 0
    finally:
        ctx.__exit__(None, None, None)


def test_deleted_executable_rebuilt_at_its_path_is_read_from_the_mapped_file(built, cli, tmp_path):
    spin = built("spin")
    exe = tmp_path / "spin-copy"
    shutil.copy2(spin, exe)
    original = build_id_of(exe)
    with running(exe) as proc:
        # A rebuild lands at the same path: a new file (another build-id), the mapped
        # one deleted. Its symbols would be the same; its build-id tells them apart.
        rebuilt = with_build_id(spin, tmp_path / "rebuilt", "cd" * 20)
        os.replace(rebuilt, exe)
        rows = own_rows(cli("maps", str(proc.pid), "--json").json_lines(), exe)
        rows = [r for r in rows if r["path"] == str(exe)]
        assert rows and all(r["deleted"] and r["opened_via"] == "map_files" for r in rows)
        assert {r["build_id"] for r in rows} == {original}
        base = int(rows[0]["base"], 16)
        (row,) = cli("addr", str(proc.pid), hex(base + symbol_value(spin, "hot_alpha") + 1),
                     "--json").json_lines()  # fmt: skip
        assert (row["symbol"], row["build_id"]) == ("hot_alpha", original)


@pytest.mark.skipif(shutil.which("addr2line") is None, reason="addr2line (binutils) not installed")
def test_the_resolver_gives_source_lines_on_demand_only(run_target, built):
    # The engine's resolver explains samples without DWARF; the dashboard asks for a
    # frame's line afterwards (AddressResolver.source_line) and gets addr2line's answer.
    spin = built("spin")
    proc = run_target("spin")
    target = TargetProcess(proc.pid)
    resolver = AddressResolver(target, MapsWatcher(target))
    generation = resolver.watcher.current
    base = next(m.start for m in generation.snapshot.entries if m.path == str(spin))
    vaddr = symbol_value(spin, "hot_gamma") + 8
    expl = resolver.explain(base + vaddr, time.monotonic())
    assert expl.symbol is not None and expl.symbol.name == "hot_gamma"
    assert not resolver.symbolizer(generation).cache._lines  # no DWARF read per sample
    line = resolver.source_line(generation.number, base + vaddr)
    want = subprocess.run(["addr2line", "-e", str(spin), hex(vaddr)], capture_output=True,
                          text=True, check=True).stdout.split(" (")[0].strip()  # fmt: skip
    assert line is not None and line.text() == want
