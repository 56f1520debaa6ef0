"""Rebuilding a session from a capture: the same profile, through the same code."""

from __future__ import annotations

from livesym.capture.model import Capture
from livesym.engine import EngineSnapshot
from livesym.profile import Profile, StackSample


def stack_samples(capture: Capture) -> list[StackSample]:
    """The capture's samples as the profile takes them, with the session's times."""
    start = _number(capture.session.get("start"), 0.0)
    frames = [record.frame() for record in capture.frames]
    stacks = [tuple(frames[i] for i in stack) for stack in capture.stacks]
    names = capture.threads
    return [
        StackSample(
            time=start + t,
            tid=tid,
            thread_name=names.get(tid, str(tid)),
            frames=stacks[stack],
            idle=bool(flags & 1),
        )
        for t, tid, stack, flags in capture.samples
    ]


def snapshot(capture: Capture, *, recent_window: float = 5.0) -> EngineSnapshot:
    """What ``top`` would have shown at the end of the captured session."""
    profile = Profile(recent_window)
    profile.add(stack_samples(capture))
    session, sampler = capture.session, capture.sampler
    start = _number(session.get("start"), 0.0)
    end = _number(session.get("end"), start)
    errors = session.get("errors")
    return EngineSnapshot(
        view=profile.view(now=end),
        samples=int(_number(session.get("samples"), len(capture.samples))),
        lost=int(_number(session.get("lost"), 0)),
        errors=tuple(str(e) for e in errors) if isinstance(errors, list) else (),
        sampler=str(sampler.get("name", "?")),
        rate_hz=int(_number(sampler.get("rate_hz"), 0)),
        elapsed=end - start,
        state=str(session.get("end_reason", "stopped")),
        maps_generation=len(capture.maps),
    )


def _number(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default
