"""What the hub asks of the observed side of a session: a live target or a recording.

The hub runs the same loop for both. What differs is where the session's facts
come from: a live target's maps are read and its samples' addresses resolved
(``live.LiveSide``); a capture's were recorded and its samples come resolved
(``recorded.RecordedSide``). The hub holds one ``TargetSide`` and never asks
which it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from livesym.engine.lines import LinesBudget
    from livesym.engine.snapshot import Source
    from livesym.records import FrameRecord
    from livesym.sampling.base import Sample, SamplerEnd
    from livesym.target.maps_watcher import MappingEvent
    from livesym.target.stats import TargetInfo


class TargetSide(Protocol):
    source: Source  # shown in the header, kept in snapshots
    info: TargetInfo

    def host(self) -> dict[str, object]:
        """The facts of the machine the session ran on."""
        ...

    def begin(self, now: float) -> float:
        """Start observing; return the session's start on the engine's clock."""
        ...

    def prepare(self) -> None:
        """Slow work before the first sample, in a worker thread."""
        ...

    def observe(self, now: float) -> list[Sample]:
        """Once a tick, on the loop's thread: readings of the target, recorded facts due;
        returns samples the side adds itself (kernel time estimated from system time)."""
        ...

    def last_look(self, now: float) -> list[Sample]:
        """The sampler ended: what ``observe`` would add for the time since its last
        look (kernel time estimated since then: a session's last second is counted as
        its others)."""
        ...

    def resolve(
        self, batch: list[Sample], refresh_maps: bool, events: list[MappingEvent]
    ) -> list[int]:
        """In a worker thread: the stack id of each raw sample, its frames and stack
        added to the session's tables (re-reading the maps first if asked)."""
        ...

    def names_arrived(self) -> bool:
        """Whether debug files arrived that the next ``resolve`` names frames with."""
        ...

    def take_renamed(self) -> bool:
        """Whether frames were renamed (earlier samples' too) since the last call."""
        ...

    def wait_for_fetches(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the debug files still being fetched."""
        ...

    def end_state(self, end: SamplerEnd) -> str:
        """The session's state once its sampler ended with ``end``."""
        ...

    def progress(self, counted: int) -> float | None:
        """How much of a recording has been counted (0..1); None for a live target."""
        ...

    def thread_name(self, tid: int) -> str: ...

    def source_line(self, record: FrameRecord) -> tuple[str, int] | None:
        """Source file and line of a frame, when known (may be slow: off the loop)."""
        ...

    def frames_with_lines(
        self, frames: list[FrameRecord], budget: LinesBudget
    ) -> list[FrameRecord]:
        """The frame table with source lines filled in where known, within ``budget``."""
        ...
