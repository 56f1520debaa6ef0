"""The CLI as users and scripts meet it: outputs, error lines, exit codes, streaming."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from livesym.addr.kinds import ElfOffset, ElfVaddr
from livesym.errors import EXIT_CAPTURE, EXIT_FAILURE, EXIT_FILE, EXIT_TARGET, EXIT_USAGE
from livesym.symbolize.explain import explain_elf_offset, explain_elf_vaddr, to_json
from livesym.symbolize.objects import ObjectCache
from tests.support.procs import running

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def assert_one_line_error(result, code: int, *words: str) -> None:
    assert result.code == code, (result.code, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("livesym: ")
    assert "Traceback" not in result.err
    for word in words:
        assert word in lines[0], lines[0]


def sample_addresses(path: str) -> list[int]:
    """Hits, gaps between symbols, .bss, and addresses outside every PT_LOAD."""
    obj = ObjectCache().load(path)
    assert obj.image is not None and obj.symbols is not None
    st = obj.symbols
    picks: list[int] = []
    for i in range(0, len(st), max(1, len(st) // 40)):
        picks += [st.start(i), st.end(i) - 1, st.end(i)]  # end is often a gap
    data = [s for s in obj.image.segments if s.p_memsz > s.p_filesz]
    picks += [s.p_vaddr + s.p_filesz + 8 for s in data]  # zero-filled tail (.bss)
    top = max(s.p_vaddr + s.p_memsz for s in obj.image.segments)
    picks += [0, 1, top + 0x10000]
    return picks


# libc and ls have gaps no symbol covers (ls is stripped): their FDEs bound them alike.
@pytest.mark.parametrize("path", [LIBC, "/usr/bin/ls"])
def test_symbolize_json_fast_path_equals_the_explanation_records(cli, path):
    addresses = sample_addresses(path)
    result = cli("symbolize", "-e", path, "--json", stdin="\n".join(map(hex, addresses)) + "\n")
    assert result.code == 0, result.err
    rows = result.json_lines()
    obj = ObjectCache().load(path)
    expected = [to_json(explain_elf_vaddr(obj, ElfVaddr(a))) for a in addresses]
    assert rows == expected


def test_symbolize_offsets_equal_the_explanation_records(cli):
    obj = ObjectCache().load(LIBC)
    assert obj.image is not None
    offsets = [seg.p_offset + 0x10 for seg in obj.image.segments] + [obj.image.size + 0x1000]
    result = cli("symbolize", "-e", LIBC, "--offset", "--json", *map(hex, offsets))
    assert result.json_lines() == [to_json(explain_elf_offset(obj, ElfOffset(o))) for o in offsets]
    assert result.json_lines()[-1]["reason"] == "no_load_segment"


def test_symbolize_keeps_input_order_and_reports_bad_lines_without_stopping(cli):
    result = cli("symbolize", "-e", LIBC, "--json", stdin="0x10\nnot-an-address\n\n42\n-5\n")
    rows = result.json_lines()
    assert [r["address"] for r in rows] == ["0x10", "not-an-address", "0x2a", "-5"]
    assert "error" in rows[1] and "error" in rows[3]
    assert result.code == EXIT_FAILURE
    assert result.err.strip() == "livesym: 2 of 4 inputs were not addresses"


def test_symbolize_text_output_names_function_and_offset(cli):
    obj = ObjectCache().load(LIBC)
    assert obj.symbols is not None
    i = obj.symbols.index_of(obj.symbols.start(100))
    name = obj.symbols.demangled(i)
    result = cli("symbolize", "-e", LIBC, hex(obj.symbols.start(i) + 2))
    assert result.out.strip() == f"{obj.symbols.start(i) + 2:#x}  {name}+0x2  ({LIBC})"


def test_symbolize_answers_each_line_as_a_coprocess():
    """A caller that writes one address and waits for its answer must get it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "livesym", "symbolize", "-e", LIBC, "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for address in ("0x10", "0x28000"):
            proc.stdin.write(address.encode() + b"\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 10)
            assert ready, "no answer within 10 s: output not flushed per read"
            assert json.loads(proc.stdout.readline())["address"] == address
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    assert proc.returncode == 0


def test_symbolize_pid_with_offset_is_a_usage_error(cli):
    assert_one_line_error(cli("symbolize", "-p", "1", "--offset", "0x1"), EXIT_USAGE, "--offset")


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (("maps", "999999999"), EXIT_TARGET, ("no such process", "ps")),
        (("addr", "999999999", "0x1000"), EXIT_TARGET, ("no such process",)),
        (("symbolize", "-p", "999999999", "0x1"), EXIT_TARGET, ("no such process",)),
        (("symbolize", "-e", "/nonexistent/file", "0x1"), EXIT_FILE, ("no such file",)),
        (("symbolize", "-e", "/etc/passwd", "0x1"), EXIT_FILE, ("not an ELF file",)),
        (("symbolize", "-e", "/", "0x1"), EXIT_FILE, ("directory",)),
        (("addr", str(os.getpid()), "zz"), EXIT_USAGE, ("not an address",)),
        (("maps", "abc"), EXIT_USAGE, ("not a process id",)),
        (("symbolize", "0x1"), EXIT_USAGE, ("-e", "-p")),
        (("frobnicate",), EXIT_USAGE, ("invalid choice",)),
        (("attach", "1", "--refresh", "0"), EXIT_USAGE, ("--refresh", "0.05")),
        (("replay", "x.json", "--refresh", "nan"), EXIT_USAGE, ("--refresh",)),
    ],
)
def test_failures_are_one_line_with_a_documented_exit_code(cli, args, code, words):
    assert_one_line_error(cli(*args), code, *words)


def test_damaged_elf_is_a_file_error(cli, tmp_path: Path):
    data = Path("/usr/bin/true").read_bytes()
    broken = tmp_path / "broken"
    broken.write_bytes(data[:0x48])  # ELF header, then nothing the header points to
    assert_one_line_error(cli("symbolize", "-e", str(broken), "0x1"), EXIT_FILE, "damaged")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as another user")
def test_maps_of_another_users_process_says_what_to_do(installed, tmp_path: Path):
    # (the installed livesym: a clone may sit where user nobody cannot read it)
    result = subprocess.run(
        [str(installed.livesym), "maps", "1"],
        user=65534,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    assert result.returncode == EXIT_TARGET, result.stderr
    assert result.stderr.strip() == (
        "livesym: cannot read the maps of 1: permission denied; run as the process's user (0) "
        "or as root"
    )


def test_help_is_fast_and_imports_nothing_heavy():
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "livesym", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0 and "symbolize" in out.stdout
    imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines()}
    assert not imported & {"textual", "elftools", "psutil", "rich"}
    assert time.perf_counter() - start < 5  # generous: catches an accidental heavy import tree


def test_demo_builds_starts_explains_and_stops_its_target(cli, tmp_path: Path, monkeypatch):
    result = cli("demo", "--text", "--seconds", "2", timeout=120)
    assert result.code == 0, result.err
    table = result.out.split("$ livesym top")[1].split("$ livesym addr")[0]
    for name in ("hot_alpha", "hot_beta", "hot_gamma"):
        assert re.search(rf"^\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+{name}\s", table, re.M), table
    # The conversion chain of each top function's hottest instruction.
    chains = re.findall(r"^symbol\s+(hot_\w+|leaf_work)\+0x[0-9a-f]+$", result.out, re.M)
    assert len(chains) == 3
    assert "base        base = start - (pgoff - p_offset + p_vaddr) = " in result.out
    pid = int(result.out.split("started spin as pid ")[1].split()[0])
    assert not Path(f"/proc/{pid}").exists(), "demo left its target running"


def test_an_error_naming_a_hostile_path_is_one_inert_line(cli, tmp_path: Path):
    bad = tmp_path / "cap\x1b[31m\nforged.json"
    bad.write_bytes(b"x")
    result = cli("report", str(bad))
    assert_one_line_error(result, EXIT_CAPTURE, "cap\\x1b[31m\\nforged.json", "livesym record")
    assert "\x1b" not in result.err


def _as_nobody_readable(exe: Path, where: Path) -> Path:
    copy = where / exe.name
    shutil.copy2(exe, copy)
    os.chmod(copy, 0o755)
    return copy


@pytest.mark.skipif(os.geteuid() != 0, reason="the remedies for root are about root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
def test_root_refused_without_cap_sys_ptrace_is_told_so_not_to_run_as_root(built, public):
    # GIVEN a target of another user, and livesym as root without CAP_SYS_PTRACE (as in a
    # container started without it)
    spin = _as_nobody_readable(built("spin"), public)
    drop = ["setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"]
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    with running(Path(shutil.which("setpriv") or "setpriv"), *nobody[1:], str(spin)) as proc:
        pid = proc.pid  # setpriv execs spin
        # WHEN it is asked to trace it
        done = subprocess.run(
            [*drop, sys.executable, "-m", "livesym", "top", str(pid), "--sampler", "ptrace",
             "--duration", "1"], capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    # THEN the one line names what is missing, and does not tell root to be root
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "CAP_SYS_PTRACE" in done.stderr, done.stderr
    assert "or as root" not in done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
def test_a_user_refused_a_process_of_another_user_is_told_whose_it_is(built, public, installed):
    spin = _as_nobody_readable(built("spin"), public)
    setpriv = Path(shutil.which("setpriv") or "setpriv")
    with running(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", str(spin)) as proc:
        done = subprocess.run(
            ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", str(installed.livesym),
             "maps", str(proc.pid)], capture_output=True, text=True, timeout=60, cwd="/",
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "run as the process's user (65534) or as root" in done.stderr, done.stderr


def test_a_demo_that_cannot_build_its_target_exits_with_its_own_code(tmp_path):
    env = {**os.environ, "CC": "no-such-compiler-livesym", "LIVESYM_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "livesym", "demo", "--text"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 6, done.stderr
    assert done.stderr.count("\n") == 1 and "cannot build the demo target" in done.stderr
