"""The observed process as /proc shows it: its maps and a way to open its files.

Files are opened through /proc/<pid>/root so a target in a container or a
chroot is read from its own file system, and through
/proc/<pid>/map_files/<range> (or /proc/<pid>/exe for the executable) when
the path was deleted or now names a different file than the one mapped. When
neither can be opened, the file is refused: never symbolize with the wrong file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from livesym.addr.maps import MapsEntry, MapsSnapshot, parse_maps
from livesym.errors import TargetError
from livesym.records import Reason, Unresolved
from livesym.target.permissions import denied_remedy

MAX_MAPS_BYTES = 64 << 20
MAX_STATUS_BYTES = 64 << 10
# Reads of the target's memory (a vdso, a few pages) are refused above this.
MAX_MEMORY_READ = 1 << 20


# How a mapped file is opened: through the target's root, by its path (a chroot's
# file seen from here), through map_files, as the target's executable, or read from
# its memory (the vdso).
Via = Literal["root", "path", "map_files", "exe", "memory"]


@dataclass(frozen=True)
class ObjectPath:
    """Where to open a mapped file, and why that way."""

    open_path: str
    via: Via
    problem: str | None = None


class TargetProcess:
    """Read-only access to one process's /proc entries."""

    def __init__(self, pid: int, proc: str = "/proc", debug_dirs: Sequence[str] = ()) -> None:
        self.pid = pid
        # Where to look for debug files first (--debug-dir), before the system's.
        self.debug_dirs = tuple(debug_dirs)
        self._dir = f"{proc}/{pid}"
        self._nspid: int | None = None
        if pid <= 0 or not os.path.isdir(self._dir):
            raise TargetError(
                f"cannot inspect {pid}: no such process; check the PID with ps or pgrep"
            )

    @property
    def root(self) -> str:
        return f"{self._dir}/root"

    def alive(self) -> bool:
        return os.path.isdir(self._dir)

    def exited_error(self) -> TargetError:
        return TargetError(
            f"cannot inspect {self.pid}: the process has exited; start it again, "
            "or replay a capture of it"
        )

    def read_maps(self) -> MapsSnapshot:
        """Parse /proc/<pid>/maps now; raise TargetError if it cannot be read."""
        text = self.read_maps_text()
        snapshot = parse_maps(text)
        if not snapshot.entries and not self.alive():
            raise self.exited_error()
        return snapshot

    def read_maps_text(self) -> str:
        """/proc/<pid>/maps as text, bounded; raise TargetError if it cannot be read."""
        try:
            with open(f"{self._dir}/maps", "rb") as f:
                raw = f.read(MAX_MAPS_BYTES)
        except FileNotFoundError:
            raise self.exited_error() from None
        except PermissionError:
            raise TargetError(
                f"cannot read the maps of {self.pid}: permission denied; {denied_remedy(self.pid)}"
            ) from None
        except OSError as e:
            if e.errno == errno.ESRCH:
                raise self.exited_error() from None
            raise TargetError(
                f"cannot read the maps of {self.pid}: {e.strerror}; run as root, or check the PID"
            ) from None
        return raw.decode("utf-8", "surrogateescape")

    def object_path(self, entry: MapsEntry) -> ObjectPath:
        """How to open the file behind a file-backed mapping.

        The path through the target's root when it still names the mapped file
        (same inode); else the mapped file itself through map_files (root only)
        or /proc/PID/exe (the executable); else nothing that opens, with why.
        """
        map_file = f"{self._dir}/map_files/{entry.range_name}"
        if not entry.path.startswith("/"):
            return ObjectPath(map_file, "map_files")
        if entry.deleted:
            return self._mapped_file(entry, map_file, f"{entry.path} was deleted", quiet=True)
        rooted = self.root + entry.path
        try:
            st = os.stat(rooted)
        except OSError:
            st = None
        if st is not None and st.st_ino == entry.inode:
            return ObjectPath(rooted, "root")
        # The kernel writes maps paths as seen from the *reader's* root: a chroot in
        # livesym's own mount namespace shows the host's path to the file.
        if _same_file(entry.path, entry):
            return ObjectPath(entry.path, "path")
        if st is None:
            return self._mapped_file(entry, map_file, f"{entry.path} is not reachable by path")
        # Replaced on disk since it was mapped: only the mapped file itself will do.
        return self._mapped_file(entry, map_file, f"{entry.path} was replaced on disk")

    def host_path(self, entry: MapsEntry) -> ObjectPath | None:
        """The mapped file by its path in livesym's own view, where that is it (same
        device and inode): for a process that has exited, whose root is gone."""
        if entry.path.startswith("/") and _same_file(entry.path, entry):
            return ObjectPath(entry.path, "path")
        return None

    def mapped_file(self, entry: MapsEntry, why: str, *, quiet: bool = False) -> ObjectPath:
        """The mapped file itself (map_files, or exe), for a path found to name another
        file after all; ``why`` says so where neither opens."""
        return self._mapped_file(entry, f"{self._dir}/map_files/{entry.range_name}", why, quiet)

    def _mapped_file(
        self, entry: MapsEntry, map_file: str, why: str, quiet: bool = False
    ) -> ObjectPath:
        """The mapped file itself, whatever its path now names. ``quiet``: the maps
        line already says why (" (deleted)"), so a path that works is no problem."""
        if os.access(map_file, os.R_OK):
            return ObjectPath(map_file, "map_files", None if quiet else why)
        exe = f"{self._dir}/exe"
        try:
            st = os.stat(exe)
            if st.st_ino == entry.inode and os.access(exe, os.R_OK):
                return ObjectPath(exe, "exe", None if quiet else why)
        except OSError:
            pass
        return ObjectPath(
            map_file,
            "map_files",
            f"{why}, and the mapped file cannot be opened through map_files (that needs "
            "root) or /proc/PID/exe; not read from whatever the path names now",
        )

    def namespace_pid(self) -> int:
        """The target's pid in its own pid namespace (the last NSpid), else its pid.
        Read once: a process never changes pid namespace."""
        if self._nspid is None:
            self._nspid = self._read_namespace_pid()
        return self._nspid

    def _read_namespace_pid(self) -> int:
        try:
            with open(f"{self._dir}/status", "rb") as f:
                status = f.read(MAX_STATUS_BYTES)
        except OSError:
            return self.pid
        for line in status.split(b"\n"):
            if line.startswith(b"NSpid:"):
                fields = line.split()[1:]
                if fields and fields[-1].isdigit():
                    return int(fields[-1])
        return self.pid

    def read_memory(self, address: int, size: int) -> bytes | Unresolved:
        """``size`` bytes of the target's memory at ``address``, or why they cannot be read."""
        if not 0 < size <= MAX_MEMORY_READ:
            return Unresolved(
                Reason.UNREADABLE,
                f"{size} bytes is more than the {MAX_MEMORY_READ} livesym reads from memory",
            )
        try:
            fd = os.open(f"{self._dir}/mem", os.O_RDONLY)
        except PermissionError:
            return Unresolved(
                Reason.UNREADABLE,
                f"permission denied reading its memory; {denied_remedy(self.pid)}",
            )
        except OSError as e:
            return Unresolved(Reason.UNREADABLE, f"cannot read its memory: {e.strerror}")
        try:
            data = os.pread(fd, size, address)
        except OSError as e:
            return Unresolved(
                Reason.UNREADABLE, f"cannot read its memory at {address:#x}: {e.strerror}"
            )
        finally:
            os.close(fd)
        if len(data) != size:
            return Unresolved(
                Reason.UNREADABLE, f"only {len(data)} of {size} bytes at {address:#x} could be read"
            )
        return data

    def command_line(self) -> list[str]:
        try:
            with open(f"{self._dir}/cmdline", "rb") as f:
                raw = f.read(1 << 16)
        except OSError:
            return []
        return [a.decode("utf-8", "backslashreplace") for a in raw.split(b"\0") if a]


def _same_file(path: str, entry: MapsEntry) -> bool:
    """Whether ``path`` (livesym's own view) is the mapped file: same device and inode."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return names_mapped_file(st.st_dev, st.st_ino, entry)


def names_mapped_file(dev: int, ino: int, entry: MapsEntry) -> bool:
    """Whether a file of device ``dev`` and inode ``ino`` is the one ``entry`` maps."""
    return (
        ino == entry.inode and os.major(dev) == entry.dev_major and os.minor(dev) == entry.dev_minor
    )


def page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")
