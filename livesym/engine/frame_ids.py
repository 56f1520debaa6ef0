"""Frame ids of a live session's stacks, looked up once where they can be: a deep stack
(a recursion 2,000 frames deep, a compiler's parser) names thousands of addresses per
sample, and at 99 Hz on four such threads naming them one by one took a third of a core.

Per maps generation: the frame id of every named address (a named frame is never named
again later: JIT code without a name yet is looked up each time), the unwinder's memo
of deep walks (``SuffixMemo``: a walk's rest depends on the generation's unwind rules),
and the frame ids of each rest that memo gives (the same tuple object each time, held
here so that its id is not reused while kept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from livesym.engine.tables import SessionTables
from livesym.records import FrameRecord
from livesym.unwind.walk import SuffixMemo

T = TypeVar("T")

MAX_GENERATIONS = 4  # maps generations whose lookups are kept
MAX_NAMED_ADDRESSES = 1 << 18  # addresses a generation's shortcut to frame ids holds
MAX_RESTS = 4096  # deep walks' rests whose frame ids are kept


class FrameIds:
    """The frame ids of addresses and records; ``generation_at`` maps a sample's time to
    its maps generation's number, ``by_address`` names an address (slowly),
    ``by_record`` a frame that is no address."""

    def __init__(
        self,
        tables: SessionTables,
        generation_at: Callable[[float], int],
        by_address: Callable[[int, float], int],
        by_record: Callable[[FrameRecord], int],
    ) -> None:
        self._tables = tables
        self._generation_at = generation_at
        self._by_address = by_address
        self._by_record = by_record
        self._memos: dict[int, SuffixMemo] = {}
        self._named: dict[int, dict[int, int]] = {}  # generation -> address -> frame id
        # (generation, id of a memo's call sites) -> (those call sites, their frame ids)
        self._rests: dict[tuple[int, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def of(self, items: tuple[int | FrameRecord, ...], when: float) -> list[int]:
        """The frame ids of ``items`` (addresses and records), as of ``when``."""
        ids = []
        named = self._named_ids(when)
        frames = self._tables.frames
        for item in items:
            if isinstance(item, int):
                frame_id = named.get(item)
                if frame_id is None:
                    frame_id = self._by_address(item, when)
                    if frames[frame_id].symbol is not None:  # never named later, then
                        named[item] = frame_id
                ids.append(frame_id)
            else:
                ids.append(self._by_record(item))
        return ids

    def of_rest(self, rest: tuple[int, ...], when: float) -> list[int]:
        """The frame ids of the call sites of a deep walk's rest that the memo gave:
        named once per maps generation, where every frame of it is named."""
        key = (self._generation_at(when), id(rest))
        found = self._rests.get(key)
        if found is not None and found[0] is rest:
            return list(found[1])
        ids = self.of(rest, when)
        frames = self._tables.frames
        if all(frames[i].symbol is not None for i in ids):
            if len(self._rests) >= MAX_RESTS:
                self._rests.clear()
            self._rests[key] = (rest, tuple(ids))
        return ids

    def memo(self, when: float) -> SuffixMemo:
        """The memo of deep walks for the maps generation of time ``when``."""
        return _kept(self._memos, self._generation_at(when), SuffixMemo)

    def _named_ids(self, when: float) -> dict[int, int]:
        number = self._generation_at(when)
        found = self._named.get(number)
        if found is not None and len(found) > MAX_NAMED_ADDRESSES:
            del self._named[number]
        return _kept(self._named, number, dict)


def _kept(by_generation: dict[int, T], number: int, make: Callable[[], T]) -> T:
    found = by_generation.get(number)
    if found is None:
        if len(by_generation) >= MAX_GENERATIONS:
            del by_generation[min(by_generation)]
        found = by_generation[number] = make()
    return found
