"""The observed process as /proc shows it: its maps and a way to open its files.

Files are opened through /proc/<pid>/root so a target in a container or a
chroot is read from its own file system, and through
/proc/<pid>/map_files/<range> when the path was deleted or now names a
different file than the one mapped (never symbolize with the wrong file).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from livesym.addr.maps import MapsEntry, MapsSnapshot, parse_maps
from livesym.errors import TargetError

MAX_MAPS_BYTES = 64 << 20


@dataclass(frozen=True)
class ObjectPath:
    """Where to open a mapped file, and why that way."""

    open_path: str
    via: str  # "root", "map_files" or "path"
    problem: str | None = None


class TargetProcess:
    """Read-only access to one process's /proc entries."""

    def __init__(self, pid: int, proc: str = "/proc") -> None:
        self.pid = pid
        self._dir = f"{proc}/{pid}"
        if pid <= 0 or not os.path.isdir(self._dir):
            raise TargetError(
                f"cannot inspect {pid}: no such process; check the PID with ps or pgrep"
            )

    @property
    def root(self) -> str:
        return f"{self._dir}/root"

    def read_maps(self) -> MapsSnapshot:
        """Parse /proc/<pid>/maps now; raise TargetError if it cannot be read."""
        try:
            with open(f"{self._dir}/maps", "rb") as f:
                raw = f.read(MAX_MAPS_BYTES)
        except FileNotFoundError:
            raise TargetError(f"cannot inspect {self.pid}: the process has exited") from None
        except PermissionError:
            raise TargetError(
                f"cannot read the maps of {self.pid}: permission denied; "
                "run as the process's user or as root"
            ) from None
        except OSError as e:
            if e.errno == errno.ESRCH:
                raise TargetError(f"cannot inspect {self.pid}: the process has exited") from None
            raise TargetError(f"cannot read the maps of {self.pid}: {e.strerror}") from None
        snapshot = parse_maps(raw.decode("utf-8", "surrogateescape"))
        if not snapshot.entries and not os.path.isdir(self._dir):
            raise TargetError(f"cannot inspect {self.pid}: the process has exited")
        return snapshot

    def object_path(self, entry: MapsEntry) -> ObjectPath:
        """How to open the file behind a file-backed mapping."""
        map_file = f"{self._dir}/map_files/{entry.range_name}"
        if entry.deleted or not entry.path.startswith("/"):
            return ObjectPath(map_file, "map_files")
        rooted = self.root + entry.path
        try:
            st = os.stat(rooted)
        except OSError:
            return ObjectPath(map_file, "map_files", f"{entry.path} is not reachable by path")
        if st.st_ino != entry.inode:
            # Replaced on disk since it was mapped: only map_files has the mapped bytes.
            if os.access(map_file, os.R_OK):
                return ObjectPath(map_file, "map_files", f"{entry.path} was replaced on disk")
            return ObjectPath(rooted, "root", f"{entry.path} was replaced on disk")
        return ObjectPath(rooted, "root")

    def command_line(self) -> list[str]:
        try:
            with open(f"{self._dir}/cmdline", "rb") as f:
                raw = f.read(1 << 16)
        except OSError:
            return []
        return [a.decode("utf-8", "backslashreplace") for a in raw.split(b"\0") if a]


def page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")
