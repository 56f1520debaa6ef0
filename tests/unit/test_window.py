"""A time range of a capture (``capture.window.within``): what is in it, cut where a wait
crosses its edges, its clock from its own start."""

from __future__ import annotations

import pytest

from livesym.capture.window import within
from livesym.errors import UsageError
from livesym.records import IDLE_FLAG, Capture, ProcessStat


def capture(samples: list[tuple[float, int, int, int, int]]) -> Capture:
    return Capture(
        target={"pid": 1}, host={}, sampler={"name": "perf", "rate_hz": 100},
        session={"start": 10.0, "end": 16.0, "errors": []}, maps=(), objects=(), frames=(),
        stacks=((),), threads={7: "main"}, samples=tuple(samples),
        process=(ProcessStat(0.5, 100.0, 1, 1), ProcessStat(3.5, 100.0, 1, 1)),
    )  # fmt: skip


def rows(c: Capture) -> list[tuple[float, int, int, int, int]]:
    return [(round(t, 6), tid, stack, flags, w) for t, tid, stack, flags, w in c.samples]


def test_on_cpu_samples_in_the_range_are_kept_on_its_clock() -> None:
    c = capture([(0.5, 7, 0, 0, 1), (2.0, 7, 0, 0, 1), (2.99, 7, 0, 0, 1), (3.0, 7, 0, 0, 1)])
    got = within(c, 1.0, 3.0)
    assert rows(got) == [(1.0, 7, 0, 0, 1), (1.99, 7, 0, 0, 1)]  # [from, to)
    assert (got.session["start"], got.session["end"]) == (11.0, 13.0)
    assert [p.time for p in got.process] == []  # the stats at 0.5 and 3.5 are outside
    assert [p.time for p in within(c, 3.0, None).process] == [0.5]
    assert within(c, None, None) is c


def test_a_wait_across_an_edge_counts_its_part_inside() -> None:
    # GIVEN a 2 s wait from 0.5 s (200 periods at 100 Hz) and a 0.1 s one from 2.95 s
    c = capture([(0.5, 7, 0, IDLE_FLAG, 200), (2.95, 7, 0, IDLE_FLAG, 10)])
    # THEN from 1.5 s on, the first counts its last second, from the range's start
    assert rows(within(c, 1.5, None)) == [
        (0.0, 7, 0, IDLE_FLAG, 100),
        (1.45, 7, 0, IDLE_FLAG, 10),
    ]
    # ... up to 3.0 s, the second counts its first 0.05 s
    assert rows(within(c, 0.0, 3.0)) == [(0.5, 7, 0, IDLE_FLAG, 200), (2.95, 7, 0, IDLE_FLAG, 5)]
    # ... and a range inside the first wait counts the range's length of it
    assert rows(within(c, 1.0, 1.2)) == [(0.0, 7, 0, IDLE_FLAG, 20)]
    # ... and one after both holds neither
    assert rows(within(c, 4.0, 5.0)) == []


@pytest.mark.parametrize(
    ("start", "end"),
    [(3.0, 1.0), (2.0, 2.0), (-1.0, None), (float("nan"), None), (float("inf"), None)],
)
def test_what_is_not_a_range_is_refused(start: float, end: float | None) -> None:
    with pytest.raises(UsageError, match="not a time range"):
        within(capture([]), start, end)


def test_a_range_that_starts_past_the_capture_s_end_says_how_long_it_is() -> None:
    with pytest.raises(UsageError, match=r"past the capture's end: it is 6\.0 s long"):
        within(capture([(0.5, 7, 0, 0, 1)]), 6.0, None)
    assert rows(within(capture([(0.5, 7, 0, 0, 1)]), 5.9, None)) == []  # inside: empty


def test_the_range_keeps_its_lost_samples_and_its_processes_moments_on_its_clock() -> None:
    import dataclasses

    from livesym.records import ProcessRecord

    # GIVEN samples lost in seconds 0, 2 and 4 (5 in all), a process seen from 1.5 s to 4.5 s
    c = dataclasses.replace(
        capture([]),
        session={"start": 10.0, "end": 16.0, "lost": 5, "lost_at": [[0, 1], [2, 3], [4, 1]]},
        processes=(ProcessRecord(9, "kid", ("kid",), 1, 1.5, 4.5),),
    )
    # THEN the range 1.5-4 s holds the second 2's three, in its own second 0
    got = within(c, 1.5, 4.0)
    assert got.session["lost_at"] == [[0, 3]] and got.session["lost"] == 3
    # ... the second 1 (its start 0.5 s in) is the range's too, from 0.5 s on
    assert within(c, 0.5, 1.0).session["lost_at"] == [[0, 1]]
    # ... and the process's moments are from the range's start
    (kid,) = got.processes
    assert (kid.started, kid.ended) == (0.0, 3.0)
    # A capture whose seconds of loss do not add up to its total keeps the total
    odd = dataclasses.replace(c, session={**c.session, "lost": 9})
    assert within(odd, 1.5, 4.0).session["lost"] == 9
