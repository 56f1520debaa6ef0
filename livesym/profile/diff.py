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

import heapq
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

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


class ProfileDiff:
    """Every function of either side, largest change first, made into ``FunctionDiff``
    rows as they are read (a diff of two big profiles has tens of thousands; a table
    shows a screenful: ``top``)."""

    __slots__ = ("_all", "_by_key", "_entries", "_frames", "_p", "_significant", "alpha",
                 "base_samples", "new_samples", "tests")  # fmt: skip

    def __init__(
        self, base_samples: int, new_samples: int, entries: list[_Entry],
        frames: dict[MatchKey, Frame], p_values: dict[MatchKey, float],
        significant: set[MatchKey], tests: int, alpha: float = ALPHA,
    ) -> None:  # fmt: skip
        self.base_samples, self.new_samples = base_samples, new_samples
        self.tests, self.alpha = tests, alpha  # (tests: the family Holm divides alpha by)
        self._entries, self._frames = entries, frames
        self._p, self._significant = p_values, significant
        self._all: tuple[FunctionDiff, ...] | None = None
        self._by_key: dict[MatchKey, _Entry] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def of(self, frame: Frame) -> FunctionDiff | None:
        """The row of the function ``frame`` names (matched as every function is)."""
        if self._by_key is None:
            self._by_key = {e[1]: e for e in self._entries}
        entry = self._by_key.get(_key(frame))
        return None if entry is None else self._row(entry)

    def _row(self, entry: _Entry) -> FunctionDiff:
        _less, key, bs, bt, ns, nt = entry
        n1, n2 = self.base_samples, self.new_samples
        return FunctionDiff(
            frame=self._frames[key], base=Counts(bs, bt), new=Counts(ns, nt),
            base_self_pct=share_pct(bs, n1), new_self_pct=share_pct(ns, n2),
            base_total_pct=share_pct(bt, n1), new_total_pct=share_pct(nt, n2),
            significant=key in self._significant, p_value=self._p.get(key),
        )  # fmt: skip

    def top(self, n: int) -> list[FunctionDiff]:
        """The ``n`` largest changes, largest first (only those made)."""
        if self._all is not None:
            return list(self._all[:n])
        return [self._row(e) for e in heapq.nsmallest(n, self._entries)]

    @property
    def functions(self) -> tuple[FunctionDiff, ...]:
        if self._all is None:
            self._all = tuple(self._row(e) for e in sorted(self._entries))
        return self._all

    @property
    def significant(self) -> tuple[FunctionDiff, ...]:
        return tuple(self._row(e) for e in sorted(self._entries) if e[1] in self._significant)


# (minus the largest change in points, key, base self, base total, new self, new total):
# entries sort as rows are listed, largest change first, ties by key, without a key
# function (a diff of two big profiles sorts tens of thousands)
_Entry = tuple[float, MatchKey, int, int, int, int]

_KEY_CACHE: dict[Frame, MatchKey] = {}
_KEY_CACHE_MAX = 1 << 19  # frames whose keys are kept (a live diff asks for the same ones)


def _key(frame: Frame) -> MatchKey:
    key = _KEY_CACHE.get(frame)
    if key is None:
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        key = _KEY_CACHE[frame] = match_key(frame)
    return key


def _merged(
    counts: Iterable[tuple[Frame, int, int]], samples: int
) -> tuple[dict[MatchKey, tuple[int, int]], dict[MatchKey, Frame]]:
    merged: dict[MatchKey, tuple[int, int]] = {}
    frames: dict[MatchKey, Frame] = {}
    for frame, own, total in counts:
        key = _key(frame)
        had = merged.get(key)
        if had is None:
            merged[key] = (own, total)
            frames[key] = frame
            continue
        if own > had[0]:
            frames[key] = frame  # the one that names most of it
        # (totals of two frames may hold the same sample: never more than all of them)
        merged[key] = (had[0] + own, min(samples, had[1] + total))
    return merged, frames


def two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float | None:
    """The two-sided p-value of the pooled z-test that ``x1/n1`` and ``x2/n2`` are one
    proportion; None where either side expects fewer than MIN_EXPECTED samples either
    way (the normal approximation does not hold)."""
    if n1 <= 0 or n2 <= 0:
        return None
    pooled = (x1 + x2) / (n1 + n2)
    low = min(n1, n2) * min(pooled, 1.0 - pooled)
    if low < MIN_EXPECTED:
        return None
    spread = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2))
    z = abs(x1 / n1 - x2 / n2) / spread
    return math.erfc(z / math.sqrt(2.0))


def holm(p_values: list[float], alpha: float) -> list[bool]:
    """Which of ``p_values`` Holm's step-down procedure rejects at family-wise ``alpha``."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    rejected = [False] * len(p_values)
    m = len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected


def diff_views(base: ProfileView, new: ProfileView, alpha: float = ALPHA) -> ProfileDiff:
    """``new`` against ``base``: every function of either, largest change first."""
    n1, n2 = base.samples, new.samples
    left, base_frames = _merged(base.functions.counts(), n1)
    right, frames = _merged(new.functions.counts(), n2)
    for key, frame in base_frames.items():
        frames.setdefault(key, frame)  # (the new side's frame names a function both have)
    k1, k2 = (100.0 / n1 if n1 else 0.0), (100.0 / n2 if n2 else 0.0)
    # A share is testable only where min(n1, n2) * pooled >= MIN_EXPECTED: most functions
    # of a big profile are far under it, and are passed over without a test.
    floor = MIN_EXPECTED * (n1 + n2) / min(n1, n2) if n1 and n2 else math.inf
    entries: list[_Entry] = []
    tested: list[tuple[float, MatchKey]] = []
    add = entries.append
    for key, (ns, nt) in right.items():
        bs, bt = left.pop(key, _NOTHING)
        add((-max(abs(ns * k2 - bs * k1), abs(nt * k2 - bt * k1)), key, bs, bt, ns, nt))
        if bt + nt >= floor:
            _test(key, bs, bt, ns, nt, n1, n2, floor, tested)
    for key, (bs, bt) in left.items():  # (only BASE has these now)
        add((-max(bs * k1, bt * k1), key, bs, bt, 0, 0))
        if bt >= floor:
            _test(key, bs, bt, 0, 0, n1, n2, floor, tested)
    rejected = holm([p for p, _ in tested], alpha)
    p_values: dict[MatchKey, float] = {}
    for p, key in tested:
        p_values[key] = min(p, p_values.get(key, 1.0))
    significant = {key for (_, key), yes in zip(tested, rejected, strict=True) if yes}
    return ProfileDiff(n1, n2, entries, frames, p_values, significant, len(tested), alpha)


_NOTHING = (0, 0)


def _test(
    key: MatchKey, bs: int, bt: int, ns: int, nt: int, n1: int, n2: int, floor: float,
    tested: list[tuple[float, MatchKey]],
) -> None:  # fmt: skip
    """The function's tests, self and total (one where they are the same counts)."""
    for x1, x2 in ((bs, ns), (bt, nt)) if (bs, ns) != (bt, nt) else ((bt, nt),):
        if x1 + x2 >= floor and (p := two_proportion_p(x1, n1, x2, n2)) is not None:
            tested.append((p, key))


def share_pct(count: int, of: int) -> float:
    """``count`` as a share of ``of`` samples, 0..100 (0 of none)."""
    return 100.0 * count / of if of else 0.0
