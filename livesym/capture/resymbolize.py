"""Offline re-symbolization: names for a capture's frames from files found by build-id.

A capture taken on a box without symbols (stripped binaries, no debug
packages) keeps each frame's ELF vaddr and each object's build-id. Given
directories of debug files (``--debug-dir``) or of binaries (``--binaries``),
``resymbolize`` finds each object's file by build-id and looks every frame of
that object up again, by its ELF vaddr, in the file's symbol table. The address
conversion is not redone: a frame's mapping, base, vaddr and file offset were
worked out on the box and stay as they were.

Where a file is looked for, for an object with build-id ``abcdef...``:

- in a debug directory: ``.build-id/ab/cdef....debug`` (the layout of
  /usr/lib/debug and debuginfod caches), then ``.build-id/ab/cdef...``, then
  every ELF file under the directory;
- in a binaries directory: every ELF file under it.

Only a file whose build-id is the recorded one is used. A file that has the
object's name but another build-id (a rebuilt binary, another version of a
library) is refused and never used, and the refusal is added to the capture's
errors, so ``report`` shows it; so is a file with the right name for an object
whose capture has no build-id to check it against.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from livesym.elf.debugfile import build_id_paths
from livesym.elf.image import ELF_MAGIC, ElfImage, load_image
from livesym.elf.symtab import SymbolTable, load_symbols
from livesym.errors import FileError, LivesymError
from livesym.records import KIND_NATIVE, Capture, FrameRecord, ObjectRecord, Unresolved
from livesym.symbolize.debuginfod import DebuginfodClient

# Directory walks are bounded: a --debug-dir of /usr/lib/debug holds many
# thousands of files, and a hostile tree could hold endless ones.
MAX_SCANNED_FILES = 50_000
MAX_DEPTH = 8


@dataclass(frozen=True)
class Candidate:
    path: str
    build_id: str | None


@dataclass(frozen=True)
class Found:
    """The file an object's symbols now come from."""

    object_id: int
    path: str
    symbols: SymbolTable


class _Files:
    """ELF files under some directories, read once each, by build-id and by name."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self._roots = roots
        self._scanned: list[Candidate] | None = None

    def candidates(self) -> list[Candidate]:
        if self._scanned is None:
            self._scanned = []
            for path in _walk(self._roots):
                candidate = _candidate(path)
                if candidate is not None:
                    self._scanned.append(candidate)
        return self._scanned

    def by_build_id(self, build_id: str) -> list[str]:
        return [c.path for c in self.candidates() if c.build_id == build_id]

    def by_name(self, name: str) -> list[Candidate]:
        names = {name, f"{name}.debug"}
        return [c for c in self.candidates() if os.path.basename(c.path) in names]


def _walk(roots: Sequence[Path]) -> Iterator[str]:
    seen = 0
    for root in roots:
        base_depth = str(root).rstrip("/").count("/")
        for directory, subdirs, files in os.walk(root):
            subdirs.sort()
            if directory.count("/") - base_depth >= MAX_DEPTH:
                subdirs.clear()
            for name in sorted(files):
                seen += 1
                if seen > MAX_SCANNED_FILES:
                    return
                yield os.path.join(directory, name)


def _candidate(path: str) -> Candidate | None:
    """The file's build-id, if it is a readable ELF file (anything else is skipped)."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != ELF_MAGIC:
                return None
        image = load_image(path)
    except (OSError, LivesymError):
        return None
    return Candidate(path, image.build_id_hex)


def _image(path: str) -> ElfImage | None:
    try:
        return load_image(path)
    except (OSError, LivesymError):
        return None


def _check_dirs(dirs: Sequence[Path], option: str) -> None:
    for d in dirs:
        if not d.is_dir():
            what = "no such directory" if not d.exists() else "not a directory"
            raise FileError(f"{option} {d}: {what}; give a directory of ELF files")


def find_objects(
    capture: Capture,
    debug_dirs: Sequence[Path],
    binaries: Sequence[Path],
    debuginfod: DebuginfodClient | None = None,
) -> tuple[list[Found], list[str]]:
    """The file for each object that has one, and a sentence for each file refused;
    where no directory has it, from debuginfod (its debug file, else the binary), for
    objects with frames still unnamed."""
    _check_dirs(debug_dirs, "--debug-dir")
    _check_dirs(binaries, "--binaries")
    debug_files, binary_files = _Files(debug_dirs), _Files(binaries)
    unnamed = {f.object for f in capture.frames if f.object is not None and f.symbol is None}
    found: list[Found] = []
    refused: list[str] = []
    for obj in capture.objects:
        if obj.build_id is None:
            refused.extend(_unverifiable(obj, debug_files, binary_files))
            continue
        # The .build-id layout is shared with live symbolization; the capture's
        # build-id is untrusted and becomes a path: build_id_paths checks it.
        paths = [p for d in debug_dirs for p in build_id_paths(d, obj.build_id)]
        paths += debug_files.by_build_id(obj.build_id) + binary_files.by_build_id(obj.build_id)
        hit = _first_with_symbols(paths, obj.build_id)
        if hit is None and debuginfod is not None and obj.id in unnamed:
            hit = _from_server(debuginfod, obj.build_id, refused)
        if hit is not None:
            found.append(Found(obj.id, *hit))
        elif not paths:
            refused.extend(_mismatches(obj, debug_files, binary_files))
    return found, refused


def _from_server(
    client: DebuginfodClient, build_id: str, refused: list[str]
) -> tuple[str, SymbolTable] | None:
    """The object's debug file, else its binary, from debuginfod (checked there to be
    that build); what the servers said when neither came."""
    why = []
    for fetch in (client.debuginfo, client.executable):
        got = fetch(build_id)
        if isinstance(got, Unresolved):
            why.append(got.detail)
            continue
        hit = _first_with_symbols([str(got)], build_id)
        if hit is not None:
            return hit
    if why:
        refused.append(f"debuginfod had no file for build-id {build_id}: {why[0]}")
    return None


def _first_with_symbols(paths: list[str], build_id: str) -> tuple[str, SymbolTable] | None:
    """The first file that is really that build and has function symbols."""
    for path in dict.fromkeys(paths):  # in order, each once
        image = _image(path)
        if image is None or image.build_id_hex != build_id:
            continue  # a .build-id link that points at something else is no match
        try:
            symbols = load_symbols(image)
        except LivesymError:
            continue
        if len(symbols):
            return path, symbols
    return None


def _same_name(obj: ObjectRecord, *files: _Files) -> list[Candidate]:
    name = os.path.basename(obj.path)
    return [c for f in files for c in f.by_name(name)] if name else []


def _mismatches(obj: ObjectRecord, *files: _Files) -> list[str]:
    name = os.path.basename(obj.path)
    return [
        f"{c.path} has build-id {c.build_id or 'none'}, but {name} was recorded with "
        f"{obj.build_id}: a different build, not used for its symbols"
        for c in _same_name(obj, *files)
    ]


def _unverifiable(obj: ObjectRecord, *files: _Files) -> list[str]:
    name = os.path.basename(obj.path)
    return [
        f"{c.path} has the name of {name}, but the capture has no build-id to check it "
        f"against: not used for its symbols"
        for c in _same_name(obj, *files)
    ]


def resymbolize(
    capture: Capture,
    debug_dirs: Sequence[Path],
    binaries: Sequence[Path],
    debuginfod: DebuginfodClient | None = None,
) -> Capture:
    """``capture`` with the frames of every object found by build-id looked up again.

    A frame whose address the found file has no symbol for keeps what it had.
    Refused files are named in ``session["errors"]``. Raises FileError when a
    directory does not exist.
    """
    found, refused = find_objects(capture, debug_dirs, binaries, debuginfod)
    by_object = {f.object_id: f for f in found}
    frames = tuple(_frame(r, by_object.get(r.object)) if r.object is not None else r
                   for r in capture.frames)  # fmt: skip
    objects = tuple(_object(o, by_object.get(o.id)) for o in capture.objects)
    maps = tuple(
        dataclasses.replace(g, mappings=tuple(
            dataclasses.replace(m, symbol_source=objects[m.object].symbol_source)
            if m.object is not None and m.object in by_object else m
            for m in g.mappings
        ))
        for g in capture.maps
    )  # fmt: skip
    session = dict(capture.session)
    if refused:
        errors = session.get("errors")
        session["errors"] = [*(errors if isinstance(errors, list) else []), *refused]
    return dataclasses.replace(capture, frames=frames, objects=objects, maps=maps, session=session)


def _frame(record: FrameRecord, found: Found | None) -> FrameRecord:
    if found is None or record.kind != KIND_NATIVE or record.elf_vaddr is None:
        return record
    hit = found.symbols.lookup(record.elf_vaddr)
    if hit is None:
        return record
    return dataclasses.replace(
        record,
        symbol=hit.name,
        demangled=hit.demangled,
        symbol_vaddr=hit.vaddr,
        symbol_size=hit.size,
        symbol_offset=hit.offset,
        reason=None,
        detail=f"symbol from {found.path} (found by build-id)",
    )


def _object(obj: ObjectRecord, found: Found | None) -> ObjectRecord:
    if found is None:
        return obj
    return dataclasses.replace(obj, symbol_source="+".join(found.symbols.sources) or "none")
