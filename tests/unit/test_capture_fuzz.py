"""Captures are untrusted input: mutated files give CaptureError (or load), nothing else.

The seed capture is a real document shape written by ``capture.writer.document``;
hypothesis then edits its JSON tree (wrong types, dangling references, huge or
negative numbers, deleted keys) and its bytes (truncation, flips, gzip damage).
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livesym.capture.reader import read_capture
from livesym.capture.writer import document
from livesym.engine import replay_snapshot
from livesym.errors import CaptureError
from livesym.records import (
    FrameRecord,
    GenerationRecord,
    MappingRecord,
    ObjectRecord,
    ProcessRecord,
    ProcessStat,
    Reason,
    python_frame_record,
)

FRAME = FrameRecord(
    id=0, generation=1, vma=0x55A1C0BD6500, module="/usr/bin/app", object=0,
    mapping=(0x55A1C0BD5000, 0x55A1C3F17000, "r-xp", 0xBD4000), base=0x55A1C0000000,
    segment=3, elf_vaddr=0xBD6500, elf_offset=0xBD5500, symbol="_Z3runv", demangled="run()",
    symbol_vaddr=0xBD6400, symbol_size=512, symbol_offset=256, reason=None, detail="",
    steps=("base = 0x1",), problems=(),
)  # fmt: skip
UNRESOLVED = FrameRecord(
    id=1, generation=1, vma=0x10, module=None, object=None, mapping=None, base=None,
    segment=None, elf_vaddr=None, elf_offset=None, symbol=None, demangled=None,
    symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=Reason.UNMAPPED,
    detail="no mapping holds 0x10", steps=(), problems=(),
)  # fmt: skip
PYFRAME = dataclasses.replace(python_frame_record("handle", "/srv/app.py", 12), id=2)
MAPPING = MappingRecord(
    start=0x55A1C0BD5000, end=0x55A1C3F17000, perms="r-xp", pgoff=0xBD4000, dev="fd:01",
    inode=42, path="/usr/bin/app", deleted=False, object=0, base=0x55A1C0000000,
    base_formula="base = 0x1", e_type="ET_DYN", build_id="ab", symbol_source="symtab",
    problems=("p_align is not a power of two",),
)  # fmt: skip
SEED: dict[str, Any] = document(
    created="2026-11-21T00:00:00Z", version="0.1.0",
    target={"pid": 42, "cmdline": ["app"]}, host={"hostname": "h", "page_size": 4096},
    sampler={"name": "perf", "rate_hz": 99, "idle": False},
    session={"start": 10.0, "end": 12.0, "end_reason": "stopped", "samples": 3, "lost": 0,
             "errors": []},
    maps=[GenerationRecord(1, 0.0, (MAPPING,))],
    objects=[ObjectRecord(0, "/usr/bin/app", "ab", "ET_DYN", 64, "EM_X86_64", (), "symtab")],
    frames=[FRAME, UNRESOLVED, PYFRAME], stacks=[(0,), (1, 0), (2,)], threads={43: "worker"},
    samples=[(0.1, 43, 0, 0), (0.2, 43, 1, 0), (0.3, 44, 1, 1), (0.4, 43, 2, 0)],
    process=[ProcessStat(0.5, 99.5, 1 << 20, 2)],
    processes=[ProcessRecord(42, "app", ("app",)),
               ProcessRecord(44, "kid", ("kid", "-x"), 42, 0.2)],
    thread_pids={43: 42, 44: 44},
)  # fmt: skip

_DIR = tempfile.TemporaryDirectory(prefix="livesym-capture-fuzz-")
_count = iter(range(1 << 62))

ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                         max_size=2),
)  # fmt: skip


def load(data: bytes, suffix: str = ".json") -> None:
    """Read the bytes as a capture; anything but CaptureError fails the test."""
    path = Path(_DIR.name) / f"c{next(_count)}{suffix}"
    path.write_bytes(data)
    try:
        capture = read_capture(path)
    except CaptureError as e:
        assert "\n" not in str(e)
        return
    finally:
        path.unlink()
    replay_snapshot(capture)  # whatever loads must also report without raising


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in the JSON tree a value can be replaced."""
    found = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += paths(v, (*prefix, i))
    return found


ALL_PATHS = paths(SEED)


def test_the_seed_itself_loads_and_reports():
    load(json.dumps(SEED).encode())
    path = Path(_DIR.name) / "seed.json"
    path.write_text(json.dumps(SEED))
    snap = replay_snapshot(read_capture(path))
    assert snap.view.samples == 3  # the third sample is idle, excluded by default
    names = {row.frame.label: row.self_samples for row in snap.view.functions}
    assert names == {"run()": 1, "[unmapped address]": 1, "handle": 1}


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(where=st.sampled_from(ALL_PATHS), value=ODD_VALUES, delete=st.booleans())
def test_edited_documents_are_rejected_or_loaded_never_crash(where, value, delete):
    doc = copy.deepcopy(SEED)
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[where[-1]]
    elif delete and isinstance(parent, list):
        parent.pop(where[-1])
    else:
        parent[where[-1]] = value
    load(json.dumps(doc).encode())


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    cut=st.integers(min_value=0, max_value=2000),
    flips=st.lists(
        st.tuples(st.integers(min_value=0, max_value=2000), st.integers(1, 255)), max_size=4
    ),
)
def test_truncated_and_flipped_bytes_are_rejected_or_loaded(cut, flips):
    data = bytearray(json.dumps(SEED).encode())
    for at, xor in flips:
        if at < len(data):
            data[at] ^= xor
    load(bytes(data[:cut]))
    load(gzip.compress(bytes(data))[: max(cut, 1)], ".json.gz")


def test_a_gzip_bomb_is_refused_without_inflating_it():
    bomb = gzip.compress(b" " * (64 << 20))  # 64 MiB of spaces in a few KiB
    path = Path(_DIR.name) / "bomb.json.gz"
    path.write_bytes(bomb)
    try:
        read_capture(path, memory_limit=16 << 20)
    except CaptureError as e:
        assert "more than 16 MiB of memory" in str(e) and "--max-capture-memory" in str(e)
    else:
        raise AssertionError("the bomb was inflated")


def test_the_parse_cost_bound_holds_for_the_costliest_json_per_byte():
    # Each of these is the worst kind of value per byte of text: an empty container,
    # a one-character string, a float, a dict entry. Parsed, they must not take more
    # than parse_cost says (measured with tracemalloc, which sees every allocation).
    import tracemalloc

    import orjson

    from livesym.capture.reader import parse_cost

    for text in (b"[" + b"[]," * 100_000 + b"[]]", b"[" + b'"",' * 100_000 + b'""]',
                 b"[" + b"1.5," * 100_000 + b"1.5]", b"[" + b"{}," * 100_000 + b"{}]",
                 b"{" + b",".join(b'"%d":0' % i for i in range(100_000)) + b"}",
                 b'["' + "\u00e9\U0001f600".encode() * 50_000 + b'"]'):  # fmt: skip
        tracemalloc.start()
        value = orjson.loads(text)
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del value
        assert used <= parse_cost(text), (text[:20], used, parse_cost(text))


def test_a_frame_reason_is_one_livesym_knows_or_the_capture_is_refused():
    # A reason is a code the profile groups unnamed frames by, not free text.
    doc = json.loads(json.dumps(SEED))
    unresolved = next(f for f in doc["frames"] if f["reason"] is not None)
    path = Path(_DIR.name) / "reason.json"
    unresolved["reason"] = "no_symbols"  # another known code loads, as that code
    path.write_text(json.dumps(doc))
    frames = read_capture(path).frames
    assert {f.reason for f in frames} == {None, Reason.NO_SYMBOLS}
    unresolved["reason"] = "[red]made up[/red]"
    path.write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match=r"reason .* is not one livesym knows"):
        read_capture(path)


def test_older_captures_still_read_and_newer_frames_need_their_version():
    doc = json.loads(json.dumps(SEED))
    assert doc["version"] == 6
    # A weight (new in version 5: an off-CPU interval's length) needs version 5
    path = Path(_DIR.name) / "v4-weighted.json"
    weighted = dict(doc, samples=[[*doc["samples"][0], 7], *doc["samples"][1:]])
    path.write_text(json.dumps(dict(weighted, version=4)))
    with pytest.raises(CaptureError, match=r"sample 0 is not \[time, tid, stack, flags\]"):
        read_capture(path)
    path.write_text(json.dumps(weighted))
    assert read_capture(path).samples[0][4] == 7
    path.write_text(json.dumps(dict(weighted, samples=[[*doc["samples"][0], 0]])))
    with pytest.raises(CaptureError, match="sample 0 has a bad weight"):
        read_capture(path)
    for older in ("processes", "thread_pids"):  # new in version 4
        del doc[older]
    for generation in doc["maps"]:
        del generation["pid"]
    path = Path(_DIR.name) / "v1.json"
    doc["version"] = 1  # the seed has no truncated, unnamed or kernel frame
    path.write_text(json.dumps(doc))
    assert len(read_capture(path).frames) == len(doc["frames"])
    # A truncated frame (new in version 2) in a file that says 1 was not written by livesym
    cut = dict(doc["frames"][0], kind="truncated", symbol="stack copy too small")
    doc["frames"][0] = cut
    path.write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match="version 1 capture with truncated frames"):
        read_capture(path)
    doc["version"] = 2
    path.write_text(json.dumps(doc))
    assert read_capture(path).frames[0].kind == "truncated"
    # A kernel frame (new in version 3) needs version 3
    doc["frames"][0] = dict(doc["frames"][0], kind="kernel", symbol="do_syscall_64")
    path.write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match="version 2 capture with kernel frames"):
        read_capture(path)
    doc["version"] = 3
    path.write_text(json.dumps(doc))
    old = read_capture(path)
    assert old.frames[0].kind == "kernel"
    # Before version 4 a capture is one process: the target, every thread its own
    assert old.processes == () and old.thread_pids == {} and old.maps[0].pid == 0
    view = replay_snapshot(old).view
    assert [(p.pid, p.name, p.samples) for p in view.processes] == [(42, "app", 3)]


def test_a_capture_of_several_processes_reads_back_with_each_threads_process():
    path = Path(_DIR.name) / "v4.json"
    path.write_text(json.dumps(SEED))
    capture = read_capture(path)
    assert [(p.pid, p.name, p.argv, p.parent) for p in capture.processes] == [
        (42, "app", ("app",), 0), (44, "kid", ("kid", "-x"), 42),
    ]  # fmt: skip
    assert capture.thread_pids == {43: 42, 44: 44}
    view = replay_snapshot(capture).view
    # Thread 44's idle sample is not counted (the session did not sample idle ones)
    assert [(p.pid, p.name, p.samples) for p in view.processes] == [(42, "app", 3)]
    bad = dict(SEED, thread_pids={"43": "42"})
    path.write_text(json.dumps(bad))
    with pytest.raises(CaptureError, match="thread_pids must map"):
        read_capture(path)
