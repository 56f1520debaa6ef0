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

from livesym.capture.model import GenerationRecord, MappingRecord

NEW_FOR = 5.0  # seconds a mapping is marked new after it first appears
MAX_REMOVED = 256  # removed mappings kept, most recently seen first

MappingKey = tuple[int, int, str, int, str]  # MappingRecord.key


@dataclass(frozen=True, slots=True)
class MappingRow:
    """One row of the mappings pane."""

    record: MappingRecord  # the facts as of the last generation holding the mapping
    samples: int  # leaf samples that fell in it, since the last reset
    status: str  # "live", "new" or "removed"
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
            status = "new" if seen > first_time and now - seen < NEW_FOR else "live"
            live.append(MappingRow(record, count, status, seen))
        else:
            removed.append((index, MappingRow(record, count, "removed", seen)))
    removed.sort(key=lambda item: -item[0])
    kept = [row for _, row in removed[:MAX_REMOVED]]
    live.sort(key=lambda row: row.record.start)
    kept.sort(key=lambda row: row.record.start)
    return tuple(live + kept)
