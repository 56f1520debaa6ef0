"""Scrubbing a capture of its address-space layout before it is shared.

ASLR makes a process's addresses a secret worth keeping: they defeat the
randomisation for anyone who later attacks that process. ``scrub`` rewrites
every run-time address of a capture into a new address space that keeps what
the profile needs and nothing of the original layout, after ``perf inject
--aslr`` (../shared/seeds/002_a38341696872cd73.txt):

- Mappings are gathered into *clusters*: mappings of one loaded object (same
  object and base, or for a file without ELF facts the same file and
  ``start - pgoff``), and mappings that touch or overlap, in any maps
  generation. A cluster moves as a whole by one delta, so split mappings of one
  object keep one base, contiguous mappings stay contiguous, and a library
  dlopen()ed where another was dlclose()d a moment earlier is still at the same
  address as it.
- Clusters are laid out afresh in their original order, at least one page
  apart, from ``NEW_START``, never overlapping any original address. A delta is
  a multiple of the largest p_align of the cluster's objects (at least a page),
  so page offsets and segment alignment survive and nothing else does.
- A cluster holding an ET_EXEC image stays where it is: such an image runs at
  its link-time addresses (base 0 by construction), which its file states and
  ASLR never chose.
- Addresses in no mapping go to a separate range, one page per distinct
  original page, in order; never to 0.
- ELF vaddrs, file offsets, symbols and offsets in symbols are not run-time
  addresses and are kept, so the scrubbed capture reports the same functions
  with the same counts.
- A frame with no ELF object (JIT code named by a perf map, an anonymous
  mapping) has no ELF vaddrs or file offsets: what it holds in those fields --
  today the perf map's symbol start, ``symbol_vaddr`` -- is a run-time address
  and moves with the same map. Such a value is tied to the frame's mapping's
  cluster (unless it is more than ``MAX_SYMBOL_GAP`` away), so ``vma -
  symbol_vaddr`` (the offset in the JIT function) is kept.
- Texts (conversion steps, base formulas, details, problems, session errors)
  have their addresses rewritten with the same map, so no original address
  survives in them either.

``ScrubOptions`` adds the host facts (``drop_host``) and directory names
(``basenames``: of every path, including the debug files named in
``symbol_source`` and paths inside arguments and texts) to what is removed.
``leftover_addresses`` checks a scrubbed file's text for any original address,
as the command does before writing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from livesym.addr.kinds import Base, Vma
from livesym.records import (
    KIND_KERNEL,
    KIND_PYTHON,
    Capture,
    FrameRecord,
    GenerationRecord,
    MappingRecord,
)

_Address = TypeVar("_Address", bound=int)  # one address kind, moved as it is

NEW_START = 0x10000000  # where the scrubbed address space begins (fits 32-bit targets)
UNMAPPED_ALIGN = 1 << 30  # the unmapped range starts on its own GiB
MAX_CLUSTER_ALIGN = 1 << 30
ADDRESS_LIMIT = 1 << 64
MMAP_MIN_ADDR = 0x10000  # Linux's default vm.mmap_min_addr
DEFAULT_PAGE = 4096
# How far from its frame's mapping a run-time symbol start may lie and still move
# with it. No function is this large; a perf map entry further away is stale or
# hostile, and tying it would make one huge cluster.
MAX_SYMBOL_GAP = 1 << 30

# Numbers inside texts: 0x-prefixed hex, bare hex of 8-16 digits (maps lines,
# map_files names), and decimal. Only values the address map knows are changed.
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+"
    r"|(?<![0-9A-Za-z_])[0-9a-fA-F]{8,16}(?![0-9A-Za-z_])"
    r"|(?<![0-9A-Za-z_])\d+(?![0-9A-Za-z_])"
)
# The conversion steps livesym writes (livesym.addr.convert.Step.text), with the
# groups that hold run-time addresses: only those move. Other numbers in them
# (pgoff, p_offset, ELF vaddrs) are file facts, even when one happens to equal
# an address. Texts of any other shape get the number-by-number rewrite.
_HEX = r"(-?0x[0-9a-f]+)"
_STEP_FORMS = (
    (re.compile(rf"base = start - \(pgoff - p_offset \+ p_vaddr\) = {_HEX} - \({_HEX} - "
                rf"{_HEX} \+ {_HEX}\) = {_HEX}"), (1, 5)),
    (re.compile(rf"elf_vaddr = vma - base = {_HEX} - {_HEX} = {_HEX}"), (1, 2)),
    (re.compile(rf"vma = elf_vaddr \+ base = {_HEX} \+ {_HEX} = {_HEX}"), (2, 3)),
    (re.compile(rf"elf_offset = elf_vaddr - p_vaddr \+ p_offset = {_HEX} - {_HEX} \+ {_HEX} = "
                rf"{_HEX}"), ()),
    (re.compile(rf"elf_vaddr = elf_offset - p_offset \+ p_vaddr = {_HEX} - {_HEX} \+ {_HEX} = "
                rf"{_HEX}"), ()),
    (re.compile(r"base = 0 \(ET_EXEC: runs at its link-time addresses\) = 0x0"), ()),
    # JIT code (explain_jit): vma and the perf map's start move, the offset stays.
    (re.compile(rf"offset = vma - start = {_HEX} - {_HEX} = {_HEX}"), (1, 2)),
)  # fmt: skip
# An environment assignment, NAME=value, as it would appear in a command line.
_ENV_LIKE = re.compile(r"(?<![\w=])([A-Za-z_][A-Za-z0-9_]*)=[^\s]*")
# An absolute path inside a sentence (not a/b, which is usually a ratio or a pair).
_PATH_IN_TEXT = re.compile(r"(?<![\w./\-])/[^\s'\"(),;]+")
# Where one part of a symbol_source ("dynsym+build-id:/usr/lib/debug/...") ends: a
# "+" followed by the next source's name (a "+" inside a path is not followed by
# ":/", "+" or the end, unless the path is contrived; see symbol_source below).
_SOURCE_SPLIT = re.compile(r"\+(?=[a-z][a-z0-9-]*(?::/|\+|$))")


@dataclass(frozen=True)
class ScrubOptions:
    drop_host: bool = False  # hostname, user, arguments, environment-like strings, host clock
    basenames: bool = False  # every path reduced to its file name


@dataclass(frozen=True, slots=True)
class Cluster:
    """Original addresses [lo, hi) that move together by ``delta``."""

    lo: int
    hi: int
    delta: int
    pinned: bool  # holds an ET_EXEC image: stays at its link-time addresses


class AddressMap:
    """Original run-time address -> scrubbed one, the same for the whole capture."""

    def __init__(self, clusters: list[Cluster], unmapped: dict[int, int], page: int) -> None:
        self.clusters = clusters  # sorted by lo, disjoint
        self._los = [c.lo for c in clusters]
        self.unmapped = unmapped  # original page -> new page
        self.page = page

    def cluster_of(self, addr: int) -> Cluster | None:
        i = bisect_right(self._los, addr) - 1
        if i >= 0 and addr < self.clusters[i].hi:
            return self.clusters[i]
        return None

    def translate(self, addr: int) -> int | None:
        """The scrubbed address, or None for a number this map does not know."""
        cluster = self.cluster_of(addr)
        if cluster is not None:
            return addr + cluster.delta
        page = addr - addr % self.page
        new_page = self.unmapped.get(page)
        return None if new_page is None else new_page + addr % self.page


@dataclass(frozen=True)
class _Space:
    """One process's address space: its maps generations and the frames it moves (the
    root's also moves the frames of no process: kernel, Python, stand-ins), the map
    laid out for them."""

    pid: int
    capture: Capture  # its generations and the frames it moves
    amap: AddressMap


def _spaces(capture: Capture) -> list[_Space]:
    """Each process's address space, the root's first. A capture of one process (every
    capture before version 4) is one space: everything moves by one map. With several,
    each process's layout is remapped on its own (the same library sits at different
    bases in each); the frames of no process (the kernel's above all: one for all
    processes) move with the root's, and every process's layout keeps clear of them."""
    pids = list(dict.fromkeys(g.pid for g in capture.maps))
    if len(pids) <= 1:
        return [_Space(pids[0] if pids else 0, capture, address_map(capture))]
    owner = {g.number: g.pid for g in capture.maps}
    root_pid = capture.target.get("pid")
    root = root_pid if root_pid in pids else min(pids)
    frames: dict[int | None, list[FrameRecord]] = {}
    for f in capture.frames:
        frames.setdefault(owner.get(f.generation), []).append(f)
    ownerless = frames.get(None, [])
    spaces = []
    for pid in sorted(pids, key=lambda p: p != root):
        own = frames.get(pid, []) + (ownerless if pid == root else [])
        maps = tuple(g for g in capture.maps if g.pid == pid)
        laid = dataclasses.replace(capture, maps=maps, frames=(*frames.get(pid, []), *ownerless))
        amap = address_map(laid)
        spaces.append(_Space(pid, dataclasses.replace(laid, frames=tuple(own)), amap))
    return spaces


def scrub(capture: Capture, options: ScrubOptions = ScrubOptions()) -> Capture:
    """The capture with a new address space per process (and, as asked, host facts and
    paths removed)."""
    spaces = _spaces(capture)
    maps_of: dict[int, GenerationRecord] = {}
    frames_of: dict[int, FrameRecord] = {}
    for space in spaces:
        amap = space.amap
        texts = _TextScrubber(capture, amap, options)
        for g in space.capture.maps:
            moved = tuple(_mapping(m, amap, texts) for m in g.mappings)
            maps_of[id(g)] = dataclasses.replace(g, mappings=moved)
        # Whether each (generation, start, end, perms, pgoff) a frame can name is a file.
        files: dict[tuple[object, ...], bool] = {
            (g.number, m.start, m.end, m.perms, m.pgoff): _is_file(m)
            for g in space.capture.maps
            for m in g.mappings
        }
        for f in space.capture.frames:
            frames_of[id(f)] = _frame(f, amap, texts, files)
    maps = tuple(maps_of[id(g)] for g in capture.maps)
    frames = tuple(frames_of[id(f)] for f in capture.frames)
    texts = _TextScrubber(capture, spaces[0].amap, options)
    objects = tuple(
        dataclasses.replace(
            o, path=texts.path(o.path), symbol_source=texts.symbol_source(o.symbol_source)
        )
        for o in capture.objects
    )
    session = dict(capture.session)
    errors = session.get("errors")
    if isinstance(errors, list):
        session["errors"] = [texts.text(str(e)) for e in errors]
    target, host = dict(capture.target), dict(capture.host)
    threads = dict(capture.threads)
    if options.drop_host:
        _drop_host(target, host, session)
        threads = {tid: _ENV_LIKE.sub(r"\1=…", name) for tid, name in threads.items()}
    if options.basenames:
        if isinstance(target.get("exe"), str):
            target["exe"] = _basename(str(target["exe"]))
        cmdline = target.get("cmdline")
        if isinstance(cmdline, list):
            target["cmdline"] = [texts.argument(a) if isinstance(a, str) else a for a in cmdline]
    processes = tuple(
        dataclasses.replace(p, argv=_scrubbed_argv(p.argv, texts, options))
        for p in capture.processes
    )
    return dataclasses.replace(
        capture, target=target, host=host, session=session, maps=maps, objects=objects,
        frames=frames, threads=threads, processes=processes,
    )  # fmt: skip


def _scrubbed_argv(argv: tuple[str, ...], texts: _TextScrubber, options: ScrubOptions
                   ) -> tuple[str, ...]:  # fmt: skip
    """A process's command line as ``options`` leave it (as the target's)."""
    if options.drop_host:
        argv = (_basename(argv[0]),) if argv else ()
    if options.basenames:
        argv = tuple(texts.argument(a) for a in argv)
    return argv


def address_map(capture: Capture) -> AddressMap:
    """Where every run-time address of ``capture`` goes (see the module docstring)."""
    page = _page_size(capture)
    intervals = list(_intervals(capture))
    clusters = _place(_clusters(intervals, capture, page), page)
    # Addresses no mapping of any generation covers: frames without a mapping
    # (or with one that lies about them) and bases outside their object.
    amap = AddressMap(clusters, {}, page)
    loose = sorted({a - a % page for a in _loose_addresses(capture) if amap.cluster_of(a) is None})
    if loose:
        top = max((c.hi + c.delta for c in clusters), default=NEW_START)
        size = 2 * len(loose) * page
        start = _free_spot(_align_up(top + page, UNMAPPED_ALIGN), size, UNMAPPED_ALIGN,
                           _forbidden(clusters, page))  # fmt: skip
        amap.unmapped.update({p: start + 2 * i * page for i, p in enumerate(loose)})
    return amap


def leftover_addresses(original: Capture, text: str, scrubbed: Capture | None = None) -> list[int]:
    """Original run-time addresses (that scrubbing moves) still in ``text``, as hex or decimal.

    Mapping bounds, bases, sampled addresses and the run-time symbol starts of
    frames with no ELF object (JIT code) are looked for as whole tokens:
    lower-case hex with or without 0x, and decimal. Numbers below ``MMAP_MIN_ADDR``
    are not looked for: nothing is mapped that low, so they say nothing of the
    layout, and they are everywhere (page sizes, offsets, counts). Nor are
    numbers that ``scrubbed`` (the capture ``text`` was made from) carries as
    something other than an address -- a file offset, an ELF vaddr -- which a
    text cannot tell from an address of the same value.
    """
    wanted = {
        old
        for space in _spaces(original)
        for old, new in _moves(space.capture, space.amap)
        if old >= MMAP_MIN_ADDR and old != new
    }
    if scrubbed is not None:
        wanted -= set(_file_facts(scrubbed))
    found = {int(t, 16) for t in re.findall(r"[0-9a-fA-F]+", text) if len(t) <= 16}
    found |= {int(t) for t in re.findall(r"\d+", text) if len(t) <= 20}
    return sorted(wanted & found)


def _file_facts(capture: Capture) -> Iterable[int]:
    """Numbers a capture holds that are not run-time addresses (file offsets, inodes,
    ELF vaddrs of ELF objects, sizes, offsets in symbols, lines)."""
    for g in capture.maps:
        for m in g.mappings:
            yield m.pgoff
            yield m.inode
    for f in capture.frames:
        if f.mapping is not None:
            yield f.mapping[3]
        # Only an ELF object gives a frame ELF vaddrs and file offsets; without one
        # these fields hold run-time addresses (a perf map's), which must not be
        # excused here, or a JIT symbol start left unmoved would pass the check.
        elf = (f.elf_vaddr, f.elf_offset, f.symbol_vaddr) if f.object is not None else ()
        # An offset in a symbol is a difference of two addresses, kept as it was: it
        # may equal some original address by chance (0x14000 bytes into a JIT
        # function, a mapping at 0x14000), which says nothing of the layout.
        for fact in (*elf, f.symbol_size, f.symbol_offset, f.line):
            if fact is not None:
                yield fact
    for o in capture.objects:
        for seg in o.segments:
            for field in seg.values():
                if isinstance(field, str):
                    with contextlib.suppress(ValueError):
                        yield int(field, 16)
                elif isinstance(field, int):
                    yield field


# --- building the map ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Interval:
    lo: int
    hi: int
    key: tuple[object, ...] | None  # mappings with one key move together
    objects: tuple[int, ...]  # ObjectRecord ids, for their p_align
    exec_image: bool


def _page_size(capture: Capture) -> int:
    page = capture.host.get("page_size")
    if isinstance(page, int) and not isinstance(page, bool) and page > 0 and page & (page - 1) == 0:
        return min(page, MAX_CLUSTER_ALIGN)
    return DEFAULT_PAGE


def _is_file(m: MappingRecord) -> bool:
    return m.inode != 0 or m.path.startswith("/")


def _mapping_key(m: MappingRecord) -> tuple[object, ...] | None:
    if m.object is not None and m.base is not None:
        return ("object", m.object, m.base)
    if _is_file(m):
        return ("file", m.path, m.dev, m.inode, m.start - m.pgoff)
    return None


def _intervals(capture: Capture) -> Iterable[_Interval]:
    exec_objects = {o.id for o in capture.objects if o.e_type == "ET_EXEC"}
    # The kernel moves as one piece, as KASLR moves it: every kernel address (sampled,
    # and its symbol's start) by one delta, so each offset in a function is kept.
    kernel = [
        v
        for f in capture.frames
        if f.kind == KIND_KERNEL
        for v in (f.vma, f.symbol_vaddr)
        if v is not None and v >= MMAP_MIN_ADDR
    ]
    if kernel:
        yield _Interval(min(kernel), max(kernel) + 1, ("kernel",), (), False)
    for g in capture.maps:
        for m in g.mappings:
            objects = (m.object,) if m.object is not None else ()
            pinned = m.e_type == "ET_EXEC" or m.object in exec_objects
            low = m.start if pinned else _low(m.start, m.base)
            yield _Interval(low, max(m.end, m.start + 1), _mapping_key(m), objects, pinned)
    # A frame's mapping is normally one of the above; one that is not (an edited
    # capture, a mapping seen only through a perf mmap record) still moves.
    for f in capture.frames:
        if f.mapping is None:
            continue
        start, end, _perms, pgoff = f.mapping
        if f.object is not None and f.base is not None:
            key: tuple[object, ...] = ("object", f.object, f.base)
        else:
            key = ("frame-file", f.module, start - pgoff)
        objects = (f.object,) if f.object is not None else ()
        pinned = f.object in exec_objects
        low = start if pinned else _low(start, f.base)
        yield _Interval(low, max(end, start + 1), key, objects, pinned)
        # A JIT symbol may start before the mapping the sample is in (code
        # spanning two mappings): the span between them moves as one piece, so
        # the offset in the symbol (vma - symbol_vaddr) is kept.
        span_end = max(end, start + 1)
        for value in _runtime_values(f):
            gap = max(start - value, value + 1 - span_end)
            if 0 < gap <= MAX_SYMBOL_GAP:
                yield _Interval(min(value, start), max(value + 1, span_end), None, (), False)


def _low(start: int, base: int | None) -> int:
    """Where a mapping's span begins: a base below the mapping (an object whose first
    PT_LOAD is not at vaddr 0) belongs to it, so the base moves with it and lands, like
    the mapping, clear of every original address. (Not for ET_EXEC: its base is 0 by
    construction, not a place in the address space.)"""
    return base if base is not None and 0 <= base < start else start


def _align_of(capture: Capture, objects: Iterable[int], page: int) -> int:
    """The largest power-of-two p_align of these objects' segments, at least a page."""
    align = page
    for oid in objects:
        if not 0 <= oid < len(capture.objects):
            continue
        for seg in capture.objects[oid].segments:
            raw = seg.get("p_align")
            try:
                value = int(raw, 16) if isinstance(raw, str) else 0
            except ValueError:
                continue
            if 0 < value <= MAX_CLUSTER_ALIGN and value & (value - 1) == 0:
                align = max(align, value)
    return align


@dataclass
class _Group:
    lo: int
    hi: int
    objects: set[int]
    pinned: bool
    align: int = 0


def _clusters(intervals: list[_Interval], capture: Capture, page: int) -> list[_Group]:
    """Group by key, then merge groups whose spans touch or overlap."""
    by_key: dict[tuple[object, ...], _Group] = {}
    groups: list[_Group] = []
    for iv in intervals:
        group = by_key.get(iv.key) if iv.key is not None else None
        if group is None:
            group = _Group(iv.lo, iv.hi, set(iv.objects), iv.exec_image)
            groups.append(group)
            if iv.key is not None:
                by_key[iv.key] = group
        else:
            group.lo, group.hi = min(group.lo, iv.lo), max(group.hi, iv.hi)
            group.objects.update(iv.objects)
            group.pinned |= iv.exec_image
    merged: list[_Group] = []
    for group in sorted(groups, key=lambda g: g.lo):
        last = merged[-1] if merged else None
        if last is not None and group.lo <= last.hi:
            last.hi = max(last.hi, group.hi)
            last.objects |= group.objects
            last.pinned |= group.pinned
        else:
            merged.append(_Group(group.lo, group.hi, set(group.objects), group.pinned))
    for group in merged:
        group.align = _align_of(capture, group.objects, page)
    return merged


def _forbidden(clusters: Iterable[Cluster], page: int) -> list[tuple[int, int]]:
    """Original spans (with a page of margin), which no scrubbed address may fall in."""
    return sorted((max(0, c.lo - page), c.hi + page) for c in clusters)


def _free_spot(start: int, size: int, align: int, forbidden: list[tuple[int, int]]) -> int:
    """The first ``align``-aligned address >= start with [it, it + size) clear of ``forbidden``."""
    at = _align_up(start, align)
    los = [lo for lo, _ in forbidden]
    while True:
        # Spans starting before the end of the candidate; the last of them that
        # reaches into it pushes the candidate past it.
        i = bisect_right(los, at + size)
        clash = next((hi for lo, hi in reversed(forbidden[:i]) if hi > at and lo < at + size), None)
        if clash is None:
            break
        at = _align_up(clash, align)
    if at + size > ADDRESS_LIMIT:
        raise OverflowError("the capture's mappings do not fit a scrubbed 64-bit address space")
    return at


def _place(groups: list[_Group], page: int) -> list[Cluster]:
    originals = [Cluster(g.lo, g.hi, 0, g.pinned) for g in groups]
    forbidden = _forbidden(originals, page)
    out: list[Cluster] = []
    cursor = NEW_START
    for g in groups:
        if g.pinned:
            out.append(Cluster(g.lo, g.hi, 0, True))
            continue
        align = g.align
        size = g.hi - g.lo
        offset = g.lo % align
        # At least a page between this cluster and the one before it.
        at = _free_spot(cursor + page, size + offset, align, forbidden) + offset
        out.append(Cluster(g.lo, g.hi, at - g.lo, False))
        cursor = at + size
    return out


def _runtime_values(f: FrameRecord) -> tuple[int, ...]:
    """The run-time addresses a frame with no ELF object holds in its ELF fields.

    Without an ELF object there is nothing for an ELF vaddr or a file offset to
    be relative to: ``symbol_vaddr`` is a perf map's start of JIT code, and
    ``elf_vaddr``/``elf_offset``, should an explanation ever fill them in, could
    only be run-time addresses too. Values below ``MMAP_MIN_ADDR`` are not
    addresses (nothing is mapped there) and are left alone.
    """
    if f.kind == KIND_PYTHON or f.object is not None:
        return ()
    return tuple(
        v
        for v in (f.symbol_vaddr, f.elf_vaddr, f.elf_offset)
        if v is not None and v >= MMAP_MIN_ADDR
    )


def _loose_addresses(capture: Capture) -> Iterable[int]:
    for f in capture.frames:
        if f.kind == KIND_PYTHON:
            continue
        # Those in a mapping's cluster are dropped by the caller: what is left is a
        # symbol start too far from its mapping to move with it.
        yield from _runtime_values(f)
        if f.mapping is not None:
            continue
        if f.vma:
            yield f.vma
        if f.base:
            yield f.base


def _moves(capture: Capture, amap: AddressMap) -> Iterable[tuple[int, int | None]]:
    """(original, scrubbed) for every run-time address: mapping bounds, bases, sampled VMAs.

    Bounds and bases move with their mapping's cluster (an end is exclusive, a
    base can lie outside its object), so they are paired through the mapping."""

    def delta(start: int) -> int:
        cluster = amap.cluster_of(start)
        return cluster.delta if cluster is not None else 0

    for g in capture.maps:
        for m in g.mappings:
            d = delta(m.start)
            yield m.start, m.start + d
            yield m.end, m.end + d
            if m.base is not None:
                yield m.base, m.base + d
    for f in capture.frames:
        if f.kind == KIND_PYTHON:
            continue
        if f.mapping is not None:
            d = delta(f.mapping[0])
            yield f.mapping[0], f.mapping[0] + d
            yield f.mapping[1], f.mapping[1] + d
            yield f.vma, f.vma + d
            if f.base is not None:
                yield f.base, f.base + d
        else:
            yield f.vma, amap.translate(f.vma)
            if f.base is not None:
                yield f.base, amap.translate(f.base)
        for value in _runtime_values(f):
            yield value, amap.translate(value)


def _align_up(value: int, align: int) -> int:
    return -(-value // align) * align


# --- rewriting records --------------------------------------------------------


def _basename(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2] or path


def _is_path(text: object) -> bool:
    return isinstance(text, str) and text.startswith("/")


class _TextScrubber:
    """Rewrites the addresses (and as asked, paths and host facts) inside free text."""

    def __init__(self, capture: Capture, amap: AddressMap, options: ScrubOptions) -> None:
        self._amap = amap
        self._options = options
        words = []
        if options.drop_host:
            for value in (capture.host.get("hostname"), capture.target.get("user")):
                if isinstance(value, str) and len(value) >= 2:
                    words.append(re.escape(value))
        self._host_words = re.compile(r"\b(?:" + "|".join(words) + r")\b") if words else None

    def path(self, path: str) -> str:
        return _basename(path) if self._options.basenames and "/" in path else path

    def optional_path(self, path: str | None) -> str | None:
        return self.path(path) if path is not None else None

    def argument(self, arg: str) -> str:
        """A command-line argument that is a path, or holds one (--config=/etc/app/x.conf),
        with its directories removed."""
        return _basename(arg) if _is_path(arg) else self.paths_in(arg)

    def paths_in(self, text: str) -> str:
        """``text`` with the absolute paths in it reduced to file names, as asked."""
        if not self._options.basenames:
            return text
        return _PATH_IN_TEXT.sub(lambda m: _basename(m.group(0)), text)

    def symbol_source(self, source: str | None) -> str | None:
        """``dynsym+build-id:/usr/lib/debug/.build-id/93/ac….debug`` -> ``…+build-id:ac….debug``
        with ``basenames``: each source's file by its name. A part that still holds a
        "/" (a path with "+name+" in a directory) is cut to its last component, so no
        directory survives even then."""
        if source is None or not self._options.basenames or "/" not in source:
            return source
        parts = []
        for part in _SOURCE_SPLIT.split(source):
            name, colon, path = part.partition(":")
            if colon and path.startswith("/"):
                part = f"{name}:{_basename(path)}"
            elif "/" in part:
                part = _basename(part)
            parts.append(part)
        return "+".join(parts)

    def text(self, text: str, known: dict[int, int] | None = None) -> str:
        """``text`` with addresses moved: ``known`` first (the record's own numbers), then
        any number that falls in a moved cluster or a remapped unmapped page."""
        exact = known or {}
        for form, moving in _STEP_FORMS:
            step = form.fullmatch(text)
            if step is not None:
                return self._step(step, moving, exact)

        def number(m: re.Match[str]) -> str:
            token = m.group(0)
            if token[:2] in ("0x", "0X"):
                new = self._new(int(token, 16), exact)
                return token if new is None else f"0x{new:x}"
            if token.isdigit():
                new = self._new(int(token), exact)
                if new is not None:
                    return str(new)
                if len(token) < 8:
                    return token
            new = self._new(int(token, 16), exact)
            # /proc/PID/maps pads addresses to 8 digits; keep that, not the old width.
            return token if new is None else f"{new:0{min(len(token), 8)}x}"

        text = self.paths_in(_NUMBER.sub(number, text))
        if self._options.drop_host:
            text = _ENV_LIKE.sub(r"\1=…", text)
            if self._host_words is not None:
                text = self._host_words.sub("…", text)
        return text

    def _step(self, step: re.Match[str], moving: tuple[int, ...], exact: dict[int, int]) -> str:
        """A conversion step with its run-time numbers (groups ``moving``) moved."""
        text, shift = step.string, 0
        for group in moving:
            token = step.group(group)
            value = -int(token[1:], 16) if token.startswith("-") else int(token, 16)
            new = self._new(value, exact)
            if new is None:
                continue
            replacement = f"{new:#x}"
            begin, end = step.start(group) + shift, step.end(group) + shift
            text = text[:begin] + replacement + text[end:]
            shift += len(replacement) - (end - begin)
        return text

    def texts(self, items: tuple[str, ...], known: dict[int, int]) -> tuple[str, ...]:
        return tuple(self.text(t, known) for t in items)

    def _new(self, value: int, exact: dict[int, int]) -> int | None:
        if value in exact:
            return exact[value]
        # Below MMAP_MIN_ADDR a number is a size, an offset, a line: never an
        # address, even when an unmapped frame's page 0 was remapped.
        return self._amap.translate(value) if value >= MMAP_MIN_ADDR else None


def _known(pairs: Iterable[tuple[int | None, int | None]]) -> dict[int, int]:
    return {old: new for old, new in pairs if old is not None and new is not None and old}


def _moved_pgoff(m_pgoff: int, is_file: bool, amap: AddressMap) -> int:
    # A file offset is not an address. Without a file, a non-zero pgoff is the
    # address the kernel derived it from (perf's anonymous mmap events), and moves.
    if is_file or not m_pgoff:
        return m_pgoff
    moved = amap.translate(m_pgoff)
    return m_pgoff if moved is None else moved


def _mapping(m: MappingRecord, amap: AddressMap, texts: _TextScrubber) -> MappingRecord:
    cluster = amap.cluster_of(m.start)
    delta = cluster.delta if cluster is not None else 0
    start, end = m.start + delta, m.end + delta
    base = m.base + delta if m.base is not None else None
    known = _known(((m.start, start), (m.end, end), (m.base, base)))
    return dataclasses.replace(
        m,
        start=start,
        end=end,
        pgoff=_moved_pgoff(m.pgoff, _is_file(m), amap),
        path=texts.path(m.path),
        base=base,
        base_formula=texts.text(m.base_formula, known) if m.base_formula is not None else None,
        symbol_source=texts.symbol_source(m.symbol_source),
        problems=texts.texts(m.problems, known),
    )


def _frame(
    f: FrameRecord, amap: AddressMap, texts: _TextScrubber, files: dict[tuple[object, ...], bool]
) -> FrameRecord:
    module = texts.optional_path(f.module)
    paths = _path_fields(f, texts)
    if f.kind == KIND_PYTHON:  # a function and a source line: no address to move
        problems = texts.texts(f.problems, {})
        return dataclasses.replace(
            f, module=module, detail=texts.text(f.detail), problems=problems, **paths
        )
    mapping = f.mapping
    if mapping is not None:
        # The frame's own mapping says which cluster it moves with, whatever its
        # vma and base are (elf_vaddr = vma - base must still hold).
        start, end, perms, pgoff = mapping
        cluster = amap.cluster_of(start)
        delta = cluster.delta if cluster is not None else 0
        file_backed = files.get((f.generation, *mapping))
        if file_backed is None:  # a mapping the maps do not have: judge by the frame
            # For JIT code the module is the perf map that named it, not the
            # mapping's file: the mapping is anonymous (or a memfd the maps show).
            jit = f.object is None and f.symbol is not None
            file_backed = f.object is not None or (
                bool(f.module and f.module.startswith("/")) and not jit
            )
        pgoff = _moved_pgoff(pgoff, file_backed, amap)
        mapping = (start + delta, end + delta, perms, pgoff)
        vma = f.vma + delta if f.vma else f.vma  # 0: no address
        base = f.base + delta if f.base is not None else None
        known = _known(((f.vma, vma), (f.base, base), (start, mapping[0]), (end, mapping[1])))
    else:
        vma = (amap.translate(f.vma) or f.vma) if f.vma else f.vma
        base = (amap.translate(f.base) or f.base) if f.base else f.base
        known = _known(((f.vma, vma), (f.base, base)))
    # No ELF object: symbol_vaddr (and elf_vaddr, elf_offset) are run-time
    # addresses, moved by the map like any other. (_intervals put a perf map's
    # symbol start in its mapping's cluster, so vma - symbol_vaddr is kept.)
    runtime = {v: amap.translate(v) for v in _runtime_values(f)}
    known.update(_known(runtime.items()))

    def moved(value: _Address | None) -> _Address | None:
        new = runtime.get(value) if value is not None else None
        return value if new is None else cast(_Address, new)  # the same kind, moved

    return dataclasses.replace(
        f,
        vma=Vma(vma),
        base=Base(base) if base is not None else None,
        mapping=mapping,
        module=module,
        elf_vaddr=moved(f.elf_vaddr),
        elf_offset=moved(f.elf_offset),
        symbol_vaddr=moved(f.symbol_vaddr),
        detail=texts.text(f.detail, known),
        steps=texts.texts(f.steps, known),
        problems=texts.texts(f.problems, known),
        **paths,
    )


def _path_fields(f: FrameRecord, texts: _TextScrubber) -> dict[str, Any]:
    """Path-valued frame fields other than ``module``, as ``basenames`` asks. (The
    DWARF ``source_file`` is looked up by name: captures may predate it.)"""
    source_file = getattr(f, "source_file", None)
    if isinstance(source_file, str):
        return {"source_file": texts.path(source_file)}
    return {}


def _drop_host(
    target: dict[str, object], host: dict[str, object], session: dict[str, object]
) -> None:
    host.pop("hostname", None)
    target.pop("user", None)
    target.pop("started", None)  # wall-clock start: when, on which box
    cmdline = target.get("cmdline")
    if isinstance(cmdline, list):
        target["cmdline"] = [_basename(str(cmdline[0]))] if cmdline else []
    # CLOCK_MONOTONIC readings are the host's uptime; only differences matter.
    start, end = session.get("start"), session.get("end")
    if _is_number(start):
        assert isinstance(start, int | float)
        session["start"] = 0.0
        if _is_number(end):
            assert isinstance(end, int | float)
            session["end"] = end - start


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
