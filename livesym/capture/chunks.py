"""A recording's capture as chunks: each says only what is new since the one before.

A session that is recorded appends to its capture, never rewrites it
(docs/capture-format.md, "The chunked layout"): a header line, then one line a chunk
with the samples taken since the last, the stacks, frames and objects they brought,
the maps generations read, and whatever changed of the threads, the processes and the
counters. So writing costs what the last half second brought, at minute 1 as at hour
10, and ``kill -9`` loses only the chunk that was not written yet.

The session's tables hand over an ``Increment`` (``engine.tables``: slices of what is
new, cheap on the event loop); ``ChunkMaker`` remembers what the chunks written so
far said of the small tables that change in place (threads, processes, counters) and
makes the next chunk's JSON. Nothing here touches a file: ``capture.appender`` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

import orjson

from livesym import __version__
from livesym.capture.model import FORMAT, LAYOUT_CHUNKS, VERSION
from livesym.capture.session import SessionFacts, Tables
from livesym.capture.writer import (
    frame_json,
    generation_json,
    object_json,
    process_json,
    sample_row,
)
from livesym.records import (
    FrameRecord,
    ObjectRecord,
    ProcessRecord,
)


@dataclass(frozen=True)
class Mark:
    """How much of each table the chunks written so far hold (the next starts here):
    counts of the tables that only grow, and of the logs of frames renamed and
    objects replaced in place (a debug file arrived)."""

    samples: int = 0
    stacks: int = 0
    frames: int = 0
    renamed: int = 0
    objects: int = 0
    replaced: int = 0
    generations: int = 0  # generations ever added (the tables keep a bounded tail)
    process: int = 0


@dataclass(frozen=True)
class Increment:
    """What the session's tables hold beyond a ``Mark``, taken at one moment (``part``):
    the new samples (absolute times), stacks (ids from ``since.stacks``), frames and
    objects new or changed (in id order), generations and readings; and the small
    tables whole (the chunk says what changed of them). ``mark``: where it ends."""

    since: Mark
    mark: Mark
    part: Tables


R = TypeVar("R", FrameRecord, ObjectRecord)


def changed_records(table: Sequence[R], since: int, upto: int, log: Sequence[int]) -> list[R]:
    """The records of ``table`` from ``since`` to ``upto``, and before ``since`` those
    the ``log`` (ids changed in place) names, in id order, each once."""
    changed = sorted({i for i in log if 0 <= i < since})
    return [table[i] for i in changed] + list(table[since:upto])


@dataclass
class ChunkMaker:
    """Makes a recording's lines: the header first, then each chunk from an
    ``Increment``, saying of the tables that change in place only what changed."""

    written: dict[str, object] = field(default_factory=dict)  # target, host, sampler
    threads: dict[int, str] = field(default_factory=dict)
    thread_pids: dict[int, int] = field(default_factory=dict)
    processes: dict[int, ProcessRecord] = field(default_factory=dict)
    lost_at: dict[int, int] = field(default_factory=dict)
    errors: int = 0
    header_written: bool = False

    def lines(
        self, inc: Increment, facts: SessionFacts, extra_frames: Sequence[FrameRecord] = ()
    ) -> bytes:
        """The header (the first time) and the chunk of ``inc``, each a JSON line;
        ``extra_frames``: frames to say again (their source lines were found)."""
        out = b""
        if not self.header_written:
            out = orjson.dumps(self._header(facts)) + b"\n"
        chunk = self._chunk(inc, facts, extra_frames)
        return out + orjson.dumps(chunk) + b"\n"

    def landed(self, inc: Increment, facts: SessionFacts) -> None:
        """The lines of ``inc`` are on disk: the next chunk says what changed since."""
        self.header_written = True
        for key, value in (("target", facts.target), ("host", facts.host),
                           ("sampler", facts.sampler)):  # fmt: skip
            self.written[key] = value
        self.threads = dict(inc.part.threads)
        self.thread_pids = dict(inc.part.thread_pids)
        self.processes = {p.pid: p for p in inc.part.processes}
        self.lost_at = dict(facts.lost_at)
        self.errors = len(facts.errors)

    def _header(self, facts: SessionFacts) -> dict[str, object]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "layout": LAYOUT_CHUNKS,
            "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "livesym": __version__,
            "target": facts.target,
            "host": facts.host,
            "sampler": facts.sampler,
            "session": {"start": facts.start},
        }

    def _chunk(
        self, inc: Increment, facts: SessionFacts, extra_frames: Sequence[FrameRecord]
    ) -> dict[str, object]:
        start, part = facts.start, inc.part
        chunk: dict[str, object] = {
            "session": {"end": part.end, "end_reason": part.state,
                        "samples": facts.samples, "lost": facts.lost},
            "stacks_from": inc.since.stacks,
            "samples": orjson.Fragment(_sample_rows(part, start)),
        }  # fmt: skip
        if self.header_written:
            for key, value in (("target", facts.target), ("host", facts.host),
                               ("sampler", facts.sampler)):  # fmt: skip
                if self.written.get(key) != value:
                    chunk[key] = value
        moved = [dataclasses.replace(g, time=g.time - start) for g in part.generations]
        _put(chunk, "frames", [frame_json(f) for f in _merged_frames(part.frames, extra_frames)])
        _put(chunk, "objects", [object_json(o) for o in part.objects])
        _put(chunk, "stacks", [list(s) for s in part.stacks])
        _put(chunk, "maps", [generation_json(g) for g in moved])
        _put(chunk, "process", [[round(p.time - start, 3), round(p.cpu_pct, 1), p.rss, p.threads]
                                for p in part.process])  # fmt: skip
        _put(chunk, "threads", {str(t): n for t, n in part.threads.items()
                                if self.threads.get(t) != n})  # fmt: skip
        _put(chunk, "thread_pids", {str(t): p for t, p in part.thread_pids.items()
                                    if self.thread_pids.get(t) != p})  # fmt: skip
        _put(chunk, "processes", [process_json(p.moved(-start)) for p in part.processes
                                  if self.processes.get(p.pid) != p])  # fmt: skip
        _put(chunk, "lost_at", [[s, n] for s, n in facts.lost_at if self.lost_at.get(s) != n])
        _put(chunk, "errors", list(facts.errors[self.errors :]))
        return chunk


def _put(chunk: dict[str, object], key: str, value: list[object] | dict[str, object]) -> None:
    """Only what a chunk has to say: an empty table is left out."""
    if value:
        chunk[key] = value


def _merged_frames(
    frames: Sequence[FrameRecord], extra: Sequence[FrameRecord]
) -> list[FrameRecord]:
    """``frames`` with ``extra`` in place of those of the same id, in id order (extra
    ones no newer than the table's: they were made from it)."""
    if not extra:
        return list(frames)
    by_id = {f.id: f for f in frames}
    by_id.update((f.id, f) for f in extra)
    return [by_id[i] for i in sorted(by_id)]


def _sample_rows(part: Tables, start: float) -> bytes:
    """The samples of ``part`` as the capture's rows, a JSON array."""
    t, tids, stacks = part.times, part.tids, part.stack_of
    flags, weights = part.flags, part.weights
    return orjson.dumps(
        [
            sample_row(round(t[i] - start, 6), tids[i], stacks[i], flags[i], weights[i])
            for i in range(len(flags))
        ]
    )
