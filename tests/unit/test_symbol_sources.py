"""Symbol sources on synthetic and hostile input: debuglink, build-id paths, MiniDebugInfo
bounds, perf maps, the vdso and mapped-file choice of a target (a fake /proc tree)."""

from __future__ import annotations

import lzma
import os
import struct
import zlib
from pathlib import Path

import pytest

from livesym.addr.maps import parse_maps_line
from livesym.elf.debugfile import (
    HOW_DEBUGLINK,
    DebugFile,
    DebugLink,
    build_id_paths,
    check_debug_file,
    debuglink_paths,
    find_debug_file,
    read_debuglink,
)
from livesym.elf.image import load_image
from livesym.elf.minidebug import decompress_bounded, load_minidebuginfo
from livesym.records import Reason, Unresolved
from livesym.symbolize.objects import ObjectCache
from livesym.symbolize.perfmap import MAX_LINE, PerfMap
from livesym.symbolize.sources import SymbolSearch
from livesym.target.process import TargetProcess
from tests.support.elfbuild import Sec, Spec, Sym, build

TEXT = Sec(".text", 0x1000, 0x400)


def debuglink_section(name: bytes, crc: int) -> Sec:
    data = name + b"\0"
    data += b"\0" * (-len(data) % 4) + struct.pack("<I", crc)
    return Sec(".gnu_debuglink", 0, len(data), flags="", data=data, align=4)


def write(path: Path, spec: Spec) -> Path:
    path.write_bytes(build(spec).data)
    return path


def stripped(path: Path, *extra: Sec, build_id: bytes | None = None) -> Path:
    """An object with only .dynsym, as distributions ship them."""
    spec = Spec(
        sections=(TEXT, *extra),
        dynsym=(Sym("exported", 0x1000, 0x10),),
        build_id=build_id,
    )
    return write(path, spec)


def debug_file(path: Path, build_id: bytes | None = None) -> Path:
    """A debug file: the same addresses, .text NOBITS, a full .symtab."""
    spec = Spec(
        sections=(Sec(".text", 0x1000, 0x400, nobits=True),),
        symtab=(Sym("exported", 0x1000, 0x10), Sym("static_fn", 0x1100, 0x20, bind=0)),
        build_id=build_id,
    )
    return write(path, spec)


def test_debuglink_is_read_with_its_crc_in_the_files_byte_order(tmp_path):
    obj = load_image(stripped(tmp_path / "app", debuglink_section(b"app.debug", 0xDEADBEEF)))
    assert read_debuglink(obj) == DebugLink("app.debug", 0xDEADBEEF)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (b"../../etc/passwd", "not a plain file name"),
        (b"..", "not a plain file name"),
        (b"", "holds no file name"),
        (b"\xff\xfe", "not text"),
        (b"x" * 300, "not a plain file name"),
    ],
)
def test_a_hostile_debuglink_name_is_refused_never_made_a_path(tmp_path, name, why):
    obj = load_image(stripped(tmp_path / "app", debuglink_section(name, 1)))
    found = read_debuglink(obj)
    assert isinstance(found, Unresolved) and why in found.detail


def test_a_debuglink_without_room_for_its_crc_is_refused(tmp_path):
    sec = Sec(".gnu_debuglink", 0, 6, flags="", data=b"a.dbg\0", align=1)
    assert "no CRC" in str(read_debuglink(load_image(stripped(tmp_path / "app", sec))))


def test_build_id_paths_take_hex_only_and_prefer_the_debug_file(tmp_path):
    (tmp_path / ".build-id" / "ab").mkdir(parents=True)
    (tmp_path / ".build-id" / "ab" / "cdef").write_bytes(b"x")
    (tmp_path / ".build-id" / "ab" / "cdef.debug").write_bytes(b"x")
    assert build_id_paths(tmp_path, "abcdef") == [
        str(tmp_path / ".build-id/ab/cdef.debug"),
        str(tmp_path / ".build-id/ab/cdef"),
    ]
    assert build_id_paths(tmp_path, "ab/../../x") == []
    assert build_id_paths(tmp_path, "ABCDEF") == []


def test_debuglink_places_in_gdbs_order(tmp_path):
    root = tmp_path / "root"
    debug_root = tmp_path / "debug"
    for place in (root / "opt/app", root / "opt/app/.debug", debug_root / "opt/app"):
        place.mkdir(parents=True)
        (place / "app.debug").write_bytes(b"x")
    found = debuglink_paths("/opt/app/bin", "app.debug", [str(debug_root)], str(root))
    assert found == [
        f"{root}/opt/app/app.debug",
        f"{root}/opt/app/.debug/app.debug",
        f"{debug_root}/opt/app/app.debug",
    ]


def test_a_debug_file_with_another_build_id_is_refused(tmp_path):
    obj = load_image(stripped(tmp_path / "app", build_id=b"\x11" * 20))
    other = debug_file(tmp_path / "app.debug", build_id=b"\x22" * 20)
    why = check_debug_file(obj, str(other), HOW_DEBUGLINK, DebugLink("app.debug", 0))
    assert isinstance(why, Unresolved) and why.reason is Reason.OTHER_BUILD
    assert "another build" in why.detail


def test_without_build_ids_the_debuglink_crc_decides(tmp_path):
    dbg = debug_file(tmp_path / "app.debug")
    crc = zlib.crc32(dbg.read_bytes())
    good = load_image(stripped(tmp_path / "good", debuglink_section(b"app.debug", crc)))
    bad = load_image(stripped(tmp_path / "bad", debuglink_section(b"app.debug", crc ^ 1)))
    found = check_debug_file(good, str(dbg), HOW_DEBUGLINK, read_debuglink(good))  # type: ignore[arg-type]
    assert isinstance(found, DebugFile)
    refused = check_debug_file(bad, str(dbg), HOW_DEBUGLINK, read_debuglink(bad))  # type: ignore[arg-type]
    assert isinstance(refused, Unresolved) and "CRC32" in refused.detail


def test_the_object_itself_is_never_its_own_debug_file(tmp_path):
    app = stripped(tmp_path / "app", build_id=b"\x33" * 20)
    (tmp_path / ".build-id" / "33").mkdir(parents=True)
    os.symlink(app, tmp_path / ".build-id" / "33" / ("33" * 19))  # Fedora's link to the binary
    found, attempts = find_debug_file(load_image(app), str(app), [str(tmp_path)])
    assert found is None and [a.why for a in attempts] == ["is the object itself"]


def test_debug_file_symbols_merge_with_the_objects_own(tmp_path):
    bid = b"\x44" * 20
    stripped(tmp_path / "app", build_id=bid)
    debug_root = tmp_path / "debug"
    (debug_root / ".build-id" / "44").mkdir(parents=True)
    debug_file(debug_root / ".build-id" / "44" / (("44" * 19) + ".debug"), build_id=bid)
    obj = ObjectCache(search=SymbolSearch((str(debug_root),))).load(tmp_path / "app")
    assert obj.symbols is not None
    assert obj.symbols.lookup(0x1110).name == "static_fn"  # type: ignore[union-attr]
    assert obj.symbols.lookup(0x1000).source == "dynsym"  # type: ignore[union-attr]
    assert obj.symbol_source.startswith(f"dynsym+build-id:{debug_root}/.build-id/44/")
    assert [(u.source, u.status) for u in obj.sources][:3] == [
        ("symtab", "absent"),
        ("dynsym", "used"),
        ("build-id", "used"),
    ]


def test_an_object_with_a_symtab_is_not_searched_until_it_misses(tmp_path):
    spec = Spec(sections=(TEXT,), symtab=(Sym("f", 0x1000, 0x10),), build_id=b"\x55" * 20)
    write(tmp_path / "app", spec)
    cache = ObjectCache(search=SymbolSearch((str(tmp_path),)))
    obj = cache.load(tmp_path / "app")
    assert not obj.searched and [u.source for u in obj.sources] == ["symtab", "dynsym"]
    done = cache.complete(obj)
    assert done.searched and cache.load(tmp_path / "app") is done
    assert any(u.source == "debug file" and u.status == "absent" for u in done.sources)


def minidebug_section(inner: bytes) -> Sec:
    packed = lzma.compress(inner, format=lzma.FORMAT_XZ)
    return Sec(".gnu_debugdata", 0, len(packed), flags="", data=packed, align=1)


def test_minidebuginfo_adds_the_local_functions(tmp_path):
    inner = build(Spec(sections=(TEXT,), symtab=(Sym("local_fn", 0x1200, 0x30, bind=0),))).data
    app = stripped(tmp_path / "app", minidebug_section(inner))
    obj = ObjectCache().load(app)
    assert obj.symbols is not None
    hit = obj.symbols.lookup(0x1210)
    assert hit is not None and (hit.name, hit.source) == ("local_fn", "minidebuginfo")
    assert obj.symbol_source == "dynsym+minidebuginfo"


def test_an_xz_bomb_in_gnu_debugdata_is_refused_not_inflated():
    bomb = lzma.compress(b"\0" * (16 << 20), format=lzma.FORMAT_XZ, preset=0)
    assert len(bomb) < 64 << 10
    assert "more than 4 MiB" in str(decompress_bounded(bomb, 4 << 20))
    assert len(decompress_bounded(bomb, 16 << 20)) == 16 << 20  # type: ignore[arg-type]
    assert "truncated" in str(decompress_bounded(bomb[: len(bomb) // 2], 32 << 20))
    assert "not valid xz" in str(decompress_bounded(b"garbage!" * 10, 1 << 20))


def test_gnu_debugdata_that_is_not_elf_is_a_reason(tmp_path):
    app = stripped(tmp_path / "app", minidebug_section(b"not an ELF file"))
    found = load_minidebuginfo(load_image(app))
    assert isinstance(found, Unresolved) and "not an ELF image" in found.detail
    obj = ObjectCache().load(app)
    mini = next(u for u in obj.sources if u.source == "minidebuginfo")
    assert mini.status == "unused" and "not an ELF image" in mini.detail


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_perf_map_is_read_as_it_grows_keeping_its_offset(tmp_path):
    path = tmp_path / "perf-1.map"
    path.write_text("1000 100 first\nnot an entry\n2000 0x80 second\n3000 10 partial")
    clock = FakeClock()
    pm = PerfMap(str(path), "/tmp/perf-1.map", clock)
    assert pm.lookup(0x1050).name == "first"  # type: ignore[union-attr]
    assert pm.lookup(0x207F).name == "second"  # type: ignore[union-attr]
    assert pm.lookup(0x3005) is None  # the last line is not complete yet
    assert pm.skipped == 1 and len(pm) == 2
    with path.open("a") as f:
        f.write("\n1000 100 recompiled\n")
    assert pm.lookup(0x3005) is None  # too soon to look at the file again
    clock.now += 1
    assert pm.lookup(0x3005).name == "partial"  # type: ignore[union-attr]
    assert pm.lookup(0x1050).name == "recompiled"  # the later line wins
    assert pm.lookup(0x1050).line == 5  # type: ignore[union-attr]


def test_perf_map_version_changes_with_its_entries_and_covers_does_not_read(tmp_path):
    path = tmp_path / "perf-4.map"
    path.write_text("1000 100 first\n")
    clock = FakeClock()
    pm = PerfMap(str(path), "/tmp/perf-4.map", clock)
    assert pm.covers(0x1000) is False  # nothing read yet, and covers never reads
    assert pm.lookup(0x1000) is not None
    read = pm.version
    assert pm.covers(0x1050) and not pm.covers(0x2000)
    with path.open("a") as f:
        f.write("2000 10 second\n")
    clock.now += 1
    assert not pm.covers(0x2000) and pm.version == read  # the line is not read yet
    assert pm.lookup(0x2000) is not None and pm.version != read and pm.covers(0x2000)
    grown = pm.version
    clock.now += 1
    assert pm.lookup(0x9000) is None and pm.version == grown  # read again, nothing new


def test_perf_map_survives_hostile_lines(tmp_path):
    path = tmp_path / "perf-2.map"
    junk = [
        "x" * (MAX_LINE + 10),
        "ffffffffffffffff 10 wraps_past_the_end",
        "-10 10 negative",
        "10 0 empty",
        "10 -5 negative_size",
        "zz 10 not_hex",
        "10 10",
        "4000 10 good",
    ]
    path.write_bytes("\n".join(junk).encode() + b"\n\xff\xfe 1 1\n")
    pm = PerfMap(str(path), "/tmp/perf-2.map", FakeClock())
    assert pm.lookup(0x4005).name == "good"  # type: ignore[union-attr]
    assert len(pm) == 1 and pm.skipped == 8


def test_perf_map_replaced_by_a_new_file_is_read_anew(tmp_path):
    path = tmp_path / "perf-3.map"
    path.write_text("1000 100 old\n")
    clock = FakeClock()
    pm = PerfMap(str(path), "/tmp/perf-3.map", clock)
    assert pm.lookup(0x1000).name == "old"  # type: ignore[union-attr]
    fresh = tmp_path / "new.map"
    fresh.write_text("5000 100 new\n")
    os.replace(fresh, path)
    clock.now += 1
    assert pm.lookup(0x5000).name == "new"  # type: ignore[union-attr]
    assert pm.lookup(0x1000) is None


# A fake /proc/<pid> tree: what the target maps, what its path names now, and which
# of map_files and exe can be opened.
LINE = "{start:x}-{end:x} r-xp 00001000 {major:02x}:{minor:02x} {inode} /opt/app/bin (deleted)"


def fake_target(
    tmp_path: Path, mapped: Path, *, map_files: bool, exe: Path | None
) -> tuple[TargetProcess, Path, str]:
    """(target, its /proc/<pid> directory, the maps line of ``mapped`` as deleted)."""
    proc = tmp_path / "proc"
    pid_dir = proc / "42"
    (pid_dir / "map_files").mkdir(parents=True)
    (pid_dir / "root" / "opt" / "app").mkdir(parents=True)
    st = mapped.stat()
    line = LINE.format(start=0x1000, end=0x2000, major=os.major(st.st_dev),
                       minor=os.minor(st.st_dev), inode=st.st_ino)  # fmt: skip
    if map_files:
        os.symlink(mapped, pid_dir / "map_files" / "1000-2000")
    if exe is not None:
        os.symlink(exe, pid_dir / "exe")
    return TargetProcess(42, proc=str(proc)), pid_dir, line


def test_a_deleted_file_is_read_through_map_files(tmp_path):
    mapped = tmp_path / "mapped"
    mapped.write_bytes(b"x")
    target, _, line = fake_target(tmp_path, mapped, map_files=True, exe=None)
    found = target.object_path(parse_maps_line(line))
    assert (found.via, found.problem) == ("map_files", None)


def test_without_map_files_the_executable_is_read_through_exe(tmp_path):
    mapped = tmp_path / "mapped"
    mapped.write_bytes(b"x")
    target, pid_dir, line = fake_target(tmp_path, mapped, map_files=False, exe=mapped)
    found = target.object_path(parse_maps_line(line))
    assert (found.open_path, found.via) == (f"{pid_dir}/exe", "exe")


def test_a_rebuilt_file_at_the_path_is_refused_when_the_mapped_one_cannot_be_opened(tmp_path):
    mapped = tmp_path / "mapped"
    mapped.write_bytes(b"x")
    target, pid_dir, text = fake_target(tmp_path, mapped, map_files=False, exe=None)
    rebuilt = pid_dir / "root" / "opt" / "app" / "bin"
    rebuilt.write_bytes(b"another build")
    for line in (text, text.removesuffix(" (deleted)")):  # deleted, or replaced in place
        found = target.object_path(parse_maps_line(line))
        assert found.open_path == f"{pid_dir}/map_files/1000-2000"  # never the rebuilt file
        assert found.problem is not None and "not read from whatever the path names" in (
            found.problem
        )
        assert ObjectCache().load(found.open_path).image is None


def test_namespace_pid_is_the_last_nspid(tmp_path):
    pid_dir = tmp_path / "42"
    pid_dir.mkdir()
    (pid_dir / "status").write_text("Name:\tx\nNSpid:\t42\t7\n")
    target = TargetProcess(42, proc=str(tmp_path))
    assert target.namespace_pid() == 7
    (pid_dir / "status").unlink()
    assert target.namespace_pid() == 7  # read once
    (pid_dir / "status").write_text("Name:\tx\n")
    assert TargetProcess(42, proc=str(tmp_path)).namespace_pid() == 42


def test_memory_reads_are_bounded(tmp_path):
    (tmp_path / "42").mkdir()
    target = TargetProcess(42, proc=str(tmp_path))
    assert "more than" in str(target.read_memory(0x1000, 1 << 30))
    assert "cannot read its memory" in str(target.read_memory(0x1000, 16))


def swapped_after_the_check(tmp_path, monkeypatch, *, map_files: bool):
    """A symbolizer of a fake target whose maps line names a mapped ELF file, where
    another ELF file stands at that path by the time it is opened: the path check
    (os.stat) still saw the mapped file, as if the swap came just after it."""
    from livesym.addr.maps import parse_maps
    from livesym.symbolize.process import ProcessSymbolizer

    mapped = tmp_path / "mapped"
    mapped.write_bytes(Path("/bin/true").read_bytes())
    target, pid_dir, text = fake_target(tmp_path, mapped, map_files=map_files, exe=None)
    planted = pid_dir / "root" / "opt" / "app" / "bin"
    planted.write_bytes(Path("/bin/false").read_bytes() + b"planted")
    real_stat = os.stat

    def stat_before_the_swap(path, *args, **kwargs):
        return real_stat(mapped if str(path) == str(planted) else path, *args, **kwargs)

    monkeypatch.setattr("livesym.target.process.os.stat", stat_before_the_swap)
    line = text.removesuffix(" (deleted)")
    return ProcessSymbolizer(target, snapshot=parse_maps(line + "\n")), mapped


def test_a_file_swapped_in_between_the_check_and_the_open_is_not_read(tmp_path, monkeypatch):
    symbolizer, mapped = swapped_after_the_check(tmp_path, monkeypatch, map_files=True)
    entry = symbolizer.maps.entries[0]
    assert symbolizer.object_path(entry).via == "root"  # the check was fooled
    obj = symbolizer.object_for(entry)
    # What was read is the mapped file itself, through map_files, not the planted one
    assert obj is not None and obj.image is not None
    assert obj.image.identity.ino == mapped.stat().st_ino
    assert symbolizer.object_path(entry).via == "map_files"


def test_a_swapped_file_is_refused_when_the_mapped_one_cannot_be_opened(tmp_path, monkeypatch):
    symbolizer, _ = swapped_after_the_check(tmp_path, monkeypatch, map_files=False)
    obj = symbolizer.object_for(symbolizer.maps.entries[0])
    assert obj is not None and obj.image is None  # nothing read rather than the wrong file
