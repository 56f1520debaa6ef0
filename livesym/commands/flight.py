"""``record --keep-last SECONDS``: a flight recorder.

The session keeps only its last SECONDS (the engine forgets older samples:
``Counted.keep_last``) and writes them, as a whole capture of their own, when asked:

- SIGUSR1: to the ``-o`` path, atomically (a reader sees the last dump or this one),
  and recording goes on;
- ``--trigger cpu>PCT``: when a reading of the target's CPU (one a second, over the
  second before it) is above PCT, to a file of its own beside ``-o`` with the moment in
  its name (``cap.20261207-031500.250.json``); again only once the CPU went back under PCT;
- at the end of the session (Ctrl-C, SIGTERM, ``--duration``, the target's exit): to
  ``-o``, as a recording ends.

A dump says the span it holds as its length (its session starts where its seconds
do). Nothing is appended while recording: a flight recorder killed outright leaves
its last dump.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from livesym.engine import Engine
from livesym.errors import LivesymError, UsageError
from livesym.files import stamped
from livesym.printable import printable

WATCH_PERIOD = 0.2  # seconds between looks for a SIGUSR1 or a trigger
_TRIGGER = re.compile(r"\s*cpu\s*>\s*(\d+(?:\.\d+)?)\s*%?\s*")


@dataclass(frozen=True)
class Trigger:
    """Dump when the target's CPU (percent of one CPU, as top shows it) is above this."""

    cpu_pct: float

    @classmethod
    def parse(cls, text: str) -> Trigger:
        """``cpu>PCT`` (PCT in percent of one CPU: 150 is a core and a half)."""
        match = _TRIGGER.fullmatch(text)
        if match is None or not math.isfinite(float(match.group(1))):
            raise UsageError(
                f"--trigger {text!r} is not a trigger: give cpu>PCT, e.g. --trigger 'cpu>90' "
                "(percent of one CPU, as top shows it)"
            )
        return cls(float(match.group(1)))


class FlightRecorder:
    """Dumps of a session's last ``keep`` seconds to ``output`` (see the module)."""

    def __init__(self, engine: Engine, output: str, keep: float, trigger: Trigger | None):
        self._engine = engine
        self._output = output
        self._keep = keep
        self._trigger = trigger
        self._asked = False  # a SIGUSR1 came
        self._armed = True  # the trigger may fire (the CPU went under it since it last did)
        self._seen = 0  # readings of the target looked at
        self.dumps: list[str] = []
        engine.counted.keep_last = keep

    @contextlib.contextmanager
    def listening(self) -> Iterator[None]:
        """SIGUSR1 asks for a dump while inside (it only sets a flag: signal-safe)."""
        previous = signal.signal(signal.SIGUSR1, lambda _signum, _frame: self._ask())
        try:
            yield
        finally:
            signal.signal(signal.SIGUSR1, previous)

    def _ask(self) -> None:
        self._asked = True

    async def watch(self) -> None:
        """Until cancelled: a dump for each SIGUSR1 and each trigger."""
        while True:
            await asyncio.sleep(WATCH_PERIOD)
            if self._asked:
                self._asked = False
                await self._dump(self._output)
            if self._trigger is not None and self._triggered():
                path = stamped(self._output, time.time())
                if await self._dump(path):
                    print(f"livesym: CPU above {self._trigger.cpu_pct:g} %: wrote the last "
                          f"{self._keep:g} s to {printable(path)}", file=sys.stderr)  # fmt: skip

    async def last(self) -> None:
        """The session's end: its last seconds to ``-o``."""
        await self._dump(self._output)

    def _triggered(self) -> bool:
        assert self._trigger is not None
        readings = self._engine.tables.process
        fresh, self._seen = readings[self._seen :], len(readings)
        fired = False
        for reading in fresh:
            if reading.cpu_pct <= self._trigger.cpu_pct:
                self._armed = True
            elif self._armed:
                fired, self._armed = True, False
        return fired

    async def _dump(self, path: str) -> bool:
        engine = self._engine
        rate = engine.sampler.rate_hz
        since = max(engine.captures.facts().start, engine.clock() - self._keep)
        try:
            await engine.captures.dump_async(path, since, 1.0 / rate if rate else 0.0)
        except LivesymError as e:  # one line; the recording goes on (or ends) regardless
            print(f"livesym: {e}", file=sys.stderr)
            return False
        self.dumps.append(path)
        return True


def check_output_directory(output: str) -> None:
    """A flight recorder writes only when asked: a directory it cannot write to is said
    at the start, not at the first dump."""
    directory = os.path.dirname(os.path.abspath(output))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write dumps to {printable(directory)}: choose a writable "
                         "directory for -o")  # fmt: skip
