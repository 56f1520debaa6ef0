"""MiniDebugInfo: the xz-compressed ELF in ``.gnu_debugdata``.

Fedora and its relatives strip binaries to .dynsym, then embed a small ELF
holding a .symtab of the functions .dynsym lacks (static functions), xz
compressed, in ``.gnu_debugdata`` (the gdb manual's "MiniDebugInfo"). Its
symbols use the object's own addresses.

The section is hostile input: its compressed size, the decompressor's memory
and the decompressed size are all bounded, and anything wrong gives a reason,
never an exception.
"""

from __future__ import annotations

import lzma

from livesym.elf.image import ElfImage, load_image_bytes, section_bytes
from livesym.errors import LivesymError
from livesym.records import Reason, Unresolved

SECTION = ".gnu_debugdata"
MAX_COMPRESSED = 64 << 20
MAX_DECOMPRESSED = 256 << 20
# A crafted xz header can ask for a huge dictionary; real ones use a few MiB.
MAX_DECODER_MEMORY = 256 << 20


def has_minidebuginfo(image: ElfImage) -> bool:
    return image.section(SECTION) is not None


def load_minidebuginfo(image: ElfImage) -> ElfImage | Unresolved | None:
    """The embedded ELF image, None when there is none, or why it cannot be read."""
    sec = image.section(SECTION)
    if sec is None:
        return None
    try:
        packed = section_bytes(image, sec, MAX_COMPRESSED)
    except LivesymError as e:
        return Unresolved(Reason.UNREADABLE, f"{SECTION} unreadable: {e}")
    data = decompress_bounded(packed, MAX_DECOMPRESSED)
    if isinstance(data, Unresolved):
        return Unresolved(data.reason, f"{SECTION}: {data.detail}")
    try:
        return load_image_bytes(data, f"{image.path} [{SECTION}]")
    except LivesymError as e:
        return Unresolved(Reason.UNREADABLE, f"{SECTION}: {e}")


def decompress_bounded(packed: bytes, limit: int) -> bytes | Unresolved:
    """xz (or lzma-alone) data decompressed to at most ``limit`` bytes, or why not."""
    try:
        decoder = lzma.LZMADecompressor(lzma.FORMAT_AUTO, memlimit=MAX_DECODER_MEMORY)
        data = decoder.decompress(packed, max_length=limit)
    except lzma.LZMAError as e:
        return Unresolved(Reason.UNREADABLE, f"not valid xz data ({e})")
    if not decoder.eof:
        if decoder.needs_input:
            return Unresolved(Reason.UNREADABLE, "xz data ends early (truncated)")
        return Unresolved(
            Reason.UNREADABLE, f"decompresses to more than {limit >> 20} MiB; not read"
        )
    return data
