"""A time range of a capture (``--from``/``--to``): the capture as if it had been recorded
over those seconds alone, so that every reader of captures (report, the call tree,
export) shows the range without knowing of it.

Times are seconds from the capture's start. A sample on the CPU is in the range if its
moment is. A wait (an off-CPU sample: its moment is where it began, its weight how long
it lasted) is cut to the part of it inside the range, so that a 2 s sleep half in the
range counts 1 s there. The maps generations keep their order (one made before the range
still names the range's samples); the session's start and end become the range's.
"""

from __future__ import annotations

import dataclasses
import math

from livesym.capture.reader import lost_at
from livesym.errors import UsageError
from livesym.records import IDLE_FLAG, Capture

__all__ = ["within"]


def within(capture: Capture, start: float | None, end: float | None) -> Capture:
    """``capture`` over the seconds ``start`` to ``end`` from its start (either None:
    its own start or end)."""
    if start is None and end is None:
        return capture
    first = 0.0 if start is None else start
    last = math.inf if end is None else end
    if not (math.isfinite(first) and first >= 0 and last > first):
        raise UsageError(
            f"--from {first:g} --to {last:g} is not a time range: give 0 <= --from < --to, "
            "in seconds from the capture's start"
        )
    if capture.seconds and first >= capture.seconds:
        raise UsageError(
            f"--from {first:g} is past the capture's end: it is {capture.seconds:.1f} s long"
        )
    period = 1.0 / capture.rate_hz if capture.rate_hz else 0.0  # (a wait's weight: periods)
    samples = tuple(
        kept for row in capture.samples if (kept := _cut(row, first, last, period)) is not None
    )
    session = dict(capture.session)
    began = _number(session.get("start"), 0.0)
    ended = _number(session.get("end"), began)
    session["start"] = began + first
    session["end"] = max(began + first, min(ended, began + last))
    _lost_within(session, first, last)
    return dataclasses.replace(
        capture,
        samples=samples,
        session=session,
        maps=tuple(dataclasses.replace(g, time=g.time - first) for g in capture.maps),
        processes=tuple(p.moved(-first) for p in capture.processes),
        process=tuple(
            dataclasses.replace(p, time=p.time - first)
            for p in capture.process
            if first <= p.time < last
        ),
    )


def _lost_within(session: dict[str, object], first: float, last: float) -> None:
    """The samples lost in the range, where the capture says when they were lost (its
    ``lost_at``; the seconds then from the range's start); else the whole total stays."""
    pairs = lost_at(session)
    if not pairs or sum(n for _, n in pairs) != session.get("lost"):
        return  # (a capture without them, or with more seconds of loss than it lists)
    kept = [(max(0, math.floor(s - first)), n) for s, n in pairs if first - 1 < s < last]
    session["lost_at"] = [list(pair) for pair in kept]
    session["lost"] = sum(n for _, n in kept)


def _cut(
    row: tuple[float, int, int, int, int], first: float, last: float, period: float
) -> tuple[float, int, int, int, int] | None:
    """The sample ``row`` as the range holds it, its time from the range's start; None
    where none of it is in the range."""
    moment, tid, stack, flags, weight = row
    if not flags & IDLE_FLAG or period <= 0:
        return (moment - first, tid, stack, flags, weight) if first <= moment < last else None
    began, ended = moment, moment + weight * period
    inside = min(ended, last) - max(began, first)
    if inside <= 0:
        return None
    kept = weight if inside >= ended - began else round(inside / period)
    if kept <= 0:
        return None
    return (max(began, first) - first, tid, stack, flags, kept)


def _number(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default
