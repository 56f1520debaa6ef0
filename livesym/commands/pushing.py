"""``record --push URL``: the recording's profile of each interval sent to a back end
(``export.push``), made off the event loop, while it records as it always does."""

from __future__ import annotations

import asyncio
import sys
import time

from livesym.engine import Engine
from livesym.errors import LivesymError
from livesym.export.pprof import pprof
from livesym.export.push import Interval, Pusher, Target
from livesym.printable import printable

CLOSE_WAIT = 3.0  # seconds the end waits for the last profiles to be sent


class Pushing:
    """Every ``interval`` seconds, the last interval's pprof to ``target``."""

    def __init__(self, engine: Engine, target: Target, interval: float) -> None:
        self._engine = engine
        self._interval = interval
        self.pusher = Pusher(target)
        self._mark = 0  # samples sent (absolute index: the next interval starts there)
        self._since: float | None = None  # when the last interval ended, on the clock
        engine.captures.hold(lambda: self._mark)
        self._said = ""  # the last reason said

    async def run(self) -> None:
        """Until cancelled: an interval's profile every ``interval`` seconds."""
        while True:
            await asyncio.sleep(self._interval)
            await self.send()

    async def send(self) -> None:
        """The seconds since the last send (or the session's start) as one profile."""
        engine = self._engine
        start = engine.captures.facts().start
        since = start if self._since is None else self._since
        until = engine.clock()
        if until - since <= 0:
            return
        self._since = until
        try:
            capture, self._mark = await engine.captures.interval(self._mark, since)
            data = await asyncio.to_thread(pprof, capture, mode=engine.sampler.mode)
        except LivesymError as e:  # (its own capture: only a bug gets here; said, not fatal)
            engine.sampler.stats.error(f"an interval's profile was not made: {e}")
            return
        unix = time.time() - (engine.clock() - until)  # the session's clock -> Unix time
        self.pusher.push(Interval(data, unix - (until - since), unix))
        self._note()

    def _note(self) -> None:
        """A failed send is said in the session's errors, once a reason (the capture and
        the report show them; the count of profiles lost is said at the end)."""
        p = self.pusher
        why = p.last_error or ("the queue was full" if p.lost else "")
        if why and why != self._said:
            self._said = why
            self._engine.sampler.stats.error(f"profiles not pushed to {p.target.url}: {why}")

    async def finish(self) -> None:
        """The session ended: its last interval, then what waits is sent (CLOSE_WAIT at
        most), and one line says how it went."""
        await self.send()
        await asyncio.to_thread(self.pusher.close, CLOSE_WAIT)
        p = self.pusher
        line = f"livesym: pushed {p.sent} profiles to {printable(p.target.url)}"
        if p.lost:
            line += f"; {p.lost} not sent ({printable(p.last_error or 'the queue was full')})"
        print(line, file=sys.stderr)
