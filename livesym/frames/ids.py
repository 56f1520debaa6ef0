"""Frame ids of a live session's stacks, looked up once where they can be: a deep stack
(a recursion 2,000 frames deep, a compiler's parser) names thousands of addresses per
sample, and at 99 Hz on four such threads naming them one by one took a third of a core.

Per maps generation: the frame id of every named address (a named frame is never named
again later: JIT code without a name yet is looked up each time), the unwinder's memo
of deep walks (``SuffixMemo``: a walk's rest depends on the generation's unwind rules),
the frame ids of each rest that memo gives (the same tuple object each time, held
here so that its id is not reused while kept), and the stack id of each stack ending
in such a rest, by its head and the rest's identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from livesym.frames.table import FrameTable
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
        tables: FrameTable,
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
        self._kept: dict[int, tuple[int, ...]] = {}  # id of a kept rest's ids -> them
        # (head's ids, id of a kept rest's ids, tail's ids) -> (those rest ids, stack id)
        Stack = tuple[tuple[int, ...], int, tuple[int, ...]]
        self._stacks: dict[Stack, tuple[tuple[int, ...], int]] = {}

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

    def of_rest(self, rest: tuple[int, ...], when: float) -> tuple[int, ...]:
        """The frame ids of the call sites of a deep walk's rest that the memo gave:
        named once per maps generation, where every frame of it is named (then the
        same tuple each time: ``stack_id`` knows it by that)."""
        key = (self._generation_at(when), id(rest))
        found = self._rests.get(key)
        if found is not None and found[0] is rest:
            return found[1]
        ids = tuple(self.of(rest, when))
        frames = self._tables.frames
        if all(frames[i].symbol is not None for i in ids):
            if len(self._rests) >= MAX_RESTS:
                self._rests.clear()
                self._kept.clear()
            self._rests[key] = (rest, ids)
            self._kept[id(ids)] = ids
        return ids

    def stack_id(self, head: list[int], rest: tuple[int, ...], tail: list[int]) -> int:
        """The id of the stack ``head + rest + tail``: where ``rest`` is a kept rest's
        ids (``of_rest``), found by the head, the rest's identity and the tail; a
        2,000-frame stack hashed and compared whole took 13 us a sample."""
        tables = self._tables
        if not rest:
            return tables.intern_stack((*head, *tail))
        key = (tuple(head), id(rest), tuple(tail))
        found = self._stacks.get(key)
        if found is not None and found[0] is rest:  # the key's id is this rest's
            return found[1]
        stack_id = tables.intern_stack((*head, *rest, *tail))
        if self._kept.get(id(rest)) is rest:
            if len(self._stacks) >= MAX_RESTS:
                self._stacks.clear()
            self._stacks[key] = (rest, stack_id)
        return stack_id

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
