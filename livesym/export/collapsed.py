"""Folded stacks, ``root;caller;leaf count`` per line: flamegraph.pl and inferno read them.

One line per distinct stack of labels (stacks that differ only in addresses
inside the same functions are merged); the counts add up to the samples
``report`` counts. Labels are what ``report`` shows: the demangled name, or
``[reason] module`` for an unresolved frame. The format has no quoting, so the
three characters that would break a line apart are written as ``%3B`` (;),
``%0A`` and ``%0D`` (line breaks).
"""

from __future__ import annotations

from collections import Counter

from livesym.capture.model import Capture
from livesym.export.stacks import profile_frames, stack_counts
from livesym.profile import UNKNOWN_FRAME

_ESCAPES = str.maketrans({";": "%3B", "\n": "%0A", "\r": "%0D"})


def escape(label: str) -> str:
    return label.translate(_ESCAPES)


def collapsed(capture: Capture, *, include_idle: bool = False) -> str:
    frames = profile_frames(capture)
    labels = [escape(f.label) for f in frames]
    unknown = escape(UNKNOWN_FRAME.label)  # a sample without frames, as in the profile
    folded: Counter[str] = Counter()
    per_stack: Counter[int] = Counter()
    for (_tid, sid), n in stack_counts(capture, include_idle).items():
        per_stack[sid] += n
    for sid, n in per_stack.items():
        ids = capture.stacks[sid]
        folded[";".join(labels[i] for i in reversed(ids)) if ids else unknown] += n
    return "".join(f"{stack} {n}\n" for stack, n in sorted(folded.items()))
