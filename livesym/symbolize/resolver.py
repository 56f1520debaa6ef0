"""Explaining sampled addresses against the maps generation of their time.

A sample taken at time t is symbolized with the maps generation current at t.
If its address is in no mapping of that generation, the mapping is newer than
the last read: the next generation is used, reading the maps again if there is
none yet. A library unloaded and another loaded at the same address therefore
never takes over the first one's samples.

When the sampler reports the mappings it saw created (perf's mmap records,
with times), a later generation is only used if the mapping holding the
address there was not created after the sample: otherwise the sample's own
mapping came and went between two reads of the maps, and the address stays
unmapped rather than being charged to whatever took its place.

Results are memoised per (generation, address): a profile hits the same few
thousand addresses over and over.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable

from livesym.addr.kinds import Vma
from livesym.elf.cfi_rules import Rules
from livesym.errors import LivesymError
from livesym.records import Reason
from livesym.symbolize.explain import Explanation
from livesym.symbolize.lines import SourceLine
from livesym.symbolize.objects import LoadedObject, ObjectCache
from livesym.symbolize.process import ProcessSymbolizer, cache_for
from livesym.target.maps_watcher import MappingEvent, MapsGeneration, MapsWatcher
from livesym.target.process import TargetProcess

MAX_MEMO = 500_000
MAX_SYMBOLIZERS = 16
MAX_MAPPING_EVENTS = 50_000


def may_be_named_later(found: Explanation) -> bool:
    """JIT code not in the perf map yet: the next look may find it (not memoised)."""
    mapping = found.mapping
    return (
        found.reason in (Reason.ANONYMOUS, Reason.SPECIAL)
        and mapping is not None
        and mapping.executable
    )


class AddressResolver:
    """Explains (time, address) pairs of one process; use from one thread at a time."""

    def __init__(
        self, target: TargetProcess, watcher: MapsWatcher, cache: ObjectCache | None = None
    ) -> None:
        self._target = target
        self.watcher = watcher
        self._cache = cache or cache_for(target)
        self._symbolizers: dict[int, ProcessSymbolizer] = {}
        self._memo: dict[tuple[int, int], Explanation] = {}
        self._created: list[MappingEvent] = []

    def note_mappings(self, events: Iterable[MappingEvent]) -> None:
        """Mappings the sampler saw created, with their times."""
        self._created.extend(events)
        if len(self._created) > MAX_MAPPING_EVENTS:
            del self._created[: len(self._created) - MAX_MAPPING_EVENTS // 2]

    def _created_after(self, vma: int, when: float) -> MappingEvent | None:
        for event in reversed(self._created):
            if event.start <= vma < event.end and event.time > when:
                return event
        return None

    def explain(self, vma: int, when: float) -> Explanation:
        return self.resolve(vma, when)[1]

    def resolve(self, vma: int, when: float) -> tuple[MapsGeneration, Explanation]:
        """The generation used for ``vma`` at time ``when``, and the explanation."""
        generation = self.watcher.at(when)
        found = self._explain_in(generation, vma)
        if found.reason is not Reason.UNMAPPED:
            return generation, found
        later = self.watcher.after(generation)
        if later is None:
            try:
                self.watcher.refresh()
            except LivesymError:
                # The process is gone (or unreadable): the address stays unmapped.
                return generation, found
            later = self.watcher.after(generation)
        if later is None:
            return generation, found
        newer = self._created_after(vma, when)
        if newer is not None:
            what = newer.path or "an anonymous mapping"
            detail = (
                f"{vma:#x} was in no mapping when the maps were read before the sample, and "
                f"{what} was mapped there {newer.time - when:.3f} s after it: the sample's "
                "own mapping came and went between two reads"
            )
            return generation, dataclasses.replace(found, detail=detail)
        return later, self._explain_in(later, vma)

    def rules_at(self, when: float) -> Callable[[int], Rules | None]:
        """Unwind rules by run-time address, in the maps generation of time ``when``; for
        an address no mapping of it holds, in the next generation read (a library mapped
        just before the sample, after the maps were last read: as ``resolve`` does)."""
        generation = self.watcher.at(when)
        first = self.symbolizer(generation)

        def rules(vma: int) -> Rules | None:
            found = first.rules_for(vma)
            if found is not None or first.maps.find(Vma(vma)) is not None:
                return found
            later = self.watcher.after(generation)
            return self.symbolizer(later).rules_for(vma) if later is not None else None

        return rules

    def code_at(self, when: float) -> Callable[[int, int], bytes | None]:
        """Code bytes by run-time address, in the maps generation of time ``when``."""
        return self.symbolizer(self.watcher.at(when)).code_before

    def symbolizer(self, generation: MapsGeneration) -> ProcessSymbolizer:
        found = self._symbolizers.get(generation.number)
        if found is None:
            if len(self._symbolizers) >= MAX_SYMBOLIZERS:
                del self._symbolizers[min(self._symbolizers)]
            found = ProcessSymbolizer(self._target, generation.snapshot, self._cache)
            self._symbolizers[generation.number] = found
        return found

    def _explain_in(self, generation: MapsGeneration, vma: int) -> Explanation:
        key = (generation.number, vma)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= MAX_MEMO:
                self._memo.clear()
            found = self.symbolizer(generation).explain(Vma(vma))
            if not may_be_named_later(found):
                self._memo[key] = found
        return found

    def forget(self, build_ids: Collection[str]) -> None:
        """Forget what was worked out with the objects of ``build_ids`` (their debug files
        arrived): every address is explained afresh."""
        self._cache.forget(build_ids)
        self._memo.clear()
        self._symbolizers.clear()

    def explain_again(self, generation: int, vma: int) -> tuple[MapsGeneration, Explanation] | None:
        """``vma`` explained in generation ``generation`` as known now; None where that
        generation is no longer held."""
        found = next((g for g in self.watcher.history if g.number == generation), None)
        return None if found is None else (found, self._explain_in(found, vma))

    def object_line(self, obj: LoadedObject, elf_vaddr: int) -> SourceLine | None:
        """File and line of an ELF vaddr in an object, whatever generation mapped it."""
        return self._cache.source_line(obj, elf_vaddr)

    def source_line(self, generation: int, vma: int) -> SourceLine | None:
        """File and line of a frame's address, from DWARF: for the dashboard's details,
        on demand (the first question about an object decodes a part of its line table;
        never call it per sample). None when the generation is no longer held."""
        symbolizer = self._symbolizers.get(generation)
        if symbolizer is None:
            return None
        found = self._memo.get((generation, vma)) or symbolizer.explain(Vma(vma))
        return symbolizer.source_line(found)
