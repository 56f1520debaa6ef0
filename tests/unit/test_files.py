"""Writing a file safely: a device or a pipe at the destination is written into, never
renamed over (``-o /dev/null`` as root once replaced the machine's /dev/null with a
regular 0600 file); a symlink another user planted is replaced, never followed."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from livesym.files import stream_destination, write_atomically

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mknod and chown need root")


def null_device(where: Path) -> Path:
    """A node of the null device (major 1, minor 3), as /dev/null is."""
    os.mknod(where, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return where


@root_only
def test_a_character_device_is_written_into_and_stays_a_device(tmp_path: Path):
    null = null_device(tmp_path / "null")
    write_atomically(str(null), b"capture" * 1000)
    info = null.lstat()
    assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]  # no temporary file left


@root_only
def test_a_symlink_of_this_user_to_a_device_is_followed(tmp_path: Path):
    null = null_device(tmp_path / "null")
    (tmp_path / "stdout").symlink_to(null)
    write_atomically(str(tmp_path / "stdout"), b"x")
    assert (tmp_path / "stdout").is_symlink() and stat.S_ISCHR(null.lstat().st_mode)


@root_only
def test_a_symlink_another_user_planted_is_replaced_whatever_it_points_to(tmp_path: Path):
    null = null_device(tmp_path / "null")
    planted = tmp_path / "cap.json"
    planted.symlink_to(null)
    os.lchown(planted, 65534, 65534)
    assert not stream_destination(str(planted))
    write_atomically(str(planted), b"data")
    assert stat.S_ISREG(planted.lstat().st_mode) and planted.read_bytes() == b"data"
    assert stat.S_ISCHR(null.lstat().st_mode)


@root_only
def test_a_block_device_is_refused(tmp_path: Path):
    disk = tmp_path / "disk"
    os.mknod(disk, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    with pytest.raises(OSError, match="block device"):
        write_atomically(str(disk), b"data")
    assert stat.S_ISBLK(disk.lstat().st_mode)


def test_a_named_pipe_gets_the_data_once(tmp_path: Path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomically(str(fifo), b"one document")
    reader.join(timeout=10)
    assert got == [b"one document"] and stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_regular_file_is_replaced_whole_and_private(tmp_path: Path):
    out = tmp_path / "cap.json"
    out.write_bytes(b"old, longer than the new")
    out.chmod(0o644)
    write_atomically(str(out), b"new")
    assert out.read_bytes() == b"new" and stat.S_IMODE(out.stat().st_mode) == 0o600
