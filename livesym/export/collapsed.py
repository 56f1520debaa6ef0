"""Folded stacks, ``root;caller;leaf count`` per line: flamegraph.pl and inferno read them.

One line per distinct stack of labels (stacks that differ only in addresses
inside the same functions are merged); the counts add up to the samples
``report`` counts. Labels are what ``report`` shows: the demangled name, or
``[reason] module`` for an unresolved frame. The format has no quoting, so the
characters that would break a line apart are percent-encoded: ``%3B`` (;),
``%0A`` and ``%0D`` (line breaks). So is every other control character (C0,
DEL and C1, as the bytes of its UTF-8: ESC is ``%1B``, U+009B is ``%C2%9B``):
the folded lines are printed on terminals and end up in SVG, where an escape
sequence or a C0 character does harm.

With ``by_process`` (``export --pid``) each stack starts with its process,
``name-PID``, as ``stackcollapse-perf.pl --pid`` writes it: a flame graph then has
one tower per process.
"""

from __future__ import annotations

from collections import Counter

from livesym.export.stacks import Processes, profile_frames, stack_counts
from livesym.records import UNKNOWN_FRAME, Capture, TimeMode

_CONTROLS = [*range(0x20), 0x7F, *range(0x80, 0xA0)]
_ESCAPES = str.maketrans(
    {";": "%3B"} | {chr(c): "".join(f"%{b:02X}" for b in chr(c).encode()) for c in _CONTROLS}
)


def escape(label: str) -> str:
    return label.translate(_ESCAPES)


def collapsed(capture: Capture, *, mode: TimeMode = TimeMode.CPU, by_process: bool = False) -> str:
    frames = profile_frames(capture)
    labels = [escape(f.label) for f in frames]
    unknown = escape(UNKNOWN_FRAME.label)  # a sample without frames, as in the profile
    folded: Counter[str] = Counter()
    per_stack: Counter[tuple[str, int]] = Counter()
    processes = Processes(capture)
    for (tid, sid), n in stack_counts(capture, mode).items():
        prefix = ""
        if by_process:
            pid = processes.pid(tid)
            prefix = f"{escape(processes.name(pid) or '?')}-{pid};"
        per_stack[(prefix, sid)] += n
    for (prefix, sid), n in per_stack.items():
        ids = capture.stacks[sid]
        folded[prefix + (";".join(labels[i] for i in reversed(ids)) if ids else unknown)] += n
    return "".join(f"{stack} {n}\n" for stack, n in sorted(folded.items()))
