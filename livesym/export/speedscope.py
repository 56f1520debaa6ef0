"""The speedscope file format (https://www.speedscope.app/file-format-schema.json).

One "sampled" profile per thread of each process, busiest first, over one shared
frame table; with several processes a profile's name says its process first
(``name PID: thread (TID)``).
A frame is a function as the profile counts it: ``name`` is its label (the
demangled name, or ``[reason] module``), ``file`` its module (for a Python
function, its source file) and, for a Python function, ``line`` the first
line of it that was sampled. Samples are in time order, root first, with
consecutive equal stacks merged; weights are sample counts (unit "none"), so
they add up to what ``report`` counts.
"""

from __future__ import annotations

from operator import itemgetter

import orjson

from livesym import __version__
from livesym.export.stacks import Processes, counted
from livesym.records import KIND_PYTHON, UNKNOWN_FRAME, Capture, Frame, TimeMode

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope(capture: Capture, *, mode: TimeMode = TimeMode.CPU, name: str = "livesym") -> bytes:
    return orjson.dumps(speedscope_document(capture, mode=mode, name=name))


def speedscope_document(
    capture: Capture, *, mode: TimeMode = TimeMode.CPU, name: str = "livesym"
) -> dict[str, object]:
    table = _FrameTable(capture)
    per_thread: dict[int, tuple[list[list[int]], list[int]]] = {}
    # Stable: samples with equal times keep the capture's order.
    for _t, tid, sid, _flags, weight in sorted(counted(capture, mode), key=itemgetter(0)):
        stack = table.stack(sid)
        samples, weights = per_thread.setdefault(tid, ([], []))
        if samples and samples[-1] is stack:
            weights[-1] += weight
        else:
            samples.append(stack)
            weights.append(weight)
    processes = Processes(capture)
    profiles = []
    for tid, (samples, weights) in sorted(
        per_thread.items(), key=lambda item: (-sum(item[1][1]), item[0])
    ):
        total = sum(weights)
        thread = capture.threads.get(tid, "")
        title = f"{thread} ({tid})" if thread else str(tid)
        if processes.several:
            pid = processes.pid(tid)
            title = f"{processes.name(pid)} {pid}: {title}"
        profiles.append(
            {
                "type": "sampled",
                "name": title,
                "unit": "none",  # sampling periods
                "startValue": 0,
                "endValue": total,
                "samples": samples,
                "weights": weights,
            }
        )
    return {
        "$schema": SCHEMA,
        "name": name,
        "exporter": f"livesym {__version__}",
        "activeProfileIndex": 0,
        "shared": {"frames": table.frames},
        "profiles": profiles,
    }


class _FrameTable:
    """Speedscope frames, one per profile function, and each capture stack as their indices."""

    def __init__(self, capture: Capture) -> None:
        self._capture = capture
        self.frames: list[dict[str, object]] = []
        self._index: dict[Frame, int] = {}
        self._by_record: list[int] = []
        first_line: dict[Frame, int] = {}
        for record in capture.frames:
            frame = record.frame()
            self._by_record.append(self._add(frame))
            if record.kind == KIND_PYTHON and record.line is not None and record.line > 0:
                first_line[frame] = min(first_line.get(frame, record.line), record.line)
        for frame, line in first_line.items():
            self.frames[self._index[frame]]["line"] = line
        self._stacks: dict[int, list[int]] = {}
        self._interned: dict[tuple[int, ...], list[int]] = {}

    def _add(self, frame: Frame) -> int:
        index = self._index.get(frame)
        if index is None:
            index = self._index[frame] = len(self.frames)
            entry: dict[str, object] = {"name": frame.label}
            if frame.module:
                entry["file"] = frame.module
            self.frames.append(entry)
        return index

    def stack(self, sid: int) -> list[int]:
        """Root first; one list object per distinct stack of frames, whatever the stack id
        (two addresses in one function are one frame), so repeats are cheap to spot."""
        found = self._stacks.get(sid)
        if found is None:
            ids = self._capture.stacks[sid]
            if ids:
                key = tuple(self._by_record[i] for i in reversed(ids))
            else:
                key = (self._add(UNKNOWN_FRAME),)
            found = self._stacks[sid] = self._interned.setdefault(key, list(key))
        return found
