"""The spin target's ground truth, taken from its registry entry rather than retyped."""

from __future__ import annotations

from livesym.sample_targets import TARGETS

_HOT = TARGETS["spin"].hot_functions

# Functions that spin's samples land in (leaf_work is called from hot_alpha).
HOT = frozenset(name for name, _share in _HOT)
# Each worker thread (alpha, beta, gamma) runs one hot_* function, so its share of
# the samples is that function's share, in percent.
NOMINAL = {
    name.removeprefix("hot_"): round(share * 100, 1)
    for name, share in _HOT
    if name.startswith("hot_")
}
