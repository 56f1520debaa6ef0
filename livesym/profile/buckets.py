"""Old samples folded into time buckets: what keeps a long session's memory flat.

A session keeps each sample as a row (a moment, a thread, a stack, a class byte: the
flags or the split state, and a weight). Rows older than a horizon are folded: those of
one bucket of time with the same thread, stack and class become one row, its weight
their sum and its moment the earliest of theirs (so it stays in the bucket: a
timeline's second, a range's edge within a bucket). A steady target makes the same few
stacks second after second, so a second of 4,000 samples becomes some dozens of rows,
and a minute of them, later, as many again.

What a fold keeps: every count by thread, stack, class and bucket, so every view of
the whole session, of a thread, a mode or a range whose edges fall on bucket edges,
counts what it did before. What it gives up: where in its bucket each sample was.
The rows come out in time order (the readers' bisects count on nearly that).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Columns = tuple["npt.NDArray[np.float64]", "npt.NDArray[np.int64]", "npt.NDArray[np.int64]",
                "npt.NDArray[np.int64]", "npt.NDArray[np.int64]"]  # fmt: skip


def folded(
    times: npt.NDArray[np.float64],
    threads: npt.NDArray[np.int64],
    stacks: npt.NDArray[np.int64],
    classes: npt.NDArray[np.int64],
    weights: npt.NDArray[np.int64],
    origin: float,
    bucket: float,
) -> Columns:
    """The rows folded by (bucket of ``bucket`` seconds from ``origin``, thread, stack,
    class): (moments, threads, stacks, classes, weights), ordered by moment."""
    import numpy as np

    if not len(times):
        return times, threads, stacks, classes, weights
    which = np.floor((times - origin) / bucket).astype(np.int64)
    # Rows of one key made neighbours (sorted by bucket, thread, stack, class), then
    # summed run by run: np.unique over rows and ufunc.at took 1.1 ms for 600 rows, a
    # recording's two folds every 2 s a fifth of its event loop; this takes 60 us.
    order = np.lexsort((classes, stacks, threads, which))
    w, th, st, cl = which[order], threads[order], stacks[order], classes[order]
    starts = np.empty(len(order), dtype=bool)
    starts[0] = True
    starts[1:] = (w[1:] != w[:-1]) | (th[1:] != th[:-1]) | (st[1:] != st[:-1]) | (cl[1:] != cl[:-1])
    at = np.flatnonzero(starts)
    summed = np.add.reduceat(weights[order], at)
    first = np.minimum.reduceat(times[order], at)
    by_time = np.argsort(first, kind="stable")
    return (first[by_time], th[at][by_time], st[at][by_time], cl[at][by_time],
            summed[by_time])  # fmt: skip


def fold_front(
    cols: Columns,
    *,
    coarse: int,
    old: int,
    fine_end: int,
    coarse_end: int,
    split: int | None,
    origin: float,
    fine: float,
    coarse_bucket: float,
) -> tuple[Columns, int, int, int | None]:
    """Rows laid out ``[coarse rows][fine rows][detail rows]`` (``coarse`` and ``old``
    their ends) with the detail rows up to ``fine_end`` folded into ``fine`` buckets and
    the fine rows up to ``coarse_end`` into ``coarse_bucket`` ones: the new columns, the
    new ends of the coarse and of all folded rows, and where the row ``split`` went (a
    boundary kept: rows before it and after it are never folded together)."""
    import numpy as np

    bounds = sorted({0, coarse, coarse_end, old, fine_end, len(cols[0])})
    if split is not None and split not in bounds:
        bounds = sorted({*bounds, split})
    parts: list[Columns] = []
    moved: dict[int, int] = {}
    at = 0
    for lo, hi in itertools.pairwise(bounds):
        moved[lo] = at
        part = _slice(cols, lo, hi)
        if coarse <= lo < coarse_end:
            part = folded(*part, origin, coarse_bucket)
        elif old <= lo < fine_end:
            part = folded(*part, origin, fine)
        parts.append(part)
        at += len(part[0])
    moved[bounds[-1]] = at
    out = tuple(np.concatenate([p[i] for p in parts]) for i in range(5))
    new_split = None if split is None else moved[split]
    return out, moved[coarse_end], moved[fine_end], new_split  # type: ignore[return-value]


def first_at(
    times: npt.NDArray[np.float64], lo: int, before: float, hi: int, origin: float, bucket: float
) -> int:
    """The first row from ``lo`` (up to ``hi``) at or after the start of the bucket that
    holds ``before``: the rows before it are the old ones, whole buckets of them (each
    bucket is folded once, all of it; rows come nearly in time order, and a late one
    stays as it is)."""
    import math

    import numpy as np

    before = origin + math.floor((before - origin) / bucket) * bucket
    if hi <= lo:
        return lo
    newer = np.flatnonzero(times[lo:hi] >= before)
    return lo + int(newer[0]) if len(newer) else hi


def _slice(cols: Columns, lo: int, hi: int) -> Columns:
    t, a, b, c, w = cols
    return t[lo:hi], a[lo:hi], b[lo:hi], c[lo:hi], w[lo:hi]
