"""The capture format's name and version (docs/capture-format.md).

The record types are the package's shared vocabulary and live in
``livesym.records``; this module names the format and its version.
"""

from __future__ import annotations

FORMAT = "livesym-capture"
# Version 2 (issue 14): frames of kind "truncated" (a stack that stopped early) and the
# reason "unnamed_function" (FDE bounds). Version 1 captures have neither and read as
# they are.
VERSION = 2
READABLE_VERSIONS = (1, 2)
