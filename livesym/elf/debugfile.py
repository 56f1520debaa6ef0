"""Separate debug files: where an object's debug file can be, and whether one belongs to it.

Distributions strip binaries and ship their symbols and DWARF in separate
files, found two ways (the gdb manual's "Separate Debug Files"):

- by build-id: ``<debug root>/.build-id/ab/cdef....debug`` for build-id
  ``abcdef...`` (``.build-id/ab/cdef...`` without ``.debug`` is, on Fedora, a
  link to the binary itself);
- by ``.gnu_debuglink``: a section naming the debug file and holding the CRC32
  of its contents, looked for next to the object, in the ``.debug/``
  directory beside it, and under each debug root as ``<root>/<object's
  dir>/<name>``.

A candidate is used only if it is that build: where both files have a
build-id they must be equal, and where either lacks one the debuglink CRC
must match (a build-id decides on its own: computing the CRC of a
multi-hundred-megabyte debug file costs a second and proves nothing more).
A candidate is never the object itself.

Everything read from a file is hostile: the debuglink name must be a plain
file name (it becomes a path), the build-id hex (idem), the CRC is computed
over at most ``MAX_CRC_BYTES``.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from livesym.elf.image import ElfImage, load_image, section_bytes
from livesym.errors import LivesymError
from livesym.records import Reason, Unresolved

How = Literal["build-id", "debuglink", "debuginfod"]  # how a debug file was found
HOW_BUILD_ID: Final = "build-id"
HOW_DEBUGLINK: Final = "debuglink"
HOW_DEBUGINFOD: Final = "debuginfod"  # fetched by build-id from a server

MAX_DEBUGLINK_BYTES = 4096
MAX_LINK_NAME = 255
MAX_CRC_BYTES = 8 << 30
CRC_CHUNK = 1 << 20
_HEX_DIGITS = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class DebugLink:
    """The contents of ``.gnu_debuglink``: a file name and the CRC32 of that file."""

    name: str
    crc: int


@dataclass(frozen=True)
class DebugFile:
    """A debug file that belongs to an object, and how it was found."""

    path: str
    image: ElfImage
    how: How


@dataclass(frozen=True, slots=True)
class Attempt:
    """A candidate that was looked at and not used, and why."""

    path: str
    how: How
    why: str


def read_debuglink(image: ElfImage) -> DebugLink | Unresolved | None:
    """The object's debuglink, None when it has none, or why it cannot be used."""
    sec = image.section(".gnu_debuglink")
    if sec is None:
        return None
    try:
        data = section_bytes(image, sec, MAX_DEBUGLINK_BYTES)
    except LivesymError as e:
        return Unresolved(Reason.UNREADABLE, f".gnu_debuglink unreadable: {e}")
    end = data.find(b"\0")
    if end <= 0:
        return Unresolved(Reason.UNREADABLE, ".gnu_debuglink holds no file name")
    crc_at = (end + 4) & ~3  # the name, its NUL, padding to 4 bytes, then the CRC
    if crc_at + 4 > len(data):
        return Unresolved(Reason.UNREADABLE, ".gnu_debuglink has no CRC after its file name")
    raw = data[:end]
    (crc,) = struct.unpack_from("<I" if image.little_endian else ">I", data, crc_at)
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Unresolved(Reason.UNREADABLE, ".gnu_debuglink file name is not text")
    # The name becomes part of a path: a plain file name only.
    if len(raw) > MAX_LINK_NAME or "/" in name or name in (".", ".."):
        return Unresolved(
            Reason.UNREADABLE, f".gnu_debuglink names {name[:80]!r}, not a plain file name"
        )
    return DebugLink(name, crc)


def valid_build_id(build_id: str) -> bool:
    """Hex of a plausible length: safe to turn into a path."""
    return 3 <= len(build_id) <= 128 and all(c in _HEX_DIGITS for c in build_id)


def build_id_paths(debug_root: str | Path, build_id: str) -> list[str]:
    """The files for ``build_id`` under one debug root that exist, the .debug one first."""
    if not valid_build_id(build_id):
        return []
    stem = os.path.join(str(debug_root), ".build-id", build_id[:2], build_id[2:])
    return [p for p in (stem + ".debug", stem) if os.path.isfile(p)]


def debuglink_paths(
    object_path: str, link: str, debug_roots: Sequence[str], root: str = ""
) -> list[str]:
    """Where a debuglink's file can be, in gdb's order, for an object at ``object_path``.

    ``object_path`` is the path as the process sees it (absolute); ``root`` is
    prefixed to the places beside the object (a container's /proc/PID/root).
    Debug roots are full paths already. Only files that exist are returned.
    """
    directory = os.path.dirname(object_path)
    places = [
        root + os.path.join(directory, link),
        root + os.path.join(directory, ".debug", link),
        *(os.path.join(r, directory.lstrip("/"), link) for r in debug_roots),
    ]
    return [p for p in dict.fromkeys(places) if os.path.isfile(p)]


def file_crc32(path: str, limit: int = MAX_CRC_BYTES) -> int | Unresolved:
    """The CRC32 (zlib's, which is the debuglink's) of a whole file, or why not."""
    crc = 0
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > limit:
                return Unresolved(
                    Reason.UNREADABLE, f"larger than {limit >> 30} GiB: its CRC is not checked"
                )
            while chunk := f.read(CRC_CHUNK):
                crc = zlib.crc32(chunk, crc)
    except OSError as e:
        return Unresolved(Reason.UNREADABLE, f"unreadable: {e.strerror}")
    return crc


def check_debug_file(
    obj: ElfImage, path: str, how: How, link: DebugLink | None = None
) -> DebugFile | Unresolved:
    """``path`` as the debug file of ``obj``, or why it is not."""
    try:
        image = load_image(path)
    except LivesymError as e:
        return Unresolved(Reason.UNREADABLE, str(e).removeprefix(f"{path}: "))
    if image.identity == obj.identity:
        return Unresolved(Reason.OTHER_BUILD, "is the object itself")
    theirs, ours = image.build_id_hex, obj.build_id_hex
    if theirs is not None and ours is not None:
        if theirs != ours:
            return Unresolved(
                Reason.OTHER_BUILD, f"build-id {theirs}, but the object's is {ours}: another build"
            )
        return DebugFile(path, image, how)
    if how == HOW_BUILD_ID:
        return Unresolved(
            Reason.OTHER_BUILD,
            "has no build-id to match" if theirs is None else "the object has no build-id",
        )
    if link is None:
        return Unresolved(
            Reason.OTHER_BUILD, "no build-id and no debuglink CRC to check it against"
        )
    crc = file_crc32(path)
    if isinstance(crc, Unresolved):
        return crc
    if crc != link.crc:
        return Unresolved(
            Reason.OTHER_BUILD,
            f"CRC32 {crc:08x}, but .gnu_debuglink expects {link.crc:08x}: another build",
        )
    return DebugFile(path, image, how)


def find_debug_file(
    obj: ElfImage, object_path: str, debug_roots: Sequence[str], root: str = ""
) -> tuple[DebugFile | None, list[Attempt]]:
    """The first debug file that belongs to ``obj``: by build-id under each debug root,
    then by debuglink; and every candidate refused on the way, with why."""
    attempts: list[Attempt] = []
    build_id = obj.build_id_hex
    if build_id is not None:
        for debug_root in debug_roots:
            for path in build_id_paths(debug_root, build_id):
                found = check_debug_file(obj, path, HOW_BUILD_ID)
                if isinstance(found, DebugFile):
                    return found, attempts
                attempts.append(Attempt(path, HOW_BUILD_ID, found.detail))
    link = read_debuglink(obj)
    if isinstance(link, Unresolved):
        attempts.append(Attempt(object_path, HOW_DEBUGLINK, link.detail))
    elif link is not None:
        for path in debuglink_paths(object_path, link.name, debug_roots, root):
            found = check_debug_file(obj, path, HOW_DEBUGLINK, link)
            if isinstance(found, DebugFile):
                return found, attempts
            attempts.append(Attempt(path, HOW_DEBUGLINK, found.detail))
    return None, attempts
