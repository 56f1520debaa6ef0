"""Writing a file whole, safely, in a directory others may write to.

livesym usually runs as root, in whatever directory the user stands in (/tmp
included). A temporary file with a fixed name (``FILE.tmp``) opened with a plain
``open`` follows a symlink that any local user planted there, and root's write
lands wherever it points. So the temporary file gets an unpredictable name and is
created with O_CREAT|O_EXCL|O_NOFOLLOW (``tempfile.mkstemp``) beside the
destination, then renamed over it: ``rename`` replaces a symlink standing at the
destination itself, never the file it points to. A reader never sees half a file.

Files are created 0600, as perf writes perf.data: a capture holds the target's
command line, its paths and its memory layout. (``chmod`` the finished file to
share it; a recording creates its file 0600 with its first chunk and appends to it.)

A destination that is not a file (``-o /dev/null``, ``-o /dev/stdout``, a named pipe)
is written into, never renamed over: a rename run as root would replace the device
node itself with a regular file, for every program on the machine. A symlink leading
to one is followed only when its owner is this user or root (a link another user
planted in /tmp is replaced, as above, whatever it points to, as the kernel's
protected_symlinks rule decides too); a block device is refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile

MODE = 0o600


def stamped(path: str, when: float, nth: int = 1) -> str:
    """``path`` with the local time of ``when``, to the millisecond, before its extension
    (.json, .json.gz): a flight recorder's dumps and a recording's rotated files, which
    sort by name as they were made (``nth`` > 1: the nth of that millisecond)."""
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when))
    stamp += f".{int(when * 1000) % 1000:03d}" + (f"-{nth}" if nth > 1 else "")
    directory, name = os.path.split(path)
    for suffix in (".json.gz", ".json", ".gz"):
        if name.endswith(suffix):
            return os.path.join(directory, f"{name[: -len(suffix)]}.{stamp}{suffix}")
    return os.path.join(directory, f"{name}.{stamp}")


def stream_destination(path: str) -> bool:
    """Whether ``path`` is a stream to write into rather than a file to replace: a
    character device, a pipe or a socket, reached directly or through a symlink this
    user or root owns. Raises OSError (EISDIR-like) for a block device."""
    try:
        link = os.lstat(path)
        info = os.stat(path) if stat.S_ISLNK(link.st_mode) else link
    except OSError:
        return False  # nothing there (yet), or a dangling link: a new file replaces it
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (0, os.geteuid()):
        return False  # planted by another user: replaced, never followed
    if stat.S_ISBLK(info.st_mode):
        raise OSError(errno.EPERM, "it is a block device, not a file to write a capture to")
    return stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode)


def write_atomically(path: str, data: bytes, *, durable: bool = True) -> None:
    """Put ``data`` at ``path`` in one rename; ``durable``: on disk before the rename
    (a crash leaves the old file or the new one, never an empty one). A device or a
    pipe (``stream_destination``) is written into instead. Raises OSError."""
    fd, _ = open_atomically(path, data, durable=durable)
    os.close(fd)


def open_atomically(path: str, data: bytes, *, durable: bool = False) -> tuple[int, bool]:
    """``write_atomically``, the file left open for appending: its descriptor, and
    whether it is a stream (a device or a pipe, written into) rather than a file."""
    if stream_destination(path):
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            write_all(fd, data)
        except BaseException:
            os.close(fd)
            raise
        return fd, True
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return fd, False


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (a write may take part of it). Raises OSError."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
