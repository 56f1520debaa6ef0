"""Symbolizing run-time addresses of one process against one maps snapshot."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import NamedTuple

from livesym.addr.convert import BaseDerivation, ObjectBaseCheck, check_object_bases, derive_base
from livesym.addr.kinds import Vma
from livesym.addr.maps import MapKind, MapsEntry, MapsSnapshot
from livesym.addr.segments import segment_for_vaddr
from livesym.elf.cfi_rules import Rules
from livesym.elf.image import FileIdentity
from livesym.errors import LivesymError
from livesym.records import Reason, Unresolved
from livesym.symbolize.explain import Explanation, explain_jit, explain_vma
from livesym.symbolize.lines import SourceLine
from livesym.symbolize.objects import LoadedObject, ObjectCache
from livesym.symbolize.perfmap import PerfMap
from livesym.symbolize.sources import SymbolSearch
from livesym.target.process import ObjectPath, TargetProcess, names_mapped_file, page_size

# Unresolved in an executable mapping for these reasons: JIT code, if the
# process keeps a perf map.
MAX_CACHED_RULES = 1 << 16  # addresses whose unwind rules are remembered, per generation
_JIT_REASONS = (Reason.ANONYMOUS, Reason.SPECIAL, Reason.NOT_ELF, Reason.FILE_UNAVAILABLE)


class MappingFacts(NamedTuple):
    """One mapping with its object, base and checks: a row of ``livesym maps`` (a named
    tuple: a process may have tens of thousands, most of them anonymous memory)."""

    entry: MapsEntry
    object_path: ObjectPath | None
    obj: LoadedObject | None
    base: BaseDerivation | Unresolved | None
    object_check: ObjectBaseCheck | None

    @property
    def problems(self) -> list[str]:
        """Every check that disagreed, and why the object could not be read."""
        found: list[str] = []
        if isinstance(self.base, BaseDerivation):
            found += self.base.problems
        elif isinstance(self.base, Unresolved):
            found.append(self.base.detail)
        if self.object_check is not None:
            found += self.object_check.problems
        if self.obj is not None and self.obj.error and not self.obj.not_elf:
            found.append(self.obj.error)
        if self.object_path is not None and self.object_path.problem:
            found.append(self.object_path.problem)
        return found


_new_facts = tuple.__new__


# A file as maps names it, and one load of it (the start of its pgoff-0 mapping).
_FileKey = tuple[int, int, int, str]
_LoadKey = tuple[_FileKey, int | None]


def _is_mapped_file(identity: FileIdentity, entry: MapsEntry) -> bool:
    """Whether the file that was opened (its fstat) is the one the maps line names."""
    return names_mapped_file(identity.dev, identity.ino, entry)


def _file_key(entry: MapsEntry) -> _FileKey:
    return (entry.dev_major, entry.dev_minor, entry.inode, entry.path)


_FILE, _MEMFD, _VDSO = MapKind.FILE, MapKind.MEMFD, MapKind.VDSO


def has_object(entry: MapsEntry) -> bool:
    """Whether an ELF object stands behind the mapping: a file, or the vdso (in memory)."""
    # Identity, not set membership: an Enum's hash is a Python call, and a big process
    # asks this of tens of thousands of mappings.
    kind = entry.kind
    return kind is _FILE or kind is _MEMFD or kind is _VDSO  # file_backed, or the vdso


def cache_for(target: TargetProcess, *, background: bool = False) -> ObjectCache:
    """An object cache that looks for debug files where the target's options say (and
    fetches them from debuginfod in the background, with ``background``)."""
    return ObjectCache(search=SymbolSearch.of(target.debug_dirs, background=background))


class ProcessSymbolizer:
    """Explains addresses of one process using one maps snapshot."""

    def __init__(
        self,
        target: TargetProcess,
        snapshot: MapsSnapshot | None = None,
        cache: ObjectCache | None = None,
        page: int | None = None,
    ) -> None:
        self.target = target
        self.maps = snapshot if snapshot is not None else target.read_maps()
        self._rules: dict[int, Rules | None] = {}  # address -> its unwind rules
        self._code: dict[tuple[int, int], bytes | None] = {}  # (end, size) -> the code before
        self.cache = cache or cache_for(target)
        self.page_size = page or page_size()
        self._paths: dict[MapsEntry, ObjectPath] = {}
        self._bases: dict[MapsEntry, BaseDerivation | Unresolved] = {}
        self._vdso: dict[MapsEntry, LoadedObject] = {}
        self._anchors: dict[MapsEntry, MapsEntry] | None = None

    def object_path(self, entry: MapsEntry) -> ObjectPath:
        found = self._paths.get(entry)
        if found is None:
            if entry.kind is MapKind.VDSO:
                found = ObjectPath(f"/proc/{self.target.pid}/mem", "memory")
            else:
                found = self.target.object_path(entry)
            self._paths[entry] = found
        return found

    def object_for(self, entry: MapsEntry) -> LoadedObject | None:
        if entry.kind is MapKind.VDSO:
            return self._vdso_object(entry)
        if not entry.file_backed:
            return None
        where = self.object_path(entry)
        obj = self._load(entry, where)
        if obj.image is None and where.via != "path":
            # The process ended (or became a zombie) between the look at its path and the
            # open: its root and map_files went with it, but the file may be ours to read.
            host = self.target.host_path(entry)
            if host is not None:
                self._paths[entry] = where = host
                obj = self._load(entry, where)
        if obj.image is None or _is_mapped_file(obj.image.identity, entry):
            return obj
        # What the path named when it was opened is not the mapped file (a container
        # changes its own tree at will, between the check and the open or since), or
        # is it only by inode (overlay file systems report another device through the
        # path): the mapped file itself, through map_files where permitted, is sure.
        inode_only = obj.image.identity.ino == entry.inode and where.via == "root"
        why = f"{entry.path} named another file when it was opened"
        mapped = self.target.mapped_file(entry, why, quiet=inode_only)
        if inode_only and mapped.via != "map_files":
            return obj  # the best that can be had without root
        self._paths[entry] = mapped
        found = self._load(entry, mapped)
        if found.image is not None and not _is_mapped_file(found.image.identity, entry):
            return LoadedObject(found.path, None, None, f"{why}; not read")
        return found

    def _load(self, entry: MapsEntry, where: ObjectPath) -> LoadedObject:
        # Debug files beside the object are where its path says, in the file system
        # the path belongs to: livesym's own for a chroot's file seen from here.
        root = "" if where.via == "path" else self.target.root
        return self.cache.load(where.open_path, seen_as=entry.path, root=root)

    def _vdso_object(self, entry: MapsEntry) -> LoadedObject:
        """The vdso, read from the target's memory: the kernel's code, no file behind it."""
        found = self._vdso.get(entry)
        if found is None:
            data = self.target.read_memory(entry.start, entry.size)
            if isinstance(data, Unresolved):
                why = f"[vdso] of {self.target.pid}: {data.detail}"
                found = LoadedObject(entry.path, None, None, why)
            else:
                found = self.cache.load_bytes(data, entry.path)
            self._vdso[entry] = found
        return found

    def perf_map(self) -> PerfMap:
        """The target's perf map, /tmp/perf-<pid>.map in its own root, for its own pid."""
        name = f"/tmp/perf-{self.target.namespace_pid()}.map"
        return self.cache.perf_map(self.target.root + name, name)

    def anchor_for(self, entry: MapsEntry) -> MapsEntry | None:
        """The mapping that starts this load of the object: the nearest mapping of the
        same file with pgoff 0 at or below ``entry`` (the ELF header's page)."""
        if self._anchors is None:
            self._anchors = self._all_anchors()
        return self._anchors.get(entry)

    def _all_anchors(self) -> dict[MapsEntry, MapsEntry]:
        """Every mapping's anchor, in one pass in address order (a search per mapping
        was quadratic: 64 s for 40,000 mappings of one shared-memory file)."""
        anchors: dict[MapsEntry, MapsEntry] = {}
        latest: dict[_FileKey, MapsEntry] = {}
        for entry in self.maps.entries:
            if not has_object(entry):
                continue  # (most mappings of a big process: anonymous memory)
            key = _file_key(entry)
            if entry.pgoff == 0:
                latest[key] = entry
            found = latest.get(key)
            if found is not None:
                anchors[entry] = found
        return anchors

    def base_for(self, entry: MapsEntry) -> BaseDerivation | Unresolved | None:
        """The base of a file mapping, consistent with the load it belongs to."""
        obj = self.object_for(entry)
        if obj is None or obj.image is None:
            return None
        found = self._bases.get(entry)
        if found is None:
            image = obj.image
            expected = None
            anchor = self.anchor_for(entry)
            if anchor is not None and anchor is not entry:
                first = derive_base(anchor, image.segments, image.e_type, self.page_size)
                if isinstance(first, BaseDerivation):
                    expected = first.implied
            found = derive_base(entry, image.segments, image.e_type, self.page_size, expected)
            self._bases[entry] = found
        return found

    def explain(self, vma: Vma) -> Explanation:
        entry = self.maps.find(vma)
        if entry is None:
            return explain_vma(vma, None, None, self.page_size)
        obj = self.object_for(entry)
        base = self.base_for(entry)
        result = explain_vma(vma, entry, obj, self.page_size, base)
        unnamed = (Reason.UNKNOWN_ADDRESS, Reason.UNNAMED_FUNCTION)
        if result.reason in unnamed and obj is not None and not obj.searched:
            # The object's own tables miss it: its debug file or MiniDebugInfo may not.
            completed = self.cache.complete(obj)
            if completed is not obj:
                result = explain_vma(vma, entry, completed, self.page_size, base)
        if result.reason in _JIT_REASONS and entry.executable and entry.kind is not MapKind.VDSO:
            jit = self.perf_map()
            hit = jit.lookup(vma)
            if hit is not None:
                return explain_jit(vma, entry, hit, jit.shown_as)
        extra = self.object_path(entry).problem if has_object(entry) else None
        # The user knows the object by the path the target mapped, not by
        # the /proc path it was read through.
        problems = result.problems + ((extra,) if extra else ())
        return dataclasses.replace(result, path=entry.path or result.path, problems=problems)

    def rules_for(self, vma: int) -> Rules | None:
        """The unwind rules at a run-time address (its object's FDE, decoded); None
        where no object is mapped there. Remembered per address: a profile's stacks
        pass the same return addresses again and again."""
        rules = self._rules
        if vma in rules:
            return rules[vma]
        if len(rules) >= MAX_CACHED_RULES:
            rules.clear()
        found = rules[vma] = self._rules_for(vma)
        return found

    def _rules_for(self, vma: int) -> Rules | None:
        entry = self.maps.find(Vma(vma))
        if entry is None or not entry.executable:
            return None
        obj = self.object_for(entry)
        base = self.base_for(entry)
        if obj is None or not isinstance(base, BaseDerivation):
            return None
        rules = obj.rules_at(vma - base.base)
        if isinstance(rules, Unresolved) and not obj.searched:
            # No CFI of its own covers it: its debug file's .debug_frame may.
            completed = self.cache.complete(obj)
            if completed is not obj:
                rules = completed.rules_at(vma - base.base)
        return rules

    def code_before(self, vma: int, size: int) -> bytes | None:
        """The ``size`` bytes of code that end at ``vma``: from its object's file, else
        (JIT code, no file) from the target's memory; None where none can be read.
        Remembered per address, as rules are."""
        key = (vma, size)
        code = self._code
        if key in code:
            return code[key]
        if len(code) >= MAX_CACHED_RULES:
            code.clear()
        found = code[key] = self._code_before(vma, size)
        return found

    def _code_before(self, vma: int, size: int) -> bytes | None:
        start = vma - size
        entry = self.maps.find(Vma(start))
        if entry is None or not entry.executable or vma > entry.end or size <= 0:
            return None
        obj = self.object_for(entry) if has_object(entry) else None
        if obj is None or obj.image is None:
            got = self.target.read_memory(start, size)
            return got if isinstance(got, bytes) else None
        base = self.base_for(entry)
        if not isinstance(base, BaseDerivation):
            return None
        vaddr = start - base.base
        segment = segment_for_vaddr(obj.image.segments, vaddr)
        if segment is None or vaddr + size > segment.p_vaddr + segment.p_filesz:
            return None
        try:
            return obj.image.read(segment.p_offset + vaddr - segment.p_vaddr, size)
        except LivesymError:
            return None

    def source_line(self, expl: Explanation) -> SourceLine | None:
        """File and line of an explained address, from DWARF (on demand, never per sample)."""
        if expl.mapping is None or expl.elf_vaddr is None or expl.symbol is None:
            return None
        obj = self.object_for(expl.mapping)
        if obj is None:
            return None
        return self.cache.source_line(obj, expl.elf_vaddr)

    def mappings(self) -> Iterator[MappingFacts]:
        """Every mapping with its object facts and the per-object base check."""
        by_load: dict[_LoadKey, list[BaseDerivation]] = {}
        rows: list[tuple[MapsEntry, BaseDerivation | Unresolved | None, _LoadKey | None]]
        rows = []
        for entry in self.maps.entries:
            if not has_object(entry):
                rows.append((entry, None, None))  # anonymous memory: nothing to derive
                continue
            base = self.base_for(entry)
            anchor = self.anchor_for(entry)
            key: _LoadKey = (_file_key(entry), int(anchor.start) if anchor else None)
            rows.append((entry, base, key))
            if isinstance(base, BaseDerivation):
                by_load.setdefault(key, []).append(base)
        checks = {key: check_object_bases(found) for key, found in by_load.items()}
        for entry, base, load in rows:
            if load is None:  # (tuple.__new__: a fifth of NamedTuple's own for the many)
                yield _new_facts(MappingFacts, (entry, None, None, None, None))
                continue
            yield MappingFacts(
                entry=entry,
                object_path=self.object_path(entry),
                obj=self.object_for(entry),
                base=base,
                object_check=checks.get(load),
            )
