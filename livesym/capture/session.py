"""A session's capture document, assembled from its tables at one moment.

The engine hands over ``Tables`` (its tables frozen, cheap to take on the event loop)
and ``SessionFacts`` (what the sampler, the target and the machine say of the
session); the document (docs/capture-format.md) is made here, off the loop, with
source lines filled in by whoever can look them up. Nothing here knows the engine or
a sampler.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from livesym import __version__
from livesym.capture.writer import document, sample_row
from livesym.records import (
    IDLE_FLAG,
    Capture,
    FrameRecord,
    GenerationRecord,
    ObjectRecord,
    ProcessRecord,
    ProcessStat,
)

# Frames with their source lines filled in where they can be (within a budget).
LineFiller = Callable[[list[FrameRecord]], list[FrameRecord]]


@dataclass(frozen=True)
class Tables:
    """The session's tables at one moment, for a capture written from them."""

    end: float
    state: str
    times: array[float]
    tids: array[int]
    stack_of: array[int]
    flags: array[int]
    weights: array[int]
    stacks: list[tuple[int, ...]]
    frames: list[FrameRecord]
    objects: list[ObjectRecord]
    generations: list[GenerationRecord]
    threads: dict[int, str]
    process: list[ProcessStat]
    processes: list[ProcessRecord]
    thread_pids: dict[int, int]


@dataclass(frozen=True)
class SessionFacts:
    """What a capture says of its session beside the tables: the target, the machine,
    the sampler (name, rate, idle, kernel mode, scope), the session's start on its
    clock, and the sampler's counts and errors so far."""

    target: dict[str, object]
    host: dict[str, object]
    sampler: dict[str, object]
    start: float
    samples: int
    lost: int
    errors: tuple[str, ...]
    lost_at: tuple[tuple[int, int], ...] = ()  # (second of the session, samples lost in it)


def session_document(
    t: Tables,
    facts: SessionFacts,
    lines: LineFiller | None = None,
) -> dict[str, object]:
    """The capture document of a session's tables ``t`` (times from ``facts.start``);
    with ``lines``, the frames of its stacks get their source lines."""
    start = facts.start
    samples = [
        sample_row(when - start, tid, stack, flags, weight)
        for when, tid, stack, flags, weight in zip(
            t.times, t.tids, t.stack_of, t.flags, t.weights, strict=True
        )
    ]
    return document(
        created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        version=__version__,
        target=facts.target,
        host=facts.host,
        sampler=facts.sampler,
        session={
            "start": start,
            "end": t.end,
            "end_reason": t.state,
            "samples": facts.samples,
            "lost": facts.lost,
            "lost_at": [list(pair) for pair in facts.lost_at],
            "errors": list(facts.errors),
        },
        maps=[dataclasses.replace(g, time=g.time - start) for g in t.generations],
        objects=t.objects,
        frames=with_lines(t.frames, t.stacks, lines) if lines is not None else t.frames,
        stacks=t.stacks,
        threads=t.threads,
        samples=samples,
        process=[dataclasses.replace(p, time=p.time - start) for p in t.process],
        processes=[p.moved(-start) for p in t.processes],
        thread_pids=t.thread_pids,
    )


def with_lines(
    frames: list[FrameRecord], stacks: list[tuple[int, ...]], lines: LineFiller
) -> list[FrameRecord]:
    """The frames, those of the stacks with their source lines: a frame no stack holds
    (an interpreter frame a mixed stack left out) is not worth the DWARF it costs."""
    used = sorted({i for stack in stacks for i in stack})
    out = list(frames)
    for record in lines([frames[i] for i in used]):
        out[record.id] = record
    return out


def capture_document(capture: Capture) -> dict[str, object]:
    """A loaded capture as a document again (times stay relative to the session start)."""
    return document(
        created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        version=__version__,
        target=capture.target,
        host=capture.host,
        sampler=capture.sampler,
        session=capture.session,
        maps=list(capture.maps),
        objects=list(capture.objects),
        frames=list(capture.frames),
        stacks=list(capture.stacks),
        threads=capture.threads,
        samples=[sample_row(*row) for row in capture.samples],
        process=list(capture.process),
        processes=list(capture.processes),
        thread_pids=capture.thread_pids,
    )


def last_seconds(
    t: Tables, facts: SessionFacts, since: float, period: float
) -> tuple[Tables, SessionFacts]:
    """The tables and facts of a session as if it had begun at ``since`` (on its clock):
    a flight recorder's dump of its last seconds. A sample is kept where its moment is
    at or after ``since``; a wait (weighed in ``period``s from where it began) is cut to
    its part after it, as ``capture.window`` cuts a range. The session's start becomes
    ``since``, so a reader gives the span the dump holds as its length."""
    keep: list[int] = []
    weights: list[int] = []
    times: list[float] = []
    for i, (when, flags, weight) in enumerate(zip(t.times, t.flags, t.weights, strict=True)):
        if when >= since:
            keep.append(i)
            times.append(when)
            weights.append(weight)
        elif flags & IDLE_FLAG and period > 0 and when + weight * period > since:
            kept = round((when + weight * period - since) / period)
            if kept > 0:
                keep.append(i)
                times.append(since)
                weights.append(kept)
    cut = dataclasses.replace(
        t,
        times=array("d", times),
        tids=array("q", (t.tids[i] for i in keep)),
        stack_of=array("q", (t.stack_of[i] for i in keep)),
        flags=array("b", (t.flags[i] for i in keep)),
        weights=array("q", weights),
        process=[p for p in t.process if p.time >= since],
    )
    first = math.floor(since - facts.start)
    lost_at = tuple((s - first, n) for s, n in facts.lost_at if s >= first)
    moved = dataclasses.replace(facts, start=since, lost_at=lost_at, samples=len(keep),
                                lost=sum(n for _, n in lost_at))  # fmt: skip
    return cut, moved


def session_capture(t: Tables, facts: SessionFacts) -> Capture:
    """The session's tables ``t`` as a loaded capture, without the JSON between (what a
    document of them would read back as; times from ``facts.start``): an interval sent
    by ``record --push`` every few seconds, made from records the session already has."""
    start = facts.start
    return Capture(
        target=dict(facts.target),
        host=dict(facts.host),
        sampler=dict(facts.sampler),
        session={"start": start, "end": t.end, "end_reason": t.state,
                 "samples": facts.samples, "lost": facts.lost, "errors": list(facts.errors)},
        maps=tuple(dataclasses.replace(g, time=g.time - start) for g in t.generations),
        objects=tuple(t.objects),
        frames=tuple(t.frames),
        stacks=tuple(t.stacks),
        threads=dict(t.threads),
        samples=tuple(
            (when - start, tid, stack, flags, weight)
            for when, tid, stack, flags, weight in zip(
                t.times, t.tids, t.stack_of, t.flags, t.weights, strict=True
            )
        ),
        process=tuple(dataclasses.replace(p, time=p.time - start) for p in t.process),
        processes=tuple(p.moved(-start) for p in t.processes),
        thread_pids=dict(t.thread_pids),
    )  # fmt: skip
