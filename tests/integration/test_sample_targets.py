"""The sample targets build, have the ELF layouts they promise, and behave as documented.

The targets ship inside the package as ``livesym.sample_targets`` (the top-level
sample_targets/ directory), so they are tested through that name, as ``demo`` uses them.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.constants import P_FLAGS
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

import livesym.sample_targets as sample_targets
from livesym.sample_targets import TARGETS, BuildError, TargetUnavailable, build
from tests.support.procs import running, thread_names

HOT_ADDR = 0x801234  # --section-start=.hot in the twoseg spec
PAGE = 0x1000
EXES = [name for name, spec in TARGETS.items() if spec.kind == "exe"]


# --------------------------------------------------------------------------- fixtures


Built = dict[str, Path | TargetUnavailable]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Every target built into one temporary directory (or why it cannot be built here)."""
    if sample_targets.compiler() is None:
        pytest.skip("no C compiler ($CC, cc, gcc) on this machine")
    out = tmp_path_factory.mktemp("targets")
    paths: Built = {}
    for name in TARGETS:
        try:
            paths[name] = build(name, out)
        except TargetUnavailable as exc:  # e.g. no libc.a for spin-static
            paths[name] = exc
    return paths


def target(built: Built, name: str) -> Path:
    path = built[name]
    if isinstance(path, TargetUnavailable):
        pytest.skip(str(path))
    return path


# --------------------------------------------------------------------------- ELF helpers


@dataclass(frozen=True)
class Elf:
    e_type: str
    loads: list[tuple[int, int, int, int]]  # (p_offset, p_vaddr, p_filesz, p_flags)
    interp: bool
    symbols: dict[str, int]  # .symtab FUNC symbols, name -> st_value
    dynsym: dict[str, int]  # defined FUNC symbols in .dynsym
    needed: list[str]
    runpath: list[str]
    soname: str | None


def read_elf(path: Path) -> Elf:
    with path.open("rb") as f:
        elf = ELFFile(f)
        loads = [
            (seg["p_offset"], seg["p_vaddr"], seg["p_filesz"], seg["p_flags"])
            for seg in elf.iter_segments()
            if seg["p_type"] == "PT_LOAD"
        ]
        interp = any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())

        def funcs(section_name: str) -> dict[str, int]:
            sec = elf.get_section_by_name(section_name)
            if not isinstance(sec, SymbolTableSection):
                return {}
            return {
                sym.name: sym["st_value"]
                for sym in sec.iter_symbols()
                if sym["st_info"]["type"] == "STT_FUNC" and sym["st_shndx"] != "SHN_UNDEF"
            }

        needed: list[str] = []
        runpath: list[str] = []
        soname = None
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                for tag in sec.iter_tags():
                    entry: Any = tag  # pyelftools sets .needed/.runpath/... per tag
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(entry.needed)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        runpath.append(entry.runpath)
                    elif tag.entry.d_tag == "DT_RPATH":
                        runpath.append(entry.rpath)
                    elif tag.entry.d_tag == "DT_SONAME":
                        soname = entry.soname
        return Elf(
            e_type=elf.header["e_type"],
            loads=loads,
            interp=interp,
            symbols=funcs(".symtab"),
            dynsym=funcs(".dynsym"),
            needed=needed,
            runpath=runpath,
            soname=soname,
        )


def exec_loads(info: Elf) -> list[tuple[int, int, int, int]]:
    return [load for load in info.loads if load[3] & P_FLAGS.PF_X]


# --------------------------------------------------------------------------- /proc helpers


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    offset: int
    path: str


def maps(pid: int) -> list[Mapping]:
    result = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        start, end = (int(x, 16) for x in fields[0].split("-"))
        path = fields[5] if len(fields) > 5 else ""
        result.append(Mapping(start, end, fields[1], int(fields[2], 16), path))
    return result


def thread_cpu(pid: int) -> dict[str, int]:
    """comm -> utime+stime (clock ticks) for each thread of pid."""
    result: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2 :].split()  # rest[0] is field 3 (state)
        result[comm] = result.get(comm, 0) + int(rest[11]) + int(rest[12])
    return result


# --------------------------------------------------------------------------- the specs


def test_specs_are_consistent() -> None:
    for name, spec in TARGETS.items():
        assert spec.name == name
        assert spec.kind in ("exe", "lib")
        assert spec.kind == "exe" or name.endswith(".so")
        for source in spec.sources:
            assert (sample_targets.source_dir() / source).is_file(), source
        for dep in spec.needs:
            assert TARGETS[dep].kind == "lib"
        for _, share in spec.hot_functions:
            assert 0 < share <= 1


def test_hot_functions_exist_in_the_built_files(built: Built) -> None:
    for name in EXES:
        path = built[name]
        if isinstance(path, TargetUnavailable):
            continue
        defined = dict(read_elf(path).symbols)
        for dep in TARGETS[name].needs:
            defined.update(read_elf(target(built, dep)).dynsym)
        for function, _ in TARGETS[name].hot_functions:
            assert function in defined, f"{name}: {function} not defined"


def test_sources_compile_without_warnings() -> None:
    cc = sample_targets.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    done: set[tuple[str, tuple[str, ...]]] = set()
    for spec in TARGETS.values():
        for source in spec.sources:
            key = (source, spec.cflags)
            if key in done:
                continue
            done.add(key)
            proc = subprocess.run(
                [*shlex.split(cc), *spec.cflags, "-Werror", "-fsyntax-only", source],
                cwd=sample_targets.source_dir(),
                capture_output=True,
                text=True,
                check=False,
            )
            assert proc.returncode == 0 and proc.stderr == "", f"{source}: {proc.stderr}"


# --------------------------------------------------------------------------- ELF layouts


def test_spin_is_pie(built: Built) -> None:
    info = read_elf(target(built, "spin"))
    assert info.e_type == "ET_DYN"
    assert info.interp
    assert {"hot_alpha", "hot_beta", "hot_gamma", "leaf_work"} <= info.symbols.keys()


def test_spin_nopie_is_exec(built: Built) -> None:
    info = read_elf(target(built, "spin-nopie"))
    assert info.e_type == "ET_EXEC"
    assert info.interp
    assert min(load[1] for load in info.loads) == 0x400000


def test_spin_static_is_exec_without_interp(built: Built) -> None:
    info = read_elf(target(built, "spin-static"))
    assert info.e_type == "ET_EXEC"
    assert not info.interp
    assert info.needed == []


def test_twoseg_has_two_executable_loads_one_unaligned(built: Built) -> None:
    info = read_elf(target(built, "twoseg"))
    xloads = exec_loads(info)
    assert len(xloads) == 2, xloads
    unaligned = [load for load in xloads if load[0] % PAGE != 0]
    assert len(unaligned) == 1, xloads
    offset, vaddr, filesz, _ = unaligned[0]
    assert vaddr == HOT_ADDR and offset % PAGE == HOT_ADDR % PAGE
    assert info.symbols["hot_section_work"] == HOT_ADDR
    assert vaddr <= info.symbols["hot_section_work"] < vaddr + filesz
    aligned = next(load for load in xloads if load[0] % PAGE == 0)
    assert aligned[1] <= info.symbols["text_work"] < aligned[1] + aligned[2]


def test_twoseg_readelf_agrees(built: Built) -> None:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) not installed")
    out = subprocess.run(
        [readelf, "-lW", str(target(built, "twoseg"))], capture_output=True, text=True, check=True
    ).stdout
    xloads = [
        int(m.group(1), 16)
        for m in re.finditer(r"^\s*LOAD\s+(0x[0-9a-f]+)\s+.*\sR E\s+0x[0-9a-f]+$", out, re.M)
    ]
    assert len(xloads) == 2, out
    assert sorted(off % PAGE for off in xloads) == [0, HOT_ADDR % PAGE], out


def test_libhot_exports(built: Built) -> None:
    info = read_elf(target(built, "libhot.so"))
    assert info.e_type == "ET_DYN"
    assert not info.interp
    assert {"hot_in_lib", "lib_helper"} <= info.dynsym.keys()
    assert info.soname == "libhot.so"


def test_uselib_links_libhot_via_origin(built: Built) -> None:
    info = read_elf(target(built, "uselib"))
    assert "libhot.so" in info.needed
    assert info.runpath == ["$ORIGIN"]


@pytest.mark.parametrize(("lib", "function"), [("a", "churn_a_work"), ("b", "churn_b_work")])
def test_churn_libraries_export(built: Built, lib: str, function: str) -> None:
    info = read_elf(target(built, f"libchurn_{lib}.so"))
    assert info.e_type == "ET_DYN"
    assert function in info.dynsym


# --------------------------------------------------------------------------- running


@pytest.mark.parametrize("name", EXES)
def test_program_starts_and_maps_itself(built: Built, name: str) -> None:
    path = target(built, name).resolve()
    with running(path) as proc:
        mine = [m for m in maps(proc.pid) if m.path == str(path)]
        assert any(m.perms == "r-xp" for m in mine), mine
        libc = any(re.search(r"/libc[.-]", m.path) for m in maps(proc.pid))
        assert libc == ("-static" not in TARGETS[name].ldflags)
        assert proc.poll() is None


def test_uselib_maps_libhot(built: Built) -> None:
    lib = str(target(built, "libhot.so").resolve())
    with running(target(built, "uselib")) as proc:
        assert any(m.path == lib and m.perms == "r-xp" for m in maps(proc.pid))


def test_churn_maps_and_unmaps_its_libraries(built: Built) -> None:
    libs = {str(target(built, f"libchurn_{x}.so").resolve()) for x in "ab"}
    seen: set[str] = set()
    with running(target(built, "churn")) as proc:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and seen != libs:
            seen |= {m.path for m in maps(proc.pid) if m.path in libs and m.perms == "r-xp"}
            time.sleep(0.005)
    # At least one library seen, and in 2 s (~100 swaps) normally both.
    assert seen, "neither libchurn_a.so nor libchurn_b.so was ever mapped"
    assert seen == libs


def test_twoseg_maps_two_executable_ranges_of_itself(built: Built) -> None:
    path = target(built, "twoseg").resolve()
    text_load = min(exec_loads(read_elf(path)), key=lambda load: load[1])
    with running(path) as proc:
        rx = [m for m in maps(proc.pid) if m.path == str(path) and m.perms == "r-xp"]
    assert len(rx) == 2, rx
    low, high = sorted(rx, key=lambda m: m.start)
    # The .hot mapping has the same load bias as .text and covers the page of 0x801234,
    # mapped from the page-rounded-down p_offset.
    bias = low.start - (text_load[1] & ~(PAGE - 1))
    assert high.start == bias + (HOT_ADDR & ~(PAGE - 1))
    assert low.offset == text_load[0]
    assert high.offset % PAGE == 0 and high.offset != low.offset


@pytest.fixture(scope="module")
def spin_proc(built: Built) -> Iterator[int]:
    with running(target(built, "spin")) as proc:
        yield proc.pid


def test_spin_thread_names(spin_proc: int) -> None:
    assert sorted(thread_names(spin_proc).values()) == ["alpha", "beta", "gamma", "spin"]


def test_spin_cpu_split_matches_duty_cycles(spin_proc: int) -> None:
    # (whatever else runs: the workers burn their budgets in rounds, sample_targets/spin.c)
    before = thread_cpu(spin_proc)
    time.sleep(1.5)
    after = thread_cpu(spin_proc)
    used = {name: after[name] - before[name] for name in ("alpha", "beta", "gamma")}
    total = sum(used.values())
    assert total > 0, (before, after)
    for name, duty in (("alpha", 50), ("beta", 30), ("gamma", 15)):
        share = used[name] / total
        assert abs(share - duty / 95) < 0.05, f"{name}: {share:.3f} of {used}"


def test_spin_extra_idle_threads(built: Built) -> None:
    with running(target(built, "spin"), "--threads", "200") as proc:
        names = list(thread_names(proc.pid).values())
    assert names.count("idle") == 200
    assert {"alpha", "beta", "gamma"} <= set(names)


def test_spin_duration_argument_exits_cleanly(built: Built) -> None:
    with running(target(built, "spin"), "0.3") as proc:
        assert proc.wait(timeout=5) == 0


def test_running_raises_when_program_fails(tmp_path: Path) -> None:
    script = tmp_path / "fails"
    script.write_text("#!/bin/sh\necho 'something broke' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(RuntimeError, match="something broke"), running(script):
        pass


def test_running_times_out(tmp_path: Path) -> None:
    script = tmp_path / "silent"
    script.write_text("#!/bin/sh\nexec sleep 30\n")
    script.chmod(0o755)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="not ready"), running(script, timeout=0.3):
        pass
    assert time.monotonic() - start < 3


# --------------------------------------------------------------------------- build()


def test_build_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if sample_targets.compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("LIVESYM_CACHE", str(tmp_path / "cache"))
    first = build("uselib")
    assert first.is_relative_to(tmp_path / "cache" / "targets")
    lib = first.parent / "libhot.so"
    stamps = (first.stat().st_mtime_ns, lib.stat().st_mtime_ns)
    time.sleep(0.01)
    second = build("uselib")
    assert second == first
    assert (first.stat().st_mtime_ns, lib.stat().st_mtime_ns) == stamps
    # Same with an explicit output directory.
    out = tmp_path / "out"
    a = build("twoseg", out)
    mtime = a.stat().st_mtime_ns
    assert build("twoseg", out) == a and a.stat().st_mtime_ns == mtime
    # A different compiler is a different build.
    gcc = shutil.which("gcc")
    if gcc is not None:
        monkeypatch.setenv("CC", f"{gcc} -DLIVESYM_OTHER=1")
        assert build("uselib") != first


def test_concurrent_builds(tmp_path: Path) -> None:
    if sample_targets.compiler() is None:
        pytest.skip("no C compiler")
    out = tmp_path / "out"
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: build("churn", out), range(4)))
    assert len(set(paths)) == 1
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "churn",
        "libchurn_a.so",
        "libchurn_b.so",
    ]
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_broken_compiler_gives_one_line_build_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", "/bin/false")
    with pytest.raises(BuildError) as info:
        build("spin", tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert "spin" in message and "/bin/false" in message
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_compile_error_is_reported_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cc = sample_targets.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("CC", f"{cc} -include /nonexistent/livesym.h")
    with pytest.raises(BuildError) as info:
        build("twoseg", tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert "twoseg" in message and "/nonexistent/livesym.h" in message


def test_missing_compiler_says_install_gcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, no gcc
    assert sample_targets.compiler() is None
    with pytest.raises(BuildError, match="install gcc") as info:
        build("spin", tmp_path)
    assert "\n" not in str(info.value)


def test_unknown_target() -> None:
    with pytest.raises(BuildError, match="unknown sample target"):
        build("no-such-target")


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LIVESYM_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert sample_targets.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("LIVESYM_CACHE")
    assert sample_targets.cache_dir() == tmp_path / "b" / "livesym"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert sample_targets.cache_dir() == Path.home() / ".cache" / "livesym"
