"""Offline re-symbolization: a capture of a stripped spin gets its names back by build-id.

spin is copied and stripped (``strip --strip-all`` keeps the build-id note),
the stripped copy is run and recorded, and its frames are unresolved. Then
``report`` and ``export`` are given the unstripped build (``--binaries``) or
its debug file in a .build-id tree (``--debug-dir``) and the names come back;
a rebuilt spin of the same name but another build-id is refused, never used.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from livesym.capture.reader import read_capture
from livesym.capture.resymbolize import resymbolize
from livesym.elf.debugfile import build_id_paths
from livesym.elf.image import load_image
from livesym.engine import Engine
from livesym.sample_targets import compiler, source_dir
from livesym.sampling.perf_event import PerfSampler
from livesym.target.process import TargetProcess
from tests.support.procs import running
from tests.support.spin import HOT

pytestmark = pytest.mark.perf

STRIP = shutil.which("strip") or shutil.which("objcopy")


@pytest.fixture(scope="module")
def stripped(built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(capture of a stripped spin, the directory of the unstripped build)."""
    reason = PerfSampler.available()
    if reason is not None:
        pytest.skip(reason)
    if STRIP is None:
        pytest.skip("neither strip nor objcopy is installed (binutils) to strip spin")
    spin = built("spin")
    work = tmp_path_factory.mktemp("stripped")
    copy = work / "bin" / "spin"
    copy.parent.mkdir()
    shutil.copy2(spin, copy)
    subprocess.run([STRIP, "--strip-all", str(copy)], check=True)
    capture = work / "spin.json"
    with running(copy) as proc:
        engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
        engine.captures.record_to(capture)
        asyncio.run(engine.run(asyncio.Event(), duration=1.2))
    yield capture, spin.parent


def functions(result: Any) -> set[str | None]:
    assert result.code == 0, result.err
    return {f["symbol"] for f in json.loads(result.out)["functions"]}


def test_a_stripped_target_records_unresolved_frames(stripped, built):
    capture_path, _ = stripped
    capture = read_capture(capture_path)
    spin = next(o for o in capture.objects if o.path.endswith("/bin/spin"))
    assert spin.build_id == load_image(built("spin")).build_id_hex  # strip keeps the note
    own = [f for f in capture.frames if f.object == spin.id]
    assert own and all(f.symbol is None and f.elf_vaddr is not None for f in own)


def test_binaries_with_the_recorded_build_id_give_the_names_back(stripped, cli):
    capture, binaries = stripped
    assert not functions(cli("report", str(capture), "--json", "--limit", "1000")) & HOT
    result = cli("report", str(capture), "--json", "--limit", "1000", "--binaries", str(binaries))
    assert functions(result) >= HOT
    assert json.loads(result.out)["errors"] == []


def test_resymbolized_frames_say_where_their_names_came_from(stripped, built):
    capture_path, binaries = stripped
    before = read_capture(capture_path)
    after = resymbolize(before, [], [binaries])
    spin = next(o for o in after.objects if o.path.endswith("/bin/spin"))
    assert spin.symbol_source is not None and "symtab" in spin.symbol_source
    own = [f for f in after.frames if f.object == spin.id]
    assert own and all(f.symbol is not None and f.reason is None for f in own)
    assert all(str(built("spin")) in f.detail for f in own)
    # Nothing but the names changed: the conversion is the one made on the box.
    for old, new in zip(before.frames, after.frames, strict=True):
        assert (old.vma, old.base, old.elf_vaddr, old.steps) == (
            new.vma, new.base, new.elf_vaddr, new.steps
        )  # fmt: skip
        if new.symbol is not None and new.object == spin.id:
            assert new.symbol_vaddr is not None and new.symbol_offset is not None
            assert new.symbol_vaddr + new.symbol_offset == new.elf_vaddr


def test_a_debug_file_in_a_build_id_tree_gives_the_names_back(stripped, built, cli, tmp_path):
    capture, _ = stripped
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        pytest.skip("objcopy is not installed (binutils) to make a debug file")
    build_id = load_image(built("spin")).build_id_hex
    assert build_id is not None
    debug = tmp_path / "debug" / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    debug.parent.mkdir(parents=True)
    subprocess.run([objcopy, "--only-keep-debug", str(built("spin")), str(debug)], check=True)
    result = cli("report", str(capture), "--json", "--limit", "1000",
                 "--debug-dir", str(tmp_path / "debug"))  # fmt: skip
    assert functions(result) >= HOT


def test_a_rebuilt_binary_of_the_same_name_is_refused(stripped, cli, tmp_path):
    capture, _ = stripped
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler to build a different spin")
    other = tmp_path / "other" / "spin"
    other.parent.mkdir()
    subprocess.run(
        [*shlex.split(cc), "-O0", "-pthread", "-I", str(source_dir()), "-o", str(other),
         str(source_dir() / "spin.c")],
        check=True,
    )  # fmt: skip
    result = cli("report", str(capture), "--json", "--limit", "1000",
                 "--binaries", str(other.parent))  # fmt: skip
    assert not functions(result) & HOT  # never used
    errors = json.loads(result.out)["errors"]
    assert any(str(other) in e and "not used" in e for e in errors), errors
    # The text report says so too.
    text = cli("report", str(capture), "--binaries", str(other.parent))
    assert text.code == 0 and f"note: {other}" in text.out


def test_export_takes_the_found_names_too(stripped, cli, tmp_path):
    from livesym.export.profile_proto import Profile

    capture, binaries = stripped
    out = tmp_path / "out.pb.gz"
    result = cli("export", str(capture), "--format", "pprof", "-o", str(out),
                 "--binaries", str(binaries))  # fmt: skip
    assert result.code == 0, result.err
    profile = Profile.FromString(gzip.decompress(out.read_bytes()))
    table = list(profile.string_table)
    assert {table[f.name] for f in profile.function} >= HOT
    folded = cli("export", str(capture), "--format", "collapsed", "-o", "-",
                 "--binaries", str(binaries))  # fmt: skip
    assert all(name in folded.out for name in HOT)


def test_a_missing_symbol_directory_is_one_line_with_the_file_exit_code(stripped, cli, tmp_path):
    capture, _ = stripped
    result = cli("report", str(capture), "--binaries", str(tmp_path / "nowhere"))
    assert result.code == 4
    assert result.err == f"livesym: --binaries {tmp_path / 'nowhere'}: no such directory; " \
        "give a directory of ELF files\n"  # fmt: skip


def test_hostile_build_ids_and_junk_files_are_ignored(built, tmp_path):
    # A crafted capture's build-id must not walk out of the debug directory, and files
    # that are not ELF (or are damaged) in the directories are skipped.
    from livesym.records import ObjectRecord
    from tests.unit.test_export import capture, native

    outside = tmp_path / "etc"
    outside.mkdir()
    shutil.copy2(built("spin"), outside / "x.debug")
    debug = tmp_path / "debug"
    (debug / ".build-id").mkdir(parents=True)
    (debug / "junk.so").write_bytes(b"\x7fELF" + b"\xff" * 60)
    (debug / "notes.txt").write_text("not ELF")
    c = capture([native(0, None, reason="no_symbols")], [(0,)], [(0.0, 7, 0, 0)])
    crafted = ObjectRecord(0, "/usr/lib/libx.so", "../../etc/x", "ET_DYN", 64, "EM_X86_64", ())
    c = dataclasses.replace(c, objects=(crafted,))
    after = resymbolize(c, [debug], [])
    assert after.frames == c.frames and after.session.get("errors") == []
    # The crafted id names no path at all; a real one names its .build-id file.
    assert build_id_paths(debug, "../../etc/x") == []
    (debug / ".build-id" / "ab").mkdir()
    (debug / ".build-id" / "ab" / "cdef.debug").write_bytes(b"")
    assert build_id_paths(debug, "abcdef") == [str(debug / ".build-id/ab/cdef.debug")]
