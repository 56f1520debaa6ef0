"""The mappings pane's rows: every mapping the session saw, its facts, its samples.

A mapping is the same row across maps generations while its range, perms,
pgoff and path stay the same. Rows of the current generation are ``live``
(``new`` for a while after they first appear); rows gone from it are kept as
``removed`` (the most recent ones, bounded), so a library the target loaded
and unloaded stays visible with the samples it took. Pure: live sessions and
replays build the rows from the same generation records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from livesym.records import FrameRecord, GenerationRecord, MappingRecord

NEW_FOR = 5.0  # seconds a mapping is marked new after it first appears
MAX_REMOVED = 256  # removed mappings kept, most recently seen first

MappingKey = tuple[int, int, str, int, str]  # MappingRecord.key
ProcessMapping = tuple[int, MappingKey]  # (the generation's pid, its mapping's key)
MappingStatus = Literal["live", "new", "removed"]


@dataclass(frozen=True, slots=True)
class MappingRow:
    """One row of the mappings pane."""

    record: MappingRecord  # the facts as of the last generation holding the mapping
    samples: int  # leaf samples that fell in it, since the last reset
    status: MappingStatus
    first_seen: float  # session clock time of the first generation holding it

    @property
    def key(self) -> MappingKey:
        return self.record.key

    @property
    def flagged(self) -> bool:
        """A base or alignment check disagreed, or the object could not be read."""
        return bool(self.record.problems)


def mapping_rows(
    generations: Sequence[GenerationRecord],
    samples: Mapping[MappingKey, int],
    now: float,
) -> tuple[MappingRow, ...]:
    """Rows of the current generation by address, then removed ones by address."""
    if not generations:
        return ()
    first_seen: dict[MappingKey, float] = {}
    last: dict[MappingKey, tuple[int, MappingRecord]] = {}
    for index, generation in enumerate(generations):
        for m in generation.mappings:
            key = m.key
            first_seen.setdefault(key, generation.time)
            last[key] = (index, m)
    current_index = len(generations) - 1
    first_time = generations[0].time
    live: list[MappingRow] = []
    removed: list[tuple[int, MappingRow]] = []
    for key, (index, record) in last.items():
        seen = first_seen[key]
        count = samples.get(key, 0)
        if index == current_index:
            status: MappingStatus = "new" if seen > first_time and now - seen < NEW_FOR else "live"
            live.append(MappingRow(record, count, status, seen))
        else:
            removed.append((index, MappingRow(record, count, "removed", seen)))
    removed.sort(key=lambda item: -item[0])
    kept = [row for _, row in removed[:MAX_REMOVED]]
    live.sort(key=lambda row: row.record.start)
    kept.sort(key=lambda row: row.record.start)
    return tuple(live + kept)


_NO_MAPPING = -1  # the frame has no mapping (a kernel, Python or JIT-map frame), or none matched
_NOT_YET = -2  # the frame's generation is not among those seen so far (a replay ahead)


class LeafMappings:
    """Leaf samples per mapping, for the mappings pane.

    Which mapping a frame record's address fell in never changes, so it is worked out
    once per record, as a small slot number; counting a session's samples per mapping
    is then one list index per leaf frame, not a lookup through its generation (a
    first look at the mappings pane of a 1M-sample replay took 45 ms for that).
    """

    def __init__(self) -> None:
        self._slot: list[int] = []  # frame id -> slot, _NO_MAPPING or _NOT_YET
        self._keys: list[ProcessMapping] = []  # slot -> mapping
        self._slot_of: dict[ProcessMapping, int] = {}
        self._not_yet: list[int] = []  # frame ids to try again once generations come
        self._generations = 0  # how many generations the slots were worked out with

    def count(
        self,
        leaves: Mapping[int, int],
        frames: Sequence[FrameRecord],
        generations: Sequence[GenerationRecord],
    ) -> dict[ProcessMapping, int]:
        """Samples per mapping of each process, from samples per leaf frame id."""
        self._assign(frames, generations)
        counts = [0] * (len(self._keys) + 2)  # the two negative slots index the end
        slot = self._slot
        for frame_id, n in leaves.items():
            counts[slot[frame_id]] += n
        return {key: counts[i] for i, key in enumerate(self._keys) if counts[i]}

    def _assign(
        self, frames: Sequence[FrameRecord], generations: Sequence[GenerationRecord]
    ) -> None:
        more_generations = len(generations) != self._generations
        if not more_generations and len(self._slot) == len(frames):
            return
        by_generation = {
            g.number: {m.start: (g.pid, m.key) for m in g.mappings} for g in generations
        }
        self._generations = len(generations)
        if more_generations:
            retry, self._not_yet = self._not_yet, []
            for frame_id in retry:
                self._slot[frame_id] = self._slot_for(frame_id, frames[frame_id], by_generation)
        for frame_id in range(len(self._slot), len(frames)):
            self._slot.append(self._slot_for(frame_id, frames[frame_id], by_generation))

    def _slot_for(
        self,
        frame_id: int,
        record: FrameRecord,
        by_generation: dict[int, dict[int, ProcessMapping]],
    ) -> int:
        if record.mapping is None:
            return _NO_MAPPING
        in_generation = by_generation.get(record.generation)
        if in_generation is None:
            self._not_yet.append(frame_id)
            return _NOT_YET
        key = in_generation.get(record.mapping[0])
        if key is None:
            return _NO_MAPPING
        slot = self._slot_of.get(key)
        if slot is None:
            slot = self._slot_of[key] = len(self._keys)
            self._keys.append(key)
        return slot


class MappingsPane:
    """The mappings pane's rows of one process of a session at a time, made again only
    when the generations, the samples counted or the second changed."""

    def __init__(self) -> None:
        self.leaves = LeafMappings()
        self._cache: tuple[tuple[object, ...], tuple[MappingRow, ...]] | None = None

    def rows(
        self,
        pid: int,
        root: int,
        leaves: Mapping[int, int],
        frames: Sequence[FrameRecord],
        generations: Sequence[GenerationRecord],
        counted: tuple[int, int],
        now: float,
    ) -> tuple[MappingRow, ...]:
        """The rows of process ``pid`` (``root``: the session's first process, which a
        record of pid 0 means: a capture before version 4); ``counted`` changes whenever
        ``leaves`` (samples per leaf frame id) does."""
        version = (len(generations), counted, int(now), pid)
        if self._cache is not None and self._cache[0] == version:
            return self._cache[1]
        mine = [g for g in generations if (g.pid or root) == pid]
        by_mapping = self.leaves.count(leaves, frames, generations).items()
        samples = {key: n for (p, key), n in by_mapping if (p or root) == pid}
        rows = mapping_rows(mine, samples, now)
        self._cache = (version, rows)
        return rows
