"""Pure aggregation of symbolized samples into frozen profile views.

The engine symbolizes each sample into a ``StackSample`` (frames leaf first)
and feeds batches to one ``Profile``. ``Profile.view`` returns a frozen
``ProfileView``: the hot-function table, modules, threads, and on demand the
caller->callee tree and the callers/callees of one function. Nothing here
reads a clock, does I/O or knows about asyncio; times come in with the data.

The unit of aggregation is a ``Frame`` ("function"): a resolved frame is its
symbol in its module; unresolved frames of one module with one reason are one
frame whatever their addresses (``[no symbols] libfoo.so``), so a stripped
library is one row, not one row per address. Nothing is dropped: kernel frames
show as ``[kernel]``, a sample with no frames counts under ``[unknown]``.

Counting: a function's *self* samples are those whose leaf frame it is; its
*total* samples are those with it anywhere on the stack, once per sample even
when it recurses. Percentages are of the samples in the view, after filters.

How views stay cheap: every distinct stack is interned once to an id, with its
frames as ids, its leaf and its distinct frames precomputed. ``add`` counts
samples per stack id -- per (thread, idle) group, and for running samples in
a pending table -- plus self samples per leaf for thread rows, and keeps raw
``(time, stack id, tid)`` records only for the recent window. ``view`` folds
the pending table into per-function self/total counters (each stack walked
once per view, not once per sample), so the default view costs O(functions
+ stacks seen since the last view), whatever the number of samples; a
filtered cumulative view costs O(distinct stacks of the selected threads); a
recent view O(samples in the window). The tree's children and the
callers/callees are worked out only when asked for, from a copy of the
per-stack counts taken when the view was made.

What these cost on a million samples is in docs/performance.md ("Profile views").

A ``Profile`` is owned by one thread (the engine). Its views may be handed to
another (the UI) and held across refreshes: their contents never change. They
share the accumulator's intern tables, which only ever grow (``reset``
replaces them rather than clearing them), and read only entries that existed
when the view was made.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple, overload

from livesym.profile.calltree import DOWN, UP, Neighbours, StackNode, Stacks
from livesym.profile.ranges import SampleLog, StackColumns, ThreadLeaves, range_counts
from livesym.records import UNKNOWN_FRAME, Frame, FrameOrder, TimeMode, WaitState

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# A thread's split (``ThreadRow.split``): on a CPU, then off it by records.WaitState.
SPLIT_LABELS = ("on CPU", *(w.label for w in WaitState))
SPLIT_STATES = len(SPLIT_LABELS)


def _split_index(flags: int) -> int:
    wait = WaitState.of_flags(flags)
    return 0 if wait is None else 1 + wait.value


def _basename(path: str) -> str:
    return path.rpartition("/")[2] or path


_EMPTY_STACK = (UNKNOWN_FRAME,)


@dataclass(frozen=True, slots=True)
class StackSample:
    """One symbolized sample: what the engine feeds in. ``frames`` are leaf first.

    ``weight`` counts the sample that many times (>= 1): sampling periods, an off-CPU
    interval's length. ``idle``: off the CPU; ``flags`` the capture's flags, which also
    say why (records.WaitState). ``pid`` and ``process_name`` say which process the
    thread belongs to (a thread's first sample decides).
    """

    time: float
    tid: int
    thread_name: str
    frames: tuple[Frame, ...]
    idle: bool = False
    weight: int = 1
    pid: int = 0
    process_name: str = ""
    flags: int = 0

    def __post_init__(self) -> None:
        if self.weight < 1:
            raise ValueError(f"sample weight must be at least 1, not {self.weight}")


class FunctionRow(NamedTuple):
    """One function in a view; the percentages are 0..100 of the view's samples.

    A named tuple, not a dataclass: a view of a big profile makes tens of thousands
    of them when a table is sorted or filtered, at a third of the cost.
    """

    frame: Frame
    self_samples: int
    total_samples: int
    self_pct: float
    total_pct: float


@dataclass(frozen=True, slots=True)
class ModuleRow:
    """Samples whose leaf frame is in one module (None: no module at all)."""

    module: str | None
    self_samples: int
    pct: float

    @property
    def label(self) -> str:
        return _basename(self.module) if self.module else "[no module]"


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One process's samples in a view."""

    pid: int
    name: str
    samples: int
    pct: float


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """One thread's samples, and the function with the most self samples in it."""

    tid: int
    name: str
    samples: int
    pct: float
    top_function: Frame | None
    # The thread's weight on a CPU and off it by why, over everything counted (every
    # mode): indexed as SPLIT_LABELS; empty where nothing was counted.
    split: tuple[int, ...] = ()


def _frame_order(frame: Frame) -> FrameOrder:
    return frame.order


# (-self samples, -total samples, frame id): a function before it is ordered.
_Counted = tuple[int, int, int]


def _self_first(k: _Counted) -> tuple[int, int]:
    return (k[0], k[1])


def _total_first(k: _Counted) -> tuple[int, int]:
    return (k[1], k[0])


TOP_SHARE = 8  # a slice of up to 1/TOP_SHARE of the rows from the top is picked, not sorted


class FunctionColumns(NamedTuple):
    """A view's functions by columns: ``frames[fids[i]]`` has ``own[i]`` self samples and
    ``total[i]`` in all."""

    frames: list[Frame]
    fids: npt.NDArray[np.int64]
    own: npt.NDArray[np.int64]
    total: npt.NDArray[np.int64]


class FunctionRows(Sequence[FunctionRow]):
    """A view's functions, most self samples first, then most total, then frame order.

    A table shows the first few hundred of tens of thousands of functions: rows
    are made when asked for, and the first rows are picked (``heapq``) without
    ordering the rest. The whole order is worked out once, on the first access
    that needs it. Compares equal to a sequence of the same rows.
    """

    __slots__ = ("_columns", "_counted", "_frames", "_ordered", "_rows", "_scale")

    def __init__(self, counted: list[_Counted], frames: list[Frame], scale: float) -> None:
        self._counted = counted
        self._frames = frames
        self._scale = scale
        self._ordered: list[_Counted] | None = None
        self._rows: tuple[FunctionRow, ...] | None = None
        self._columns: FunctionColumns | None = None

    def columns(self) -> FunctionColumns:
        """Every function's frame id, self and total samples, as arrays (made once), and
        the frames the ids index: the profile's own list, which only grows (a diff
        against a pinned baseline names each id once)."""
        if self._columns is None:
            import numpy as np

            rows = np.array(self._counted, dtype=np.int64).reshape(-1, 3)
            self._columns = FunctionColumns(self._frames, rows[:, 2], -rows[:, 0], -rows[:, 1])
        return self._columns

    def __len__(self) -> int:
        return len(self._counted)

    def _row(self, key: _Counted) -> FunctionRow:
        own, total, fid = key
        scale = self._scale
        return FunctionRow(self._frames[fid], -own, -total, -own * scale, -total * scale)

    def _full_key(self, key: _Counted) -> tuple[int, int, FrameOrder]:
        return (key[0], key[1], self._frames[key[2]]._order)

    def _order(self) -> list[_Counted]:
        if self._ordered is None:
            self._ordered = sorted(self._counted, key=self._full_key)
        return self._ordered

    def top(self, n: int, *, by_total: bool = False, reverse: bool = False) -> list[FunctionRow]:
        """The first ``n`` rows, without ordering the others: by self samples (the view's
        order), or ``by_total`` (total, then self, then frame order); ``reverse`` takes
        the last ``n`` of that order, last first."""
        if n <= 0:
            return []
        plain = not by_total and not reverse
        if plain and (self._ordered is not None or n * TOP_SHARE >= len(self._counted)):
            return [self._row(k) for k in self._order()[:n]]
        counts = _total_first if by_total else _self_first
        pick = heapq.nlargest if reverse else heapq.nsmallest
        # The n first by counts, plus every function tied with the last of them on
        # both counts: frame order decides among those, so take them all, then sort.
        # (In the view's own order the tuples compare as they are: no key to call.)
        cut = heapq.nsmallest(n, self._counted) if plain else pick(n, self._counted, key=counts)
        if not cut:
            return []
        edge = counts(cut[-1])
        chosen = [k for k in cut if counts(k) != edge]
        chosen += [k for k in self._counted if counts(k) == edge]
        frames = self._frames
        chosen.sort(key=lambda k: (*counts(k), frames[k[2]]._order), reverse=reverse)
        return [self._row(k) for k in chosen[:n]]

    def _all(self) -> tuple[FunctionRow, ...]:
        if self._rows is None:
            self._rows = tuple(self._row(k) for k in self._order())
        return self._rows

    def module_rows(self) -> list[ModuleRow]:
        return _module_rows(self._counted, self._frames, self._scale)

    def frames(self) -> Iterator[Frame]:
        """The functions' frames, in no particular order (no rows made)."""
        frames = self._frames
        return (frames[k[2]] for k in self._counted)

    def row_of(self, frame: Frame) -> FunctionRow | None:
        """The row of ``frame``, None when the view has no samples of it (one pass over
        the counts; no order worked out, no other row made)."""
        frames, wanted = self._frames, hash(frame)
        for k in self._counted:
            candidate = frames[k[2]]
            if candidate is frame or (candidate._hash == wanted and candidate == frame):
                return self._row(k)
        return None

    def where(self, keep: Callable[[Frame], bool]) -> list[FunctionRow]:
        """The rows of the frames ``keep`` says yes to, in no particular order (rows are
        made for those only)."""
        frames = self._frames
        return [self._row(k) for k in self._counted if keep(frames[k[2]])]

    def counts(self) -> Iterator[tuple[Frame, int, int]]:
        """Every function's (frame, self samples, total samples), in no particular order,
        without making rows (a diff of two big profiles reads each once)."""
        frames = self._frames
        return ((frames[fid], -own, -total) for own, total, fid in self._counted)

    def unordered(self) -> Iterator[FunctionRow]:
        """Every row, in no particular order: for who sorts or filters them anyway."""
        if self._rows is not None:
            return iter(self._rows)
        return (self._row(k) for k in self._counted)

    @overload
    def __getitem__(self, index: int) -> FunctionRow: ...

    @overload
    def __getitem__(self, index: slice) -> list[FunctionRow]: ...

    def __getitem__(self, index: int | slice) -> FunctionRow | list[FunctionRow]:
        if isinstance(index, slice):
            if self._rows is None and index.start in (None, 0) and index.step in (None, 1):
                stop = len(self) if index.stop is None else index.stop
                if 0 <= stop * TOP_SHARE < len(self):
                    return self.top(stop)
            return list(self._all()[index])
        if self._rows is None and 0 <= index < len(self) and index * TOP_SHARE < len(self):
            return self.top(index + 1)[index]
        return self._all()[index]

    def __iter__(self) -> Iterator[FunctionRow]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FunctionRows):
            return self._all() == other._all()
        if isinstance(other, Sequence):
            return self._all() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FunctionRows({len(self)} functions)"


@dataclass(frozen=True)
class ProfileView:
    """A frozen snapshot of a profile, as selected by ``Profile.view``.

    ``functions`` are sorted by self samples, then total, then frame order;
    ``modules`` by samples then name; ``threads`` by samples, name, tid.
    """

    samples: int
    functions: FunctionRows  # rows made as they are read
    threads: tuple[ThreadRow, ...]
    _stacks: Stacks = field(repr=False, compare=False)
    processes: tuple[ProcessRow, ...] = ()  # by samples, then pid

    @cached_property
    def modules(self) -> tuple[ModuleRow, ...]:
        """Each module's self samples (made when first asked: a range view is made for
        every key that moves the range, the modules pane shown now and then)."""
        return tuple(self.functions.module_rows())

    @cached_property
    def tree(self) -> StackNode | None:
        """The caller->callee tree under a ``ROOT_FRAME`` node (None for no samples).

        The root's children are the outermost frames; the root's total is ``samples``.
        """
        return self._stacks.tree(DOWN)

    @cached_property
    def inverted_tree(self) -> StackNode | None:
        """The callee->caller tree under a ``ROOT_FRAME`` node (None for no samples): its
        root's children are the leaves (each function's self samples), theirs their
        callers."""
        return self._stacks.tree(UP)

    def callees_tree(self, frame: Frame) -> StackNode | None:
        """Every path below ``frame``, merged: the lower half of its sandwich."""
        return self._stacks.sandwich(frame, DOWN)

    def callers_tree(self, frame: Frame) -> StackNode | None:
        """Every path above ``frame``, merged, callers as children: the upper half."""
        return self._stacks.sandwich(frame, UP)

    def frame_ids(self, frames: Iterable[Frame]) -> frozenset[int]:
        """The ids the view's stacks know ``frames`` by (for ``StackNode.samples_holding``)."""
        ids = self._stacks.frame_ids
        return frozenset(i for i in (ids.get(f) for f in frames) if i is not None)

    def callers(self, frame: Frame) -> Neighbours:
        """Frames that called ``frame``, with samples (once per sample each), most first."""
        return self._stacks.neighbours(frame, UP)

    def callees(self, frame: Frame) -> Neighbours:
        """Frames ``frame`` called, with samples (once per sample each), most first."""
        return self._stacks.neighbours(frame, DOWN)


def _ignore(_record: object) -> None:
    pass


# (time, stack id, tid, idle, weight)
_Record = tuple[float, int, int, bool, int]
# Per thread and idleness: samples per stack id, and self samples per leaf frame id.
_Group = tuple[dict[int, int], dict[int, int]]


class Profile:
    """Mutable accumulator of ``StackSample``s, owned by one thread (the engine).

    ``recent_window`` is how many seconds ``view(recent=True)`` looks back;
    records older than the newest sample time minus the window are discarded.
    """

    def __init__(self, recent_window: float = 5.0) -> None:
        if not recent_window > 0:
            raise ValueError(f"recent window must be positive, not {recent_window}")
        self.recent_window = recent_window
        self.reset()

    def reset(self) -> None:
        """Forget every sample. Views made before stay as they were."""
        # Intern tables, append-only (views read them).
        self._frames: list[Frame] = []
        self._frame_ids: dict[Frame, int] = {}
        self._stacks_with: list[list[int]] = []  # frame id -> ids of stacks holding it
        self._stack_ids: dict[tuple[Frame, ...], int] = {}
        # The same stack tuple object comes back sample after sample (the engine
        # interns them): finding it by identity skips hashing every Frame in it.
        self._by_identity: dict[int, tuple[tuple[Frame, ...], int]] = {}
        self._frame_by_identity: dict[int, tuple[Frame, int]] = {}
        self._stack_fids: list[tuple[int, ...]] = []  # frame ids, leaf first
        self._stack_distinct: list[tuple[int, ...]] = []  # each frame id once
        self._stack_leaf: list[int] = []
        self._stack_module: list[str | None] = []  # the leaf frame's module
        # Cumulative running samples of all threads: the default view.
        self._self: list[int] = []  # frame id -> self samples
        self._total: list[int] = []  # frame id -> total samples
        self._stack_running: list[int] = []  # stack id -> samples
        # Running samples per stack id not yet in the three counters above. Folding
        # them in at ``view`` walks each stack once per view, not once per sample.
        self._pending: dict[int, int] = {}
        # Cumulative per (tid, idle), for filtered views and thread rows.
        self._groups: dict[tuple[int, bool], _Group] = {}
        self._names: dict[int, str] = {}
        # Per thread, its weight in each state (``ThreadRow.split``), whatever the mode.
        self._splits: dict[int, list[int]] = {}
        self._pid_of: dict[int, int] = {}  # tid -> its process (as its first sample said)
        self._process_names: dict[int, str] = {}
        # Raw records for the recent window only.
        self._recent: deque[_Record] = deque()
        self._latest: float | None = None
        # Every sample's moment, and the stacks as columns: views of a time range.
        self._log = SampleLog()
        self._columns = StackColumns()

    def _intern_frame(self, frame: Frame) -> int:
        fid = self._frame_ids.get(frame)
        if fid is None:
            fid = len(self._frames)
            self._frames.append(frame)
            self._stacks_with.append([])
            self._self.append(0)
            self._total.append(0)
            self._frame_ids[frame] = fid  # last: a view that finds it finds the rest
        return fid

    def _intern_stack(self, frames: tuple[Frame, ...]) -> int:
        # Frame objects repeat (the engine makes one per address): by identity first.
        known = self._frame_by_identity
        fids_list = []
        for f in frames:
            hit = known.get(id(f))
            if hit is not None and hit[0] is f:
                fids_list.append(hit[1])
            else:
                fid = self._intern_frame(f)
                if len(known) > 4 * len(self._frames) + 4096:
                    known.clear()  # callers that build new Frames every time
                known[id(f)] = (f, fid)
                fids_list.append(fid)
        fids = tuple(fids_list)
        distinct = tuple(dict.fromkeys(fids))
        sid = len(self._stack_fids)
        self._stack_fids.append(fids)
        self._stack_distinct.append(distinct)
        self._stack_leaf.append(fids[0])
        self._stack_module.append(frames[0].module)
        self._stack_running.append(0)
        for fid in distinct:
            self._stacks_with[fid].append(sid)
        self._columns.add(sid, distinct, fids[0], frames[0].module)
        self._stack_ids[frames] = sid
        return sid

    def add(
        self, samples: Iterable[StackSample], *, recent: bool = True, grouped: bool = False
    ) -> None:
        """Count a batch of samples.

        ``recent=False`` keeps them out of the recent window whatever their
        time: for samples known to be older than it (a replay loaded at once).
        ``grouped``: each is many samples at one moment that is not theirs (a replay's
        stack counted at once): their moments come by ``log_rows``.
        """
        stack_ids = self._stack_ids
        stack_leaf = self._stack_leaf
        pending = self._pending
        groups = self._groups
        names = self._names
        pid_of = self._pid_of
        splits = self._splits
        record = self._recent.append if recent else _ignore
        latest = -math.inf if self._latest is None else self._latest
        by_identity = self._by_identity
        log = self._log if not grouped else SampleLog()  # (groups: their rows come by log_rows)
        log_moment, log_stack, log_thread = (
            log.moments.append,
            log.stacks.append,
            log.threads.append,
        )
        log_split, log_weight, thread_index = (
            log.splits.append,
            log.weights.append,
            log.thread_index,
        )
        for s in samples:
            frames = s.frames or _EMPTY_STACK
            known = by_identity.get(id(frames))
            if known is not None and known[0] is frames:
                sid = known[1]
            else:
                found = stack_ids.get(frames)
                sid = self._intern_stack(frames) if found is None else found
                if len(by_identity) > 2 * len(self._stack_fids) + 4096:
                    by_identity.clear()  # callers that build a new tuple every time
                by_identity[id(frames)] = (frames, sid)  # holds it: the id stays its own
            tid = s.tid
            idle = s.idle
            w = s.weight
            group = groups.get((tid, idle))
            if group is None:
                group = groups[(tid, idle)] = ({}, {})
            by_stack, by_leaf = group
            by_stack[sid] = by_stack.get(sid, 0) + w
            leaf = stack_leaf[sid]
            by_leaf[leaf] = by_leaf.get(leaf, 0) + w
            if not idle:
                pending[sid] = pending.get(sid, 0) + w
            split = splits.get(tid)
            if split is None:
                split = splits[tid] = [0] * SPLIT_STATES
            state = _split_index(s.flags)
            split[state] += w
            names[tid] = s.thread_name
            if tid not in pid_of:
                pid_of[tid] = s.pid
                self._process_names.setdefault(s.pid, s.process_name)
            t = s.time
            record((t, sid, tid, idle, w))
            log_moment(t)
            log_stack(sid)
            log_thread(thread_index(tid))
            log_split(state)
            log_weight(w)
            if t > latest:
                latest = t
        log.trim()
        if latest > -math.inf:
            self._latest = latest
            cutoff = latest - self.recent_window
            window = self._recent
            while window and window[0][0] < cutoff:
                window.popleft()

    def view(
        self,
        *,
        recent: bool = False,
        now: float | None = None,
        thread: int | None = None,
        module: str | None = None,
        mode: TimeMode = TimeMode.CPU,
        process: int | None = None,
        between: tuple[float, float] | None = None,
        period: float = 0.0,
    ) -> ProfileView:
        """A frozen snapshot of the selected samples (on the owning thread, like ``add``).

        ``recent``: only samples with time >= ``now`` - ``recent_window``
        (``now`` defaults to the newest sample's time). ``thread``: only that
        tid. ``module``: only samples whose leaf frame is in that module.
        ``process``: only that pid's threads. ``mode``: which time (on-CPU samples,
        off-CPU ones, or both). A ``now`` before the newest sample may miss records
        already discarded. ``between``: samples from ``start`` to ``end`` (``recent``
        unread; from ``log.since``), a wait its part inside (weighed in ``period``s).
        """
        if between is not None:
            return self._range_view(between, thread, module, mode, process, period)
        if recent or thread is not None or module is not None or process is not None:
            return self._filtered_view(recent, now, thread, module, mode, process)
        self._fold_pending()
        if mode.takes(False):  # the running samples, counted as they came
            fself = self._self.copy()
            ftotal = self._total.copy()
            counts = self._stack_running.copy()
        else:
            fself = [0] * len(self._self)
            ftotal = [0] * len(self._total)
            counts = [0] * len(self._stack_running)
        by_thread: dict[int, list[dict[int, int]]] = {}
        for (tid, idle), (by_stack, by_leaf) in self._groups.items():
            if not mode.takes(idle):
                continue
            if idle:
                self._count_stacks(by_stack.items(), fself, ftotal)
                for sid, c in by_stack.items():
                    counts[sid] += c
            by_thread.setdefault(tid, []).append(by_leaf)
        leaves = {tid: _leaves(parts) for tid, parts in by_thread.items()}
        return self._make_view(fself, ftotal, counts, leaves)

    def _fold_pending(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._count_stacks(pending.items(), self._self, self._total)
        running = self._stack_running
        for sid, c in pending.items():
            running[sid] += c
        self._pending = {}

    def _count_stacks(
        self, items: Iterable[tuple[int, int]], fself: list[int], ftotal: list[int]
    ) -> None:
        stack_leaf = self._stack_leaf
        stack_distinct = self._stack_distinct
        for sid, c in items:
            fself[stack_leaf[sid]] += c
            for fid in stack_distinct[sid]:
                ftotal[fid] += c

    def _filtered_view(
        self,
        recent: bool,
        now: float | None,
        thread: int | None,
        module: str | None,
        mode: TimeMode,
        process: int | None = None,
    ) -> ProfileView:
        counts: dict[int, int] = {}
        pid_of = self._pid_of

        def wanted(tid: int) -> bool:
            return (thread is None or tid == thread) and (
                process is None or pid_of.get(tid) == process
            )

        by_leaf: dict[int, dict[int, int]] = {}  # tid -> leaf frame id -> samples
        stack_leaf = self._stack_leaf
        stack_module = self._stack_module

        def take(tid: int, sid: int, c: int) -> None:
            counts[sid] = counts.get(sid, 0) + c
            leaves = by_leaf.get(tid)
            if leaves is None:
                leaves = by_leaf[tid] = {}
            leaf = stack_leaf[sid]
            leaves[leaf] = leaves.get(leaf, 0) + c

        if recent:
            if now is None:
                now = self._latest
            cutoff = -math.inf if now is None else now - self.recent_window
            for t, sid, tid, idle, w in self._recent:
                if (
                    t >= cutoff
                    and mode.takes(idle)
                    and wanted(tid)
                    and (module is None or stack_module[sid] == module)
                ):
                    take(tid, sid, w)
        else:
            for (tid, idle), (by_stack, _) in self._groups.items():
                if not mode.takes(idle) or not wanted(tid):
                    continue
                for sid, c in by_stack.items():
                    if module is None or stack_module[sid] == module:
                        take(tid, sid, c)
        fself = [0] * len(self._frames)
        ftotal = [0] * len(self._frames)
        self._count_stacks(counts.items(), fself, ftotal)
        return self._make_view(fself, ftotal, counts, {t: _leaves([d]) for t, d in by_leaf.items()})

    def log_rows(
        self, rows: Sequence[tuple[float, int, int, int, int]], start: float,
        stack_of: Callable[[int], tuple[Frame, ...]],
    ) -> None:  # fmt: skip
        """Keep the moments of samples ``add`` took ``grouped``: rows of (time from
        ``start``, tid, the caller's stack id, flags, weight), their stacks as
        ``stack_of`` names them (added already)."""
        ids = self._stack_ids
        self._log.add_rows(rows, start, lambda sid: ids[stack_of(sid) or _EMPTY_STACK],
                           _split_index)  # fmt: skip

    @property
    def log(self) -> SampleLog:
        """Every sample's moment, for ranges: ``since`` it holds them; ``fold`` its old."""
        return self._log

    def _range_view(
        self,
        between: tuple[float, float],
        thread: int | None,
        module: str | None,
        mode: TimeMode,
        process: int | None,
        period: float,
    ) -> ProfileView:
        tids: list[int] | None = None
        if thread is not None or process is not None:
            tids = [t for t in self._names if (thread is None or t == thread)
                    and (process is None or self._pid_of.get(t) == process)]  # fmt: skip
        counted = range_counts(
            self._log, self._columns.table(len(self._frames)), between[0], between[1], mode,
            tids=tids, module=None if module is None else self._columns.module_index(module),
            split_states=SPLIT_STATES, period=period,
        )  # fmt: skip
        return self._make_view(
            counted.fself, counted.ftotal, counted.stacks, counted.threads, counted.splits
        )

    def _make_view(
        self,
        fself: list[int],
        ftotal: list[int],
        counts: list[int] | dict[int, int],
        by_thread: dict[int, ThreadLeaves],
        splits: dict[int, list[int]] | None = None,
    ) -> ProfileView:
        frames = self._frames
        samples = sum(fself)  # every sample has exactly one leaf
        scale = 100.0 / samples if samples else 0.0
        counted = [(-fself[fid], -total, fid) for fid, total in enumerate(ftotal) if total]
        threads = _thread_rows(
            by_thread, frames, self._names, self._splits if splits is None else splits, scale
        )
        processes = _process_rows(threads, self._pid_of, self._process_names, scale)
        stacks = Stacks(
            counts, samples, frames, self._frame_ids, self._stack_fids, self._stacks_with
        )
        functions = FunctionRows(counted, frames, scale)
        return ProfileView(samples, functions, tuple(threads), stacks, tuple(processes))


def _thread_rows(
    by_thread: dict[int, ThreadLeaves], frames: list[Frame], names: dict[int, str],
    splits: dict[int, list[int]], scale: float,
) -> list[ThreadRow]:  # fmt: skip
    """Each thread's samples and its hottest function, most samples first."""
    threads: list[ThreadRow] = []
    for tid, (n, tops) in by_thread.items():
        if not n:
            continue
        top = min((frames[f] for f in tops), key=_frame_order)
        split = tuple(splits.get(tid, ()))
        threads.append(ThreadRow(tid, names.get(tid, ""), n, n * scale, top, split))
    threads.sort(key=lambda r: (-r.samples, r.name, r.tid))
    return threads


def _leaves(parts: list[dict[int, int]]) -> ThreadLeaves:
    """A thread's samples and most sampled leaves, from its counts per leaf (in parts)."""
    leaves = parts[0] if len(parts) == 1 else _merge(parts)
    most = max(leaves.values(), default=0)
    return sum(leaves.values()), [f for f, c in leaves.items() if c == most]


def _process_rows(
    threads: list[ThreadRow], pid_of: dict[int, int], names: dict[int, str], scale: float
) -> list[ProcessRow]:
    """Each process's samples (its threads'), most first."""
    per_pid: dict[int, int] = {}
    for row in threads:
        pid = pid_of.get(row.tid, 0)
        per_pid[pid] = per_pid.get(pid, 0) + row.samples
    processes = [ProcessRow(pid, names.get(pid, ""), n, n * scale) for pid, n in per_pid.items()]
    processes.sort(key=lambda r: (-r.samples, r.pid))
    return processes


def _module_rows(counted: list[_Counted], frames: list[Frame], scale: float) -> list[ModuleRow]:
    """Each module's self samples (its functions' own), most first."""
    by_module: dict[str | None, int] = {}
    for own, _, fid in counted:
        if own:
            module = frames[fid].module
            by_module[module] = by_module.get(module, 0) - own
    modules = [ModuleRow(m, c, c * scale) for m, c in by_module.items()]
    modules.sort(key=lambda r: (-r.self_samples, r.label, r.module or ""))
    return modules


def _merge(parts: list[dict[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for part in parts:
        for key, c in part.items():
            out[key] = out.get(key, 0) + c
    return out
