"""LeafMappings: leaf samples per mapping, with each frame's mapping worked out once.

The reference is the direct computation: each leaf frame looked up through its own
generation's mappings by start address. Generations arrive over time, as in a replay
whose frames are all known up front; a frame whose generation has not come yet counts
once it has.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from livesym.profile.mapping_rows import LeafMappings, ProcessMapping
from livesym.records import FrameRecord, GenerationRecord, MappingRecord


def mapping(start: int, path: str) -> MappingRecord:
    return MappingRecord(start, start + 0x1000, "r-xp", 0, "08:01", 1, path, False)


def frame(fid: int, generation: int, start: int | None) -> FrameRecord:
    where = None if start is None else (start, start + 0x1000, "r-xp", 0)
    return FrameRecord(
        fid, generation, (start or 0) + 0x10, None, None, where, None, None, None, None,
        None, None, None, None, None, None, "", (), (),
    )  # fmt: skip


def direct(
    leaves: dict[int, int], frames: list[FrameRecord], generations: list[GenerationRecord]
) -> dict[ProcessMapping, int]:
    by_generation = {g.number: {m.start: (g.pid, m.key) for m in g.mappings} for g in generations}
    out: dict[ProcessMapping, int] = {}
    for fid, n in leaves.items():
        record = frames[fid]
        if record.mapping is None:
            continue
        key = by_generation.get(record.generation, {}).get(record.mapping[0])
        if key is not None:
            out[key] = out.get(key, 0) + n
    return out


# Three generations: libb is unloaded in generation 2 and libc loaded at its address;
# generation 1 is another process's (the same /exe mapping: counted apart).
GENERATIONS = [
    GenerationRecord(0, 0.0, (mapping(0x1000, "/exe"), mapping(0x5000, "/liba"))),
    GenerationRecord(1, 1.0, (mapping(0x1000, "/exe"), mapping(0x9000, "/libb")), pid=7),
    GenerationRecord(2, 2.0, (mapping(0x1000, "/exe"), mapping(0x9000, "/libc"))),
]
STARTS = (0x1000, 0x5000, 0x9000, 0x7000, None)  # 0x7000: in no generation's maps


@given(
    frame_specs=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(STARTS)), max_size=40),
    steps=st.lists(
        st.tuples(st.integers(0, 3), st.dictionaries(st.integers(0, 39), st.integers(1, 9))),
        max_size=6,
    ),
)
def test_counts_equal_the_direct_lookup_as_generations_arrive(frame_specs, steps) -> None:
    frames: list[FrameRecord] = []
    counter = LeafMappings()
    known = 0
    for more_frames, leaves in steps:
        # Frames are added (a live session) or all there from the start (a replay); the
        # generations come one at a time.
        for generation, start in frame_specs[len(frames) : len(frames) + more_frames * 10]:
            frames.append(frame(len(frames), generation, start))
        known = min(known + 1, len(GENERATIONS))
        generations = GENERATIONS[:known]
        leaves = {fid: n for fid, n in leaves.items() if fid < len(frames)}
        assert counter.count(leaves, frames, generations) == direct(leaves, frames, generations)


def test_a_frame_of_a_generation_not_yet_read_counts_once_it_is() -> None:
    frames = [frame(0, 0, 0x5000), frame(1, 2, 0x9000)]
    counter = LeafMappings()
    leaves = {0: 3, 1: 4}
    assert counter.count(leaves, frames, GENERATIONS[:1]) == {(0, mapping(0x5000, "/liba").key): 3}
    assert counter.count(leaves, frames, GENERATIONS) == {
        (0, mapping(0x5000, "/liba").key): 3,
        (0, mapping(0x9000, "/libc").key): 4,  # not libb, which process 7 had there
    }
