"""The recorded side of a session: a capture, replayed.

``RecordedSide`` loads the capture's frames, stacks, objects and thread names
into the session's tables before the first sample, and releases its maps
generations and process readings as the replay's clock reaches them. There is
nothing to resolve: the replay sampler (``sampling.replay``) yields rows whose
stack ids refer to the loaded tables.
"""

from __future__ import annotations

from livesym.capture.reader import lost_at, paused_gc
from livesym.engine.lines import LinesBudget
from livesym.engine.snapshot import Source
from livesym.engine.tables import SessionTables
from livesym.records import FrameRecord
from livesym.sampling.base import Sample, SamplerEnd
from livesym.sampling.replay import CaptureSampler
from livesym.target.maps_watcher import MappingEvent
from livesym.target.stats import TargetInfo


class RecordedSide:
    """The facts of the session ``sampler`` replays."""

    source: Source = "replay"

    def __init__(self, sampler: CaptureSampler, tables: SessionTables) -> None:
        self._sampler = sampler
        self._tables = tables
        self.info = TargetInfo.from_json(sampler.capture.target)
        with paused_gc():  # hundreds of thousands of records, none of them garbage
            tables.load(sampler.capture)
        for pid, p in tables.processes.items():  # recorded from the start; kept on the clock
            tables.processes[pid] = p.moved(sampler.start)
        if not sampler.capture.processes:  # before version 4: the target alone
            tables.add_process_record(self.info.record(started=sampler.start))
        for second, n in lost_at(sampler.capture.session):
            tables.count_lost(second, n)

    def host(self) -> dict[str, object]:
        return dict(self._sampler.capture.host)

    def begin(self, now: float) -> float:
        self._sampler.begin()  # a replay's start is the capture's own
        return self._sampler.start

    def prepare(self) -> None:
        pass

    def observe(self, now: float) -> list[Sample]:
        self._tables.add_recorded_generations(self._sampler.generations_until(now))
        self._tables.add_process(self._sampler.process_until(now))
        return []  # the capture holds every sample, estimated ones too

    def last_look(self, now: float) -> list[Sample]:
        return []  # the capture holds every sample, estimated ones too

    def resolve(
        self, batch: list[Sample], refresh_maps: bool, events: list[MappingEvent]
    ) -> list[int]:
        if batch:
            raise ValueError("a replay has no raw samples to resolve")
        return []

    def names_arrived(self) -> bool:
        return False  # a recording's frames came named

    def take_renamed(self) -> bool:
        return False

    def wait_for_fetches(self, timeout: float) -> None:
        return None

    def end_state(self, end: SamplerEnd) -> str:
        if end is SamplerEnd.STOPPED:
            return self._sampler.end_reason  # as the recorded session ended
        return str(end.value)

    def progress(self, counted: int) -> float | None:
        """The replay's clock, and the samples counted (an instant replay's clock is at
        the end at once, its samples arrive chunk by chunk)."""
        total = len(self._sampler.capture.samples)
        share = counted / total if total else 1.0
        return min(self._sampler.progress, share)

    def thread_name(self, tid: int) -> str:
        return str(tid)  # the capture's names are in the tables already

    def source_line(self, record: FrameRecord) -> tuple[str, int] | None:
        return record.known_line()  # no objects to read lines from

    def frames_with_lines(
        self, frames: list[FrameRecord], budget: LinesBudget
    ) -> list[FrameRecord]:
        return frames
