"""Loaded ELF objects, cached by file identity (device, inode, size, mtime).

Keying on identity rather than path means a library replaced on disk is a
new object, and the same file reached through two paths (/proc/<pid>/root/...
and the plain path) is read once.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from livesym.elf.image import ElfImage, FileIdentity, load_image, open_error
from livesym.elf.symtab import SymbolTable, load_symbols
from livesym.errors import ElfFormatError, FileError, NotElfError


@dataclass(frozen=True)
class LoadedObject:
    """An ELF image with its symbol table, or the reason it could not be read."""

    path: str
    image: ElfImage | None
    symbols: SymbolTable | None
    error: str | None = None
    not_elf: bool = False  # a mapped data file: no defect, just not an object
    damaged: bool = False  # ELF, but not readable as one

    @property
    def symbol_source(self) -> str:
        """Which tables gave symbols: ``symtab``, ``dynsym``, both, or ``none``."""
        if self.symbols is None or not self.symbols.sources:
            return "none"
        return "+".join(self.symbols.sources)


class ObjectCache:
    """Thread-safe cache of LoadedObject by file identity; failures are cached by path."""

    def __init__(self, max_objects: int = 512) -> None:
        self._by_identity: dict[FileIdentity, LoadedObject] = {}
        self._lock = threading.Lock()
        self._max = max_objects

    def load(self, path: str | Path) -> LoadedObject:
        """The object at ``path``; never raises for a bad or missing file."""
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
        obj = _load_uncached(path)
        if obj.image is not None:
            key = obj.image.identity
        with self._lock:
            if len(self._by_identity) >= self._max:
                # Drop the oldest entry: long sessions with library churn stay bounded.
                self._by_identity.pop(next(iter(self._by_identity)))
            self._by_identity[key] = obj
        return obj


def _load_uncached(path: str) -> LoadedObject:
    try:
        image = load_image(path)
    except NotElfError as e:
        return LoadedObject(path, None, None, str(e), not_elf=True)
    except ElfFormatError as e:
        return LoadedObject(path, None, None, str(e), damaged=True)
    except FileError as e:
        return LoadedObject(path, None, None, str(e))
    try:
        symbols = load_symbols(image)
    except FileError as e:
        return LoadedObject(path, image, None, str(e))
    return LoadedObject(path, image, symbols)
