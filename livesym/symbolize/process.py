"""Symbolizing run-time addresses of one process against one maps snapshot."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from livesym.addr.convert import BaseDerivation, ObjectBaseCheck, check_object_bases, derive_base
from livesym.addr.kinds import Vma
from livesym.addr.maps import MapsEntry, MapsSnapshot
from livesym.symbolize.explain import Explanation, explain_vma
from livesym.symbolize.objects import LoadedObject, ObjectCache
from livesym.target.process import ObjectPath, TargetProcess, page_size


@dataclass(frozen=True)
class MappingFacts:
    """One mapping with its object, base and checks: a row of ``livesym maps``."""

    entry: MapsEntry
    object_path: ObjectPath | None
    obj: LoadedObject | None
    base: BaseDerivation | str | None
    object_check: ObjectBaseCheck | None

    @property
    def problems(self) -> list[str]:
        """Every check that disagreed, and why the object could not be read."""
        found: list[str] = []
        if isinstance(self.base, BaseDerivation):
            found += self.base.problems
        elif isinstance(self.base, str):
            found.append(self.base)
        if self.object_check is not None:
            found += self.object_check.problems
        if self.obj is not None and self.obj.error and not self.obj.not_elf:
            found.append(self.obj.error)
        if self.object_path is not None and self.object_path.problem:
            found.append(self.object_path.problem)
        return found


# A file as maps names it, and one load of it (the start of its pgoff-0 mapping).
_FileKey = tuple[int, int, int, str]
_LoadKey = tuple[_FileKey, int | None]


def _file_key(entry: MapsEntry) -> _FileKey:
    return (entry.dev_major, entry.dev_minor, entry.inode, entry.path)


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
        self.cache = cache or ObjectCache()
        self.page_size = page or page_size()
        self._paths: dict[MapsEntry, ObjectPath] = {}
        self._bases: dict[MapsEntry, BaseDerivation | str] = {}

    def object_path(self, entry: MapsEntry) -> ObjectPath:
        found = self._paths.get(entry)
        if found is None:
            found = self._paths[entry] = self.target.object_path(entry)
        return found

    def object_for(self, entry: MapsEntry) -> LoadedObject | None:
        if not entry.file_backed:
            return None
        return self.cache.load(self.object_path(entry).open_path)

    def anchor_for(self, entry: MapsEntry) -> MapsEntry | None:
        """The mapping that starts this load of the object: the nearest mapping of the
        same file with pgoff 0 at or below ``entry`` (the ELF header's page)."""
        key = _file_key(entry)
        anchor = None
        for other in self.maps.entries:
            if other.start > entry.start:
                break
            if other.pgoff == 0 and _file_key(other) == key:
                anchor = other
        return anchor

    def base_for(self, entry: MapsEntry) -> BaseDerivation | str | None:
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
        extra = self.object_path(entry).problem if entry.file_backed else None
        # The user knows the object by the path the target mapped, not by
        # the /proc path it was read through.
        problems = result.problems + ((extra,) if extra else ())
        return dataclasses.replace(result, path=entry.path or result.path, problems=problems)

    def mappings(self) -> Iterator[MappingFacts]:
        """Every mapping with its object facts and the per-object base check."""
        by_load: dict[_LoadKey, list[BaseDerivation]] = {}
        rows: list[tuple[MapsEntry, BaseDerivation | str | None, _LoadKey]] = []
        for entry in self.maps.entries:
            base = self.base_for(entry) if entry.file_backed else None
            anchor = self.anchor_for(entry) if entry.file_backed else None
            key: _LoadKey = (_file_key(entry), int(anchor.start) if anchor else None)
            rows.append((entry, base, key))
            if isinstance(base, BaseDerivation):
                by_load.setdefault(key, []).append(base)
        checks = {key: check_object_bases(found) for key, found in by_load.items()}
        for entry, base, key in rows:
            yield MappingFacts(
                entry=entry,
                object_path=self.object_path(entry) if entry.file_backed else None,
                obj=self.object_for(entry),
                base=base,
                object_check=checks.get(key),
            )
