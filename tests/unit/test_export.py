"""Exports of shapes a spin capture does not have (synthetic captures): names that break
the folded format, samples without frames, idle samples, Python frames, frames left
for a back end to symbolize, and an empty capture.

Real-capture checks with independent readers are in tests/integration/test_sharing.py.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema

from livesym.export.collapsed import collapsed
from livesym.export.pprof import pprof
from livesym.export.profile_proto import Profile
from livesym.export.speedscope import speedscope_document
from livesym.records import (
    Capture,
    FrameRecord,
    ObjectRecord,
    Reason,
    TimeMode,
    python_frame_record,
)

SCHEMA = json.loads(
    (Path(__file__).parent.parent / "data" / "speedscope" / "file-format-schema.json").read_text()
)
LIB = (0x7F00_0000_0000, 0x7F00_0001_0000, "r-xp", 0x1000)


def native(fid: int, symbol: str | None, *, vma: int = 0x7F00_0000_1000, obj: int | None = 0,
           reason: str | None = None, module: str = "/usr/lib/libx.so") -> FrameRecord:  # fmt: skip
    return FrameRecord(
        id=fid, generation=1, vma=vma + fid, module=module, object=obj, mapping=LIB,
        base=0x7F00_0000_0000, segment=0, elf_vaddr=0x1000 + fid, elf_offset=0x1000 + fid,
        symbol=symbol, demangled=symbol, symbol_vaddr=0x1000 if symbol else None,
        symbol_size=64 if symbol else None, symbol_offset=fid if symbol else None,
        reason=Reason(reason) if reason and symbol is None else None, detail="",
        steps=(), problems=(),
    )  # fmt: skip


def capture(frames: list[FrameRecord], stacks: list[tuple[int, ...]],
            samples: list[tuple[float, ...]], build_id: str | None = "ab" * 20,
            ) -> Capture:  # fmt: skip
    return Capture(
        target={"pid": 1, "exe": "/usr/bin/app"}, host={"page_size": 4096},
        sampler={"name": "perf", "rate_hz": 100, "idle": True},
        session={"start": 10.0, "end": 12.0, "errors": []}, maps=(),
        objects=(ObjectRecord(0, "/usr/lib/libx.so", build_id, "ET_DYN", 64, "EM_X86_64", ()),),
        frames=tuple(frames), stacks=tuple(stacks), threads={7: "main", 8: "io"},
        samples=tuple(s if len(s) == 5 else (*s, 1) for s in samples),
    )  # fmt: skip


def folded(text: str) -> dict[tuple[str, ...], int]:
    out = {}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        out[tuple(stack.split(";"))] = int(count)
    return out


def test_names_that_would_break_a_folded_line_are_escaped():
    frames = [native(0, "operator;(int)"), native(1, "two\nlines"), native(2, "main")]
    c = capture(frames, [(0, 1, 2)], [(0.0, 7, 0, 0)] * 3)
    assert folded(collapsed(c)) == {("main", "two%0Alines", "operator%3B(int)"): 3}


def test_control_characters_in_folded_names_are_percent_encoded_like_line_breaks():
    # ESC would reach the terminal a folded file is printed on; C0 is not even allowed
    # in the SVG flamegraph.pl makes of it.
    frames = [native(0, "red\x1b[31m\tx\x00\x7f"), native(1, "csi\x9b2J"), native(2, "caf\u00e9")]
    c = capture(frames, [(0, 1, 2)], [(0.0, 7, 0, 0)])
    text = collapsed(c)
    assert text == "caf\u00e9;csi%C2%9B2J;red%1B[31m%09x%00%7F 1\n"
    assert text[:-1].isprintable()


def test_a_sample_without_frames_is_unknown_and_equal_label_stacks_merge():
    # Frames 0 and 1 are two addresses in one function: their stacks fold into one line.
    frames = [native(0, "work"), native(1, "work"), native(2, "main")]
    c = capture(frames, [(0, 2), (1, 2), ()], [(0.0, 7, 0, 0), (0.1, 7, 1, 0), (0.2, 8, 2, 0)])
    assert folded(collapsed(c)) == {("main", "work"): 2, ("[unknown]",): 1}


def test_idle_samples_count_only_when_asked():
    c = capture([native(0, "poll")], [(0,)], [(0.0, 7, 0, 1), (0.1, 7, 0, 0)])
    assert folded(collapsed(c)) == {("poll",): 1}
    assert folded(collapsed(c, mode=TimeMode.WALL)) == {("poll",): 2}
    profile = Profile.FromString(gzip.decompress(pprof(c, mode=TimeMode.WALL)))
    table = list(profile.string_table)
    assert [table[t.type] for t in profile.sample_type] == ["samples", "wall"]
    assert sum(s.value[0] for s in profile.sample) == 2


def decode(c: Capture) -> tuple[Any, list[str]]:
    profile = Profile.FromString(gzip.decompress(pprof(c)))
    return profile, list(profile.string_table)


def test_pprof_python_frames_have_source_lines_and_no_address():
    py = [
        dataclasses.replace(python_frame_record("handle", "/srv/app.py", 12), id=0),
        dataclasses.replace(python_frame_record("handle", "/srv/app.py", 15), id=1),
        dataclasses.replace(python_frame_record("main", "/srv/app.py", 3), id=2),
    ]
    c = capture(py, [(0, 2), (1, 2)], [(0.0, 7, 0, 0), (0.1, 7, 1, 0)])
    profile, table = decode(c)
    functions = {f.id: f for f in profile.function}
    assert sorted(table[f.name] for f in functions.values()) == ["handle", "main"]
    assert {table[f.filename] for f in functions.values()} == {"/srv/app.py"}
    lines = sorted(
        (table[functions[ln.function_id].name], ln.line)
        for loc in profile.location
        for ln in loc.line
    )
    assert lines == [("handle", 12), ("handle", 15), ("main", 3)]
    assert all(loc.address == 0 and loc.mapping_id == 0 for loc in profile.location)
    assert len(profile.mapping) == 0


def test_pprof_labels_unresolved_frames_and_leaves_them_to_a_back_end_to_name_again():
    frames = [native(0, None, reason="no_symbols"), native(1, "main")]
    c = capture(frames, [(0, 1)], [(0.0, 7, 0, 0)])
    profile, table = decode(c)
    (mapping,) = profile.mapping
    assert table[mapping.build_id] == "ab" * 20 and not mapping.has_functions
    assert (mapping.memory_start, mapping.memory_limit, mapping.file_offset) == (
        LIB[0], LIB[1], LIB[3]
    )  # fmt: skip
    leaf = next(loc for loc in profile.location if loc.id == profile.sample[0].location_id[0])
    assert leaf.address == frames[0].vma
    functions = {f.id: table[f.name] for f in profile.function}
    assert [functions[ln.function_id] for ln in leaf.line] == ["[no symbols] libx.so"]
    # Without a build-id nothing could symbolize it later: it keeps livesym's label.
    profile, table = decode(capture(frames, [(0, 1)], [(0.0, 7, 0, 0)], build_id=None))
    assert "[no symbols] libx.so" in {table[f.name] for f in profile.function}
    assert profile.mapping[0].has_functions


def test_pprof_samples_per_thread_with_labels_and_period():
    c = capture([native(0, "f")], [(0,)], [(0.0, 7, 0, 0), (0.1, 7, 0, 0), (0.2, 8, 0, 0)])
    profile, table = decode(c)
    assert profile.period == 10_000_000 and profile.duration_nanos == 2_000_000_000
    by_thread = {
        next(table[lb.str] for lb in s.label if table[lb.key] == "thread"): list(s.value)
        for s in profile.sample
    }
    assert by_thread == {"main": [2, 20_000_000], "io": [1, 10_000_000]}


def test_speedscope_merges_repeats_keeps_time_order_and_names_python_lines():
    py = [
        dataclasses.replace(python_frame_record("handle", "/srv/app.py", 15), id=0),
        dataclasses.replace(python_frame_record("handle", "/srv/app.py", 12), id=1),
    ]
    c = capture([*py, native(2, "main")], [(0, 2), (1, 2), (2,)],
                [(0.3, 7, 2, 0), (0.0, 7, 0, 0), (0.1, 7, 1, 0), (0.2, 8, 2, 0)])  # fmt: skip
    doc = speedscope_document(c)
    jsonschema.validate(doc, SCHEMA)
    frames = doc["shared"]["frames"]
    assert frames[0] == {"name": "handle", "file": "/srv/app.py", "line": 12}
    main, io = doc["profiles"]
    assert main["name"] == "main (7)" and io["name"] == "io (8)"
    # The two handle samples (two lines of one function) merge; time order is kept.
    assert [[frames[i]["name"] for i in s] for s in main["samples"]] == [
        ["main", "handle"], ["main"]
    ]  # fmt: skip
    assert main["weights"] == [2, 1]


def test_an_empty_capture_exports_empty_but_valid_files():
    c = capture([], [], [])
    assert collapsed(c) == ""
    doc = speedscope_document(c)
    jsonschema.validate(doc, SCHEMA)
    assert doc["profiles"] == []
    profile, _table = decode(c)
    assert len(profile.sample) == 0 and len(profile.sample_type) == 2
