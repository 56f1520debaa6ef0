"""Where an object's symbols come from, tried in a fixed order (docs/symbol-sources.md).

1. The object's own ``.symtab`` and ``.dynsym``; for a Go program without a
   ``.symtab``, its ``.gopclntab`` (livesym.elf.gopclntab).
2. A separate debug file: by build-id under each debug root, then by
   ``.gnu_debuglink`` beside the object and under each debug root
   (livesym.elf.debugfile). Its ``.symtab`` is merged with the object's own.
3. MiniDebugInfo (``.gnu_debugdata``), when no debug file gave symbols.

Steps 2 and 3 cost file-system look-ups and reads, so they run only when
needed: at load time for an object without a ``.symtab``, otherwise the first
time an address misses (or a source line is asked for). Each source tried is
recorded as a ``SourceUse``, so ``livesym maps`` can say which one was used,
or why none was.

Debug roots, in order: each ``--debug-dir``, the target's own /usr/lib/debug
(through /proc/PID/root, for containers), then the host's /usr/lib/debug.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from livesym.elf.gopclntab import SOURCE_GOPCLNTAB
from livesym.elf.image import ElfImage
from livesym.elf.symtab import SOURCE_PLT, SOURCE_SYMTAB, SymbolPart, symbol_parts
from livesym.errors import FileError, LivesymError
from livesym.records import Unresolved

if TYPE_CHECKING:
    from livesym.elf.debugfile import DebugFile
    from livesym.symbolize.debuginfod import BackgroundFetches, DebuginfodClient

# The debug-file and MiniDebugInfo readers are imported when a search runs: a
# file with full symbols (the common case for symbolize -e) never pays for them.

DEFAULT_DEBUG_ROOT = "/usr/lib/debug"
SOURCE_MINIDEBUGINFO = "minidebuginfo"

# Table ids of the merged sources (livesym.elf.symtab keeps eight).
OWN_TABLES = 0  # .symtab 0, .dynsym 1
DEBUG_FILE_TABLES = 2
MINIDEBUG_TABLES = 4

SourceStatus = Literal["used", "absent", "refused", "unused"]
USED: Final = "used"
ABSENT: Final = "absent"
REFUSED: Final = "refused"
UNUSED: Final = "unused"  # present, but not needed or not readable


@dataclass(frozen=True, slots=True)
class SourceUse:
    """One source of an object's symbols and what came of it."""

    source: str  # "symtab", "dynsym", "build-id", "debuglink", "minidebuginfo", "memory"
    status: SourceStatus
    path: str | None = None
    detail: str = ""

    def as_json(self) -> dict[str, object]:
        return {"source": self.source, "status": self.status, "path": self.path,
                "detail": self.detail}  # fmt: skip

    def text(self) -> str:
        where = f" {self.path}" if self.path else ""
        return f"{self.source} {self.status}{where}" + (f": {self.detail}" if self.detail else "")


BEING_FETCHED = "being fetched from a debuginfod server; its names follow when it arrives"


@dataclass(frozen=True)
class SymbolSearch:
    """Where to look for debug files: host directories, in order of preference."""

    debug_dirs: tuple[str, ...] = ()
    system_root: str = DEFAULT_DEBUG_ROOT
    # Servers to fetch debug files from by build-id, where DEBUGINFOD_URLS names some.
    debuginfod: DebuginfodClient | None = None
    # Where set, files not in the cache are fetched in the background (a live session:
    # it never waits); else each is fetched when its object loads.
    background: BackgroundFetches | None = None

    @classmethod
    def from_option(cls, dirs: Sequence[str] | None) -> SymbolSearch:
        """From the commands' ``--debug-dir`` values; raise FileError for one that is
        not a directory (a typo should not silently mean "no debug files"). Debuginfod
        servers as the environment names them (DEBUGINFOD_URLS)."""
        return cls.of(checked_debug_dirs(dirs))

    @classmethod
    def of(cls, dirs: tuple[str, ...], *, background: bool = False) -> SymbolSearch:
        """Debug files in ``dirs``, and from the servers the environment names (fetched
        in the background with ``background``)."""
        from livesym.symbolize.debuginfod import BackgroundFetches, DebuginfodClient

        client = DebuginfodClient.from_environment()
        fetches = BackgroundFetches(client) if client is not None and background else None
        return cls(dirs, debuginfod=client, background=fetches)

    def roots(self, root: str = "") -> list[str]:
        """The debug roots for an object in the file system at ``root`` (a
        /proc/PID/root prefix, or "" for the host's): each --debug-dir, the
        target's /usr/lib/debug, the host's; a directory seen twice counts once."""
        found: list[str] = []
        seen: set[tuple[int, int]] = set()
        places = [*self.debug_dirs, *([root + self.system_root] if root else []),
                  self.system_root]  # fmt: skip
        for place in places:
            try:
                st = os.stat(place)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen.add(key)
                found.append(place)
        return found


def checked_debug_dirs(dirs: Sequence[str] | None) -> tuple[str, ...]:
    """``--debug-dir`` values, each checked to be a directory."""
    for d in dirs or ():
        if not os.path.isdir(d):
            what = "no such directory" if not os.path.exists(d) else "not a directory"
            raise FileError(f"--debug-dir {d}: {what}; give a directory of debug files")
    return tuple(dirs or ())


def own_uses(image: ElfImage, parts: Sequence[SymbolPart]) -> list[SourceUse]:
    """What the object's own tables gave."""
    uses = []
    for source in ("symtab", "dynsym"):
        part = next((p for p in parts if p.source == source), None)
        if part is None or not part.raw:
            section = image.section(f".{source}")
            why = f"no .{source}" if section is None else f".{source} has no function symbols"
            uses.append(SourceUse(source, ABSENT, detail=why))
        else:
            uses.append(SourceUse(source, USED, detail=f"{len(part.raw)} function symbols"))
    go = next((p for p in parts if p.source == SOURCE_GOPCLNTAB), None)
    if go is not None:
        uses.append(SourceUse(SOURCE_GOPCLNTAB, USED, detail=f"{len(go.raw)} Go functions"))
    plt = next((p for p in parts if p.source == SOURCE_PLT), None)
    if plt is not None:
        uses.append(SourceUse(SOURCE_PLT, USED, detail=f"{len(plt.raw)} stubs named"))
    return uses


def needs_search(parts: Sequence[SymbolPart]) -> bool:
    """Whether the extra sources should be tried at load time: no .symtab symbols."""
    return not any(p.source == SOURCE_SYMTAB and p.raw for p in parts)


@dataclass(frozen=True)
class ExtraSymbols:
    """What the debug file and MiniDebugInfo add, and the record of the search."""

    parts: tuple[SymbolPart, ...]
    uses: tuple[SourceUse, ...]
    debug_file: DebugFile | None
    problems: tuple[str, ...]


def extra_symbols(
    image: ElfImage, seen_as: str, search: SymbolSearch, root: str = ""
) -> ExtraSymbols:
    """The debug file's and MiniDebugInfo's function symbols for ``image``.

    ``seen_as`` is the object's path as its process (or the user) names it,
    ``root`` the prefix that reaches that process's file system.
    """
    from livesym.elf.debugfile import find_debug_file
    from livesym.elf.minidebug import has_minidebuginfo

    uses: list[SourceUse] = []
    parts: list[SymbolPart] = []
    problems: list[str] = []
    roots = search.roots(root)
    found, attempts = find_debug_file(image, seen_as, roots, root)
    shown = _shown_path(root)
    uses += [SourceUse(a.how, REFUSED, shown(a.path), a.why) for a in attempts]
    if found is None and search.debuginfod is not None and image.build_id_hex is not None:
        found, use = _from_debuginfod(image, search)
        if use is not None:
            uses.append(use)
    if found is not None:
        try:
            got = symbol_parts(found.image, DEBUG_FILE_TABLES, found.how, problems)
        except LivesymError as e:
            uses.append(SourceUse(found.how, UNUSED, shown(found.path), str(e)))
            found = None
        else:
            count = sum(len(p.raw) for p in got)
            if count:
                parts += got
                what = f"{count} function symbols"
                uses.append(SourceUse(found.how, USED, shown(found.path), what))
            else:
                uses.append(SourceUse(found.how, UNUSED, shown(found.path), "no function symbols"))
    elif not attempts:
        where = ", ".join(map(shown, roots)) if roots else "no debug root exists"
        uses.append(SourceUse("debug file", ABSENT, detail=f"none found ({where})"))
    if not parts:
        uses.append(_minidebuginfo(image, parts, problems))
    elif has_minidebuginfo(image):
        uses.append(SourceUse(SOURCE_MINIDEBUGINFO, UNUSED, detail="the debug file has it all"))
    return ExtraSymbols(tuple(parts), tuple(uses), found, tuple(problems))


def _from_debuginfod(
    image: ElfImage, search: SymbolSearch
) -> tuple[DebugFile | None, SourceUse | None]:
    """The debug file a debuginfod server has for the object's build-id (cached, or
    fetched now within the client's bounds, or being fetched in the background), or how
    that failed."""
    from livesym.elf.debugfile import HOW_DEBUGINFOD, check_debug_file

    client, build_id = search.debuginfod, image.build_id_hex
    assert client is not None and build_id is not None
    if search.background is None:
        got = client.debuginfo(build_id)
    elif (known := client.cached(build_id, "debuginfo")) is not None:
        got = known
    else:
        search.background.start(build_id)
        return None, SourceUse(HOW_DEBUGINFOD, ABSENT, detail=BEING_FETCHED)
    if isinstance(got, Unresolved):
        return None, SourceUse(HOW_DEBUGINFOD, ABSENT, detail=got.detail)
    found = check_debug_file(image, str(got), HOW_DEBUGINFOD)
    if isinstance(found, Unresolved):
        return None, SourceUse(HOW_DEBUGINFOD, REFUSED, str(got), found.detail)
    return found, None


def _shown_path(root: str) -> Callable[[str], str]:
    """Paths as a person reads them: a target whose root is the host's own
    (no chroot, no container) has its /proc/PID/root prefix dropped; others keep
    it, so a container's file is never mistaken for the host's."""
    same = False
    if root.endswith("/root"):
        # The same root directory *and* the same mounts: a process in another mount
        # namespace (a container) shares the host's "/" inode but not its files.
        ns = root.removesuffix("/root") + "/ns/mnt"
        try:
            same = os.path.samestat(os.stat(root), os.stat("/")) and (
                os.readlink(ns) == os.readlink("/proc/self/ns/mnt")
            )
        except OSError:
            same = False
    if not same:
        return lambda path: path
    return lambda path: path[len(root) :] if path.startswith(root + "/") else path


def _minidebuginfo(image: ElfImage, parts: list[SymbolPart], problems: list[str]) -> SourceUse:
    from livesym.elf.minidebug import load_minidebuginfo

    embedded = load_minidebuginfo(image)
    if embedded is None:
        return SourceUse(SOURCE_MINIDEBUGINFO, ABSENT, detail="no .gnu_debugdata")
    if isinstance(embedded, Unresolved):
        return SourceUse(SOURCE_MINIDEBUGINFO, UNUSED, detail=embedded.detail)
    try:
        got = symbol_parts(embedded, MINIDEBUG_TABLES, SOURCE_MINIDEBUGINFO, problems)
    except LivesymError as e:
        return SourceUse(SOURCE_MINIDEBUGINFO, UNUSED, detail=str(e))
    count = sum(len(p.raw) for p in got)
    if not count:
        return SourceUse(SOURCE_MINIDEBUGINFO, UNUSED, detail="no function symbols")
    parts += got
    return SourceUse(SOURCE_MINIDEBUGINFO, USED, detail=f"{count} function symbols")
