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

from livesym.profile.aggregate import FunctionRow, ProfileView
from livesym.records import Frame, Reason

ALPHA = 0.001  # family-wise: the chance a diff of one workload flags anything
MIN_EXPECTED = 5  # samples each side must expect, either way, for a test to be made

MatchKey = tuple[str, str, str]  # (kind, module, name)

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
        return (frame.kind, module, frame.symbol)
    if frame.reason is Reason.UNNAMED_FUNCTION and frame.vaddr is not None:
        return (frame.kind, module, f"@{frame.vaddr:#x}")
    return (frame.kind, module, frame.label)


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


@dataclass(frozen=True)
class ProfileDiff:
    """Every function of either side, largest change first."""

    base_samples: int
    new_samples: int
    functions: tuple[FunctionDiff, ...]
    tests: int  # tests made (the family Holm's correction divides ALPHA by)
    alpha: float = ALPHA

    @property
    def significant(self) -> tuple[FunctionDiff, ...]:
        return tuple(f for f in self.functions if f.significant)


def _merged(rows: Iterable[FunctionRow], samples: int) -> dict[MatchKey, tuple[Frame, Counts]]:
    merged: dict[MatchKey, tuple[Frame, Counts]] = {}
    for row in rows:
        key = match_key(row.frame)
        had = merged.get(key)
        if had is None:
            merged[key] = (row.frame, Counts(row.self_samples, row.total_samples))
            continue
        frame, counts = had
        if row.self_samples > counts.self_samples:
            frame = row.frame  # the one that names most of it
        # (totals of two frames may hold the same sample: never more than all of them)
        total = min(samples, counts.total_samples + row.total_samples)
        merged[key] = (frame, Counts(counts.self_samples + row.self_samples, total))
    return merged


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


def _tests(base: Counts, new: Counts, n1: int, n2: int) -> list[float]:
    """The function's tests' p-values: self and total, or one where they are one."""
    pairs = {(base.self_samples, new.self_samples), (base.total_samples, new.total_samples)}
    out = []
    for x1, x2 in sorted(pairs):
        p = two_proportion_p(x1, n1, x2, n2)
        if p is not None:
            out.append(p)
    return out


def diff_views(base: ProfileView, new: ProfileView, alpha: float = ALPHA) -> ProfileDiff:
    """``new`` against ``base``, every function of either, largest change first."""
    n1, n2 = base.samples, new.samples
    left = _merged(base.functions.unordered(), n1)
    right = _merged(new.functions.unordered(), n2)
    keys = list(left.keys() | right.keys())
    empty = Counts()
    per_key: list[list[float]] = []
    for key in keys:
        b = left.get(key, (None, empty))[1]
        a = right.get(key, (None, empty))[1]
        per_key.append(_tests(b, a, n1, n2))
    flat = [p for ps in per_key for p in ps]
    rejected = iter(holm(flat, alpha))
    out: list[FunctionDiff] = []
    for key, ps in zip(keys, per_key, strict=True):
        frame_b, b = left.get(key, (None, empty))
        frame_a, a = right.get(key, (None, empty))
        frame = frame_a or frame_b
        assert frame is not None  # every key came from one side
        flags = [next(rejected) for _ in ps]
        out.append(
            FunctionDiff(
                frame=frame, base=b, new=a,
                base_self_pct=_pct(b.self_samples, n1), new_self_pct=_pct(a.self_samples, n2),
                base_total_pct=_pct(b.total_samples, n1), new_total_pct=_pct(a.total_samples, n2),
                significant=any(flags), p_value=min(ps) if ps else None,
            )
        )  # fmt: skip
    out.sort(key=lambda f: (-f.change, f.frame.order))
    return ProfileDiff(n1, n2, tuple(out), len(flat), alpha)


def _pct(count: int, of: int) -> float:
    return 100.0 * count / of if of else 0.0
