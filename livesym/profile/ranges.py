"""Every counted sample's moment, kept for views of a time range (the dashboard's
timeline; ``Profile.view(between=...)``), and the counting of one range.

``SampleLog`` keeps five columns, appended as samples are counted: the moment, the stack
id, the thread (as a dense index), its split state (0 on a CPU, 1 + ``WaitState``) and
the weight: 21 bytes a sample in ``array`` columns, where a tuple a sample took about 100.
It keeps at most ``MAX_SAMPLES``; past that the older half is forgotten, and ``since``
says from when ranges can be asked.

``range_counts`` counts a range with numpy: which samples fall in it (a mask over the
moments: samples come nearly, not exactly, in time order), their weight per stack
(``bincount``), per function (the stacks' distinct frames, flattened once as stacks are
made, weighed by their stacks' counts), and per thread and leaf. A million samples take
tens of milliseconds where a Python loop over them took about half a second (bench/
ranges.py). numpy is imported here alone, on the first range asked for.
"""

from __future__ import annotations

import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from livesym.profile.buckets import first_at, fold_front
from livesym.records import TimeMode

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MAX_SAMPLES = 1 << 23  # about 176 MB of columns; the older half goes past it
DENSE_BINS = 1 << 23  # (thread, leaf) pairs counted by bincount up to this many bins


class SampleLog:
    """The columns of every sample counted since ``since`` (see the module)."""

    __slots__ = ("_tid_index", "coarse", "moments", "old", "since", "splits", "stacks",
                 "threads", "tids", "weights")  # fmt: skip

    def __init__(self) -> None:
        self.moments = array.array("d")
        self.stacks = array.array("i")
        self.threads = array.array("i")  # dense thread index: ``tids[i]`` is its tid
        self.splits = array.array("b")
        self.weights = array.array("i")
        self.tids: list[int] = []
        self._tid_index: dict[int, int] = {}
        self.since = float("-inf")  # moments before it were forgotten (MAX_SAMPLES)
        # Rows at the front folded into buckets as they aged (``fold``), and of them
        # those folded coarsely.
        self.old = 0
        self.coarse = 0

    def __len__(self) -> int:
        return len(self.moments)

    def thread_index(self, tid: int) -> int:
        index = self._tid_index.get(tid)
        if index is None:
            index = self._tid_index[tid] = len(self.tids)
            self.tids.append(tid)
        return index

    def trim(self) -> None:
        """Forget the older half once the log holds MAX_SAMPLES (called between batches)."""
        if len(self.moments) < MAX_SAMPLES:
            return
        half = len(self.moments) // 2
        self.since = max(self.moments[:half])
        for column in (self.moments, self.stacks, self.threads, self.splits, self.weights):
            del column[:half]
        self.old, self.coarse = max(0, self.old - half), max(0, self.coarse - half)

    def forget(self, before: float) -> None:
        """Forget the rows older than ``before`` (a flight recorder's last seconds)."""
        k = 0
        while k < len(self.moments) and self.moments[k] < before:
            k += 1
        if k:
            self.since = max(self.since, before)
            for column in (self.moments, self.stacks, self.threads, self.splits, self.weights):
                del column[:k]
            self.old, self.coarse = max(0, self.old - k), max(0, self.coarse - k)

    def fold(self, fine_before: float, coarse_before: float, origin: float,
             fine: float, coarse: float) -> bool:  # fmt: skip
        """Fold the rows older than ``fine_before`` into ``fine`` buckets (from
        ``origin``), and folded ones older than ``coarse_before`` into ``coarse`` ones
        (``profile.buckets``); whether any were."""
        m = self.moments
        if not (self.old < len(m) and m[self.old] < fine_before - fine) and not (
            self.coarse < self.old and m[self.coarse] < coarse_before - coarse
        ):
            return False  # (nothing aged yet: a short session never imports numpy)
        import numpy as np

        moments = np.frombuffer(self.moments, dtype=np.float64)
        fine_end = first_at(moments, self.old, fine_before, len(moments), origin, fine)
        coarse_end = first_at(moments, self.coarse, coarse_before, self.old, origin, coarse)
        if fine_end <= self.old and coarse_end <= self.coarse:
            return False
        cols = (moments, np.frombuffer(self.threads, dtype=np.int32).astype(np.int64),
                np.frombuffer(self.stacks, dtype=np.int32).astype(np.int64),
                np.frombuffer(self.splits, dtype=np.int8).astype(np.int64),
                np.frombuffer(self.weights, dtype=np.int32).astype(np.int64))  # fmt: skip
        out, self.coarse, self.old, _ = fold_front(
            cols, coarse=self.coarse, old=self.old, fine_end=fine_end, coarse_end=coarse_end,
            split=None, origin=origin, fine=fine, coarse_bucket=coarse,
        )  # fmt: skip
        t, threads, stacks, splits, weights = out
        self.moments = array.array("d", t.astype(np.float64).tobytes())
        self.threads = array.array("i", threads.astype(np.int32).tobytes())
        self.stacks = array.array("i", stacks.astype(np.int32).tobytes())
        self.splits = array.array("b", splits.astype(np.int8).tobytes())
        weights = np.minimum(weights, (1 << 31) - 1)  # (a bucket's sum, in int32)
        self.weights = array.array("i", weights.astype(np.int32).tobytes())
        return True

    def add_rows(
        self, rows: Sequence[tuple[float, int, int, int, int]], start: float,
        stack_id: Callable[[int], int], state_of: Callable[[int], int],
    ) -> None:  # fmt: skip
        """Rows of (time from ``start``, tid, a stack id of the caller's, flags, weight),
        with the profile's stack id and split state of each asked once per value: by
        columns, with numpy (a replay logs a million rows at once)."""
        import numpy as np

        if not rows:
            return

        def column(i: int, dtype: type) -> npt.NDArray[Any]:
            return np.fromiter(map(itemgetter(i), rows), dtype=dtype, count=len(rows))

        self.moments.frombytes((column(0, np.float64) + start).tobytes())
        self.threads.frombytes(_mapped(column(1, np.int64), self.thread_index).tobytes())
        self.stacks.frombytes(_mapped(column(2, np.int64), stack_id).tobytes())
        self.splits.frombytes(_mapped(column(3, np.int64), state_of).astype(np.int8).tobytes())
        self.weights.frombytes(column(4, np.int32).tobytes())
        self.trim()


# A thread's samples (weight) and the frame ids of its most sampled leaves (ties all).
ThreadLeaves = tuple[int, list[int]]


@dataclass(frozen=True)
class RangeCounts:
    """A range's samples, counted: per stack, per function (self and total), per thread
    and leaf function, and per thread in each split state."""

    stacks: dict[int, int]
    fself: list[int]
    ftotal: list[int]
    threads: dict[int, ThreadLeaves]  # tid -> its weight and its most weighed leaves
    splits: dict[int, list[int]]  # tid -> weight per split state


@dataclass(frozen=True)
class StackTable:
    """What the profile knows of its stacks, as columns: each stack's leaf and module
    index, and each (stack, distinct frame) pair flattened."""

    leaf: array.array[int]
    module: array.array[int]
    flat_stack: array.array[int]
    flat_frame: array.array[int]
    frames: int  # frame ids are below it


class StackColumns:
    """Each stack's leaf, leaf module and distinct frames as columns, appended as the
    profile makes its stacks (what ``range_counts`` reads them by)."""

    __slots__ = ("_modules", "flat_frame", "flat_stack", "leaf", "module")

    def __init__(self) -> None:
        self.leaf = array.array("i")
        self.module = array.array("i")
        self.flat_stack = array.array("i")
        self.flat_frame = array.array("i")
        self._modules: dict[str | None, int] = {}

    def add(self, sid: int, distinct: tuple[int, ...], leaf: int, module: str | None) -> None:
        self.leaf.append(leaf)
        self.module.append(self._modules.setdefault(module, len(self._modules)))
        self.flat_stack.extend([sid] * len(distinct))
        self.flat_frame.extend(distinct)

    def module_index(self, module: str | None) -> int:
        """The module's index in ``module`` (-1: no stack ends in it)."""
        return self._modules.get(module, -1)

    def table(self, frames: int) -> StackTable:
        return StackTable(self.leaf, self.module, self.flat_stack, self.flat_frame, frames)


def range_counts(
    log: SampleLog,
    table: StackTable,
    start: float,
    end: float,
    mode: TimeMode,
    *,
    tids: Iterable[int] | None = None,
    module: int | None = None,
    split_states: int,
    period: float = 0.0,
) -> RangeCounts:
    """The samples of ``log`` with ``start <= moment < end`` counted in ``mode``, of
    ``tids`` alone where given, of stacks whose leaf is in ``module`` (an index of
    ``table.module``) where given; each thread's split over all of its samples in the
    range, as a whole profile's is over all of its samples. A wait (an off-CPU sample:
    its moment where it began, its weight in ``period``s) counts the part of it inside
    the range, as ``capture.window`` cuts it (period 0: a wait is where it began)."""
    import numpy as np

    moments = np.frombuffer(log.moments, dtype=np.float64)
    stacks = np.frombuffer(log.stacks, dtype=np.int32)
    threads = np.frombuffer(log.threads, dtype=np.int32)
    splits = np.frombuffer(log.splits, dtype=np.int8)
    weights = _weights_inside(moments, splits, np.frombuffer(log.weights, dtype=np.int32),
                              start, end, period)  # fmt: skip
    keep = weights > 0
    # (a thread's split is of all its time in the range, whatever the mode and filters)
    split_counts = _splits(log.tids, threads[keep], splits[keep], weights[keep], split_states)
    if mode is TimeMode.CPU:
        keep &= splits == 0
    elif mode is TimeMode.OFF_CPU:
        keep &= splits != 0
    if tids is not None:
        chosen = set(tids)
        wanted = [i for i, tid in enumerate(log.tids) if tid in chosen]
        keep &= np.isin(threads, np.array(wanted, dtype=np.int32))
    if module is not None:
        leaf_module = np.frombuffer(table.module, dtype=np.int32)
        keep &= leaf_module[stacks] == module
    sid, tix = stacks[keep], threads[keep]
    w = weights[keep]
    per_stack = np.bincount(sid, weights=w, minlength=len(table.leaf)).astype(np.int64)
    leaf = np.frombuffer(table.leaf, dtype=np.int32)
    fself = np.bincount(leaf, weights=per_stack, minlength=table.frames)
    flat_stack = np.frombuffer(table.flat_stack, dtype=np.int32)
    flat_frame = np.frombuffer(table.flat_frame, dtype=np.int32)
    ftotal = np.bincount(flat_frame, weights=per_stack[flat_stack], minlength=table.frames)
    nonzero = np.flatnonzero(per_stack)
    return RangeCounts(
        stacks=dict(zip(nonzero.tolist(), per_stack[nonzero].tolist(), strict=True)),
        fself=fself.astype(np.int64).tolist(),
        ftotal=ftotal.astype(np.int64).tolist(),
        threads=_by_thread(log.tids, tix, leaf[sid], w, table.frames),
        splits=split_counts,
    )


def _mapped(values: npt.NDArray[np.int64], f: Callable[[int], int]) -> npt.NDArray[np.int32]:
    """``f`` of each value, asked once per distinct value: looked up in a table where the
    values are small (stack ids), else found among the distinct ones sorted (tids)."""
    import numpy as np

    distinct = sorted(set(values.tolist()))
    images = np.array([f(v) for v in distinct], dtype=np.int32)
    if distinct and distinct[0] >= 0 and distinct[-1] < DENSE_BINS:
        table = np.zeros(distinct[-1] + 1, dtype=np.int32)
        table[np.array(distinct, dtype=np.int64)] = images
        return table[values]
    return images[np.searchsorted(np.array(distinct, dtype=np.int64), values)]


def _weights_inside(
    moments: npt.NDArray[np.float64],
    splits: npt.NDArray[np.int8],
    weights: npt.NDArray[np.int32],
    start: float,
    end: float,
    period: float,
) -> npt.NDArray[np.int64]:
    """Each sample's weight inside the range (0: none of it)."""
    import numpy as np

    weight = weights.astype(np.int64)
    out = np.where((moments >= start) & (moments < end), weight, 0)
    waits = np.flatnonzero(splits) if period > 0 else ()
    if len(waits):  # a wait counts its part inside the range, wherever it began
        began, length = moments[waits], weight[waits]
        ended = began + length * period
        inside = np.minimum(ended, end) - np.maximum(began, start)
        whole = inside >= ended - began
        cut = np.where(whole, length, np.rint(np.maximum(inside, 0.0) / period).astype(np.int64))
        out[waits] = np.where(inside > 0, cut, 0)
    return out


def _by_thread(
    tids: list[int],
    tix: npt.NDArray[np.int32],
    leaves: npt.NDArray[np.int32],
    w: npt.NDArray[np.int64],
    frames: int,
) -> dict[int, ThreadLeaves]:
    """Per thread, its weight and its most weighed leaf frames (the thread's row names
    one): one bincount over (thread, leaf) pairs where they fit DENSE_BINS, else the
    distinct pairs sorted (np.unique); a Python step per thread, not per pair."""
    import numpy as np

    keys = tix.astype(np.int64) * frames + leaves
    if len(tids) * frames <= DENSE_BINS:
        summed = np.bincount(keys, weights=w, minlength=len(tids) * frames)
        present = np.flatnonzero(summed)
        values = summed[present].astype(np.int64)
    else:
        present, inverse = np.unique(keys, return_inverse=True)
        values = np.bincount(inverse, weights=w).astype(np.int64)
    if not len(present):
        return {}
    thread = present // frames  # ascending: each thread's pairs are together
    first = np.r_[True, thread[1:] != thread[:-1]]  # each thread's first pair
    starts = np.flatnonzero(first)
    most = np.maximum.reduceat(values, starts)
    totals = np.add.reduceat(values, starts)
    tops = np.flatnonzero(values == most[np.cumsum(first) - 1])
    out: dict[int, ThreadLeaves] = {}
    for g, start in enumerate(starts.tolist()):
        out[tids[int(thread[start])]] = (int(totals[g]), [])
    for i in tops.tolist():
        out[tids[int(thread[i])]][1].append(int(present[i] % frames))
    return out


def _splits(
    tids: list[int],
    tix: npt.NDArray[np.int32],
    state: npt.NDArray[np.int8],
    w: npt.NDArray[np.int64],
    states: int,
) -> dict[int, list[int]]:
    import numpy as np

    summed = np.bincount(tix.astype(np.int64) * states + state, weights=w,
                         minlength=len(tids) * states).astype(np.int64)  # fmt: skip
    out: dict[int, list[int]] = {}
    for thread in np.flatnonzero(summed.reshape(len(tids), states).sum(axis=1)).tolist():
        out[tids[thread]] = summed[thread * states : (thread + 1) * states].tolist()
    return out
