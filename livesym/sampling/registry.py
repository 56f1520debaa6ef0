"""The samplers by name, loaded on first use: ``--sampler`` takes these names, and
naming them costs the command line nothing (a sampler's module loads ctypes ABIs,
psutil or py-spy's parser only when chosen).

Each class is a ``Sampler``: ``available()`` says why it cannot run here (or None),
``default_rate_hz`` is its rate when ``--rate`` is not given.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from livesym.sampling.base import Sampler

# In the order ``auto`` prefers them for a native program (mixed or py-spy: Python programs).
SAMPLERS = {
    "perf": "livesym.sampling.perf_event:PerfSampler",
    "ptrace": "livesym.sampling.ptrace:PtraceSampler",
    "pyspy": "livesym.sampling.pyspy:PySpySampler",
    "mixed": "livesym.sampling.mixed:MixedSampler",
}
NAMES = tuple(SAMPLERS)
# Processes one session samples at most (--max-processes): each costs a sampler, its
# maps and, with perf, a file descriptor per thread.
DEFAULT_MAX_PROCESSES = 128


def sampler_class(name: str) -> type[Sampler]:
    """The sampler class registered as ``name`` (one of NAMES)."""
    module, _, cls = SAMPLERS[name].partition(":")
    found: type[Sampler] = getattr(importlib.import_module(module), cls)
    return found
