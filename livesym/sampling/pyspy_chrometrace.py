"""Reading py-spy's ``record --format chrometrace`` output: each thread's Python stack
over time (pure; no py-spy needed).

Why this format for mixed stacks (``livesym.sampling.mixed``): there the samples are
perf's, with exact times, and py-spy is asked only what the Python stack of a thread
was at a moment. Chrometrace answers that to the microsecond: py-spy compares each
thread's stack with the one it saw at the previous interval and writes, stamped with
the time since it started, an end event (``"ph": "E"``) for every frame that left and
a begin event (``"B"``) for every frame that came. Replaying the events gives the
stack each time it was seen to change; between changes it held. (Speedscope, the
format of the py-spy sampler, keeps every sample but no times: py-spy's intervals are
random, so its times are known only to tens of milliseconds mid-window.)

The events of one interval share a time; the ends come leaf first, then the begins
root first. With ``--threads`` each thread's root frame is ``thread (TID): NAME``, the
OS thread id (``tid`` itself is the pthread id). When py-spy writes the file it closes
every stack still open with end events at that moment: those say when it stopped,
not that a stack changed. A file is untrusted: bounded in size by the caller, in events
and depth here; any other shape is a ``ChrometraceError``.

Written by hand: py-spy's own output, in a shape no library reads for us; orjson does
the JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from livesym.sampling.pyspy_parse import THREAD_FRAME, Frame, frame_of

MAX_EVENTS = 5_000_000  # events in one file
MAX_DEPTH = 4096  # frames open at once in one thread


class ChrometraceError(ValueError):
    """The file is not py-spy's chrometrace output (its message says what is wrong)."""


@dataclass
class ThreadTimeline:
    """One thread's stacks as py-spy saw them change: ``stacks[i]`` (leaf first, the
    thread's root frame left out) from ``times[i]`` (seconds since py-spy started) on."""

    key: int  # the event's tid: the pthread id
    tid: int | None = None  # the OS thread id, from the root frame
    name: str | None = None  # the threading name, from the root frame
    times: list[float] = field(default_factory=list)
    stacks: list[tuple[Frame, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class Timelines:
    """A chrometrace file read: every thread's timeline, the first event's time and the
    time py-spy wrote the file (its closing events'), in seconds since it started."""

    threads: tuple[ThreadTimeline, ...]
    first: float | None
    end: float | None
    unbalanced: int = 0  # end events with nothing open to end (counted, skipped)


@dataclass
class _Open:
    """A thread's frames open now, root first, and the root's thread facts."""

    timeline: ThreadTimeline
    frames: list[Frame | tuple[int | None, str | None]] = field(default_factory=list)


def read_chrometrace(data: bytes) -> Timelines:
    """Every thread's timeline in ``data``; raises ChrometraceError on anything else."""
    try:
        events = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ChrometraceError(f"not JSON ({e})") from None
    if not isinstance(events, list):
        raise ChrometraceError("the top level is not a list of events")
    if len(events) > MAX_EVENTS:
        raise ChrometraceError(f"more than {MAX_EVENTS} events")
    parsed = [_event(e) for e in events]
    end = max((ts for ts, *_ in parsed), default=None)
    # The closing events py-spy adds when it writes the file: ends only, at the last time.
    closing = end is not None and all(ph == "E" for ts, _, ph, _ in parsed if ts == end)
    threads: dict[int, _Open] = {}
    unbalanced = 0
    current: tuple[int, int] | None = None  # (tid, ts) of the interval being replayed
    for ts, tid, ph, frame in parsed:
        if closing and ts == end:
            break
        if current is not None and current != (tid, ts):
            _seen(threads[current[0]], current[1])
        current = (tid, ts)
        state = threads.get(tid)
        if state is None:
            state = threads[tid] = _Open(ThreadTimeline(tid))
        if ph == "B":
            if len(state.frames) >= MAX_DEPTH:
                raise ChrometraceError(f"a stack deeper than {MAX_DEPTH} frames")
            state.frames.append(frame)
        elif state.frames:
            state.frames.pop()
        else:
            unbalanced += 1
    if current is not None:
        _seen(threads[current[0]], current[1])
    first = min((ts for ts, *_ in parsed), default=None)
    return Timelines(
        tuple(s.timeline for s in threads.values()),
        first / 1e6 if first is not None else None,
        end / 1e6 if end is not None else None,
        unbalanced,
    )


def _seen(state: _Open, ts: int) -> None:
    """The stack ``state`` holds, seen at ``ts`` (µs): one more point of its timeline."""
    timeline = state.timeline
    frames: list[Frame] = []
    for item in reversed(state.frames):
        if isinstance(item, tuple):
            timeline.tid, timeline.name = item
        else:
            frames.append(item)
    when = ts / 1e6
    if timeline.times and timeline.times[-1] == when:
        timeline.stacks[-1] = tuple(frames)
        return
    timeline.times.append(when)
    timeline.stacks.append(tuple(frames))


def _event(event: Any) -> tuple[int, int, str, Frame | tuple[int | None, str | None]]:
    """(ts in µs, tid, "B" or "E", the frame or the thread's (OS tid, name))."""
    if not isinstance(event, dict):
        raise ChrometraceError("an event is not an object")
    ts, tid, ph, name = event.get("ts"), event.get("tid"), event.get("ph"), event.get("name")
    if (
        not isinstance(ts, int)
        or not isinstance(tid, int)
        or ph not in ("B", "E")
        or not isinstance(name, str)
    ):
        raise ChrometraceError("an event without a time, thread, phase or name")
    phase: str = ph
    args = event.get("args")
    file: Any = ""
    line: Any = None
    if isinstance(args, dict):
        file, line = args.get("filename") or "", args.get("line")
    if not isinstance(file, str) or not (line is None or _is_int(line)):
        raise ChrometraceError("an event's file or line is not a string or a number")
    if not file:
        thread = THREAD_FRAME.match(name)
        if thread is not None:
            text = thread["id"]
            os_tid = None if text[:2].lower() == "0x" else int(text)
            return ts, tid, phase, (os_tid, thread["name"])
    return ts, tid, phase, frame_of(name, file, line if line else None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
