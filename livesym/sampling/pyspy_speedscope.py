"""Reading py-spy's ``record --format speedscope`` output: every sample of every thread,
in the order py-spy took it (pure; no py-spy needed).

Why this format and not ``raw``: raw adds identical stacks of a window together, so
the samples of a window can only be stamped with the window's time. Speedscope keeps
each thread's samples as a list in time order (one "sampled" profile per thread, over
one shared frame table). With ``--idle`` py-spy takes every thread in every interval it
samples, so a thread's i-th sample is the i-th interval of its run: the sampler gives
it a time to within one sampling period (``livesym.sampling.pyspy``).

A profile's samples are lists of frame indices, root first. With ``--threads`` the
root frame is ``thread (TID): NAME`` (``thread (0x...)`` when py-spy had only the
pthread id), and with ``--subprocesses`` ``process PID:"CMDLINE"`` frames come above it;
the other frames are ``{"name", "file", "line"}`` as the raw format prints them
(``pyspy_parse.frame_of`` says what each is). The file is untrusted: it is bounded in
size by the caller, and any shape other than this one is a ``SpeedscopeError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from livesym.sampling.pyspy_parse import (
    PROCESS_FRAME,
    THREAD_FRAME,
    Frame,
    ParsedStack,
    frame_of,
    looks_idle,
)

MAX_FRAMES = 1_000_000  # shared frames in one file
MAX_SAMPLES = 10_000_000  # samples in one file, over its threads
MAX_DEPTH = 4096  # frames in one sample


class SpeedscopeError(ValueError):
    """The file is not py-spy's speedscope output (its message says what is wrong)."""


@dataclass(frozen=True)
class ThreadRun:
    """One thread's samples in one py-spy run, oldest first (one ``ParsedStack`` each;
    equal stacks are one object)."""

    tid: int | None
    thread_name: str | None
    thread_ident: int | None
    stacks: list[ParsedStack]


@dataclass(frozen=True, slots=True)
class _Pseudo:
    """A root frame that is not code: the thread (``--threads``) or a process."""

    tid: int | None = None
    ident: int | None = None
    name: str | None = None
    pid: int | None = None


def read_speedscope(data: bytes) -> list[ThreadRun]:
    """Every thread's samples in ``data``; raises SpeedscopeError on anything else."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise SpeedscopeError(f"not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise SpeedscopeError("the top level is not an object")
    shared = doc.get("shared")
    profiles = doc.get("profiles")
    if not isinstance(shared, dict) or not isinstance(profiles, list):
        raise SpeedscopeError("no shared frames or profiles")
    frames = shared.get("frames")
    if not isinstance(frames, list) or len(frames) > MAX_FRAMES:
        raise SpeedscopeError("the frame table is missing or too large")
    table = [_entry(f) for f in frames]
    runs: list[ThreadRun] = []
    total = 0
    for profile in profiles:
        samples = profile.get("samples") if isinstance(profile, dict) else None
        if not isinstance(samples, list):
            raise SpeedscopeError("a profile without samples")
        total += len(samples)
        if total > MAX_SAMPLES:
            raise SpeedscopeError(f"more than {MAX_SAMPLES} samples")
        runs.append(_run(samples, table))
    return runs


def _entry(frame: Any) -> Frame | _Pseudo:
    if not isinstance(frame, dict):
        raise SpeedscopeError("a frame is not an object")
    name, file, line = frame.get("name"), frame.get("file"), frame.get("line")
    if not isinstance(name, str) or not (file is None or isinstance(file, str)):
        raise SpeedscopeError("a frame's name or file is not a string")
    if not (line is None or (isinstance(line, int) and not isinstance(line, bool))):
        raise SpeedscopeError("a frame's line is not a number")
    if not file:
        thread = THREAD_FRAME.match(name)
        if thread is not None:
            text = thread["id"]
            hexa = text[:2].lower() == "0x"
            return _Pseudo(tid=None if hexa else int(text), ident=int(text, 16) if hexa else None,
                           name=thread["name"])  # fmt: skip
        process = PROCESS_FRAME.match(name)
        if process is not None:
            return _Pseudo(pid=int(process["pid"]))
    return frame_of(name, file or "", line if line else None)


def _run(samples: list[Any], table: list[Frame | _Pseudo]) -> ThreadRun:
    thread = _Pseudo()
    stacks: list[ParsedStack] = []
    made: dict[tuple[int, ...], ParsedStack] = {}
    for sample in samples:
        if not isinstance(sample, list) or len(sample) > MAX_DEPTH:
            raise SpeedscopeError("a sample is not a list of frames, or too deep")
        key = tuple(sample)
        stack = made.get(key)
        if stack is None:
            stack = made[key] = _stack(key, table)
            if stack.tid is not None or stack.thread_ident is not None:
                thread = _Pseudo(stack.tid, stack.thread_ident, stack.thread_name)
        stacks.append(stack)
    return ThreadRun(thread.tid, thread.name, thread.ident, stacks)


def _stack(indices: tuple[int, ...], table: list[Frame | _Pseudo]) -> ParsedStack:
    thread = _Pseudo()
    pid: int | None = None
    code: list[Frame] = []
    for i in indices:
        if not (isinstance(i, int) and 0 <= i < len(table)) or isinstance(i, bool):
            raise SpeedscopeError("a sample refers to a frame that does not exist")
        entry = table[i]
        if isinstance(entry, _Pseudo):
            if entry.pid is not None:
                pid = entry.pid
            else:
                thread = entry
        else:
            code.append(entry)
    frames = tuple(reversed(code))  # leaf first, as the sampler takes them
    return ParsedStack(
        tid=thread.tid,
        thread_name=thread.name,
        frames=frames,
        count=1,
        idle=looks_idle(frames),
        pid=pid,
        thread_ident=thread.ident,
    )
