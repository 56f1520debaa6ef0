"""A session's samples encoded once each across a recording's rewrites
(``capture.writer.SampleRows``): every write holds exactly the rows of its snapshot,
as the document's plain rows are, whatever order the snapshots come in."""

from __future__ import annotations

import random
from array import array

import orjson

from livesym.capture.writer import SampleRows, document, sample_row

START = 1234.5


def _tables(
    n: int, rng: random.Random
) -> tuple[array[float], array[int], array[int], array[int], array[int]]:
    times = array("d", sorted(START + rng.uniform(0, 60) for _ in range(n)))
    # Weights: mostly 1 (on-CPU samples, written without one), now and then an
    # off-CPU interval's length.
    return (times, array("q", (rng.randrange(1, 1 << 22) for _ in range(n))),
            array("q", (rng.randrange(0, 500) for _ in range(n))),
            array("q", (rng.randrange(0, 8) for _ in range(n))),
            array("q", (1 if rng.random() < 0.7 else rng.randrange(2, 1 << 20)
                        for _ in range(n))))  # fmt: skip


def _plain(
    tables: tuple[array[float], array[int], array[int], array[int], array[int]], n: int
) -> object:
    """The rows as the document makes them from a list of samples."""
    times, tids, stacks, flags, weights = tables
    samples = [sample_row(times[i] - START, tids[i], stacks[i], flags[i], weights[i])
               for i in range(n)]  # fmt: skip
    doc = document(created="", version="", target={}, host={}, sampler={}, session={}, maps=[],
                   objects=[], frames=[], stacks=[], threads={}, samples=samples, process=[],
                   processes=[], thread_pids={})  # fmt: skip
    return orjson.loads(orjson.dumps(doc["samples"]))


def _encoded(rows: SampleRows, tables: tuple[array[float], ...], n: int, start: float) -> object:
    times, tids, stacks, flags, weights = (t[:n] for t in tables)
    fragment = rows.fragment(times, tids, stacks, flags, weights, start)
    return orjson.loads(orjson.dumps({"s": fragment}))["s"]


def test_each_write_holds_its_snapshot_s_rows_however_the_snapshots_come():
    rng = random.Random(27)
    tables = _tables(3000, rng)
    rows = SampleRows()
    assert _encoded(rows, tables, 0, START) == []
    sizes = [1, 1, 5, 400, 400, 1000, 999, 2, 1001, 3000, 2999, 3000]  # older ones too
    for n in sizes:
        assert _encoded(rows, tables, n, START) == _plain(tables, n), n


def test_another_session_s_tables_start_again():
    rng = random.Random(28)
    first, second = _tables(200, rng), _tables(150, rng)
    rows = SampleRows()
    assert _encoded(rows, first, 200, START) == _plain(first, 200)
    shifted = _encoded(rows, second, 150, START - 1.0)
    assert shifted == [[round(t + 1.0, 6), *rest] for t, *rest in _plain(second, 150)]  # type: ignore[attr-defined]
