"""The commands that read a capture, given crafted ones: what they say on the terminal.

A capture is hostile input: its names may hold escape sequences and line
breaks, which must reach the terminal escaped. A re-symbolizing command says
which supplied file it refused, whatever it writes. A command that writes a
file never writes over the capture it reads. And a capture that cannot be read
is one line that says what to do.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from pathlib import Path

import pytest

from livesym.capture.reader import read_capture
from livesym.capture.session import capture_document
from livesym.capture.writer import write_capture
from livesym.elf.image import load_image
from livesym.errors import EXIT_CAPTURE, EXIT_USAGE
from livesym.records import Capture, ObjectRecord
from tests.unit.test_export import capture, native

ESC = "\x1b"
EVIL = f"evil{ESC}[31m\nforged 100.0"


def write(path: Path, c: Capture) -> Path:
    write_capture(path, capture_document(c))
    return path


def one_line(result, code: int) -> str:
    assert result.code == code, (result.code, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("livesym: "), result.err
    return lines[0]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A capture whose symbol, module and errors hold ESC and a newline."""
    frames = [
        native(0, EVIL, module=f"/usr/lib/lib{ESC}]0;title\a.so"),
        native(1, "main", module=f"/usr/lib/lib{ESC}]0;title\a.so"),
    ]
    c = capture(frames, [(0, 1)], [(0.0, 7, 0, 0)] * 3)
    c = dataclasses.replace(c, session={**c.session, "errors": [f"bad{ESC}[2J\nnote: forged"]})
    return write(tmp_path / "hostile.json", c)


def test_report_escapes_control_characters_from_the_capture(cli, hostile):
    result = cli("report", str(hostile))
    assert result.code == 0, result.err
    assert ESC not in result.out and "\a" not in result.out
    assert "evil\\x1b[31m\\nforged 100.0" in result.out
    assert "lib\\x1b]0;title\\x07.so" in result.out
    assert "note: bad\\x1b[2J\\nnote: forged" in result.out
    # No forged rows: the header, the time it counts (the capture's sampler counted idle
    # threads: wall time), a blank line, the column titles, two functions, one note.
    assert len(result.out.splitlines()) == 7, result.out


def test_report_header_names_report(cli, hostile):
    result = cli("report", str(hostile))
    assert result.out.startswith("livesym report: pid 1,"), result.out


def test_collapsed_export_percent_encodes_control_characters(cli, hostile):
    result = cli("export", str(hostile), "--format", "collapsed", "-o", "-")
    assert result.code == 0, result.err
    assert result.out == "main;evil%1B[31m%0Aforged 100.0 3\n"


@pytest.fixture
def refused(built, tmp_path: Path) -> tuple[Path, Path]:
    """(a capture of an object named spin with a build-id, a directory holding a spin
    of another build-id)."""
    spin = built("spin")
    assert load_image(spin).build_id_hex != "ab" * 20
    c = capture([native(0, None, reason="no_symbols", module="/opt/app/spin")], [(0,)],
                [(0.0, 7, 0, 0)])  # fmt: skip
    obj = ObjectRecord(0, "/opt/app/spin", "ab" * 20, "ET_DYN", 64, "EM_X86_64", ())
    c = dataclasses.replace(c, objects=(obj,))
    return write(tmp_path / "stripped.json", c), spin.parent


@pytest.mark.parametrize("fmt", ["collapsed", "speedscope", "pprof"])
def test_export_names_a_refused_binary_on_stderr_as_report_does(cli, refused, tmp_path, fmt):
    path, bins = refused
    note = f"note: {bins / 'spin'} has build-id "
    report = cli("report", str(path), "--binaries", str(bins))
    assert report.code == 0 and note in report.out, report.out
    out = tmp_path / f"out.{fmt}"
    result = cli("export", str(path), "--format", fmt, "-o", str(out), "--binaries", str(bins))
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"livesym: {note}"), result.err
    assert f"but spin was recorded with {'ab' * 20}" in lines[0]
    assert out.stat().st_size > 0


def test_export_without_symbol_options_prints_no_notes(cli, refused, tmp_path):
    path, _ = refused
    result = cli("export", str(path), "--format", "collapsed", "-o", str(tmp_path / "f"))
    assert result.code == 0 and result.err == ""


def _same_file_names(path: Path) -> dict[str, Path]:
    link = path.with_name("link.json")
    link.symlink_to(path.name)
    hard = path.with_name("hard.json")
    os.link(path, hard)
    return {"same path": path, "symlink": link, "hard link": hard,
            "other spelling": path.parent / "." / path.name}  # fmt: skip


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "other spelling"])
@pytest.mark.parametrize(
    "command",
    [("export", "--format", "pprof"), ("export", "--format", "collapsed"), ("scrub",)],
)
def test_writing_over_the_input_is_refused(cli, hostile, command, how):
    before = hostile.read_bytes()
    out = _same_file_names(hostile)[how]
    result = cli(command[0], str(hostile), *command[1:], "-o", str(out))
    line = one_line(result, EXIT_USAGE)
    assert "is the input" in line and "give -o another file name" in line
    assert hostile.read_bytes() == before


def test_scrub_to_a_new_file_keeps_the_profile_and_moves_every_address(cli, hostile, tmp_path):
    shared = tmp_path / "shared.json"
    result = cli("scrub", str(hostile), "-o", str(shared))
    assert result.code == 0, result.err
    # THEN the scrubbed capture reads, and reports the same functions with the same counts
    before = json.loads(cli("report", str(hostile), "--json").out)
    after = json.loads(cli("report", str(shared), "--json").out)
    counts = [(f["symbol"], f["self"], f["total"]) for f in before["functions"]]
    assert counts == [(f["symbol"], f["self"], f["total"]) for f in after["functions"]]
    assert after["samples"] == before["samples"] == 3
    # ... while no run-time address of the original is left in it
    original = {f.vma for f in read_capture(hostile).frames}
    scrubbed = {f.vma for f in read_capture(shared).frames}
    assert original and scrubbed and not original & scrubbed, (original, scrubbed)


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("nonexist.json", None, ("no such capture file", "check the path", "livesym record")),
        ("dir", "directory", ("is a directory", "give the path of a capture file")),
        ("empty.json", b"", ("empty file", "copy it again", "livesym record")),
        ("rand.json.gz", gzip.compress(bytes(range(256))), ("not JSON", "livesym record")),
        ("cut.json", b'{"format": "livesym-capture", "samp', ("truncated", "copy it again")),
        ("cut.json.gz", gzip.compress(b"{}" * 100)[:20], ("damaged gzip", "copy it again")),
        ("other.json", b'{"format": "other"}', ("invalid capture", "copy it again")),
        ("new.json", b'{"format": "livesym-capture", "version": 99}',
         ("version 99", "livesym release that wrote it")),
    ],
)  # fmt: skip
def test_an_unreadable_capture_says_what_to_do(cli, tmp_path, name, content, words):
    path = tmp_path / name
    if content == "directory":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    line = one_line(cli("report", str(path)), EXIT_CAPTURE)
    for word in words:
        assert word in line, line
