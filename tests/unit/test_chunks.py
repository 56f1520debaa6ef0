"""A recording's chunks (``capture.chunks``, ``capture.appender``, ``capture.unchunk``):
appended as a session grows, they read as the very document the session's tables
make whole, however the chunks fall; a tail cut anywhere loses only the chunk it cut;
and a chunk costs what is new, not what the session holds.

The session is a real capture's content (tests/ui/data/spin.json, recorded from a
spinning program) fed into the engine's tables in random steps, with what a real
session does between them: frames renamed when a debug file arrives, an object's
symbols replaced, threads renamed, a process ending, samples lost, errors, and maps
generations past the tables' bound."""

from __future__ import annotations

import dataclasses
import gzip
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from livesym.capture.appender import ChunkFile
from livesym.capture.chunks import ChunkMaker, Increment, Mark
from livesym.capture.reader import TORN, read_capture
from livesym.capture.session import SessionFacts, session_document
from livesym.capture.unchunk import merged
from livesym.engine import tables as tables_module
from livesym.engine.tables import SessionTables
from livesym.errors import CaptureError
from livesym.records import Capture, FrameRecord, ProcessRecord, ProcessStat

CAPTURE = Path(__file__).parent.parent / "ui" / "data" / "spin.json"
START = 1000.0


@dataclasses.dataclass
class _Session:
    """A session growing in the engine's tables, with its facts as they change."""

    capture: Capture
    rng: random.Random
    tables: SessionTables = dataclasses.field(default_factory=SessionTables)
    samples: int = 0
    errors: tuple[str, ...] = ()
    now: float = START

    def __post_init__(self) -> None:
        for o in self.capture.objects:
            self.tables.add_object(o)
        self.tables.add_process_record(
            ProcessRecord(pid=1, name="spin", argv=("spin",), parent=0, started=START)
        )

    def facts(self) -> SessionFacts:
        return SessionFacts(
            target=dict(self.capture.target), host=dict(self.capture.host),
            sampler=dict(self.capture.sampler), start=START, samples=self.samples,
            lost=sum(self.tables.lost_seconds.values()), errors=self.errors,
            lost_at=tuple(sorted(self.tables.lost_seconds.items())),
        )  # fmt: skip

    def step(self) -> None:
        """A little more session: samples on new and old stacks, and now and then the
        things a session changes in place."""
        rng, t, c = self.rng, self.tables, self.capture
        for _ in range(rng.randrange(0, 30)):
            self.now += rng.expovariate(100)
            base = rng.choice(c.stacks)
            shift = rng.randrange(0, 4)  # another generation's copy of the stack's frames
            ids = tuple(self._frame(c.frames[i], shift) for i in base)
            tid = rng.choice(sorted(c.threads))
            t.keep_thread(tid, 1, c.threads[tid])
            weight = 1 if rng.random() < 0.8 else rng.randrange(2, 5000)
            t.keep(self.now, tid, t.intern_stack(ids), rng.randrange(0, 8), weight, START)
            self.samples += 1
        roll = rng.random()
        if roll < 0.1 and t.frames:
            frame = rng.choice(t.frames)
            t.rename_frames([dataclasses.replace(frame, symbol=f"named_{rng.random()}")])
        elif roll < 0.15 and t.objects:
            o = rng.choice(t.objects)
            t.replace_object(dataclasses.replace(o, symbol_source=f"symtab+{rng.random()}"))
        elif roll < 0.25:
            tid = rng.choice(sorted(c.threads))
            t.keep_thread(tid, 1, f"renamed-{rng.randrange(100)}")
        elif roll < 0.3:
            t.count_lost(int(self.now - START), rng.randrange(1, 9))
        elif roll < 0.35:
            self.errors += (f"error {len(self.errors)}",)
        elif roll < 0.45:
            number = 1000 + len(t.generations) + rng.randrange(10**6)
            if not t.has_generation(number):
                g = dataclasses.replace(c.maps[0], number=number, time=self.now)
                t.add_generation(g)
        elif roll < 0.5:
            t.add_process([ProcessStat(self.now, rng.uniform(0, 200), 1 << 20, 2)])
        elif roll < 0.52:
            t.process_ended(1, self.now)

    def _frame(self, record: FrameRecord, shift: int) -> int:
        t = self.tables
        new = dataclasses.replace(record, id=len(t.frames), vma=record.vma + shift)
        known = t.frame_id(new.key)
        return known if known is not None else t.add_frame(new)


def _lined(t: SessionTables, rng: random.Random) -> dict[int, FrameRecord]:
    """Source lines for some frames the stacks hold (what the last chunk says again)."""
    used = sorted({i for s in t.stacks for i in s})
    chosen = rng.sample(used, k=min(len(used), 5))
    return {i: dataclasses.replace(t.frames[i], line=10 + i, source_file="spin.c") for i in chosen}


def _record(seed: int, steps: int, chunk_every: float) -> tuple[bytes, dict[str, Any], list[int]]:
    """A session of ``steps`` grown with a chunk after a step with probability
    ``chunk_every``: its chunked lines, the whole document its tables make at the end
    (the same source lines), and the samples each chunk held."""
    rng = random.Random(seed)
    session = _Session(read_capture(CAPTURE), rng)
    maker, mark, out, per_chunk = ChunkMaker(), Mark(), b"", []

    def chunk(state: str, extra: list[FrameRecord] | tuple[()] = ()) -> None:
        nonlocal mark, out
        inc = session.tables.increment(mark, session.now, state)
        facts = session.facts()
        out += maker.lines(inc, facts, extra)
        maker.landed(inc, facts)
        mark = inc.mark
        per_chunk.append(len(inc.part.flags))

    for _ in range(steps):
        session.step()
        if rng.random() < chunk_every:
            chunk("live")
    lined = _lined(session.tables, rng)
    chunk("stopped", list(lined.values()))
    whole = session_document(
        session.tables.freeze(session.now, "stopped"),
        session.facts(),
        lambda frames: [lined.get(f.id, f) for f in frames],
    )
    return out, orjson.loads(orjson.dumps(whole)), per_chunk


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    doc = {k: v for k, v in doc.items() if k not in ("created", "layout")}
    doc["session"] = dict(doc["session"], lost_at=sorted(doc["session"]["lost_at"]))
    return doc


@pytest.mark.parametrize("seed", range(12))
def test_the_chunks_merge_into_the_document_the_tables_make_whole(seed, monkeypatch):
    # GIVEN a small bound on the generations the tables keep, so that the tail is cut
    monkeypatch.setattr(tables_module, "MAX_GENERATION_RECORDS", 6)
    # WHEN a session is recorded in chunks, now many small ones, now few large ones
    lines, whole, _ = _record(seed, steps=300, chunk_every=[0.9, 0.3, 0.05][seed % 3])
    # THEN the chunks, merged, are that session's whole document, field by field
    doc, torn = merged(lines)
    assert not torn
    # (every maps generation: the whole document has the tables' bounded tail of them)
    maps, tail = doc.pop("maps"), whole.pop("maps")
    assert maps[len(maps) - len(tail) :] == tail
    assert _comparable(doc) == _comparable(whole)


def test_every_generation_is_written_once_though_the_tables_keep_a_bounded_tail(monkeypatch):
    monkeypatch.setattr(tables_module, "MAX_GENERATION_RECORDS", 3)
    lines, whole, _ = _record(5, steps=400, chunk_every=0.5)
    doc, _ = merged(lines)
    numbers = [g["generation"] for g in doc["maps"]]
    assert len(numbers) == len(set(numbers)) > 3 >= len(whole["maps"])


def test_a_chunk_holds_what_is_new_and_no_more():
    # GIVEN a session recorded in many chunks
    lines, whole, per_chunk = _record(3, steps=600, chunk_every=0.5)
    chunks = [orjson.loads(line) for line in lines.splitlines()[1:]]
    # THEN each chunk's samples are those taken since the one before: all, once
    assert [len(c["samples"]) for c in chunks] == per_chunk
    assert sum(per_chunk) == len(whole["samples"])
    # ... and its stacks follow the ones before
    assert [c["stacks_from"] for c in chunks] == [
        sum(len(c.get("stacks", [])) for c in chunks[:i]) for i in range(len(chunks))
    ]


def _chunk_file(tmp_path: Path, name: str, lines: bytes) -> tuple[Path, list[int]]:
    """``lines`` appended as a recording appends them (the header with the first
    chunk); the file's size after each append."""
    path = tmp_path / name
    f, sizes = ChunkFile(str(path)), []
    parts = lines.splitlines(keepends=True)
    f.append(parts[0] + parts[1])
    sizes.append(path.stat().st_size)
    for part in parts[2:]:
        f.append(part)
        sizes.append(path.stat().st_size)
    f.close()
    return path, sizes


@pytest.mark.parametrize("name", ["cut.json", "cut.json.gz"])
def test_a_tail_cut_anywhere_loses_only_the_chunk_it_cut(tmp_path, name):
    # GIVEN a recording's file, plain and gzip (a member a chunk)
    lines, whole, per_chunk = _record(7, steps=200, chunk_every=0.3)
    path, sizes = _chunk_file(tmp_path, name, lines)
    data = path.read_bytes()
    assert len(read_capture(path).samples) == len(whole["samples"])
    if name.endswith(".gz"):
        assert gzip.decompress(data) == lines  # a whole gzip file after every chunk
    # WHEN it is cut at any byte of its last chunk (as kill -9 or a full disk leaves it)
    rng = random.Random(1)
    before = sizes[-2]
    cuts = sorted({before + 1, sizes[-1] - 1, *rng.sample(range(before + 1, sizes[-1]), 20)})
    for cut in cuts:
        path.write_bytes(data[:cut])
        capture = read_capture(path)
        # THEN it reads whole up to that chunk, and says its last was cut short
        assert len(capture.samples) == sum(per_chunk[:-1]), cut
        assert TORN in capture.session["errors"]
    # ... and cut exactly after a chunk, it is whole, with nothing to say
    path.write_bytes(data[:before])
    capture = read_capture(path)
    assert len(capture.samples) == sum(per_chunk[:-1])
    assert TORN not in capture.session["errors"]


def test_a_damaged_chunk_before_the_last_is_refused_in_one_line(tmp_path):
    lines, _, _ = _record(8, steps=100, chunk_every=0.5)
    parts = lines.splitlines(keepends=True)
    assert len(parts) > 4
    damaged = tmp_path / "damaged.json"
    damaged.write_bytes(b"".join([*parts[:2], b'{"samples": [[0.1, 5,\n', *parts[2:]]))
    with pytest.raises(CaptureError, match=r"line 3 is not JSON") as e:
        read_capture(damaged)
    assert "\n" not in str(e.value)
    # A chunk whose stacks do not follow those before it (one left out) is refused too
    with_stacks = [i for i, p in enumerate(parts) if i > 1 and b'"stacks":' in p]
    assert with_stacks
    gap = tmp_path / "gap.json"
    gap.write_bytes(b"".join(p for i, p in enumerate(parts) if i != with_stacks[0]))
    with pytest.raises(CaptureError, match=r"its stacks start at \d+, but the chunks before"):
        read_capture(gap)


def test_the_increment_of_a_long_session_costs_what_is_new(monkeypatch):
    # GIVEN a session with many samples already written
    session = _Session(read_capture(CAPTURE), random.Random(4))
    for _ in range(3000):
        session.step()
    inc: Increment = session.tables.increment(Mark(), session.now, "live")
    mark = inc.mark
    assert mark.samples > 20_000
    # WHEN a few more come
    for _ in range(3):
        session.step()
    later = session.tables.increment(mark, session.now, "live")
    # THEN the increment holds those, not the session
    assert len(later.part.flags) == later.mark.samples - mark.samples < 100
    assert len(later.part.stacks) == later.mark.stacks - mark.stacks


def test_a_chunked_capture_damaged_anywhere_is_read_or_refused_in_one_line(tmp_path):
    # GIVEN a recording's lines, and mutations of them: bytes flipped, a value of the
    # wrong kind where a chunk's table is, a line cut, lines swapped
    lines, _, _ = _record(12, steps=60, chunk_every=0.4)
    rng = random.Random(5)
    parts = lines.splitlines(keepends=True)
    hostile = [b'{"session": 5}\n', b'{"stacks_from": "x"}\n', b'{"frames": {"id": 0}}\n',
               b'{"lost_at": [[[1], 2]]}\n', b'{"processes": [{"pid": [1]}]}\n',
               b'{"objects": [{"id": 99999}]}\n', b'[1, 2]\n', b'{"threads": []}\n',
               b'{"samples": [["a", 1, 0, 0]]}\n', b'\xff\xfe\n']  # fmt: skip
    path = tmp_path / "hostile.json"
    for trial in range(300):
        mutated = list(parts)
        kind = trial % 4
        if kind == 0:
            i = rng.randrange(len(mutated))
            line = bytearray(mutated[i])
            line[rng.randrange(len(line))] = rng.randrange(256)
            mutated[i] = bytes(line)
        elif kind == 1:
            mutated.insert(rng.randrange(1, len(mutated) + 1), rng.choice(hostile))
        elif kind == 2:
            i = rng.randrange(1, len(mutated))
            mutated[i] = mutated[i][: rng.randrange(len(mutated[i]))] + b"\n"
        else:
            i, j = rng.randrange(1, len(mutated)), rng.randrange(1, len(mutated))
            mutated[i], mutated[j] = mutated[j], mutated[i]
        path.write_bytes(b"".join(mutated))
        # THEN it reads, or is refused with one line: nothing else escapes
        try:
            read_capture(path)
        except CaptureError as e:
            assert "\n" not in str(e)
