"""The capture's contents as data (docs/capture-format.md), independent of JSON.

The record types are the package's shared vocabulary and live in
``livesym.records``; this module names the format and its version, and gives the
capture code one place to import its records from.
"""

from __future__ import annotations

from livesym.records import (
    Capture,
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    ProcessStat,
    named_frame_record,
    python_frame_record,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "Capture",
    "FrameRecord",
    "GenerationRecord",
    "MappingRecord",
    "ObjectRecord",
    "ProcessStat",
    "named_frame_record",
    "python_frame_record",
]

FORMAT = "livesym-capture"
VERSION = 1
