"""Reading the chunked layout: a recording's header and chunks, merged into the one
document a whole capture is, which the reader then validates as it validates any.

A chunk says only what is new (``capture.chunks``): the lists that grow (samples,
stacks, maps generations, readings, errors) are extended; frames and objects are put
in place by id (a chunk says a renamed one again); threads, processes and the session's
counters are updated. A line cut short at the end of the file is the chunk a killed
or refused write left; it is left out, and the rest reads. Anything else that is not
what a chunk is (a damaged line before the last, a chunk whose stacks do not follow
the ones before) is refused: the file was not written by livesym as it is.

Every check here is of shape and order; the values are the reader's to check, once,
on the merged document (``capture.reader``).
"""

from __future__ import annotations

from typing import Any

import orjson

from livesym.capture.model import LAYOUT_CHUNKS

# The session's fields a chunk may update (its start is the header's).
SESSION_UPDATES = ("end", "end_reason", "samples", "lost")
HEAD = 1 << 20  # bytes looked at for the header line's end (its facts are small)


class ChunkError(ValueError):
    """The chunked layout is broken; the message says where and how."""


def is_chunked(raw: bytes | bytearray) -> bool:
    """Whether ``raw`` is the chunked layout: its first line a header that says so."""
    end = raw.find(b"\n", 0, HEAD)
    if end < 0:
        return False
    try:
        head = orjson.loads(raw[:end])
    except orjson.JSONDecodeError:
        return False
    return isinstance(head, dict) and head.get("layout") == LAYOUT_CHUNKS


def merged(raw: bytes | bytearray) -> tuple[dict[str, Any], bool]:
    """The document the header and chunks of ``raw`` make, and whether its last chunk
    was cut short (and left out). Raises ChunkError."""
    view = memoryview(raw)  # lines parsed in place: the text is not copied again
    end = raw.find(b"\n")
    state = _State(_start(_line(view[:end], 1)))
    number, at = 1, end + 1
    while (end := raw.find(b"\n", at)) >= 0:
        number += 1
        if end > at:
            state.add(_line(view[at:end], number), number)
        at = end + 1
    torn = at < len(raw)  # whole lines end in a newline; the last piece did not
    return state.finish(), torn


def _line(line: memoryview, number: int) -> dict[str, Any]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise ChunkError(f"line {number} is not JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise ChunkError(f"line {number} is not a JSON object")
    return value


def _start(head: dict[str, Any]) -> dict[str, Any]:
    """The document before any chunk: the header's facts, every table empty."""
    doc = {key: value for key, value in head.items() if key != "layout"}
    session = head.get("session")
    start = session.get("start") if isinstance(session, dict) else None
    doc["session"] = {"start": start, "end": start, "end_reason": "live", "samples": 0,
                      "lost": 0, "lost_at": [], "errors": []}  # fmt: skip
    for key in ("maps", "objects", "frames", "stacks", "samples", "process", "processes"):
        doc[key] = []
    doc["threads"], doc["thread_pids"] = {}, {}
    return doc


class _State:
    """The document being merged, with what finding a record by id needs."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.process_at: dict[Any, int] = {}  # pid -> index in processes
        self.lost_at: dict[Any, Any] = {}

    def add(self, chunk: dict[str, Any], number: int) -> None:
        doc = self.doc
        for key in ("target", "host", "sampler"):
            if key in chunk:
                doc[key] = _of(chunk, key, dict, number)
        session = chunk.get("session", {})
        if not isinstance(session, dict):
            raise ChunkError(f"line {number}: its session is not an object")
        doc["session"].update((k, v) for k, v in session.items() if k in SESSION_UPDATES)
        stacks_from = chunk.get("stacks_from", len(doc["stacks"]))
        if stacks_from != len(doc["stacks"]):
            raise ChunkError(
                f"line {number}: its stacks start at {stacks_from!r}, but the chunks before "
                f"it hold {len(doc['stacks'])}"
            )
        for key in ("objects", "frames"):
            _by_id(doc[key], _of(chunk, key, list, number), key, number)
        for key in ("stacks", "maps", "samples", "process"):
            doc[key].extend(_of(chunk, key, list, number))
        for key in ("threads", "thread_pids"):
            doc[key].update(_of(chunk, key, dict, number))
        self._processes(_of(chunk, "processes", list, number), number)
        for pair in _of(chunk, "lost_at", list, number):
            if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int):
                raise ChunkError(f"line {number}: a lost_at entry is not a [second, count] pair")
            self.lost_at[pair[0]] = pair[1]
        doc["session"]["errors"].extend(_of(chunk, "errors", list, number))

    def _processes(self, records: list[Any], number: int) -> None:
        processes = self.doc["processes"]
        for record in records:
            pid = record.get("pid") if isinstance(record, dict) else None
            if not isinstance(pid, int):
                raise ChunkError(f"line {number}: a process without a pid")
            at = self.process_at.setdefault(pid, len(processes))
            if at == len(processes):
                processes.append(record)
            else:
                processes[at] = record

    def finish(self) -> dict[str, Any]:
        self.doc["session"]["lost_at"] = [[s, n] for s, n in self.lost_at.items()]
        return self.doc


def _of(chunk: dict[str, Any], key: str, kind: type, number: int) -> Any:
    value = chunk.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ChunkError(f"line {number}: its {key} is not a JSON {kind.__name__}")
    return value


def _by_id(table: list[Any], records: list[Any], what: str, number: int) -> None:
    """Each record in place of the one of its id, or after the last."""
    for record in records:
        rid = record.get("id") if isinstance(record, dict) else None
        if not isinstance(rid, int) or isinstance(rid, bool) or not 0 <= rid <= len(table):
            raise ChunkError(
                f"line {number}: one of its {what} has id {rid!r}, where the chunks so far "
                f"hold {len(table)}"
            )
        if rid == len(table):
            table.append(record)
        else:
            table[rid] = record
