"""Replaying a capture: a sampler whose samples come from a file.

``CaptureSampler`` is a ``Sampler`` like the others: it hands the engine the
capture's samples as the capture's own clock reaches them, at ``speed`` times
real time or all at once, and offers the maps generations and process readings
of the same moments. Its samples need no resolving: they come as
``RecordedRows`` whose stack ids refer to the capture's frame and stack tables,
which the engine loads first. So a replay rebuilds the profile through the same
code as the live session, and ``report`` is the same replay done in one step.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import time
from bisect import bisect_right
from collections.abc import Callable
from operator import itemgetter

from livesym.records import Capture, GenerationRecord, KernelMode, ProcessStat, TimeMode
from livesym.sampling.base import MapsHint, RecordedRows, Row, Sampler, SamplerEnd, SampleSink

TICK = 0.05  # seconds between deliveries while replaying at a speed
CHUNK = 50_000  # samples per delivery, at most
FIRST_CHUNK = 10_000


def _number(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


# How a recorded session ended, in words: "live" is the state of a session still
# sampling when ``w`` wrote it.
END_REASONS = {"live": "written mid-session", "failed": "sampling failed"}


class CaptureSampler(Sampler):
    """The samples of ``capture`` in time order, released as its clock advances."""

    @classmethod
    def available(cls) -> str | None:
        return None  # a file is always there to read

    def __init__(
        self,
        capture: Capture,
        speed: float | None,
        wall_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if speed is not None and not speed > 0:
            raise ValueError(f"replay speed must be positive, not {speed}")
        self.capture = capture
        self.speed = speed
        self._wall_clock = wall_clock
        session, sampler = capture.session, capture.sampler
        pid = capture.target.get("pid")
        super().__init__(
            pid if isinstance(pid, int) else 0,
            int(_number(sampler.get("rate_hz"), 0)),
            bool(sampler.get("idle", False)),
        )
        self.name = str(sampler.get("name", "?"))
        mode = sampler.get("mode")  # captures before version 5: what "idle" said
        with contextlib.suppress(ValueError):
            self.mode = TimeMode.parse(mode) if mode is not None else self.mode
        source = sampler.get("off_cpu")
        self.off_cpu_source = source[:200] if isinstance(source, str) else ""
        kernel = sampler.get("kernel")  # older captures did not say: nothing is shown
        self.kernel_mode = KernelMode.parse(kernel[:200] if isinstance(kernel, str) else "")
        scope = sampler.get("scope")  # (captures before issue 27 did not say)
        self.scope = scope[:200] if isinstance(scope, str) else ""
        self.start = _number(session.get("start"), 0.0)
        last = max((row[0] for row in capture.samples), default=0.0)
        self.end = max(_number(session.get("end"), self.start), self.start + last)
        recorded = str(session.get("end_reason", "stopped"))
        self.end_reason = END_REASONS.get(recorded, recorded)
        # Samples by time (captures are nearly so: sort only when needed; a stable
        # sort keeps the capture's order among equal times).
        rows = capture.samples
        ordered = all(a[0] <= b[0] for a, b in itertools.pairwise(rows))
        self._rows = rows if ordered else tuple(sorted(rows, key=itemgetter(0)))
        self._fed = 0
        self._generations = sorted(
            (dataclasses.replace(g, time=self.start + g.time) for g in capture.maps),
            key=lambda g: g.time,
        )
        self._next_generation = 0
        self._next_stat = 0
        self._began: float | None = None

    def begin(self) -> None:
        """Start the replay's clock."""
        if self._began is None:
            self._began = self._wall_clock()

    def clock(self) -> float:
        """The capture's clock as the replay has reached it."""
        if self._began is None:
            return self.start
        if self.speed is None:
            return self.end
        return min(self.end, self.start + (self._wall_clock() - self._began) * self.speed)

    @property
    def done(self) -> bool:
        return self._fed >= len(self._rows) and self.clock() >= self.end

    @property
    def progress(self) -> float:
        """How much of the capture's time has been replayed (0..1)."""
        span = self.end - self.start
        if span <= 0:
            return 1.0 if self._fed >= len(self._rows) else 0.0
        return min(1.0, max(0.0, (self.clock() - self.start) / span))

    def take_until(self, now: float, limit: int | None = None) -> list[Row]:
        """The samples the clock has reached and not yet fed, in time order (at most
        ``limit``)."""
        rows = self._rows
        begin = self._fed
        end = bisect_right(rows, now - self.start, lo=begin, key=itemgetter(0))
        if limit is not None:
            end = min(end, begin + limit)
        self._fed = end
        self._update_stats()
        return list(rows[begin:end])

    def take_all(self) -> RecordedRows:
        """The whole capture at once (its clock started, at the end when not timed)."""
        self.begin()
        return RecordedRows(self.take_rest())

    def take_rest(self) -> list[Row]:
        """Every sample not fed yet, in time order: for loading a whole replay at once."""
        return self.take_until(float("inf"))

    def _update_stats(self) -> None:
        session = self.capture.session
        total = len(self._rows)
        if self._fed >= total:
            self.stats.samples = int(_number(session.get("samples"), total))
            self.stats.lost = int(_number(session.get("lost"), 0))
            errors = session.get("errors")
            if isinstance(errors, list):
                for e in errors:
                    self.stats.error(str(e))
        else:
            self.stats.samples = self._fed
            self.stats.lost = int(_number(session.get("lost"), 0) * self._fed / max(total, 1))

    def generations_until(self, now: float) -> list[GenerationRecord]:
        out = []
        while (
            self._next_generation < len(self._generations)
            and self._generations[self._next_generation].time <= now
        ):
            out.append(self._generations[self._next_generation])
            self._next_generation += 1
        return out

    def process_until(self, now: float) -> list[ProcessStat]:
        stats = self.capture.process
        out = []
        while self._next_stat < len(stats) and self.start + stats[self._next_stat].time <= now:
            stat = stats[self._next_stat]
            out.append(dataclasses.replace(stat, time=self.start + stat.time))
            self._next_stat += 1
        return out

    async def run(
        self, sink: SampleSink, stop: asyncio.Event, maps_changed: MapsHint | None = None
    ) -> SamplerEnd:
        """Deliver samples as the replay clock reaches them, until done or asked to stop.

        At most ``CHUNK`` samples go at a time, so a large instant replay fills
        the dashboard progressively instead of freezing it.
        """
        self.begin()
        while not stop.is_set():
            # A small first chunk: the first screen shows as soon as anything is counted.
            limit = FIRST_CHUNK if self._fed == 0 else CHUNK
            batch = self.take_until(self.clock(), limit)
            if batch:
                sink(RecordedRows(batch))
            if self.done:
                break
            if len(batch) == limit:
                await asyncio.sleep(0)  # more is due: let the engine count this first
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK)
        return SamplerEnd.STOPPED
