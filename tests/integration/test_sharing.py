"""scrub and export on a real capture of spin (perf, 499 Hz), checked by independent readers.

One recording is shared by every test here, and one of jitmap (JIT code named
only by a perf map) by the JIT tests. Scrubbing is checked the way
``perf inject --aslr`` is tested: not one original address survives anywhere
in the output text, and the report is the same before and after. Exports are
parsed back with readers that share no code with the exporters: a folded-stack
parser, the speedscope JSON schema, and a protobuf wire-format walker (plus the
pprof tool where it is installed).
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from livesym.capture.reader import read_capture
from livesym.elf.image import load_image
from livesym.engine import Engine
from livesym.sampling.perf_event import PerfSampler
from livesym.symbolize.perfmap import RECHECK_S
from livesym.target.process import TargetProcess
from tests.support.capture_json import capture_json
from tests.support.procs import running
from tests.support.spin import HOT

pytestmark = pytest.mark.perf

_REASON = PerfSampler.available()
SCHEMA = Path(__file__).parent.parent / "data" / "speedscope" / "file-format-schema.json"
PAGE = 4096


@pytest.fixture(scope="module")
def recorded(built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A capture of spin, recorded in-process (faster than the CLI, the same writer)."""
    if _REASON is not None:
        pytest.skip(_REASON)
    path = tmp_path_factory.mktemp("sharing") / "spin.json"
    with running(built("spin")) as proc:
        engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
        engine.captures.record_to(path)
        asyncio.run(engine.run(asyncio.Event(), duration=1.5))
    yield path


@pytest.fixture(scope="module")
def report(recorded: Path) -> dict[str, Any]:
    from livesym.commands.top import top_json
    from livesym.engine import replay_snapshot

    return top_json(replay_snapshot(read_capture(recorded)), 10_000)


def report_json(cli, path: Path, *extra: str) -> dict[str, Any]:
    result = cli("report", str(path), "--json", "--limit", "10000", *extra)
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(result.out)
    return doc


# --- scrub ---------------------------------------------------------------------


def original_addresses(doc: dict[str, Any]) -> set[int]:
    """Every run-time address of a capture document: mapping bounds, bases, sampled VMAs,
    and in frames of no ELF object (JIT code) the perf map's symbol start and whatever
    else is in the ELF fields, which only an ELF object makes ELF addresses."""
    found: set[int] = set()
    for g in doc["maps"]:
        for e in g["entries"]:
            found |= {int(e[0], 16), int(e[1], 16)}
            if len(e) == 9 and "base" in e[8]:
                found.add(int(e[8]["base"], 16))
    for f in doc["frames"]:
        if f.get("kind", "native") == "python":
            continue
        found.add(int(f["vma"], 16))
        if f["base"] is not None:
            found.add(int(f["base"], 16))
        if f["mapping"] is not None:
            found |= {int(f["mapping"][0], 16), int(f["mapping"][1], 16)}
        if f["object"] is None:
            found |= {int(f[k], 16) for k in ("symbol_vaddr", "elf_vaddr", "elf_offset") if f[k]}
    found.discard(0)
    return found


def assert_no_address_survives(original: dict[str, Any], text: str) -> None:
    text = text.lower()
    left = [
        a
        for a in sorted(original_addresses(original))
        if f"{a:x}" in text or str(a) in text  # f"{a:x}" also finds "0x..." forms
    ]
    assert not left, f"original addresses in the scrubbed file: {[hex(a) for a in left]}"


def scrub(cli, src: Path, dst: Path, *options: str) -> dict[str, Any]:
    result = cli("scrub", str(src), "-o", str(dst), *options)
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(dst.read_text())
    return doc


def test_no_mapping_address_base_or_sampled_vma_survives_a_scrub(recorded, cli, tmp_path):
    original = capture_json(recorded)
    assert len(original_addresses(original)) > 20  # the check below has something to find
    out = tmp_path / "scrubbed.json"
    scrub(cli, recorded, out)
    assert_no_address_survives(original, out.read_text())


def test_the_report_is_identical_before_and_after_a_scrub(recorded, cli, tmp_path):
    out = tmp_path / "scrubbed.json.gz"
    result = cli("scrub", str(recorded), "-o", str(out))
    assert result.code == 0, result.err
    before, after = report_json(cli, recorded), report_json(cli, out)
    assert after == before
    assert {f["symbol"] for f in after["functions"]} >= HOT


def pairs(original: dict[str, Any], scrubbed: dict[str, Any]) -> list[tuple[list, list]]:
    out = []
    for g, h in zip(original["maps"], scrubbed["maps"], strict=True):
        out.extend(zip(g["entries"], h["entries"], strict=True))
    return out


def test_the_scrubbed_layout_keeps_bases_contiguity_and_gaps(recorded, cli, tmp_path):
    original = capture_json(recorded)
    scrubbed = scrub(cli, recorded, tmp_path / "scrubbed.json")
    mapped = pairs(original, scrubbed)
    deltas: dict[tuple[Any, ...], set[int]] = {}
    for e, s in mapped:
        start, end, pgoff = int(e[0], 16), int(e[1], 16), int(e[3], 16)
        new_start, new_end = int(s[0], 16), int(s[1], 16)
        delta = new_start - start
        assert new_end - new_start == end - start and s[2:8] == e[2:8]  # size, perms, pgoff, file
        assert delta % PAGE == 0 and new_start != start
        if e[6]:
            # Split mappings of one object: one delta per (object, start - pgoff) ...
            deltas.setdefault((e[6], e[5], start - pgoff), set()).add(delta)
        facts, new_facts = e[8], s[8]
        if "base" in facts:
            # ... and the base moves with it, so elf_vaddr = vma - base still holds.
            assert int(new_facts["base"], 16) - int(facts["base"], 16) == delta
            assert facts["base"] not in new_facts["base_formula"]
    assert deltas and all(len(d) == 1 for d in deltas.values()), deltas
    # Every object's mappings share one base (spin, libc, ld.so each load once).
    bases: dict[int, set[str]] = {}
    for _e, s in mapped:
        if "object" in s[8]:
            bases.setdefault(s[8]["object"], set()).add(s[8]["base"])
    assert len(bases) >= 3 and all(len(b) == 1 for b in bases.values())
    # Contiguous mappings stay contiguous, separate ones at least a page apart, order kept.
    old = sorted((int(e[0], 16), int(e[1], 16), int(s[0], 16), int(s[1], 16)) for e, s in mapped)
    contiguous = gaps = 0
    for (_a, a_end, _na, na_end), (b, _b_end, nb, _nb_end) in itertools.pairwise(old):
        if a_end == b:
            assert nb == na_end
            contiguous += 1
        else:
            assert nb - na_end >= PAGE
            gaps += 1
    assert contiguous >= 5 and gaps >= 3
    # Frames: vma - base = elf_vaddr, inside their (moved) mapping, which is in the maps.
    moved = {(s[0], s[1], s[2], s[3]) for _e, s in mapped}
    for f in scrubbed["frames"]:
        if f["mapping"] is None:
            continue
        vma = int(f["vma"], 16)
        assert int(f["mapping"][0], 16) <= vma < int(f["mapping"][1], 16)
        assert tuple(f["mapping"]) in moved
        if f["base"] is not None:  # ([vdso] has a mapping but no object, so no base)
            assert vma - int(f["base"], 16) == int(f["elf_vaddr"], 16)
            assert f"{vma:#x}" in " ".join(f["steps"])  # the texts name the new numbers


def edited_capture(recorded: Path, tmp_path: Path) -> tuple[Path, dict[str, Any], list[int]]:
    """The real capture with frames a perf capture rarely has: three unmapped addresses
    (two on one page) and a Python function, each made the leaf of a real stack."""
    doc = capture_json(recorded)
    ends = sorted(int(e[1], 16) for g in doc["maps"] for e in g["entries"])
    starts = {int(e[0], 16) for g in doc["maps"] for e in g["entries"]}
    # A page in a hole of the address space, after some mapping's end.
    hole = next(end for end in ends if end not in starts and end + PAGE not in starts)
    unmapped = [hole + 0x10, hole + 0x7F0, hole + 3 * PAGE + 0x20]
    template = {k: None for k in doc["frames"][0]}
    template.update(generation=1, detail="", steps=[], problems=[], kind="native", line=None)
    new_ids = []
    for vma in unmapped:
        frame = dict(template, id=len(doc["frames"]), vma=hex(vma), reason="unmapped",
                     detail=f"no mapping holds {vma:#x}")  # fmt: skip
        doc["frames"].append(frame)
        new_ids.append(frame["id"])
    python = dict(template, id=len(doc["frames"]), vma="0x0", kind="python", symbol="handle",
                  module="/srv/app/handlers.py", line=42,
                  detail="Python function handle at /srv/app/handlers.py:42")  # fmt: skip
    doc["frames"].append(python)
    new_ids.append(python["id"])
    for i, fid in enumerate(new_ids):
        doc["stacks"][i] = [fid, *doc["stacks"][i]]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path, doc, unmapped


def test_unmapped_addresses_move_to_a_range_of_their_own_never_to_zero(recorded, cli, tmp_path):
    path, original, unmapped = edited_capture(recorded, tmp_path)
    scrubbed = scrub(cli, path, tmp_path / "scrubbed.json")
    assert_no_address_survives(original, json.dumps(scrubbed))
    by_id = {f["id"]: f for f in scrubbed["frames"]}
    first = len(original["frames"]) - 4
    new = [int(by_id[first + i]["vma"], 16) for i in range(3)]
    assert all(new) and len(set(new)) == 3
    # The same page stays one page (offsets within it kept); another page stays another.
    assert new[1] - new[0] == unmapped[1] - unmapped[0]
    assert new[2] // PAGE != new[0] // PAGE and new[2] % PAGE == unmapped[2] % PAGE
    # Not inside any (scrubbed) mapping, and the detail names the new address.
    ranges = [(int(e[0], 16), int(e[1], 16)) for g in scrubbed["maps"] for e in g["entries"]]
    assert not any(lo <= a < hi for a in new for lo, hi in ranges)
    assert by_id[first]["detail"] == f"no mapping holds {new[0]:#x}"
    # The Python frame has no address: it is kept as it was.
    python = by_id[first + 3]
    assert python["vma"] == "0x0" and python["line"] == 42
    assert python["module"] == "/srv/app/handlers.py" and python["symbol"] == "handle"
    assert report_json(cli, tmp_path / "scrubbed.json") == report_json(cli, path)


def test_drop_host_and_basenames_remove_who_where_and_the_directories(recorded, cli, tmp_path):
    path, original, _ = edited_capture(recorded, tmp_path)
    out = tmp_path / "scrubbed.json"
    scrubbed = scrub(cli, path, out, "--drop-host", "--basenames")
    text = out.read_text()
    assert_no_address_survives(original, text)
    assert "hostname" not in scrubbed["host"] and "user" not in scrubbed["target"]
    assert scrubbed["target"]["cmdline"] == ["spin"] and scrubbed["target"]["exe"] == "spin"
    assert scrubbed["session"]["start"] == 0.0
    for directory in {str(Path(p).parent) for p in _paths(original)}:
        assert f"{directory}/" not in text
    python = next(f for f in scrubbed["frames"] if f["kind"] == "python")
    assert python["module"] == "handlers.py"
    before, after = report_json(cli, path), report_json(cli, out)
    # The same functions and counts; only the modules lost their directories.
    assert [(f["symbol"], f["self"], f["total"]) for f in after["functions"]] == [
        (f["symbol"], f["self"], f["total"]) for f in before["functions"]
    ]
    assert [f["module"] for f in after["functions"]] == [
        Path(f["module"]).name if f["module"] else f["module"] for f in before["functions"]
    ]
    assert after["duration_s"] == before["duration_s"]


def _paths(doc: dict[str, Any]) -> set[str]:
    """Every path of a capture document: mappings, objects, frames' modules and source
    files, and the debug files named in symbol sources (objects and mapping facts)."""
    paths = {e[6] for g in doc["maps"] for e in g["entries"] if e[6].startswith("/")}
    paths |= {o["path"] for o in doc["objects"]}
    paths |= {p for f in doc["frames"] for p in (f["module"], f.get("source_file")) if p}
    sources = [o["symbol_source"] for o in doc["objects"]]
    sources += [e[8].get("symbol_source") for g in doc["maps"] for e in g["entries"]]
    paths |= {p for s in sources if s for p in re.findall(r":(/[^+]+)", s)}
    return {p for p in paths if p.startswith("/")}


# --- scrub: JIT code named by a perf map -----------------------------------------


@pytest.fixture(scope="module")
def jit_recorded(built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A capture of jitmap: nearly every sample is in anonymous executable memory that
    only /tmp/perf-PID.map names. jit_beta is made (SIGUSR1) while recording, so the
    perf map grows and a second maps generation has the grown JIT mapping."""
    if _REASON is not None:
        pytest.skip(_REASON)
    path = tmp_path_factory.mktemp("sharing-jit") / "jitmap.json"
    with running(built("jitmap")) as proc:
        engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
        engine.captures.record_to(path)
        asyncio.run(_record_with_beta(engine, proc.pid))
    yield path


async def _record_with_beta(engine: Engine, pid: int) -> None:
    """Record 1.5 s, making jit_beta once jit_alpha is named and the perf map may be read
    again (RECHECK_S after its first read). An address is explained once per maps
    generation, so a jit_beta sampled before the map could be reread would stay unnamed."""
    run = asyncio.create_task(engine.run(asyncio.Event(), duration=1.5))
    while not run.done() and not any(
        row.frame.symbol == "jit_alpha" for row in engine.snapshot().view.functions
    ):
        await asyncio.sleep(0.02)
    await asyncio.sleep(RECHECK_S + 0.05)
    os.kill(pid, signal.SIGUSR1)
    await run


JIT = {"jit_alpha", "jit_beta"}


def jit_frames(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The frames a perf map named: a symbol, a mapping, and no ELF object."""
    return {
        f["id"]: f
        for f in doc["frames"]
        if f["object"] is None and f["mapping"] is not None and f["symbol"] is not None
    }


def test_jit_frames_keep_no_run_time_address_and_report_the_same(jit_recorded, cli, tmp_path):
    original = capture_json(jit_recorded)
    before = jit_frames(original)
    assert {f["symbol"] for f in before.values()} == JIT, before
    assert len({tuple(f["mapping"]) for f in before.values()}) >= 2  # the JIT code grew
    # The perf map's symbol starts are run-time addresses: the check looks for them too.
    assert all(int(f["symbol_vaddr"], 16) in original_addresses(original) for f in before.values())
    out = tmp_path / "scrubbed.json"
    scrubbed = scrub(cli, jit_recorded, out)
    assert_no_address_survives(original, out.read_text())
    after = jit_frames(scrubbed)
    assert after.keys() == before.keys()
    for fid, f in after.items():
        old = before[fid]
        vma, start = int(f["vma"], 16), int(f["symbol_vaddr"], 16)
        offset = f["symbol_offset"]
        assert (f["symbol"], offset, f["symbol_size"]) == (
            old["symbol"], old["symbol_offset"], old["symbol_size"]
        )  # fmt: skip
        # The offset in the JIT function survives the move, in numbers and in texts.
        assert vma - start == offset == int(old["vma"], 16) - int(old["symbol_vaddr"], 16)
        assert int(f["mapping"][0], 16) <= start < int(f["mapping"][1], 16)
        assert f["steps"] == [f"offset = vma - start = {vma:#x} - {start:#x} = {offset:#x}"]
        assert f"start {start:#x}, size {f['symbol_size']:#x})" in f["detail"]
        assert f["elf_vaddr"] is None and f["base"] is None
    before_report, after_report = report_json(cli, jit_recorded), report_json(cli, out)
    assert after_report == before_report
    assert {f["symbol"] for f in after_report["functions"]} >= JIT


def test_basenames_shortens_symbol_source_paths(jit_recorded, cli, tmp_path):
    doc = capture_json(jit_recorded)
    # A debuglink file in a directory with a space, on the executable, so the test never
    # depends on which debug packages this box has (the ones it has are checked too).
    exe = next(o for o in doc["objects"] if o["path"] == doc["target"]["exe"])
    exe["symbol_source"] = "symtab+debuglink:/opt/jit app/.debug/jitmap.debug"
    for g in doc["maps"]:
        for e in g["entries"]:
            if e[8].get("object") == exe["id"]:
                e[8]["symbol_source"] = exe["symbol_source"]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "scrubbed.json"
    scrubbed = scrub(cli, path, out, "--basenames")
    text = out.read_text()
    assert_no_address_survives(doc, text)
    directories = {str(Path(p).parent) for p in _paths(doc)}
    assert {"/opt/jit app/.debug", "/tmp"} <= directories
    for directory in directories:
        assert f"{directory}/" not in text, directory

    def short(source: str | None) -> str | None:
        # Independently: every "name:/dir/.../file" part keeps "name:file".
        return re.sub(r":/(?:[^+/]*/)*", ":", source) if source else source

    sources = [(o["symbol_source"], s["symbol_source"])
               for o, s in zip(doc["objects"], scrubbed["objects"], strict=True)]  # fmt: skip
    sources += [(e[8].get("symbol_source"), s[8].get("symbol_source"))
                for e, s in pairs(doc, scrubbed)]  # fmt: skip
    assert all(new == short(old) for old, new in sources), sources
    assert ("symtab+debuglink:/opt/jit app/.debug/jitmap.debug",
            "symtab+debuglink:jitmap.debug") in sources  # fmt: skip
    # The JIT functions keep their names; their module is the perf map's file name.
    functions = report_json(cli, out)["functions"]
    jit = {f["symbol"]: f["module"] for f in functions if f["symbol"] in JIT}
    assert set(jit) == JIT and set(jit.values()) == {f"perf-{doc['target']['pid']}.map"}


def test_scrub_failures_are_one_line_with_the_capture_exit_code(cli, tmp_path):
    result = cli("scrub", str(tmp_path / "missing.json"), "-o", str(tmp_path / "out.json"))
    assert result.code == 5
    assert result.err.startswith("livesym: ") and result.err.count("\n") == 1
    assert "Traceback" not in result.err and not (tmp_path / "out.json").exists()


# --- export --------------------------------------------------------------------


def export(cli, src: Path, fmt: str, dst: Path) -> bytes:
    result = cli("export", str(src), "--format", fmt, "-o", str(dst))
    assert result.code == 0, result.err
    return dst.read_bytes()


def self_counts(report: dict[str, Any]) -> dict[str, int]:
    return {f["demangled"]: f["self"] for f in report["functions"] if f["self"]}


def parse_folded(text: str) -> list[tuple[list[str], int]]:
    """flamegraph.pl's reading: the count after the last space, frames split on ';'."""
    out = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        assert stack and count.isdigit(), line
        out.append((stack.split(";"), int(count)))
    return out


def test_collapsed_stacks_add_up_to_the_report(recorded, cli, tmp_path, report):
    text = export(cli, recorded, "collapsed", tmp_path / "out.folded").decode()
    folded = parse_folded(text)
    assert sum(n for _, n in folded) == report["samples"]
    assert len({";".join(s) for s, _ in folded}) == len(folded)  # one line per stack
    leaves: Counter[str] = Counter()
    for stack, n in folded:
        leaves[stack[-1]] += n
    assert leaves == self_counts(report)
    # Root first: the workers' stacks end ... -> hot_alpha -> leaf_work.
    alpha = [s for s, _ in folded if "leaf_work" in s]
    assert alpha and all(s.index("hot_alpha") == s.index("leaf_work") - 1 for s in alpha)
    assert {frame for s, _ in folded for frame in s} >= HOT


def test_collapsed_to_stdout(recorded, cli, report):
    result = cli("export", str(recorded), "--format", "collapsed", "-o", "-")
    assert result.code == 0, result.err
    assert sum(n for _, n in parse_folded(result.out)) == report["samples"]


def test_speedscope_export_follows_the_schema_and_adds_up(recorded, cli, tmp_path, report):
    doc = json.loads(export(cli, recorded, "speedscope", tmp_path / "out.speedscope.json"))
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    frames = doc["shared"]["frames"]
    assert {f["name"] for f in frames} >= HOT
    assert all(f["file"].endswith("/spin") for f in frames if f["name"] in HOT)
    leaves: Counter[str] = Counter()
    threads = {}
    for profile in doc["profiles"]:
        assert profile["type"] == "sampled" and profile["unit"] == "none"
        assert len(profile["samples"]) == len(profile["weights"])
        assert profile["endValue"] == sum(profile["weights"])
        threads[profile["name"]] = sum(profile["weights"])
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            leaves[frames[stack[-1]]["name"]] += weight  # root first: the leaf is last
    assert sum(threads.values()) == report["samples"]
    assert leaves == self_counts(report)
    # One profile per thread, named after it, busiest first.
    assert {name.split(" ")[0] for name in threads} == {"alpha", "beta", "gamma"}
    assert list(threads.values()) == sorted(threads.values(), reverse=True)


def walk(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """Protobuf wire format (https://protobuf.dev/programming-guides/encoding/): yield
    (field number, wire type, value), value an int or the raw bytes of a length-delimited
    field. Independent of the schema the exporter uses."""
    i = 0

    def varint() -> int:
        nonlocal i
        value = shift = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 2:
            size = varint()
            yield number, wire, data[i : i + size]
            i += size
        elif wire == 1:
            yield number, wire, int.from_bytes(data[i : i + 8], "little")
            i += 8
        elif wire == 5:
            yield number, wire, int.from_bytes(data[i : i + 4], "little")
            i += 4
        else:
            raise AssertionError(f"bad wire type {wire}")


def _varints(data: bytes) -> list[int]:
    out, value, shift = [], 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            out.append(value)
            value = shift = 0
    return out


def test_pprof_export_reads_back_with_the_schema_and_on_the_wire(recorded, cli, tmp_path, report):
    from livesym.export.profile_proto import Profile

    raw = gzip.decompress(export(cli, recorded, "pprof", tmp_path / "out.pb.gz"))
    # On the wire, by profile.proto's field numbers: string_table = 6, sample = 2,
    # Sample.value = 2 (packed), Mapping.build_id = 6.
    fields = list(walk(raw))
    strings = [v.decode() for n, w, v in fields if n == 6 and w == 2]
    assert strings[0] == "" and set(strings) >= HOT
    counts = [_varints(v)[0] for n, _w, s in fields if n == 2 for n2, _w2, v in walk(s) if n2 == 2]
    assert sum(counts) == report["samples"]
    # With the schema.
    profile = Profile.FromString(raw)
    table = list(profile.string_table)
    assert [(table[t.type], table[t.unit]) for t in profile.sample_type] == [
        ("samples", "count"), ("cpu", "nanoseconds")
    ]  # fmt: skip
    assert profile.period == round(1e9 / 499) and table[profile.period_type.type] == "cpu"
    assert sum(s.value[0] for s in profile.sample) == report["samples"]
    assert all(s.value[1] == s.value[0] * profile.period for s in profile.sample)
    names = {table[f.name] for f in profile.function}
    assert names >= HOT
    assert all(
        table[f.system_name] == table[f.name] for f in profile.function if table[f.name] in HOT
    )
    # Source lines from spin's DWARF, stored when the recording ended.
    hot_functions = {f.id: f for f in profile.function if table[f.name] in HOT}
    assert all(table[f.filename].endswith("spin.c") for f in hot_functions.values())
    lines = [
        ln.line for loc in profile.location for ln in loc.line if ln.function_id in hot_functions
    ]
    assert lines and all(n > 0 for n in lines)
    spin = load_image(read_capture(recorded).target["exe"])  # type: ignore[arg-type]
    mappings = {m.id: m for m in profile.mapping}
    assert table[profile.mapping[0].filename] == str(spin.path)  # the main binary first
    assert spin.build_id_hex in {table[m.build_id] for m in profile.mapping}
    for location in profile.location:
        if location.mapping_id:
            m = mappings[location.mapping_id]
            assert m.memory_start <= location.address < m.memory_limit
    # Per-thread labels.
    threads = Counter()
    for s in profile.sample:
        label = {table[lb.key]: table[lb.str] for lb in s.label if lb.str}
        threads[label["thread"]] += s.value[0]
    assert set(threads) == {"alpha", "beta", "gamma"}


@pytest.mark.skipif(
    shutil.which("pprof") is None and shutil.which("go") is None,
    reason="neither pprof nor go is installed (go tool pprof reads the export)",
)
def test_pprof_tool_reads_the_export(recorded, cli, tmp_path, report):
    out = tmp_path / "out.pb.gz"
    export(cli, recorded, "pprof", out)
    command = ["pprof"] if shutil.which("pprof") else ["go", "tool", "pprof"]
    result = subprocess.run([*command, "-raw", str(out)], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert all(name in result.stdout for name in HOT)


def test_export_of_a_missing_capture_is_one_line(cli, tmp_path):
    result = cli("export", str(tmp_path / "nope.json"), "--format", "pprof", "-o", "x")
    assert result.code == 5 and result.err.count("\n") == 1 and "Traceback" not in result.err


def test_exports_are_deterministic(recorded):
    from livesym.commands.export import export as to_bytes

    capture = read_capture(recorded)
    for fmt in ("collapsed", "speedscope", "pprof"):
        assert to_bytes(capture, fmt) == to_bytes(capture, fmt)
    assert orjson.loads(to_bytes(capture, "speedscope"))["profiles"]
