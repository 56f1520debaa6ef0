"""The capture format's name and version (docs/capture-format.md).

The record types are the package's shared vocabulary and live in
``livesym.records``; this module names the format and its version.
"""

from __future__ import annotations

FORMAT = "livesym-capture"
# Version 2 (issue 14): frames of kind "truncated" (a stack that stopped early) and the
# reason "unnamed_function" (FDE bounds). Version 1 captures have neither and read as
# they are.
# Version 3 (issue 15): frames of kind "kernel" (named from /proc/kallsyms; their vma
# is the kernel address), and the sampler's "kernel" (how kernel time was seen).
# Version 4 (issue 17): several processes: a ``processes`` table, each thread's process
# (``thread_pids``) and each maps generation's (``pid``). Older captures are one process,
# the target.
# Version 5 (issue 29): off-CPU time: a sample's flags say why its thread was off the CPU
# (bits 1-2), a fifth element in a sample's row its weight in sampling periods (an
# off-CPU interval's length), and the sampler's ``mode`` (cpu, wall or off-cpu).
# Version 6 (issue 31): the chunked layout a recording appends to (a header line, then a
# line a chunk, each saying what is new); a whole document is as in version 5.
VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
LAYOUT_CHUNKS = "chunks"  # the header's "layout" in the chunked form
MAX_WEIGHT = 1 << 40  # sampling periods one sample may stand for (a bound, not a use)
# The frames each version brought: a file of an older version holding them was not
# written by the livesym of that version.
NEW_IN = {
    2: "truncated frames or unnamed functions",
    3: "kernel frames or stops at a system call's exit",
}
