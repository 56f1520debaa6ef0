"""Kernel symbols from /proc/kallsyms: names for the kernel's part of a stack.

/proc/kallsyms lists every kernel text symbol, modules' too (their module in
brackets): 120,000-200,000 lines, read once per session (as it starts, in a thread
of its own, where kernel mode is sampled; else on the first kernel address), parsed
into sorted arrays. kallsyms gives no sizes: a symbol runs to the
next one's address. Where kernel.kptr_restrict hides the addresses from this user
(they read as zeros), no kernel address can be named, and the reason says how to
lift it.

Written by hand: kallsyms is a three-column text format; no library reads it
better than a split.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from livesym.addr.kinds import ElfVaddr, Vma
from livesym.collector import collector_paused
from livesym.records import KIND_KERNEL, FrameRecord, Reason, Unresolved

KALLSYMS = "/proc/kallsyms"
MAX_BYTES = 64 << 20  # of /proc/kallsyms read (a distribution kernel's: about 12 MB)
MAX_SYMBOLS = 2_000_000
MAX_EXTENT = 1 << 20  # the last symbol's extent, which nothing bounds
CHUNK = 1 << 16  # bytes of kallsyms parsed in one call (the interpreter is held that long)
# "ffffffff81000080 T entry_SYSCALL_64" or "... t ext4_read\t[ext4]": text symbols only
_TEXT_SYMBOL = re.compile(
    rb"^([0-9a-fA-F]{1,16}) ([tTwW]) (\S{1,4096})(?:\t\[([^\]\n]{0,256})\])?$", re.M
)


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
        self._names: list[bytes] = []
        self._modules: list[bytes] = []  # b"": the kernel image
        self.problem: str | None = None
        self._by_name: dict[bytes, int] | None = None

    def read_soon(self) -> threading.Thread:
        """Read the symbols in a thread of their own, now (a lookup waits for them)."""
        reader = threading.Thread(target=self._load, name="livesym-kallsyms", daemon=True)
        reader.start()
        return reader

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
        name = self._names[i].decode("utf-8", "replace")
        module = self._modules[i].decode("utf-8", "replace") or None
        return KernelSymbol(name, module, start, end - start, address - start)

    def address_of(self, name: str) -> int | None:
        """The address of the kernel function ``name`` (the first of that name), for
        a stack that names its frames (/proc/PID/task/TID/stack); None if none is."""
        self._load()
        if self._by_name is None:
            with self._lock:
                if self._by_name is None:
                    by_name: dict[bytes, int] = {}
                    for start, sym in zip(self._starts, self._names, strict=True):
                        by_name.setdefault(sym, start)
                    self._by_name = by_name
        return self._by_name.get(name.encode("utf-8", "replace"))

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                with collector_paused():  # 120,000 tuples: collections for nothing
                    self._read()
                self._loaded = True

    def _read(self) -> None:
        try:
            text = read_holding(self.path, MAX_BYTES)
        except OSError as e:
            self.problem = f"cannot read {self.path}: {e.strerror}"
            return
        # A regular expression over the text: a third of the time of a loop over lines.
        # In pieces of whole lines: one call over all of it held the interpreter 60 ms
        # (more on a busy box), while the session's first samples wait to be read.
        entries: list[tuple[bytes, bytes, bytes, bytes]] = []
        start = 0
        while start < len(text):  # each piece from a line's start to past a line's end
            end = text.find(b"\n", start + CHUNK)
            end = len(text) if end < 0 else end + 1
            entries += _TEXT_SYMBOL.findall(text, start, end)
            start = end
        if len(entries) > MAX_SYMBOLS:
            self.problem = f"more than {MAX_SYMBOLS} kernel symbols; the rest ignored"
            del entries[MAX_SYMBOLS:]
        addresses = [int(a, 16) for a, _, _, _ in entries]
        kept = [i for i, a in enumerate(addresses) if a]
        if not kept:
            self.problem = (
                "the kernel hides its addresses from this user (kernel.kptr_restrict); "
                "run as root, or set sysctl kernel.kptr_restrict=0"
                if entries
                else f"{self.path} lists no kernel text symbols"
            )
            return
        if any(addresses[a] > addresses[b] for a, b in itertools.pairwise(kept)):
            kept.sort(key=addresses.__getitem__)  # the kernel lists them in order
        starts: list[int] = []
        chosen: list[int] = []
        for i in kept:
            if starts and starts[-1] == addresses[i]:
                # Several names at one address: the one _preference puts first.
                if _preference(entries[i]) < _preference(entries[chosen[-1]]):
                    chosen[-1] = i
                continue
            starts.append(addresses[i])
            chosen.append(i)
        self._starts = array("Q", starts)
        self._names = [entries[i][2] for i in chosen]  # decoded when looked up
        self._modules = [entries[i][3] for i in chosen]


def read_holding(path: str, limit: int) -> bytes:
    """The first ``limit`` bytes of the file at ``path``, read without letting go of the
    interpreter at each read (libc's read called through ``ctypes.PyDLL``).

    /proc/kallsyms gives a page a read: 1,300 reads. Each plain read lets go of the
    interpreter, and at a session's start the loop's thread wants it back each time:
    the two threads woke each other 1,300 times in 0.1 s, and each wake-up of livesym
    (at nice -20) on the target's CPU preempted it (a Python program that switches 50
    times a second was switched out 1,700 times then). Held, they take turns at the
    interpreter's switch interval (5 ms) instead."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        read = _libc_read() or _plain_read
        buffer = ctypes.create_string_buffer(READ_CHUNK)
        out = bytearray()
        while len(out) < limit:
            got = read(fd, buffer, min(READ_CHUNK, limit - len(out)))
            if got < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            if got == 0:
                break
            out += ctypes.string_at(buffer, got)
        return bytes(out)
    finally:
        os.close(fd)


READ_CHUNK = 1 << 16  # bytes asked of each read (kallsyms gives a page, whatever the size)


def _plain_read(fd: int, buffer: ctypes.Array[ctypes.c_char], size: int) -> int:
    """read(2) as ``os.read`` makes it (letting go of the interpreter), into ``buffer``:
    where libc cannot be called directly."""
    piece = os.read(fd, size)
    ctypes.memmove(buffer, piece, len(piece))
    return len(piece)


_READ: list[Callable[[int, ctypes.Array[ctypes.c_char], int], int] | None] = []


def _libc_read() -> Callable[[int, ctypes.Array[ctypes.c_char], int], int] | None:
    """libc's read(2), called with the interpreter held; None where there is no libc."""
    if not _READ:
        try:
            libc = ctypes.PyDLL(None, use_errno=True)  # the process's own: libc's read
            read = libc.read
            read.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
            read.restype = ctypes.c_ssize_t
            _READ.append(read)
        except (OSError, AttributeError):
            _READ.append(None)
    return _READ[0]


_SHARED: list[KernelSymbols] = []
_SHARED_LOCK = threading.Lock()


def shared_symbols() -> KernelSymbols:
    """The process's one reading of /proc/kallsyms (the kernel's symbols are the box's,
    not a session's): the engine's naming of kernel frames and the off-CPU reads of
    /proc share it, so that it is read once (twice at a session's start held the
    interpreter long enough for a switch ring to overflow)."""
    with _SHARED_LOCK:
        if not _SHARED:
            _SHARED.append(KernelSymbols())
        return _SHARED[0]


def _preference(entry: tuple[bytes, bytes, bytes, bytes]) -> tuple[int, int, int]:
    """Of the names at one address, the one shown: global, then weak, then local;
    then fewer leading underscores (``_text`` and ``srso_alias_untrain_ret`` share
    an address); then the shorter."""
    kind, name = entry[1], entry[2]
    return (b"TWtw".index(kind), len(name) - len(name.lstrip(b"_")), len(name))


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


ESTIMATED_DETAIL = (
    "kernel time no sampler could see into (kernel mode not sampled): sized from the "
    "threads' system time (/proc/PID/task/TID/stat) at the sampling rate, not sampled"
)


def estimated_kernel_record() -> FrameRecord:
    """The frame of the samples that stand for kernel time estimated from system time."""
    return FrameRecord(
        id=-1, generation=0, vma=Vma(0), module="[kernel]", object=None, mapping=None,
        base=None, segment=None, elf_vaddr=None, elf_offset=None, symbol=None,
        demangled=None, symbol_vaddr=None, symbol_size=None, symbol_offset=None,
        reason=Reason.ESTIMATED, detail=ESTIMATED_DETAIL, steps=(), problems=(),
        kind=KIND_KERNEL,
    )  # fmt: skip
