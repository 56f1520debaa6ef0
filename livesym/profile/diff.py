"""Two profiles compared function by function: each function's self and total share on
either side, its change in percentage points, and whether that change is larger than
sampling noise explains.

Functions are matched by what names them in any run on any host, never by address:
(kind, module, symbol), where the module is the object's file name (a library's path
differs between hosts; ``/tmp/perf-PID.map`` between runs) and a Python file is named
from its package down (``site-packages/``, ``lib/python3.X/``: a virtual environment's
path differs). Unnamed code is its module and its function's start (the FDE's, an ELF
vaddr: the same in every run of one build); other unresolved code is its module and why
it is unnamed. Frames that meet on one key (two static functions of one name) are
summed.

Significance is a two-sided test for two proportions (the pooled z-test) on each
side's sample counts, for the self and the total share of each function, with Holm's
step-down correction over every test made, at a family-wise ``ALPHA``: two captures of
one workload flag nothing in about 999 diffs of 1,000 however many functions they have.
A test is made only where each side expects at least ``MIN_EXPECTED`` samples either
way (the normal approximation holds); a function with fewer is "too few samples to
tell", never significant. The test takes samples as independent draws: a program whose
phases last long against the capture spreads more from run to run than it allows
(compare longer captures). Written here: the test is a few lines over ``math.erfc``,
and the statistics libraries that have it (scipy, statsmodels) are tens of megabytes
for one formula.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from livesym.profile.aggregate import ProfileView
from livesym.records import Frame, Reason

ALPHA = 0.001  # family-wise: the chance a diff of one workload flags anything
MIN_EXPECTED = 5  # samples each side must expect, either way, for a test to be made

# "kind\0module\0name": one string (its hash is kept; no ELF, Python or path name
# holds a NUL), in the order ties of change are broken by.
MatchKey = str

_PERF_MAP = re.compile(r"^perf-\d+\.map$")
_PYTHON_ROOTS = re.compile(r".*/(?:site-packages|dist-packages|lib/python3(?:\.\d+)?)/")


def module_key(module: str | None, kind: str) -> str:
    """What a module is called on any host: its file name (a Python file's path from
    its package down)."""
    if not module:
        return ""
    if kind == "python":
        return _PYTHON_ROOTS.sub("", module)
    name = module.rsplit("/", 1)[-1]
    return "perf-PID.map" if _PERF_MAP.match(name) else name


def match_key(frame: Frame) -> MatchKey:
    """The key two profiles' frames are matched by (see the module's docstring)."""
    module = module_key(frame.module, frame.kind)
    if frame.symbol:
        name = frame.symbol
    elif frame.reason is Reason.UNNAMED_FUNCTION and frame.vaddr is not None:
        name = f"@{frame.vaddr:#x}"
    else:
        name = frame.label
    return f"{frame.kind}\0{module}\0{name}"


@dataclass(frozen=True, slots=True)
class Counts:
    """One function's samples on one side: where it was the leaf, and anywhere."""

    self_samples: int = 0
    total_samples: int = 0


@dataclass(frozen=True, slots=True)
class FunctionDiff:
    """One function on both sides. Shares are 0..100 of each side's samples; ``p_value``
    is the smaller of its self and total tests' (None where neither could be made)."""

    frame: Frame  # the new side's, where it has the function; else the base's
    base: Counts
    new: Counts
    base_self_pct: float
    new_self_pct: float
    base_total_pct: float
    new_total_pct: float
    significant: bool
    p_value: float | None

    @property
    def delta_self_pp(self) -> float:
        return self.new_self_pct - self.base_self_pct

    @property
    def delta_total_pp(self) -> float:
        return self.new_total_pct - self.base_total_pct

    @property
    def change(self) -> float:
        """What diffs sort by: the larger move, self or total, in points."""
        return max(abs(self.delta_self_pp), abs(self.delta_total_pp))


class KeySpace:
    """Match keys as small integers, one per distinct key, shared by every side it
    prepared. A profile's frame ids are mapped to keys once: a pinned baseline and each
    new view of the same session are laid over each other by array (numpy), the keys
    of only the functions not seen before worked out."""

    __slots__ = ("_ids", "_of_list", "keys")

    def __init__(self) -> None:
        self._ids: dict[MatchKey, int] = {}
        self.keys: list[MatchKey] = []
        # A profile's frames list (by identity; it only grows) -> each frame id's key id
        # (-1: not asked yet). At most MAX_LISTS: a session's, and another's.
        self._of_list: dict[int, tuple[list[Frame], npt.NDArray[np.int64]]] = {}

    def id_of(self, frame: Frame) -> int:
        key = _key(frame)
        kid = self._ids.get(key)
        if kid is None:
            kid = self._ids[key] = len(self.keys)
            self.keys.append(key)
        return kid

    def known(self, frame: Frame) -> int | None:
        return self._ids.get(_key(frame))

    def side(self, view: ProfileView) -> Side:
        """``view``'s functions with their key ids: what a diff reads of it."""
        columns = view.functions.columns()
        kid = self._key_ids(columns.frames, columns.fids)
        own = columns.own
        # The frame that names each key: the one with most self samples (then the first).
        order = np.lexsort((np.arange(len(kid)), -own, kid))
        firsts = order[np.r_[True, kid[order][1:] != kid[order][:-1]]] if len(kid) else order
        return Side(view.samples, kid, own, columns.total, kid[firsts],
                    columns.fids[firsts], columns.frames)  # fmt: skip

    def _key_ids(self, frames: list[Frame], fids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        held = self._of_list.get(id(frames))
        if held is None or held[0] is not frames:
            if len(self._of_list) >= MAX_LISTS:
                self._of_list.clear()
            held = (frames, np.full(0, -1, dtype=np.int64))
        mapping = held[1]
        if len(mapping) < len(frames):
            mapping = np.concatenate((mapping, np.full(len(frames) - len(mapping), -1)))
        for fid in np.unique(fids[mapping[fids] < 0]).tolist():
            mapping[fid] = self.id_of(frames[fid])
        self._of_list[id(frames)] = (frames, mapping)
        return mapping[fids]


MAX_LISTS = 4  # profiles' frame lists a KeySpace keeps the key ids of


@dataclass(frozen=True, eq=False)
class Side:
    """One side of a diff: each function's key (``KeySpace``) and counts, row by row,
    and the keys it has (sorted) with the frame that names each."""

    samples: int
    kid: npt.NDArray[np.int64]
    own: npt.NDArray[np.int64]
    total: npt.NDArray[np.int64]
    named: npt.NDArray[np.int64]  # the distinct keys, ascending
    named_by: npt.NDArray[np.int64]  # the frame id that names each of ``named``
    frames: list[Frame]  # the profile's frames, by frame id

    def frame_of(self, kid: int) -> Frame | None:
        i = int(np.searchsorted(self.named, kid))
        if i < len(self.named) and self.named[i] == kid:
            return self.frames[int(self.named_by[i])]
        return None

    def merged(self, size: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Self and total samples per key id below ``size`` (totals of two frames of one
        key may hold the same sample: never more than all of them)."""
        own = np.bincount(self.kid, weights=self.own, minlength=size).astype(np.int64)
        total = np.bincount(self.kid, weights=self.total, minlength=size).astype(np.int64)
        return own, np.minimum(total, self.samples)


class ProfileDiff:
    """Every function of either side, largest change first, made into ``FunctionDiff``
    rows as they are read (a diff of two big profiles has tens of thousands; a table
    shows a screenful: ``top``)."""

    __slots__ = ("_all", "_base", "_change", "_counts", "_kids", "_new", "_p", "_significant",
                 "_space", "alpha", "base_samples", "new_samples", "tests")  # fmt: skip

    def __init__(
        self, space: KeySpace, base: Side, new: Side, kids: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64], change: npt.NDArray[np.float64],
        p_values: npt.NDArray[np.float64], significant: npt.NDArray[np.bool_], tests: int,
        alpha: float = ALPHA,
    ) -> None:  # fmt: skip
        self.base_samples, self.new_samples = base.samples, new.samples
        self.tests, self.alpha = tests, alpha  # (tests: the family Holm divides alpha by)
        self._space, self._base, self._new = space, base, new
        # Per function of either side (key ids ascending): its key id, its counts (base
        # self, base total, new self, new total), its change, p-value (NaN: untested).
        self._kids, self._counts, self._change = kids, counts, change
        self._p, self._significant = p_values, significant
        self._all: tuple[FunctionDiff, ...] | None = None

    def __len__(self) -> int:
        return len(self._kids)

    def of(self, frame: Frame) -> FunctionDiff | None:
        """The row of the function ``frame`` names (matched as every function is)."""
        kid = self._space.known(frame)
        if kid is None:
            return None
        i = int(np.searchsorted(self._kids, kid))
        return self._row(i) if i < len(self._kids) and self._kids[i] == kid else None

    def _row(self, i: int) -> FunctionDiff:
        kid = int(self._kids[i])
        bs, bt, ns, nt = (int(v) for v in self._counts[i])
        n1, n2 = self.base_samples, self.new_samples
        frame = self._new.frame_of(kid) or self._base.frame_of(kid)
        assert frame is not None
        p = float(self._p[i])
        return FunctionDiff(
            frame=frame, base=Counts(bs, bt), new=Counts(ns, nt),
            base_self_pct=share_pct(bs, n1), new_self_pct=share_pct(ns, n2),
            base_total_pct=share_pct(bt, n1), new_total_pct=share_pct(nt, n2),
            significant=bool(self._significant[i]), p_value=None if math.isnan(p) else p,
        )  # fmt: skip

    def _ordered(self, rows: Iterable[int]) -> list[int]:
        """``rows`` largest change first, ties by key (as every diff lists them)."""
        keys, change = self._space.keys, self._change
        return sorted(rows, key=lambda i: (-change[i], keys[self._kids[i]]))

    def top(self, n: int) -> list[FunctionDiff]:
        """The ``n`` largest changes, largest first (only those made)."""
        if self._all is not None or n >= len(self):
            return list(self.functions[:n])
        if n <= 0:
            return []
        edge = -np.partition(-self._change, n - 1)[n - 1]  # the n-th largest change
        return [self._row(i) for i in self._ordered(np.flatnonzero(self._change >= edge))[:n]]

    @property
    def functions(self) -> tuple[FunctionDiff, ...]:
        if self._all is None:
            self._all = tuple(self._row(i) for i in self._ordered(range(len(self))))
        return self._all

    @property
    def significant(self) -> tuple[FunctionDiff, ...]:
        return tuple(self._row(i) for i in self._ordered(np.flatnonzero(self._significant)))


_KEY_CACHE: dict[Frame, MatchKey] = {}
_KEY_CACHE_MAX = 1 << 19  # frames whose keys are kept (a live diff asks for the same ones)


def _key(frame: Frame) -> MatchKey:
    key = _KEY_CACHE.get(frame)
    if key is None:
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        key = _KEY_CACHE[frame] = match_key(frame)
    return key


def two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float | None:
    """The two-sided p-value of the pooled z-test that ``x1/n1`` and ``x2/n2`` are one
    proportion; None where either side expects fewer than MIN_EXPECTED samples either
    way (the normal approximation does not hold). ``p_values`` for one pair."""
    p = float(p_values(np.array([x1]), np.array([x2]), n1, n2)[0])
    return None if math.isnan(p) else p


def holm(p_values: list[float], alpha: float) -> list[bool]:
    """Which of ``p_values`` Holm's step-down procedure rejects at family-wise ``alpha``."""
    return [bool(v) for v in _holm(np.array(p_values, dtype=np.float64), alpha)]


def diff_views(
    base: ProfileView, new: ProfileView, alpha: float = ALPHA, *,
    space: KeySpace | None = None, base_side: Side | None = None,
) -> ProfileDiff:  # fmt: skip
    """``new`` against ``base``: every function of either, largest change first.
    ``base_side``, ``base`` prepared in ``space`` already (a pinned baseline's)."""
    if space is None or base_side is None:
        space = space or KeySpace()
        base_side = space.side(base)
    return diff_sides(space, base_side, space.side(new), alpha)


def diff_sides(space: KeySpace, base: Side, new: Side, alpha: float = ALPHA) -> ProfileDiff:
    """Two prepared sides laid over each other, by array: each key's counts on both,
    its change, and the tests (the pooled z-test, Holm over all of them)."""
    n1, n2 = base.samples, new.samples
    size = len(space.keys)
    bs, bt = base.merged(size)
    ns, nt = new.merged(size)
    kids = np.flatnonzero((bt > 0) | (nt > 0))
    bs, bt, ns, nt = bs[kids], bt[kids], ns[kids], nt[kids]
    k1, k2 = (100.0 / n1 if n1 else 0.0), (100.0 / n2 if n2 else 0.0)
    change = np.maximum(np.abs(ns * k2 - bs * k1), np.abs(nt * k2 - bt * k1))
    # A share is tested only where min(n1, n2) * pooled >= MIN_EXPECTED either way (the
    # normal approximation holds); the self share only where it is not the total's.
    own_p = p_values(bs, ns, n1, n2)
    own_p[(bs == bt) & (ns == nt)] = np.nan
    total_p = p_values(bt, nt, n1, n2)
    both = np.concatenate((own_p, total_p))
    rejected = rejected_of(both, alpha)
    significant = rejected[: len(kids)] | rejected[len(kids) :]
    smallest = np.fmin(own_p, total_p)  # (NaN where neither was made)
    counts = np.stack((bs, bt, ns, nt), axis=1)
    return ProfileDiff(space, base, new, kids, counts, change, smallest, significant,
                       int(np.count_nonzero(~np.isnan(both))), alpha)  # fmt: skip


def p_values(
    x1: npt.NDArray[np.int64], x2: npt.NDArray[np.int64], n1: int, n2: int
) -> npt.NDArray[np.float64]:
    """``two_proportion_p`` of each pair ``x1[i]/n1`` and ``x2[i]/n2``, by array; NaN
    where it makes no test."""
    out = np.full(len(x1), np.nan)
    if n1 <= 0 or n2 <= 0:
        return out
    pooled = (x1 + x2) / (n1 + n2)
    testable = np.flatnonzero(min(n1, n2) * np.minimum(pooled, 1.0 - pooled) >= MIN_EXPECTED)
    q = pooled[testable]
    spread = np.sqrt(q * (1.0 - q) * (1.0 / n1 + 1.0 / n2))
    z = np.abs(x1[testable] / n1 - x2[testable] / n2) / spread
    out[testable] = [math.erfc(v) for v in (z / math.sqrt(2.0)).tolist()]
    return out


def rejected_of(p_values: npt.NDArray[np.float64], alpha: float) -> npt.NDArray[np.bool_]:
    """Which tests Holm's procedure rejects at family-wise ``alpha``, the family being the
    tests made (NaN: none made, never rejected)."""
    tested = np.flatnonzero(~np.isnan(p_values))
    rejected = np.zeros(len(p_values), dtype=bool)
    rejected[tested] = _holm(p_values[tested], alpha)
    return rejected


def _holm(p_values: npt.NDArray[np.float64], alpha: float) -> npt.NDArray[np.bool_]:
    """``holm``, by array: rejected in order of p-value until the first kept."""
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    kept = p_values[order] > alpha / (m - np.arange(m))
    stop = int(np.argmax(kept)) if kept.any() else m
    rejected = np.zeros(m, dtype=bool)
    rejected[order[:stop]] = True
    return rejected


def share_pct(count: int, of: int) -> float:
    """``count`` as a share of ``of`` samples, 0..100 (0 of none)."""
    return 100.0 * count / of if of else 0.0
