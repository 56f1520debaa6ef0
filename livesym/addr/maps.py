"""Parsing /proc/<pid>/maps.

Lines are split on whitespace, never matched with fixed-width patterns: device
numbers can be wider than two hex digits and paths may contain spaces. Every
error carries the whole line so a report can be acted on.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from livesym.addr.kinds import ElfOffset, Vma

DELETED_SUFFIX = " (deleted)"

# A process may have up to vm.max_map_count (65530 by default) mappings; a text
# claiming far more than that is not a maps file we should hold in memory.
MAX_MAPS_LINES = 1_000_000


class MapKind(Enum):
    """What backs a mapping, as far as the maps line tells."""

    FILE = "file"
    ANON = "anon"
    HEAP = "heap"
    STACK = "stack"
    VDSO = "vdso"
    VVAR = "vvar"
    VSYSCALL = "vsyscall"
    ANON_INODE = "anon_inode"
    MEMFD = "memfd"
    SHMEM = "shmem"  # shared anonymous memory: /dev/zero (deleted), System V segments
    SPECIAL = "special"  # any other "[name]", e.g. [anon:name] or [uprobes]


class MapsParseError(ValueError):
    """A maps line that is not in the kernel's format."""

    def __init__(self, line: str, why: str) -> None:
        super().__init__(f"{why}: {line!r}")
        self.line = line


class MapsEntry(NamedTuple):
    """One line of /proc/<pid>/maps: the range [start, end) and what backs it.

    A named tuple, not a frozen dataclass: a process may have tens of thousands of
    mappings, read every second, and a tuple is made in a fifth of the time (immutable,
    hashable and compared by value all the same)."""

    start: Vma
    end: Vma
    perms: str
    pgoff: ElfOffset
    dev_major: int
    dev_minor: int
    inode: int
    path: str
    deleted: bool
    kind: MapKind

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def readable(self) -> bool:
        return self.perms[0] == "r"

    @property
    def writable(self) -> bool:
        return self.perms[1] == "w"

    @property
    def executable(self) -> bool:
        return self.perms[2] == "x"

    @property
    def file_backed(self) -> bool:
        """True when the mapping shows a file that can be opened and read as an object."""
        return self.kind is MapKind.FILE or self.kind is MapKind.MEMFD

    @property
    def range_name(self) -> str:
        """The name of this mapping's entry under /proc/<pid>/map_files/."""
        return f"{self.start:x}-{self.end:x}"

    def contains(self, vma: int) -> bool:
        return self.start <= vma < self.end

    def describe(self) -> str:
        """The line as a person reads it, rebuilt from the parsed fields."""
        name = self.path + (DELETED_SUFFIX if self.deleted else "")
        return (
            f"{self.start:x}-{self.end:x} {self.perms} {self.pgoff:08x} "
            f"{self.dev_major:02x}:{self.dev_minor:02x} {self.inode} {name}".rstrip()
        )


def _classify(path: str) -> MapKind:
    if not path:
        return MapKind.ANON
    if path.startswith("/memfd:"):
        return MapKind.MEMFD
    if path == "/dev/zero" or path.startswith("/SYSV"):
        return MapKind.SHMEM  # no file to read: a MAP_SHARED|MAP_ANONYMOUS or shmget region
    if path.startswith("/"):
        return MapKind.FILE
    if path.startswith("anon_inode:"):
        return MapKind.ANON_INODE
    special = {
        "[heap]": MapKind.HEAP,
        "[stack]": MapKind.STACK,
        "[vdso]": MapKind.VDSO,
        "[vvar]": MapKind.VVAR,
        "[vvar_vclock]": MapKind.VVAR,
        "[vsyscall]": MapKind.VSYSCALL,
    }
    if path in special:
        return special[path]
    if path.startswith("[stack:"):  # per-thread stacks on old kernels
        return MapKind.STACK
    return MapKind.SPECIAL


_PERM_CHARS = ("r-", "w-", "x-", "ps")


def _valid_perms(perms: str) -> bool:
    return len(perms) == 4 and all(c in ok for c, ok in zip(perms, _PERM_CHARS, strict=True))


def _hex(field: str, line: str, what: str) -> int:
    try:
        return int(field, 16)
    except ValueError:
        raise MapsParseError(line, f"bad {what} {field!r}") from None


_KINDS: dict[str, MapKind] = {}  # path -> its kind, as _classify says (a few per process)
MAX_KNOWN_PATHS = 4096
_new_entry = tuple.__new__  # a MapsEntry of fields in order, without NamedTuple's __new__

# A well-formed line, all of it in one match (``_careful`` says what is wrong with others):
# a big process has tens of thousands, re-read every second.
_LINE = re.compile(
    r"([0-9a-f]+)-([0-9a-f]+) ([r-][w-][x-][ps]) ([0-9a-f]+) ([0-9a-f]+):([0-9a-f]+) ([0-9]+)"
    r"(?: +(.*))?"
)


def parse_maps_line(line: str) -> MapsEntry:
    """Parse one maps line (without its newline); raise MapsParseError with the line."""
    match = _LINE.fullmatch(line)
    if match is None:
        return _careful(line)
    start_s, end_s, perms, pgoff, major, minor, inode, raw_path = match.groups()
    start, end = int(start_s, 16), int(end_s, 16)
    if end < start:
        raise MapsParseError(line, "end address before start")
    raw_path = raw_path or ""
    deleted = raw_path.endswith(DELETED_SUFFIX)
    path = raw_path[: -len(DELETED_SUFFIX)] if deleted else raw_path
    kind = _KINDS.get(path)
    if kind is None:
        kind = _classify(path)
        if len(_KINDS) < MAX_KNOWN_PATHS:
            _KINDS[path] = kind
    # (the kinds of address are NewTypes of int: nothing to convert at run time)
    return _new_entry(MapsEntry, (start, end, perms, int(pgoff, 16), int(major, 16),
                                  int(minor, 16), int(inode), path, deleted, kind))  # fmt: skip


def _careful(line: str) -> MapsEntry:
    """Any line, field by field, saying which one is wrong."""
    parts = line.split(None, 5)
    if len(parts) < 5:
        raise MapsParseError(line, "expected at least 5 fields")
    span, perms, pgoff, dev, inode = parts[:5]
    raw_path = parts[5] if len(parts) == 6 else ""
    start_s, sep, end_s = span.partition("-")
    if not sep:
        raise MapsParseError(line, f"bad address range {span!r}")
    start = _hex(start_s, line, "start address")
    end = _hex(end_s, line, "end address")
    if end < start:
        raise MapsParseError(line, "end address before start")
    if not _valid_perms(perms):
        raise MapsParseError(line, f"bad permissions {perms!r}")
    major_s, sep, minor_s = dev.partition(":")
    if not sep:
        raise MapsParseError(line, f"bad device {dev!r}")
    try:
        inode_n = int(inode, 10)
    except ValueError:
        raise MapsParseError(line, f"bad inode {inode!r}") from None
    deleted = raw_path.endswith(DELETED_SUFFIX)
    path = raw_path[: -len(DELETED_SUFFIX)] if deleted else raw_path
    return MapsEntry(
        start=Vma(start),
        end=Vma(end),
        perms=perms,
        pgoff=ElfOffset(_hex(pgoff, line, "offset")),
        dev_major=_hex(major_s, line, "device major"),
        dev_minor=_hex(minor_s, line, "device minor"),
        inode=inode_n,
        path=path,
        deleted=deleted,
        kind=_classify(path),
    )


@dataclass(frozen=True)
class MapsSnapshot:
    """The parsed maps of one moment, sorted by start, with the lines that did not parse."""

    entries: tuple[MapsEntry, ...]
    errors: tuple[str, ...] = ()

    def find(self, vma: int) -> MapsEntry | None:
        """The mapping that holds ``vma``, or None."""
        entries = self.entries
        lo, hi = 0, len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if entries[mid].start <= vma:
                lo = mid + 1
            else:
                hi = mid
        if lo and entries[lo - 1].contains(vma):
            return entries[lo - 1]
        return None


def parse_maps(text: str) -> MapsSnapshot:
    """Parse a whole maps file; bad lines are kept as errors, not fatal."""
    return parse_maps_reusing(text, {})[0]


def parse_maps_reusing(
    text: str, known: dict[str, MapsEntry]
) -> tuple[MapsSnapshot, dict[str, MapsEntry]]:
    """``parse_maps``, taking each line found in ``known`` (the previous read's lines)
    as it is: a line is its whole mapping, so the same text is the same entry. Returns
    this read's lines for the next one. A process with 40,000 mappings whose maps
    change by a few lines costs a dictionary look-up a line, not a parse."""
    entries: list[MapsEntry] = []
    errors: list[str] = []
    by_line: dict[str, MapsEntry] = {}
    for n, line in enumerate(text.splitlines()):
        if n >= MAX_MAPS_LINES:
            errors.append(f"more than {MAX_MAPS_LINES} lines; the rest was not read")
            break
        entry = known.get(line)
        if entry is None:
            if not line.strip():
                continue
            try:
                entry = parse_maps_line(line)
            except MapsParseError as e:
                errors.append(str(e))
                continue
        entries.append(entry)
        by_line[line] = entry
    if any(a.start > b.start for a, b in itertools.pairwise(entries)):
        entries.sort(key=lambda e: e.start)  # the kernel writes them in order
    return MapsSnapshot(tuple(entries), tuple(errors)), by_line
