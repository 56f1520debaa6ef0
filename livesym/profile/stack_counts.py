"""Samples per stack, and where in a function they were: the hot addresses.

``Profile`` counts by function; the details screen also asks, for one function,
which of its addresses the samples were at. That needs counts per stack of
*frame records* (addresses), not of functions, under the same selection a view
makes (thread, idle, recent window, module). ``StackCounts`` keeps those counts
since the last reset, per leaf frame too (the mappings pane), and an index from
each function to the stacks that hold it, built lazily: a replay of a million
samples builds it once, when nobody waits, rather than on the first Enter.

Pure: the stack and frame tables, and the sample arrays for a recent window,
are handed in by the engine that owns them; nothing here reads a clock.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from livesym.records import IDLE_FLAG, Frame, FrameRecord, TimeMode

# (thread id, idle, stack id, samples): one group of samples to count.
StackCount = tuple[int, bool, int, int]


class HotAddress(NamedTuple):
    """An address in a function with the samples in it; ``call``: the address of a call
    the function was making (a caller's frame), not an instruction it was executing."""

    record: FrameRecord
    samples: int
    call: bool


class SampleArrays(NamedTuple):
    """The session's samples, one entry each, in the order they were taken."""

    times: array[float]
    tids: array[int]
    stack_of: array[int]
    weights: array[int]  # sampling periods each stands for
    flags: array[int]  # bit 0: off the CPU (records.IDLE_FLAG); bits 1-2: why


class StackCounts:
    """Samples per stack and per leaf frame since the last reset, by thread and idleness.

    ``stacks`` (stack id -> frame ids, leaf first) and ``frames`` (frame id ->
    record) are the owner's tables, which only grow; ``frame_of`` gives the
    profile's function of a frame id (equal Frames: one function).
    """

    def __init__(
        self,
        stacks: Sequence[tuple[int, ...]],
        frames: Sequence[FrameRecord],
        frame_of: Callable[[int], Frame],
    ) -> None:
        self._stacks = stacks
        self._frames = frames
        self._frame_of = frame_of
        self.reset()
        self.forget_functions()

    def forget_functions(self) -> None:
        """Drop the function -> stacks index (frames were renamed): made again on use."""
        # Which stacks hold a function, for stacks up to len(_stack_functions).
        self._function_ids: dict[Frame, int] = {}  # equal Frames of many records: one id
        self._function_of: list[int] = []  # frame id -> function id (-1: not yet)
        self._stacks_with: list[list[int]] = []  # function id -> stacks holding it
        self._stack_functions: list[tuple[int, ...]] = []  # stack id -> function ids

    def reset(self) -> None:
        # Samples per stack for each (thread, idle): hot addresses under a thread filter.
        self._groups: dict[tuple[int, bool], dict[int, int]] = {}
        self._running: list[int] = [0] * len(self._stacks)  # running samples per stack
        self._idle: dict[int, int] = {}  # idle samples per stack, all threads
        self.leaves: dict[int, int] = {}  # samples per leaf frame id

    def add(self, counts: Iterable[StackCount]) -> None:
        groups = self._groups
        leaves = self.leaves
        stacks = self._stacks
        running = self._running
        running.extend([0] * (len(stacks) - len(running)))
        idle_counts = self._idle
        for tid, idle, stack_id, n in counts:
            group = groups.get((tid, idle))
            if group is None:
                group = groups[(tid, idle)] = {}
            group[stack_id] = group.get(stack_id, 0) + n
            if idle:
                idle_counts[stack_id] = idle_counts.get(stack_id, 0) + n
            else:
                running[stack_id] += n
            stack = stacks[stack_id]
            if stack:
                leaves[stack[0]] = leaves.get(stack[0], 0) + n

    def index(self) -> None:
        """Bring the function -> stacks index up to date with the stack table."""
        function_id = self._function_id
        stacks_with = self._stacks_with
        stacks = self._stacks
        for stack_id in range(len(self._stack_functions), len(stacks)):
            functions = tuple([function_id(i) for i in stacks[stack_id]])
            self._stack_functions.append(functions)
            for fn in set(functions):
                stacks_with[fn].append(stack_id)

    def _function_id(self, frame_id: int) -> int:
        of = self._function_of
        if frame_id >= len(of):
            of.extend([-1] * (len(self._frames) - len(of)))
        fn = of[frame_id]
        if fn < 0:
            fn = self._function_ids.setdefault(self._frame_of(frame_id), len(self._function_ids))
            if fn == len(self._stacks_with):
                self._stacks_with.append([])
            of[frame_id] = fn
        return fn

    def hot_addresses(
        self, frame: Frame, limit: int, count: Callable[[int], int], module: str | None
    ) -> list[HotAddress]:
        """Where in ``frame`` the samples ``count`` selects (samples per stack id) were,
        hottest first. For each sample holding ``frame``, its innermost occurrence: the
        executing instruction when the function was the leaf, else the call it was in
        (for Python functions, the line); an address seen both ways is two entries."""
        self.index()
        fn = self._function_ids.get(frame)
        if fn is None:
            return []
        found: dict[tuple[int, bool], int] = {}
        for stack_id in self._stacks_with[fn]:
            n = count(stack_id)
            if not n:
                continue
            stack = self._stacks[stack_id]
            if module is not None and (not stack or self._frames[stack[0]].module != module):
                continue  # the module filter selects by the leaf frame, as views do
            at = self._stack_functions[stack_id].index(fn)
            key = (stack[at], at > 0)
            found[key] = found.get(key, 0) + n
        ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
        return [HotAddress(self._frames[fid], n, call) for (fid, call), n in ranked[:limit]]

    def selected(
        self, thread: int | None, mode: TimeMode, among: frozenset[int] | None = None
    ) -> Callable[[int], int]:
        """Samples per stack id of the selected threads and time (``mode``), since the
        reset (``among``: only these threads, a process's)."""
        if among is not None:
            parts = [
                by_stack
                for (tid, idle), by_stack in self._groups.items()
                if tid in among and (thread is None or tid == thread) and mode.takes(idle)
            ]
            merged: Counter[int] = Counter()
            for part in parts:
                merged.update(part)
            return merged.__getitem__
        if thread is not None:
            running = self._groups.get((thread, False), {}) if mode.takes(False) else {}
            idle = self._groups.get((thread, True), {}) if mode.takes(True) else {}
            return lambda sid: running.get(sid, 0) + idle.get(sid, 0)
        counts = self._running
        idle_counts = self._idle
        if not mode.takes(True):
            return lambda sid: counts[sid] if sid < len(counts) else 0
        if not mode.takes(False):
            return lambda sid: idle_counts.get(sid, 0)
        return lambda sid: (counts[sid] if sid < len(counts) else 0) + idle_counts.get(sid, 0)


def recent_stack_counts(
    samples: SampleArrays,
    first: int,
    cutoff: float,
    thread: int | None,
    mode: TimeMode,
    among: frozenset[int] | None = None,
    until: float = math.inf,
) -> Counter[int]:
    """Samples per stack id taken at ``cutoff`` or later and before ``until``, from index
    ``first`` on (of thread ``thread``, and of the threads ``among``, where given),
    weighed."""
    times, tids, stack_of, weights, flags = samples
    # Sample times come nearly in order (per-CPU buffers are read in turn):
    # start and end a second wide, then select exactly.
    start = max(first, bisect_left(times, cutoff - 1.0))
    end = len(times) if until == math.inf else bisect_left(times, until + 1.0)
    out: Counter[int] = Counter()
    for i in range(start, end):
        if (
            cutoff <= times[i] < until
            and mode.takes(bool(flags[i] & IDLE_FLAG))
            and (thread is None or tids[i] == thread)
            and (among is None or tids[i] in among)
        ):
            out[stack_of[i]] += weights[i]
    return out
