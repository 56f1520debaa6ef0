"""What turning samples into frames writes to: the session's frame, stack, object and
maps-generation tables, as a capture keeps them (``engine.tables.SessionTables`` is
the one the engine holds). A protocol, so that this layer names no engine class and a
test can hand it any table."""

from __future__ import annotations

from typing import Protocol

from livesym.records import FrameRecord, GenerationRecord, ObjectRecord

MAX_KEPT_MAPPINGS = 2_000_000  # mappings over all kept generations (the reader takes 5M)


class FrameTable(Protocol):
    frames: list[FrameRecord]  # frame id -> its record; ids are positions
    objects: list[ObjectRecord]  # object id -> its record
    object_ids: dict[tuple[str, str | None], int]  # (path, build id) -> object id

    def frame_id(self, key: tuple[object, ...]) -> int | None:
        """The id of the frame of ``key`` (``FrameRecord.key``), if it is there."""
        ...

    def add_frame(self, record: FrameRecord) -> int:
        """Append ``record``, whose id must be ``len(frames)``."""
        ...

    def rename_frames(self, records: list[FrameRecord]) -> None:
        """Put ``records`` in place of the frames of their ids."""
        ...

    def intern_stack(self, stack: tuple[int, ...]) -> int:
        """The id of the stack of these frame ids (leaf first), added if new."""
        ...

    def add_object(self, record: ObjectRecord) -> int:
        """Append ``record``, whose id must be ``len(objects)``."""
        ...

    def replace_object(self, record: ObjectRecord) -> None:
        """``record`` in place of the object of its id."""
        ...

    def has_generation(self, number: int) -> bool: ...

    def add_generation(self, record: GenerationRecord) -> None:
        """Keep the facts of a maps generation the session used."""
        ...
