"""A live session's stored samples, folded as they age so its memory stays flat.

The session's tables keep a row a sample (``SampleArrays``) for what needs rows: the
capture's chunks, counting again when frames are renamed, a thread's timeline, the hot
addresses of a range. Kept whole, that is 33 bytes a sample, 130 KB a second at 999 Hz
on four threads: half a gigabyte an hour. So rows older than ``DETAIL_SECONDS`` are
folded into one-second buckets, and those older than ``COARSE_AFTER`` into
``COARSE_BUCKET`` ones (``profile.buckets``): the rows are then ``[folded][detail]``.

Rows are found by their *absolute* index (samples stored before them, ever): a
recording's chunk mark and the reset's first counted sample are absolute, and detail
rows keep theirs across folds (only the front is folded). Rows are never folded before
the recording wrote them. The one boundary inside the folded rows that matters, the
first sample counted since the last reset, is kept a row boundary: a fold splits there,
and ``Folds.counted_row`` says where it went.

Folding runs on the event loop between drains, when the symbolizing worker is not
appending (``Engine.run``), as every other reader of these rows does.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from livesym.profile.buckets import Columns, first_at, fold_front
from livesym.profile.stack_counts import SampleArrays

DETAIL_SECONDS = 10.0  # rows this recent stay a sample each (the recent window is 5 s)
FINE_BUCKET = 1.0  # seconds: the timeline's resolution
COARSE_AFTER = 600.0  # rows older than this are folded again, coarser
COARSE_BUCKET = 60.0


@dataclass
class Folds:
    """Where a session's rows stand: ``old`` folded rows at the front, ``coarse`` of
    them folded coarsely; ``detail_base`` the absolute index of the first detail row;
    ``counted_from`` the absolute index of the first sample counted since the reset and,
    once that was folded, ``counted_row``: the row its samples begin at."""

    old: int = 0
    coarse: int = 0
    detail_base: int = 0
    counted_from: int = 0
    counted_row: int = 0

    def total(self, rows: int) -> int:
        """Samples stored ever, of ``rows`` rows now."""
        return self.detail_base + rows - self.old

    def row(self, absolute: int) -> int:
        """The row of a sample not folded (absolute index at or past ``detail_base``)."""
        return self.old + absolute - self.detail_base

    def counted_start(self) -> int:
        """The first row counted since the reset."""
        if self.counted_from >= self.detail_base:
            return self.row(self.counted_from)
        return self.counted_row

    def reset(self, rows: int) -> None:
        """Samples are counted from the next one stored."""
        self.counted_from = self.total(rows)


def fold(
    s: SampleArrays, f: Folds, *, now: float, start: float, upto: int, detail: float
) -> SampleArrays | None:
    """``s`` with its rows older than the horizons (``detail`` seconds, COARSE_AFTER)
    folded, before the absolute index ``upto`` (what a recording wrote); ``f`` moved
    with them. None when nothing was old enough."""
    t = s.times
    if not (f.old < len(t) and t[f.old] < now - detail - FINE_BUCKET) and not (
        f.coarse < f.old and t[f.coarse] < now - COARSE_AFTER - COARSE_BUCKET
    ):
        return None  # (nothing aged yet: a short session never imports numpy)
    import numpy as np

    times = np.frombuffer(s.times, dtype=np.float64)
    written = min(f.row(upto), len(times))
    fine_end = first_at(times, f.old, now - detail, written, start, FINE_BUCKET)
    coarse_end = first_at(times, f.coarse, now - COARSE_AFTER, f.old, start, COARSE_BUCKET)
    if fine_end <= f.old and coarse_end <= f.coarse:
        return None
    cols = (times, np.frombuffer(s.tids, dtype=np.int64),
            np.frombuffer(s.stack_of, dtype=np.int64),
            np.frombuffer(s.flags, dtype=np.int8).astype(np.int64),
            np.frombuffer(s.weights, dtype=np.int64))  # fmt: skip
    out, coarse, old, counted = fold_front(
        cols, coarse=f.coarse, old=f.old, fine_end=fine_end, coarse_end=coarse_end,
        split=f.counted_start(), origin=start, fine=FINE_BUCKET, coarse_bucket=COARSE_BUCKET,
    )  # fmt: skip
    f.detail_base += fine_end - f.old
    f.coarse, f.old = coarse, old
    assert counted is not None
    f.counted_row = counted  # (read only once the count's start is folded)
    return _arrays(out)


def forget(s: SampleArrays, f: Folds, before: float) -> SampleArrays | None:
    """``s`` without its rows older than ``before`` (a flight recorder keeps its last
    seconds only; never while a recording appends: its chunks are absolute), ``f`` moved
    with them. None when none were."""
    import numpy as np

    times = np.frombuffer(s.times, dtype=np.float64)
    newer = np.flatnonzero(times >= before)
    k = int(newer[0]) if len(newer) else len(times)
    if k == 0:
        return None
    counted = max(0, f.counted_start() - k)
    if k <= f.old:
        f.old, f.coarse = f.old - k, max(0, f.coarse - k)
    else:
        f.detail_base += k - f.old
        f.old = f.coarse = 0
    f.counted_row = counted  # (read only where the count's start is no longer a detail row)
    return SampleArrays(s.times[k:], s.tids[k:], s.stack_of[k:], s.weights[k:], s.flags[k:])


def _arrays(out: Columns) -> SampleArrays:
    import numpy as np

    t, tids, stacks, flags, weights = out
    arrays = SampleArrays(array("d"), array("q"), array("q"), array("q"), array("b"))
    arrays.times.frombytes(t.astype(np.float64).tobytes())
    arrays.tids.frombytes(tids.astype(np.int64).tobytes())
    arrays.stack_of.frombytes(stacks.astype(np.int64).tobytes())
    arrays.weights.frombytes(weights.astype(np.int64).tobytes())
    arrays.flags.frombytes(flags.astype(np.int8).tobytes())
    return arrays
