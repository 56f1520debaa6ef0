"""Stripped binaries and their debug files, made with binutils as distributions make them.

- ``split_debug``: ``objcopy --only-keep-debug``, ``strip``, ``objcopy
  --add-gnu-debuglink`` (Debian's dh_strip, by hand).
- ``build_id_tree``: a debug root with ``.build-id/xx/rest.debug``.
- ``minidebuginfo``: Fedora's find-debuginfo recipe for ``.gnu_debugdata``: the
  function symbols .dynsym lacks, in a symtab-only ELF, xz-compressed and added
  to the stripped binary.

Every helper skips the calling test (with the reason) when a tool is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

TOOLS = ("objcopy", "strip", "nm", "xz")


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (binutils/xz-utils) to make debug files")


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    out = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, check=False, cwd=cwd
    )
    if out.returncode != 0:
        raise AssertionError(f"{argv[0]} failed: {out.stderr.strip()[:300]}")
    return out.stdout


def split_debug(
    exe: Path, out_dir: Path, name: str | None = None, strip: str = "--strip-all"
) -> tuple[Path, Path]:
    """(stripped copy, its debug file ``<name>.debug`` beside it, linked by debuglink).
    ``strip="--strip-debug"`` keeps the copy's .symtab."""
    need("objcopy", "strip")
    out_dir.mkdir(parents=True, exist_ok=True)
    stripped = out_dir / (name or exe.name)
    debug = out_dir / f"{stripped.name}.debug"
    run("objcopy", "--only-keep-debug", exe, debug)
    run("strip", strip, "-o", stripped, exe)
    # objcopy reads the debug file by the name given and stores its basename and CRC.
    run("objcopy", f"--add-gnu-debuglink={debug.name}", stripped.name, cwd=out_dir)
    return stripped, debug


def build_id_of(path: Path) -> str:
    with open(path, "rb") as f:
        for sec in ELFFile(f).iter_sections():
            if sec.header["sh_type"] == "SHT_NOTE":
                for note in sec.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        return str(note["n_desc"])
    raise AssertionError(f"{path} has no build-id")


def build_id_tree(debug: Path, root: Path, build_id: str) -> Path:
    """``debug`` copied to ``root/.build-id/xx/rest.debug``; returns the copy."""
    place = root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    place.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(debug, place)
    return place


def minidebuginfo(exe: Path, out: Path) -> Path:
    """A stripped copy of ``exe`` with .gnu_debugdata as Fedora builds it."""
    need(*TOOLS)
    work = out.parent / f"{out.name}.mini"
    work.mkdir(parents=True, exist_ok=True)
    dynsyms = {
        line.split()[0] for line in run("nm", "-D", "--format=posix", "--defined-only", exe)
        .splitlines() if line.strip()
    }  # fmt: skip
    funcs = {
        parts[0]
        for parts in (
            line.split() for line in run("nm", "--format=posix", "--defined-only", exe).splitlines()
        )
        if len(parts) >= 2 and parts[1] in ("T", "t")
    }
    keep = work / "keep_symbols"
    keep.write_text("".join(f"{name}\n" for name in sorted(funcs - dynsyms)))
    debug = work / "debuginfo"
    mini = work / "mini_debuginfo"
    run("objcopy", "--only-keep-debug", exe, debug)
    run("objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
        f"--keep-symbols={keep}", debug, mini)  # fmt: skip
    run("xz", "-f", mini)
    run("strip", "--strip-all", "-o", out, exe)
    run("objcopy", f"--add-section=.gnu_debugdata={mini}.xz", out)
    return out


def with_build_id(src: Path, out: Path, build_id: str) -> Path:
    """A copy of ``src`` whose build-id note says ``build_id`` (same length): the same
    bytes otherwise, i.e. "another build" to anything that checks build-ids."""
    old = bytes.fromhex(build_id_of(src))
    new = bytes.fromhex(build_id)
    assert len(new) == len(old)
    data = src.read_bytes()
    assert data.count(old) == 1, "the build-id bytes occur elsewhere in the file"
    out.write_bytes(data.replace(old, new))
    out.chmod(src.stat().st_mode)
    return out
