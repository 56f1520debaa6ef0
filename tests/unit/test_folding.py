"""A live session's old samples folded into buckets (``engine.folding``,
``profile.buckets``, ``SampleLog.fold``): memory that stops growing, and counts that
stay what they were.

Each test keeps every sample twice: in tables or a log that fold as they go, and in
plain lists that never do. Whatever the folds did, the counts by thread, stack and
class must be the same; those by second the same where rows were folded by the second;
the rows a recording has not written yet, and those counted since a reset, untouched."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.engine import folding
from livesym.engine.tables import SessionTables
from livesym.profile.ranges import SampleLog, StackColumns, range_counts
from livesym.records import TimeMode

START = 5000.0
Row = tuple[float, int, int, int, int]  # (moment, tid, stack, flags, weight)


def _rows(rng: random.Random, t0: float, seconds: float, rate: int) -> list[Row]:
    """Samples of three threads on a few stacks, nearly in time order (a late one now
    and then, as per-CPU buffers deliver them), some off the CPU with long weights."""
    rows = []
    t = t0
    while t < t0 + seconds:
        t += rng.expovariate(rate)
        late = rng.random() < 0.05
        off = rng.random() < 0.2
        rows.append((t - (rng.uniform(0, 0.8) if late else 0.0), rng.choice((11, 12, 13)),
                     rng.randrange(0, 6), (1 | rng.choice((0, 2, 4))) if off else 0,
                     rng.randrange(2, 500) if off else 1))  # fmt: skip
    return rows


def _by_key(rows: list[Row]) -> Counter[tuple[int, int, int]]:
    out: Counter[tuple[int, int, int]] = Counter()
    for _, tid, stack, flags, weight in rows:
        out[(tid, stack, flags)] += weight
    return out


def _table_rows(t: SessionTables, first: int = 0) -> list[Row]:
    s = t.samples
    return [(s.times[i], s.tids[i], s.stack_of[i], s.flags[i], s.weights[i])
            for i in range(first, len(s.flags))]  # fmt: skip


def _per_second(rows: list[Row], tid: int) -> Counter[int]:
    out: Counter[int] = Counter()
    for when, t, _, _, weight in rows:
        if t == tid:
            out[int(when - START)] += weight
    return out


@pytest.mark.parametrize("seed", range(3))
def test_folded_tables_count_what_the_samples_did_and_keep_what_is_not_written(seed):
    rng = random.Random(seed)
    tables, plain = SessionTables(), []
    # Every sample's count, and those since the last reset, by (thread, stack, flags)
    everything, since_reset = Counter[tuple[int, int, int]](), Counter[tuple[int, int, int]]()
    written = 0  # what a recording wrote
    now = START
    for step in range(90):  # 90 steps of 10 s: a quarter of an hour, folded twice over
        batch = _rows(rng, now, 10.0, rate=40)
        if rng.random() < 0.1:
            tables.count_from_next()
            since_reset = Counter()
        for when, tid, stack, flags, weight in batch:
            tables.keep(when, tid, stack, flags, weight, START)
        plain += batch
        everything.update(_by_key(batch))
        since_reset.update(_by_key(batch))
        now += 10.0
        written = rng.randrange(written, len(plain) + 1)  # a recording lags, now and then
        tables.fold(now, START, upto=written)
        # THEN nothing a recording has not written was touched: the next chunk takes it
        assert tables.stored() == len(plain)
        first = tables.folds.row(written)
        assert _table_rows(tables, first) == plain[written:]
        if step % 6 and step != 89:
            continue
        # ... every sample is counted, once, by thread, stack and class
        rows = _table_rows(tables)
        assert _by_key(rows) == everything
        # ... those counted since the reset too (a recount after a rename reads these)
        assert _by_key(_table_rows(tables, tables.folds.counted_start())) == since_reset
    # ... and the rows shrank: a minute of 2,400 samples became at most 3 threads x 6
    # stacks x 4 classes once it was older than COARSE_AFTER
    assert len(rows) < len(plain) * 0.9
    old = [r for r in rows if r[0] < now - folding.COARSE_AFTER - 10]
    minutes = int((now - folding.COARSE_AFTER - START) / folding.COARSE_BUCKET) + 1
    assert 0 < len(old) <= 3 * 6 * 4 * minutes < len(plain) * 0.05
    # ... and a thread's timeline keeps its seconds where they were folded by the second
    fine_from = now - folding.COARSE_AFTER + folding.COARSE_BUCKET
    fine_to = now - folding.DETAIL_SECONDS - 1
    folded_seconds = _per_second(rows, 12)
    plain_seconds = _per_second(plain, 12)
    for second in range(int(fine_from - START), int(fine_to - START)):
        assert folded_seconds[second] == plain_seconds[second], second


def test_the_increment_after_a_fold_holds_exactly_the_rows_not_written():
    rng = random.Random(9)
    tables = SessionTables()
    rows = _rows(rng, START, 100.0, rate=50)
    for row in rows:
        tables.keep(row[0], row[1], row[2], row[3], row[4], START)
    from livesym.capture.chunks import Mark

    inc = tables.increment(Mark(), START + 100, "live")
    half = len(rows) // 2
    mark = Mark(samples=half, stacks=inc.mark.stacks, frames=inc.mark.frames)
    assert tables.fold(START + 100, START, upto=half)
    later = tables.increment(mark, START + 100, "live")
    assert list(later.part.times) == [r[0] for r in rows[half:]]
    assert later.mark.samples == len(rows)


def _log_of(rows: list[Row]) -> SampleLog:
    log = SampleLog()
    for when, tid, stack, flags, weight in rows:
        log.moments.append(when)
        log.stacks.append(stack)
        log.threads.append(log.thread_index(tid))
        log.splits.append(0 if not flags & 1 else 1 + (flags >> 1))
        log.weights.append(weight)
    return log


def _table() -> StackColumns:
    columns = StackColumns()
    for sid in range(6):
        columns.add(sid, (sid, 6 + sid % 2), sid, None)
    return columns


def test_a_folded_log_counts_ranges_on_its_buckets_as_the_samples_did():
    rng = random.Random(3)
    rows = _rows(rng, START, 1200.0, rate=30)
    folded, plain = _log_of(rows), _log_of(rows)
    now = START + 1200.0
    assert folded.fold(now - 10, now - 600, START, 1.0, 60.0)  # by the second
    assert folded.fold(now - 10, now - 600, START, 1.0, 60.0)  # and the oldest by the minute
    assert not folded.fold(now - 10, now - 600, START, 1.0, 60.0)  # (nothing left to fold)
    assert len(folded) < len(plain) / 2
    table = _table().table(8)
    ranges = [(0, 60), (120, 600), (600, 601), (601, 1187), (1190, 1200), (0, 1200)]
    for lo, hi in ranges:
        for mode in (TimeMode.CPU, TimeMode.WALL, TimeMode.OFF_CPU):
            args = (table, START + lo, START + hi, mode)
            a = range_counts(folded, *args, split_states=4)
            b = range_counts(plain, *args, split_states=4)
            same = (a.stacks, a.fself, a.ftotal, a.splits) == (
                b.stacks,
                b.fself,
                b.ftotal,
                b.splits,
            )
            assert same, (lo, hi, mode)


def test_a_flight_recorder_forgets_what_is_older_than_it_keeps_and_counts_the_rest():
    rng = random.Random(11)
    tables, plain = SessionTables(), []
    now, reset_at = START, 0
    for step in range(40):
        batch = _rows(rng, now, 5.0, rate=40)
        if step in (7, 23):
            tables.count_from_next()
            reset_at = len(plain)
        for when, tid, stack, flags, weight in batch:
            tables.keep(when, tid, stack, flags, weight, START)
        plain += batch
        now += 5.0
        tables.forget(now - 30.0)  # the last 30 s kept ...
        tables.fold(now, START, detail=10.0)  # ... and folded where older than 10 s
        rows = _table_rows(tables)
        # THEN what is kept is the samples of the last 30 s (less the late ones that
        # came among the newer), counted as they were
        kept = [r for r in plain if r[0] >= rows[0][0] - 1.0]
        assert all(r[0] >= now - 31.0 for r in rows)
        newest = [r for r in plain if r[0] >= now - 30.0 + 1.0]
        assert sum(r[4] for r in rows) >= sum(r[4] for r in newest)
        assert sum(r[4] for r in rows) <= sum(r[4] for r in kept)
        # ... and those counted since the reset are the kept ones after it
        counted = _by_key(_table_rows(tables, tables.folds.counted_start()))
        after = _by_key([r for r in plain[reset_at:] if r[0] >= rows[0][0] - 1.0])
        assert sum(counted.values()) <= sum(after.values())
        assert all(counted[k] <= after[k] for k in counted)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.floats(0, 30),
            st.integers(1, 4),
            st.integers(0, 6),
            st.integers(0, 3),
            st.integers(1, 50),
        ),
        max_size=120,
    ),
    bucket=st.sampled_from([1.0, 60.0, 0.5]),
)
def test_folding_rows_sums_each_bucket_thread_stack_and_class_at_its_first_moment(rows, bucket):
    import numpy as np

    from livesym.profile.buckets import folded

    cols = [np.array([r[i] for r in rows], dtype=np.float64 if i == 0 else np.int64)
            for i in range(5)]  # fmt: skip
    out = folded(*cols, 0.0, bucket)  # type: ignore[arg-type]
    expected: dict[tuple[int, int, int, int], list[float]] = {}
    for t, thread, stack, cls, weight in rows:
        key = (int(np.floor(t / bucket)), thread, stack, cls)
        first, total = expected.get(key, [np.inf, 0])
        expected[key] = [min(first, t), total + weight]
    got = {
        (int(np.floor(t / bucket)), int(th), int(sk), int(c)): [float(t), int(w)]
        for t, th, sk, c, w in zip(*out, strict=True)
    }
    assert got == expected
    assert len(out[0]) == len(expected)  # one row a key
    assert list(out[0]) == sorted(out[0])  # in time order
