"""Loaded ELF objects, cached by file identity (device, inode, size, mtime).

Keying on identity rather than path means a library replaced on disk is a
new object, and the same file reached through two paths (/proc/<pid>/root/...
and the plain path) is read once.

An object's symbols come from its own tables first; the debug file and
MiniDebugInfo are searched at load time only when it has no .symtab, and
otherwise on the first miss (``ObjectCache.complete``), so a file with full
symbols costs no search at all (livesym.symbolize.sources).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from livesym.elf.cfi import CallFrames, FdeBounds, FdeIndex
from livesym.elf.cfi_rules import Rules
from livesym.elf.gopclntab import GoTable, is_go, read_go_table, stack_edge
from livesym.elf.image import ElfImage, FileIdentity, load_image, load_image_bytes, open_error
from livesym.elf.symtab import SymbolTable, merge_parts, symbol_parts
from livesym.errors import ElfFormatError, FileError, LivesymError, NotElfError
from livesym.records import Reason, Unresolved
from livesym.symbolize.sources import (
    USED,
    SourceUse,
    SymbolSearch,
    extra_symbols,
    needs_search,
    own_uses,
)

if TYPE_CHECKING:
    # Imported where used: symbolize -e on a file with full symbols needs neither.
    from livesym.elf.debugfile import DebugFile
    from livesym.symbolize.lines import LineTable, SourceLine
    from livesym.symbolize.perfmap import PerfMap

# Symbol sources that are files of their own; shown with their path.
_FILE_SOURCES = ("build-id", "debuglink", "debuginfod")
# Line tables hold an open file each; the least recently used are closed.
MAX_LINE_TABLES = 8
MAX_PERF_MAPS = 64


@dataclass(frozen=True)
class LoadedObject:
    """An ELF image with its symbol table, or the reason it could not be read."""

    path: str
    image: ElfImage | None
    symbols: SymbolTable | None
    error: str | None = None
    not_elf: bool = False  # a mapped data file: no defect, just not an object
    damaged: bool = False  # ELF, but not readable as one
    # Every symbol source tried, in order (docs/symbol-sources.md).
    sources: tuple[SourceUse, ...] = ()
    # Whether the debug file and MiniDebugInfo were searched for (they are
    # only when needed: no .symtab, or an address the own tables miss).
    searched: bool = False
    debug_file: DebugFile | None = None
    seen_as: str | None = None  # the path as the process (or the user) names it
    root: str = ""  # the prefix that reaches that process's file system
    # Its call-frame information, read on the first address no symbol covers or the
    # first unwound through it (one, or none yet).
    _frames: list[CallFrames] = field(default_factory=list, init=False, repr=False, compare=False)
    _go_table: list[GoTable | None] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def _go(self) -> GoTable | None:
        """A Go program's own function table, read on first use; None for others."""
        if not self._go_table:
            image = self.image
            table = read_go_table(image, []) if image is not None and is_go(image) else None
            self._go_table.append(table)
        return self._go_table[0]

    def function_bounds(self, vaddr: int) -> FdeBounds | Unresolved:
        """The bounds of the function holding ``vaddr`` from its FDE, for code no symbol
        covers."""
        frames = self._call_frames()
        if isinstance(frames, Unresolved):
            return frames
        return frames.lookup(vaddr)

    def eh_frame_alone(self) -> FdeIndex | None:
        """For batches: the object's ``.eh_frame`` where it is its only call-frame
        information, so that its ``span`` is ``function_bounds``' whole answer (None:
        no function known); else None (``function_bounds`` then)."""
        frames = self._call_frames()
        if isinstance(frames, Unresolved) or not frames.eh_frame_only():
            return None
        return frames.eh_frame

    def rules_at(self, vaddr: int) -> Rules:
        """The unwind rules at ``vaddr`` from the FDE covering it; ``ThreadRoot`` in a
        function where Go's runtime starts a stack."""
        go = self._go()
        if go is not None:
            hit = self.symbols.lookup(vaddr) if self.symbols is not None else None
            edge = stack_edge(hit.name) if hit is not None else None
            if edge is not None:
                return edge
        frames = self._call_frames()
        rules = frames if isinstance(frames, Unresolved) else frames.rules_at(vaddr)
        if isinstance(rules, Unresolved) and go is not None and self.image is not None:
            # No CFI (a stripped Go program has none): Go's own stack-pointer table.
            return go.rules_at(vaddr, self.image.e_machine) or rules
        return rules

    def _call_frames(self) -> CallFrames | Unresolved:
        """Read on first use (two threads may both read it: the same, one kept)."""
        if self.image is None:
            return Unresolved(Reason.NO_CFI, self.error or "the object could not be read")
        if not self._frames:
            debug = self.debug_file
            shown = (self.source_path(debug.how) or debug.path) if debug is not None else ""
            self._frames.append(
                CallFrames(self.image, (shown, debug.image) if debug is not None else None)
            )
        return self._frames[0]

    def source_path(self, source: str) -> str | None:
        """The file a used source is (a debug file, as a person reads its path)."""
        return next((u.path for u in self.sources if u.source == source and u.status == USED), None)

    @property
    def symbol_source(self) -> str:
        """Which tables gave symbols: ``symtab``, ``dynsym``, both, or ``none``, and
        any source merged in, e.g. ``dynsym+debuglink:/usr/lib/debug/x.debug``."""
        if self.symbols is None or not self.symbols.sources:
            return "none"
        paths = {u.source: u.path for u in self.sources if u.status == USED and u.path}
        return "+".join(
            f"{s}:{paths[s]}" if s in _FILE_SOURCES and s in paths else s
            for s in self.symbols.sources
        )


class ObjectCache:
    """Thread-safe cache of LoadedObject by file identity; failures are cached by path."""

    def __init__(self, max_objects: int = 512, search: SymbolSearch | None = None) -> None:
        self._by_identity: dict[FileIdentity, LoadedObject] = {}
        self._by_content: dict[bytes, LoadedObject] = {}
        self._lock = threading.Lock()
        self._max = max_objects
        self.search = search if search is not None else SymbolSearch()
        self._lines: dict[FileIdentity | str, LineTable] = {}
        self._perf_maps: dict[str, PerfMap] = {}

    def load(self, path: str | Path, seen_as: str | None = None, root: str = "") -> LoadedObject:
        """The object at ``path``; never raises for a bad or missing file.

        ``seen_as`` is the path its process maps it by (``path`` may be a
        /proc/PID/map_files entry), ``root`` the prefix of that process's file
        system: together they say where its debuglink files are.
        """
        path = str(path)
        try:
            st = os.stat(path)
        except OSError as e:
            return LoadedObject(path, None, None, str(open_error(path, e)))
        key = FileIdentity.of(st)
        with self._lock:
            hit = self._by_identity.get(key)
        if hit is not None:
            return hit
        obj = _load_uncached(path, self.search, seen_as, root)
        if obj.image is not None:
            key = obj.image.identity
        self._store(key, obj)
        return obj

    def load_bytes(self, data: bytes, name: str) -> LoadedObject:
        """An object held in memory (a vdso read from a process), cached by its bytes."""
        with self._lock:
            hit = self._by_content.get(data)
        if hit is not None:
            return hit
        try:
            image = load_image_bytes(data, name)
            parts = symbol_parts(image)
            symbols = merge_parts(parts)
        except LivesymError as e:
            return LoadedObject(name, None, None, str(e), damaged=True)
        memory = SourceUse("memory", USED, detail=f"{len(data)} bytes read from the process")
        obj = LoadedObject(name, image, symbols, sources=(memory, *own_uses(image, parts)),
                           searched=True)  # fmt: skip
        with self._lock:
            if len(self._by_content) >= 16:
                self._by_content.pop(next(iter(self._by_content)))
            self._by_content[data] = obj
        return obj

    def complete(self, obj: LoadedObject) -> LoadedObject:
        """``obj`` with the debug file and MiniDebugInfo searched (once; cached)."""
        if obj.searched or obj.image is None:
            return obj
        with self._lock:
            current = self._by_identity.get(obj.image.identity)
        if current is not None and current.searched:
            return current
        done = with_extra_sources(obj, self.search)
        self._store(obj.image.identity, done)
        return done

    def forget(self, build_ids: Collection[str]) -> None:
        """Drop the objects of ``build_ids`` (their debug files arrived): the next load
        reads them again, with the new symbols."""
        with self._lock:
            for key, obj in list(self._by_identity.items()):
                if obj.image is not None and obj.image.build_id_hex in build_ids:
                    del self._by_identity[key]
                    table = self._lines.pop(key, None)
                    if table is not None:
                        table.close()

    def perf_map(self, open_path: str, shown_as: str) -> PerfMap:
        """The perf map at ``open_path``, one reader per path for the cache's life."""
        from livesym.symbolize.perfmap import PerfMap

        with self._lock:
            found = self._perf_maps.get(open_path)
            if found is None:
                if len(self._perf_maps) >= MAX_PERF_MAPS:
                    self._perf_maps.pop(next(iter(self._perf_maps)))
                found = self._perf_maps[open_path] = PerfMap(open_path, shown_as)
            return found

    def line_table(self, obj: LoadedObject) -> LineTable | None:
        """The DWARF line table for ``obj``: its own .debug_line, else its debug
        file's (searched for now if it was not yet)."""
        from livesym.symbolize.lines import LineTable, has_line_table

        image = obj.image
        if image is None:
            return None
        if not has_line_table(image):
            obj = self.complete(obj)
            if obj.debug_file is None or not has_line_table(obj.debug_file.image):
                return None
            image = obj.debug_file.image
        key: FileIdentity | str = image.identity if image.data is None else image.path
        with self._lock:
            table = self._lines.pop(key, None)
            if table is None:
                table = LineTable(image)
                if len(self._lines) >= MAX_LINE_TABLES:
                    self._lines.pop(next(iter(self._lines))).close()
            self._lines[key] = table  # most recently used last
        return table

    def source_line(self, obj: LoadedObject, vaddr: int) -> SourceLine | None:
        """File and line of ``vaddr`` in ``obj`` from DWARF, or None. On demand only:
        the first question about a file imports pyelftools and decodes a unit."""
        table = self.line_table(obj)
        return table.lookup(vaddr) if table is not None else None

    def _store(self, key: FileIdentity, obj: LoadedObject) -> None:
        with self._lock:
            if key not in self._by_identity and len(self._by_identity) >= self._max:
                # Drop the oldest entry: long sessions with library churn stay bounded.
                self._by_identity.pop(next(iter(self._by_identity)))
            self._by_identity[key] = obj


def open_object(
    path: str, search: SymbolSearch, seen_as: str | None = None, root: str = ""
) -> LoadedObject:
    """Read the object at ``path``; raise FileError/ElfFormatError if it cannot be."""
    return object_from_image(load_image(path), search, seen_as, root)


def object_from_image(
    image: ElfImage, search: SymbolSearch, seen_as: str | None = None, root: str = ""
) -> LoadedObject:
    """The object with its own symbols, and the extra sources when it has no .symtab.
    Raises FileError if the file changed or vanished meanwhile."""
    problems: list[str] = []
    parts = symbol_parts(image, problems=problems)
    obj = LoadedObject(
        image.path,
        image,
        merge_parts(parts, problems),
        sources=tuple(own_uses(image, parts)),
        seen_as=seen_as,
        root=root,
    )
    if needs_search(parts):
        return with_extra_sources(obj, search)
    return obj


def with_extra_sources(obj: LoadedObject, search: SymbolSearch) -> LoadedObject:
    """``obj`` with the symbols of its debug file or MiniDebugInfo merged in."""
    image = obj.image
    if image is None or obj.searched:
        return obj
    seen_as = obj.seen_as or os.path.realpath(obj.path)
    try:
        extra = extra_symbols(image, seen_as, search, obj.root)
        if not extra.parts:
            return replace(obj, sources=obj.sources + extra.uses, searched=True)
        problems: list[str] = []
        own = symbol_parts(image, problems=problems)
    except LivesymError as e:
        note = SourceUse("debug file", "unused", detail=str(e))
        return replace(obj, sources=(*obj.sources, note), searched=True)
    symbols = merge_parts([*own, *extra.parts], [*problems, *extra.problems])
    return replace(
        obj,
        symbols=symbols,
        sources=obj.sources + extra.uses,
        searched=True,
        debug_file=extra.debug_file,
    )


def _load_uncached(path: str, search: SymbolSearch, seen_as: str | None, root: str) -> LoadedObject:
    try:
        # Where the process's own path is this very file in livesym's view too, reads
        # go on through it once the process is gone (its /proc/PID/root with it):
        # its CFI and line tables are read later than its symbols, often after a
        # short-lived child has exited.
        image = load_image(path).also_at(seen_as if seen_as and seen_as.startswith("/") else None)
    except NotElfError as e:
        return LoadedObject(path, None, None, str(e), not_elf=True)
    except ElfFormatError as e:
        return LoadedObject(path, None, None, str(e), damaged=True)
    except FileError as e:
        return LoadedObject(path, None, None, str(e))
    try:
        return object_from_image(image, search, seen_as, root)
    except FileError as e:
        return LoadedObject(path, image, None, str(e))
