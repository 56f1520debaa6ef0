"""Views of a time range (``Profile.view(between=...)``, profile/ranges.py): the same
view a profile of the range's samples alone gives, whatever the filters and the time,
for samples that come out of time order; and a log that forgets its older half past its
bound, saying from when."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.capture.window import _cut
from livesym.profile import Profile, ProfileView, StackSample, ranges
from livesym.records import IDLE_FLAG, Frame, TimeMode, WaitState

FRAMES = [Frame(f"f{i}", f"f{i}", f"/lib/m{i % 3}.so") for i in range(6)]
STACKS = [(FRAMES[0], FRAMES[1]), (FRAMES[2], FRAMES[1]), (FRAMES[3],), (FRAMES[1], FRAMES[4],
          FRAMES[1]), (FRAMES[5], FRAMES[2], FRAMES[0])]  # fmt: skip
SLEEPING = WaitState.SLEEPING.flags()


def _sample(t: float, tid: int, stack: int, idle: bool, weight: int) -> StackSample:
    return StackSample(time=t, tid=tid, thread_name=f"t{tid}", frames=STACKS[stack],
                       idle=idle, weight=weight, pid=100 + tid % 2,
                       flags=SLEEPING if idle else 0)  # fmt: skip


def _shape(view: ProfileView) -> dict[str, Any]:
    def tree(node: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple[int, int]]:
        out = {}
        todo = [(node, path)]
        while todo:
            n, p = todo.pop()
            if n is None:
                continue
            p = (*p, n.frame.label)
            out[p] = (n.total_samples, n.self_samples)
            todo.extend((c, p) for c in n.children)
        return out

    return {
        "samples": view.samples,
        "functions": sorted(
            (r.frame.label, r.self_samples, r.total_samples) for r in view.functions.unordered()
        ),
        "threads": sorted(
            (r.tid, r.samples, r.top_function.label if r.top_function else None, r.split)
            for r in view.threads
        ),
        "modules": sorted((r.module, r.self_samples) for r in view.modules),
        "processes": sorted((r.pid, r.samples) for r in view.processes),
        "tree": tree(view.tree),
    }


samples_strategy = st.lists(
    st.tuples(st.floats(0, 10), st.integers(1, 4), st.integers(0, len(STACKS) - 1),
              st.booleans(), st.integers(1, 5)),
    max_size=120,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    rows=samples_strategy,
    start=st.floats(0, 10),
    length=st.floats(0.01, 10),
    mode=st.sampled_from(list(TimeMode)),
    thread=st.none() | st.integers(1, 4),
    module=st.none() | st.sampled_from(["/lib/m0.so", "/lib/m1.so", "/lib/nowhere.so"]),
    process=st.none() | st.sampled_from([100, 101]),
    period=st.sampled_from([0.0, 0.1, 0.37]),
)
def test_a_range_s_view_is_the_view_of_its_samples_alone(
    rows: list[tuple[float, int, int, bool, int]], start: float, length: float,
    mode: TimeMode, thread: int | None, module: str | None, process: int | None,
    period: float,
) -> None:  # fmt: skip
    # GIVEN samples in no particular time order, counted in batches as they come
    whole, alone = Profile(), Profile()
    samples = [_sample(*row) for row in rows]
    for i in range(0, len(samples), 7):
        whole.add(samples[i : i + 7])
    end = start + length
    # ... and a profile of the range's samples alone, a wait cut to its part inside as
    # capture.window cuts it (where the period is known)
    alone.add(kept for s in samples if (kept := _inside(s, start, end, period)) is not None)
    # WHEN the range is viewed, with the filters
    got = whole.view(between=(start, end), mode=mode, thread=thread, module=module,
                     process=process, period=period)  # fmt: skip
    want = alone.view(mode=mode, thread=thread, module=module, process=process)
    # THEN it is the view of those samples alone
    assert _shape(got) == _shape(want)


def _inside(s: StackSample, start: float, end: float, period: float) -> StackSample | None:
    row = _cut((s.time, s.tid, 0, IDLE_FLAG if s.idle else 0, s.weight), start, end, period)
    if row is None:
        return None
    return dataclasses.replace(s, weight=row[4])


def test_every_sample_of_a_range_counts_whatever_its_batch(monkeypatch: Any) -> None:
    profile = Profile()
    profile.add([_sample(0.5, 1, 0, False, 1), _sample(1.5, 1, 1, False, 1)])
    profile.add([_sample(1.0, 2, 2, True, 3)])  # an earlier moment, in a later batch
    view = profile.view(between=(0.9, 1.6), mode=TimeMode.WALL)
    assert view.samples == 4 and {r.tid for r in view.threads} == {1, 2}
    assert profile.view(between=(5.0, 6.0)).samples == 0


def test_past_its_bound_the_log_forgets_its_older_half_and_says_from_when(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(ranges, "MAX_SAMPLES", 10)
    profile = Profile()
    profile.add([_sample(float(t), 1, t % len(STACKS), False, 1) for t in range(10)])
    assert profile.log.since == 4.0  # moments 0-4 forgotten (the older half)
    assert profile.view(between=(0.0, 100.0)).samples == 5
    assert profile.view().samples == 10  # the whole session's counts keep every one


def test_rows_logged_by_columns_make_the_ranges_samples_added_one_by_one_make() -> None:
    # GIVEN rows of a replay (times from a start, stack ids of the caller's, flags), and
    # the same samples added one by one with their moments
    start = 1000.0
    rows = [(0.5 * i, 1 + i % 3, i % len(STACKS), SLEEPING if i % 4 == 0 else 0, 1 + i % 2)
            for i in range(40)]  # fmt: skip
    one_by_one, grouped = Profile(), Profile()
    one_by_one.add(_sample(start + t, tid, sid, bool(f), w) for t, tid, sid, f, w in rows)
    grouped.add((_sample(start, tid, sid, bool(f), w) for t, tid, sid, f, w in rows),
                grouped=True)  # fmt: skip
    grouped.log_rows(rows, start, lambda sid: STACKS[sid])
    # THEN every range is the same on both
    for between in ((start, start + 5.0), (start + 3.2, start + 17.9), (0.0, 1e9)):
        for mode in TimeMode:
            a = one_by_one.view(between=between, mode=mode)
            b = grouped.view(between=between, mode=mode)
            assert _shape(a) == _shape(b), (between, mode)
