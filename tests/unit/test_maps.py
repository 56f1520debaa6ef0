"""/proc/<pid>/maps parsing on the shapes the kernel really prints."""

from __future__ import annotations

import os

import pytest

from livesym.addr.maps import MapKind, MapsParseError, parse_maps, parse_maps_line


def test_file_mapping_fields():
    e = parse_maps_line(
        "7f3ae7600000-7f3ae7628000 r-xp 00026000 fd:01 2888190    "
        "/usr/lib/x86_64-linux-gnu/libc.so.6"
    )
    assert (e.start, e.end, e.perms, e.pgoff) == (0x7F3AE7600000, 0x7F3AE7628000, "r-xp", 0x26000)
    assert (e.dev_major, e.dev_minor, e.inode) == (0xFD, 0x01, 2888190)
    assert e.path == "/usr/lib/x86_64-linux-gnu/libc.so.6"
    assert e.kind is MapKind.FILE and e.executable and not e.writable and e.file_backed


def test_wide_device_numbers():
    e = parse_maps_line("00400000-00401000 r-xp 00000000 103:0a2 77 /opt/a")
    assert (e.dev_major, e.dev_minor) == (0x103, 0xA2)


def test_path_with_spaces_and_deleted_suffix():
    e = parse_maps_line("1000-2000 r-xp 00000000 08:01 5   /tmp/my dir/lib x.so (deleted)")
    assert e.path == "/tmp/my dir/lib x.so"
    assert e.deleted


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("[vdso]", MapKind.VDSO),
        ("[vvar]", MapKind.VVAR),
        ("[heap]", MapKind.HEAP),
        ("[stack]", MapKind.STACK),
        ("[vsyscall]", MapKind.VSYSCALL),
        ("anon_inode:[perf_event]", MapKind.ANON_INODE),
        ("/memfd:jit-code (deleted)", MapKind.MEMFD),
        ("[anon:scudo:primary]", MapKind.SPECIAL),
        ("", MapKind.ANON),
    ],
)
def test_special_mappings_are_classified(name: str, kind: MapKind):
    e = parse_maps_line(f"1000-2000 r--p 00000000 00:00 0 {name}".rstrip())
    assert e.kind is kind
    assert e.file_backed == (kind is MapKind.MEMFD)


@pytest.mark.parametrize(
    "line",
    [
        "garbage",
        "1000 r-xp 0 00:00 0",
        "zz00-2000 r-xp 00000000 00:00 0",
        "2000-1000 r-xp 00000000 00:00 0",
        "1000-2000 rwzp 00000000 00:00 0",
        "1000-2000 r-xp 00000000 0000 0",
        "1000-2000 r-xp 00000000 00:00 x1",
    ],
)
def test_bad_lines_raise_with_the_whole_line(line: str):
    with pytest.raises(MapsParseError) as info:
        parse_maps_line(line)
    assert line in str(info.value)


def test_parse_maps_keeps_going_past_bad_lines_and_sorts():
    text = "3000-4000 r--p 00000000 00:00 0\nnonsense\n1000-2000 r-xp 00000000 00:00 0 /a\n"
    snap = parse_maps(text)
    assert [e.start for e in snap.entries] == [0x1000, 0x3000]
    assert len(snap.errors) == 1 and "nonsense" in snap.errors[0]
    assert snap.find(0x1FFF) is snap.entries[0]
    assert snap.find(0x2000) is None
    assert snap.find(0x3000) is snap.entries[1]


def test_this_process_maps_parse_without_errors():
    with open(f"/proc/{os.getpid()}/maps") as f:
        snap = parse_maps(f.read())
    assert snap.errors == ()
    assert any(e.kind is MapKind.VDSO for e in snap.entries)
    assert any(e.path.endswith("python3.11") or "python" in e.path for e in snap.entries)


def test_a_reread_reuses_the_entries_of_unchanged_lines_and_parses_the_rest() -> None:
    from livesym.addr.maps import parse_maps_reusing

    lines = [
        f"{0x7F0000000000 + i * 0x2000:x}-{0x7F0000001000 + i * 0x2000:x} r--s 00000000 "
        f"00:01 {1000 + i} /dev/zero (deleted)"
        for i in range(50)
    ]
    first, known = parse_maps_reusing("\n".join(lines) + "\nnot a maps line\n", {})
    assert len(first.entries) == 50 and len(first.errors) == 1
    lines[7] = lines[7].replace(" 1007 ", " 9999 ")  # a mapping replaced
    again, _ = parse_maps_reusing("\n".join(lines) + "\n", known)
    assert again == parse_maps("\n".join(lines) + "\n")  # the same as a whole parse
    assert [a is b for a, b in zip(first.entries, again.entries, strict=True)].count(False) == 1
    assert again.entries[7].inode == 9999
