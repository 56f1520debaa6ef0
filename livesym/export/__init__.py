"""Captures in the formats other profiling tools read: collapsed stacks, speedscope, pprof.

Each exporter is a pure function from a ``Capture`` to the bytes of a file
(docs/sharing.md says how to open them). They count what ``livesym report``
counts: the capture's on-CPU samples (idle ones too when asked), one frame per
function as the profile aggregates them.
"""
