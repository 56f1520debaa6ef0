"""What the dashboard asks of a profiling session: the engine's query surface.

The dashboard is written against this protocol rather than the Engine class,
so it can only read snapshots and query results, never reach into sampling.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from livesym.records import Frame, FrameRecord, ObjectRecord, TimeMode

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot, HotAddress
    from livesym.engine.snapshot import TimelineData
    from livesym.profile.mapping_rows import MappingRow
    from livesym.sampling.base import SamplerEnd


@dataclass(frozen=True)
class Selection:
    """Which samples the dashboard shows: the details screen asks for the same."""

    recent: bool = False
    thread: int | None = None
    module: str | None = None
    mode: TimeMode | None = None  # None: the session's (--mode)
    process: int | None = None
    between: tuple[float, float] | None = None  # the timeline's range


class Session(Protocol):
    def snapshot(
        self,
        *,
        recent: bool = False,
        thread: int | None = None,
        module: str | None = None,
        mode: TimeMode | None = None,
        process: int | None = None,
        between: tuple[float, float] | None = None,
    ) -> EngineSnapshot: ...

    def timeline(
        self,
        *,
        thread: int | None = None,
        process: int | None = None,
        between: tuple[float, float] | None = None,
    ) -> TimelineData: ...

    def hot_addresses(
        self,
        frame: Frame,
        limit: int = 10,
        *,
        recent: bool = False,
        thread: int | None = None,
        module: str | None = None,
        mode: TimeMode | None = None,
        process: int | None = None,
        between: tuple[float, float] | None = None,
    ) -> list[HotAddress]: ...

    def object_record(self, object_id: int) -> ObjectRecord | None: ...

    def source_line(self, record: FrameRecord) -> tuple[str, int] | None: ...

    def mappings(self, process: int | None = None) -> tuple[MappingRow, ...]: ...

    def reset(self) -> None: ...

    async def write_capture_async(self, path: str | Path) -> None: ...

    async def run(self, stop: asyncio.Event, duration: float | None = None) -> SamplerEnd: ...

    def hurry(self) -> None: ...
