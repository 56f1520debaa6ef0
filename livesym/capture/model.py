"""The capture format's name and version (docs/capture-format.md).

The record types are the package's shared vocabulary and live in
``livesym.records``; this module names the format and its version.
"""

from __future__ import annotations

FORMAT = "livesym-capture"
VERSION = 1
