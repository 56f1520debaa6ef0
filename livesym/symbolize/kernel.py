"""Kernel symbols from /proc/kallsyms: names for the kernel's part of a stack.

/proc/kallsyms lists every kernel text symbol, modules' too (their module in
brackets): 120,000-200,000 lines, read once per session on the first kernel
address, parsed into sorted arrays. kallsyms gives no sizes: a symbol runs to the
next one's address. Where kernel.kptr_restrict hides the addresses from this user
(they read as zeros), no kernel address can be named, and the reason says how to
lift it.

Written by hand: kallsyms is a three-column text format; no library reads it
better than a split.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_right
from dataclasses import dataclass

from livesym.addr.kinds import ElfVaddr, Vma
from livesym.records import KIND_KERNEL, FrameRecord, Reason, Unresolved

KALLSYMS = "/proc/kallsyms"
MAX_BYTES = 64 << 20  # of /proc/kallsyms read (a distribution kernel's: about 12 MB)
MAX_SYMBOLS = 2_000_000
MAX_EXTENT = 1 << 20  # the last symbol's extent, which nothing bounds
_TEXT = frozenset("tTwW")


@dataclass(frozen=True, slots=True)
class KernelSymbol:
    """The kernel function that holds an address."""

    name: str
    module: str | None  # None: the kernel image itself
    address: int
    size: int
    offset: int

    @property
    def shown_module(self) -> str:
        """The module column: ``[kernel]``, or a module's name as perf shows it."""
        return "[kernel]" if self.module is None else f"[{self.module}]"


class KernelSymbols:
    """The kernel's text symbols, read on first use; thread-safe."""

    def __init__(self, path: str = KALLSYMS) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._loaded = False
        self._starts: array[int] = array("Q")
        self._names: list[str] = []
        self._modules: list[str | None] = []
        self.problem: str | None = None

    def lookup(self, address: int) -> KernelSymbol | Unresolved:
        self._load()
        if self.problem is not None and not self._starts:
            return Unresolved(Reason.NO_SYMBOLS, self.problem)
        i = bisect_right(self._starts, address) - 1
        if i < 0:
            return Unresolved(Reason.NO_SYMBOLS, f"no kernel symbol covers {address:#x}")
        start = self._starts[i]
        end = self._starts[i + 1] if i + 1 < len(self._starts) else start + MAX_EXTENT
        if address >= end:
            return Unresolved(Reason.NO_SYMBOLS, f"no kernel symbol covers {address:#x}")
        return KernelSymbol(self._names[i], self._modules[i], start, end - start, address - start)

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                self._read()
                self._loaded = True

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                text = f.read(MAX_BYTES)
        except OSError as e:
            self.problem = f"cannot read {self.path}: {e.strerror}"
            return
        found: list[tuple[int, tuple[int, int, int], str, str | None]] = []
        hidden = 0
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3 or len(parts[1]) != 1 or chr(parts[1][0]) not in _TEXT:
                continue
            try:
                address = int(parts[0], 16)
            except ValueError:
                continue
            if address == 0:
                hidden += 1
                continue
            module = parts[3].strip(b"[]").decode("utf-8", "replace") if len(parts) > 3 else None
            name = parts[2].decode("utf-8", "replace")
            found.append((address, _preference(chr(parts[1][0]), name), name, module))
            if len(found) >= MAX_SYMBOLS:
                self.problem = f"more than {MAX_SYMBOLS} kernel symbols; the rest ignored"
                break
        if not found:
            self.problem = (
                "the kernel hides its addresses from this user (kernel.kptr_restrict); "
                "run as root, or set sysctl kernel.kptr_restrict=0"
                if hidden
                else f"{self.path} lists no kernel text symbols"
            )
            return
        found.sort()
        kept = [entry for i, entry in enumerate(found) if i == 0 or found[i - 1][0] != entry[0]]
        self._starts = array("Q", [a for a, _, _, _ in kept])
        self._names = [n for _, _, n, _ in kept]
        self._modules = [m for _, _, _, m in kept]


def _preference(kind: str, name: str) -> tuple[int, int, int]:
    """Of the names at one address, the one shown first: global, then weak, then
    local; then fewer leading underscores (``_text`` and ``srso_alias_untrain_ret``
    share an address); then the shorter."""
    return ("TWtw".index(kind), len(name) - len(name.lstrip("_")), len(name))


def kernel_frame_record(address: int, found: KernelSymbol | Unresolved) -> FrameRecord:
    """A kernel frame: one address, named from kallsyms or saying why it is not (no
    ELF conversion: the kernel's addresses are its symbols' own)."""
    if isinstance(found, Unresolved):
        return FrameRecord(
            id=-1, generation=0, vma=Vma(address), module="[kernel]", object=None,
            mapping=None, base=None, segment=None, elf_vaddr=None, elf_offset=None,
            symbol=None, demangled=None, symbol_vaddr=None, symbol_size=None,
            symbol_offset=None, reason=found.reason, detail=found.detail, steps=(),
            problems=(), kind=KIND_KERNEL,
        )  # fmt: skip
    where = f"module {found.module}" if found.module else "the kernel image"
    return FrameRecord(
        id=-1, generation=0, vma=Vma(address), module=found.shown_module, object=None,
        mapping=None, base=None, segment=None, elf_vaddr=None, elf_offset=None,
        symbol=found.name, demangled=found.name, symbol_vaddr=ElfVaddr(found.address),
        symbol_size=found.size, symbol_offset=found.offset, reason=None,
        detail=f"kernel code ({where}), named from {KALLSYMS}", steps=(), problems=(),
        kind=KIND_KERNEL,
    )  # fmt: skip
