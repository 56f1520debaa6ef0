"""livesym runs as root in shared directories: what it writes must not be redirected,
must not be readable by others, and what it reads from others must not take the machine.

Every writer (record, attach --record, w, export, scrub) is run with a symlink planted
where the old code wrote its temporary file (``FILE.tmp``) and, separately, at the
destination itself. The victim file must be untouched, and the output a regular 0600
file. Capture bombs (a small .gz that inflates to gigabytes, gigabytes of tiny values)
are refused with one line and exit 5 by every command that reads a capture, in bounded
memory.
"""

from __future__ import annotations

import gzip
import os
import resource
import shutil
import stat
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from livesym.capture.reader import read_capture
from livesym.errors import EXIT_CAPTURE
from tests.support.procs import running

SPIN_CAPTURE = Path(__file__).resolve().parents[1] / "ui" / "data" / "spin.json"
VICTIM_TEXT = "root:x:0:0:root:/root:/bin/bash\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file another user wants root to overwrite (stands in for /etc/passwd)."""
    path = tmp_path / "elsewhere" / "passwd"
    path.parent.mkdir()
    path.write_text(VICTIM_TEXT)
    return path


def plant(where: Path, victim: Path) -> None:
    where.symlink_to(victim)


def assert_safe(output: Path, victim: Path) -> None:
    assert victim.read_text() == VICTIM_TEXT, "the planted symlink redirected the write"
    info = output.lstat()
    assert stat.S_ISREG(info.st_mode), "the output is not a regular file"
    assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
    leftovers = [p.name for p in output.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers in ([], [f"{output.name}.tmp"]), leftovers  # only the planted link


@pytest.fixture
def spin(built: Callable[[str], Path]) -> Iterator[subprocess.Popen[bytes]]:
    with running(built("spin")) as proc:
        yield proc


@pytest.mark.parametrize("at", ["tmp", "destination"])
def test_record_through_a_planted_symlink_writes_a_private_file_and_not_the_victim(
    cli, spin, tmp_path, victim, at
):
    out = tmp_path / "cap.json.gz"
    plant(out if at == "destination" else tmp_path / "cap.json.gz.tmp", victim)
    result = cli("record", str(spin.pid), "-o", str(out), "--duration", "1.5")
    assert result.code == 0, result.err
    assert_safe(out, victim)
    assert read_capture(out).samples


@pytest.mark.parametrize("command", ["scrub", "export"])
@pytest.mark.parametrize("at", ["tmp", "destination"])
def test_scrub_and_export_through_a_planted_symlink_leave_the_victim_alone(
    cli, tmp_path, victim, command, at
):
    out = tmp_path / "out.file"
    plant(out if at == "destination" else tmp_path / "out.file.tmp", victim)
    extra = ["--format", "collapsed"] if command == "export" else []
    result = cli(command, str(SPIN_CAPTURE), *extra, "-o", str(out))
    assert result.code == 0, result.err
    assert_safe(out, victim)
    assert out.stat().st_size > 0


def test_attach_record_through_a_planted_symlink(spin, tmp_path, victim):
    # attach needs a terminal: run it in tmux, end it with SIGTERM.
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    from tests.ui.test_terminal import Terminal

    out = tmp_path / "live.json"
    plant(tmp_path / "live.json.tmp", victim)
    term = Terminal(f"livesym-safety-{os.getpid()}", tmp_path / "status")
    try:
        term.start(["attach", str(spin.pid), "--record", str(out)], {})
        term.wait_for("LIVE", "samples")
        os.kill(term.command_pid(), 15)
        assert term.exit_status() == 0
    finally:
        subprocess.run(["tmux", "-L", term.socket, "kill-server"], capture_output=True)
    assert_safe(out, victim)


# -- capture bombs -----------------------------------------------------------------------


def gzip_bomb(path: Path, inflated: int) -> Path:
    """A .json.gz of one string ``inflated`` bytes long, in a few MB: a whole gzip file
    (its CRC and length right), made in a second rather than deflating gigabytes."""
    head, tail, block = b'{"format": "livesym-capture", "x": "', b'"}', b"A" * (1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    crc = zlib.crc32(head)
    with path.open("wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip, no name, no time
        f.write(deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH))
        # From an emptied window a block deflates to the same bytes every time.
        same = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
        for _ in range(inflated >> 20):
            f.write(same)
            crc = zlib.crc32(block, crc)
        f.write(deflate.compress(tail) + deflate.flush())
        size = len(head) + len(tail) + (inflated >> 20 << 20)
        f.write(struct.pack("<II", zlib.crc32(tail, crc), size & 0xFFFFFFFF))
    return path


def tiny_values(path: Path, count: int) -> Path:
    """Plain JSON of ``count`` empty lists: 3 bytes of text, 64 of memory each."""
    with path.open("wb") as f:
        f.write(b'{"samples": [')
        f.write(b"[]," * count)
        f.write(b"[]]}")
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("bombs")
    return {
        "gzip": gzip_bomb(where / "bomb.json.gz", 3 << 30),  # 3 GiB of one string
        "tiny": tiny_values(where / "tiny.json", 80 << 20),  # 240 MB, ~5 GiB parsed
    }


def run_bounded(args: list[str], memory: int) -> subprocess.CompletedProcess[str]:
    """livesym with its address space capped: a bound that does not hold fails here."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "livesym", *args],
        capture_output=True, text=True, timeout=120, preexec_fn=cap,
    )  # fmt: skip


def test_the_bomb_is_a_whole_gzip_file_of_what_it_says(tmp_path):
    # The bomb's trick (one block's deflate repeated) makes a file gzip reads whole, its
    # CRC and length checked: shown on a small one, made the same way.
    text = gzip.decompress(gzip_bomb(tmp_path / "small.json.gz", 64 << 20).read_bytes())
    assert text == b'{"format": "livesym-capture", "x": "' + b"A" * (64 << 20) + b'"}'


@pytest.mark.parametrize("kind", ["gzip", "tiny"])
@pytest.mark.parametrize(
    ("args", "limit"),
    [(["report"], None), (["export", "--format", "pprof", "-o", "{out}"], "128M"),
     (["scrub", "-o", "{out}"], "128M"), (["report", "--binaries", "{dir}"], "128M")],
    ids=["report", "export", "scrub", "resymbolize"],
)  # fmt: skip
def test_a_capture_bomb_is_refused_with_one_line_in_bounded_memory(
    bombs, tmp_path, kind, args, limit
):
    # With the default limit (4 GiB of parsing, refused after 0.8 GiB of this text) under a
    # 2 GiB address space; the other commands with a lower limit under 1 GiB, which a
    # command that dropped the option (reading up to the default) would exceed.
    bomb = bombs[kind]
    filled = [a.format(out=tmp_path / "out", dir=tmp_path) for a in args]
    command = [filled[0], str(bomb), *filled[1:]]
    if limit is not None:
        command += ["--max-capture-memory", limit]
    done = run_bounded(command, (2 if limit is None else 1) << 30)
    assert done.returncode == EXIT_CAPTURE, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "--max-capture-memory" in lines[0], done.stderr
    assert f"more than {'4 GiB' if limit is None else '128 MiB'} of memory" in lines[0]
    assert not (tmp_path / "out").exists()


def test_the_limit_can_be_lowered_and_raised(cli, tmp_path):
    small = gzip.compress(SPIN_CAPTURE.read_bytes())
    path = tmp_path / "spin.json.gz"
    path.write_bytes(small)
    refused = cli("report", str(path), "--max-capture-memory", "64K")
    assert refused.code == EXIT_CAPTURE and "more than 64 KiB" in refused.err
    assert cli("report", str(path), "--max-capture-memory", "1G").code == 0
    bad = cli("report", str(path), "--max-capture-memory", "lots")
    assert bad.code == 2 and "not a size" in bad.err


def test_replay_refuses_a_bomb_before_it_needs_a_terminal(cli, bombs):
    result = cli("replay", str(bombs["gzip"]), "--max-capture-memory", "128M")
    assert result.code == EXIT_CAPTURE and "more than 128 MiB" in result.err


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_record_to_a_null_device_leaves_it_a_device(cli, spin, tmp_path):
    # GIVEN a node of the null device where a user would say -o /dev/null
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    null.chmod(0o666)  # (mknod honours the umask)
    # WHEN livesym records to it, as root
    result = cli("record", str(spin.pid), "-o", str(null), "--duration", "1.5")
    # THEN it is still the device (a rename would have put a 0600 file in its place)
    assert result.code == 0, result.err
    info = null.lstat()
    assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3)
    assert stat.S_IMODE(info.st_mode) == 0o666


def test_record_to_a_pipe_writes_one_whole_capture(cli, spin, tmp_path):
    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    result = cli("record", str(spin.pid), "-o", str(fifo), "--duration", "2.5")
    out, _ = reader.communicate(timeout=30)
    assert result.code == 0, result.err
    copy = tmp_path / "capture.json"
    copy.write_bytes(out)
    assert read_capture(copy).samples  # one document: not a rewrite appended per second
