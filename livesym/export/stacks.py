"""What every exporter needs from a capture: its samples counted per stack, and labels."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

from livesym.records import IDLE_FLAG, UNKNOWN_FRAME, Capture, Frame, TimeMode


def counted(capture: Capture, mode: TimeMode) -> Iterable[tuple[float, int, int, int, int]]:
    """The samples ``report`` counts in ``mode``: on the CPU, off it, or both."""
    if mode is TimeMode.WALL:
        return capture.samples
    return (s for s in capture.samples if mode.takes(bool(s[3] & IDLE_FLAG)))


def stack_counts(capture: Capture, mode: TimeMode) -> Counter[tuple[int, int]]:
    """Samples (their weights: sampling periods) per (thread id, stack id)."""
    out: Counter[tuple[int, int]] = Counter()
    for _t, tid, sid, _f, weight in counted(capture, mode):
        out[(tid, sid)] += weight
    return out


def capture_mode(capture: Capture) -> TimeMode:
    """The time a capture's session was asked for (before version 5: its "idle")."""
    try:
        return TimeMode.parse(capture.sampler.get("mode"))
    except ValueError:
        return TimeMode.WALL if capture.sampler.get("idle") is True else TimeMode.CPU


def profile_frames(capture: Capture) -> list[Frame]:
    """The profile's function for each frame record, by frame id."""
    return [record.frame() for record in capture.frames]


def stack_frames(capture: Capture, frames: list[Frame], stack_id: int) -> tuple[Frame, ...]:
    """A stack's functions, leaf first; a sample without frames is ``[unknown]``, as in the
    profile."""
    ids = capture.stacks[stack_id]
    return tuple(frames[i] for i in ids) if ids else (UNKNOWN_FRAME,)


class Processes:
    """Each thread's process, as a capture says: its pid and name (a capture before
    version 4, or a thread it did not place, is the target's)."""

    def __init__(self, capture: Capture) -> None:
        pid = capture.target.get("pid")
        self.target = pid if isinstance(pid, int) and not isinstance(pid, bool) else 0
        self._pids = capture.thread_pids
        self.records = {p.pid: p for p in capture.processes}
        cmdline = capture.target.get("cmdline")
        self._target_name = (
            os.path.basename(str(cmdline[0])) if isinstance(cmdline, list) and cmdline else ""
        )

    @property
    def several(self) -> bool:
        return len(self.records) > 1

    def pid(self, tid: int) -> int:
        return self._pids.get(tid, self.target)

    def name(self, pid: int) -> str:
        record = self.records.get(pid)
        if record is not None:
            return record.name
        return self._target_name if pid == self.target else ""
