"""A target with 40,000 mappings, as JVMs, browsers and big Python services have.

sample_targets/pycrunch.py maps that many shared anonymous pages (alternating
protections). livesym must read such a process in about the time the kernel takes
to write its maps (once a quadratic anchor search took 66 s before the first
sample), never treat shared memory as a file to open, and not let py-spy's native
unwinding stop the target for most of its time (docs/performance.md has the
slowdown measured by bench/overhead.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from livesym.addr.maps import MapKind, parse_maps
from livesym.sampling.pyspy import NATIVE_MAPPINGS_LIMIT, PySpySampler
from livesym.symbolize.process import ProcessSymbolizer, has_object
from livesym.target.process import TargetProcess
from tests.support.procs import running, thread_waits

PYCRUNCH = Path(__file__).resolve().parents[2] / "sample_targets" / "pycrunch.py"
MAPPINGS = 40_000


@pytest.fixture(scope="module")
def crowded() -> Iterator[subprocess.Popen[bytes]]:
    """pycrunch with 40,000 extra mappings, crunching for up to ten minutes."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with running(Path(sys.executable), str(PYCRUNCH), "1", "5000", "0", str(MAPPINGS),
                 env=env, timeout=60) as proc:  # fmt: skip
        yield proc


def livesym(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livesym", *args],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def test_maps_of_forty_thousand_mappings_lists_shared_memory_as_memory(crowded):
    done = livesym("maps", str(crowded.pid), "--json", timeout=30)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) > MAPPINGS
    shared = [r for r in rows if r["path"] == "/dev/zero"]
    assert len(shared) >= MAPPINGS - 1
    # Shared anonymous memory has no object to open, so no problem to report about one
    assert not [r for r in shared if r["problems"] or r["build_id"]]


def test_anchors_found_in_one_pass_agree_with_the_definition(crowded):
    target = TargetProcess(crowded.pid)
    symbolizer = ProcessSymbolizer(target)
    entries = symbolizer.maps.entries
    spread = entries[:: max(1, len(entries) // 2000)]  # 2,000 of the shared memory's
    assert all(symbolizer.anchor_for(e) is None for e in spread if not has_object(e))
    objects = [e for e in entries if has_object(e)]  # (no object, no load, no anchor)
    assert len(objects) > 10
    for entry in objects:
        naive = None
        for other in entries:
            if other.start > entry.start:
                break
            if other.pgoff == 0 and (other.dev_major, other.dev_minor, other.inode,
                                     other.path) == (entry.dev_major, entry.dev_minor,
                                                     entry.inode, entry.path):  # fmt: skip
                naive = other
        assert symbolizer.anchor_for(entry) is naive
    kinds = {e.kind for e in parse_maps(target.read_maps_text()).entries}
    assert MapKind.SHMEM in kinds


def test_top_with_perf_on_forty_thousand_mappings_names_the_python_interpreter(crowded):
    ran, began = thread_waits(crowded.pid)[0], time.monotonic()
    done = livesym("top", str(crowded.pid), "--sampler", "perf", "--duration", "2", "--json")
    # the share of a CPU it got meanwhile (all of one on an idle machine; less beside load)
    busy = (thread_waits(crowded.pid)[0] - ran) / 1e9 / (time.monotonic() - began)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # a sample a period of its CPU time at 99 Hz, over the seconds sampled: the session's
    # seconds are the sampler's (opening 40,000 mappings' objects before the first sample
    # once counted too, and a 2 s session had two thirds of the samples its seconds said)
    expected = 99 * report["duration_s"] * busy
    assert busy > 0.1 and report["samples"] >= 0.85 * expected, (report["samples"], expected)
    assert any("python" in (f["module"] or "") for f in report["functions"])


def test_py_spy_leaves_out_native_unwinding_for_a_big_address_space_and_says_so(crowded):
    if PySpySampler.available() is not None:
        pytest.skip(f"py-spy unavailable: {PySpySampler.available()}")
    assert MAPPINGS > NATIVE_MAPPINGS_LIMIT
    done = livesym("top", str(crowded.pid), "--sampler", "pyspy", "--duration", "3", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["samples"] > 50
    assert any("crunch_work" in (f["symbol"] or "") for f in report["functions"])
    notes = [e for e in report["errors"] if "without --native" in e]
    assert len(notes) == 1, report["errors"]
    counted = re.search(r"has (\d+) mappings", notes[0])
    assert counted is not None and int(counted.group(1)) >= MAPPINGS


async def test_a_sampler_that_keeps_the_target_stopped_is_noticed_and_named(crowded, monkeypatch):
    # GIVEN py-spy allowed its native unwinding on 40,000 mappings (as before livesym
    # left it out): it keeps the target stopped most of the time
    import asyncio

    from livesym.engine import Engine
    from livesym.sampling import pyspy

    if PySpySampler.available() is not None:
        pytest.skip(f"py-spy unavailable: {PySpySampler.available()}")
    monkeypatch.setattr(pyspy, "NATIVE_MAPPINGS_LIMIT", 10 * MAPPINGS)
    engine = Engine(TargetProcess(crowded.pid), PySpySampler(crowded.pid, 99))
    # WHEN the session runs a few seconds
    await engine.run(asyncio.Event(), duration=5.0)
    # THEN it says that the sampler stops the target, and how often
    said = [e for e in engine.snapshot().errors if "found stopped by the pyspy sampler" in e]
    assert len(said) == 1, engine.snapshot().errors
    share = int(re.search(r"in (\d+)% of looks", said[0]).group(1))  # type: ignore[union-attr]
    assert share > 10
