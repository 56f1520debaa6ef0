"""livesym's callers against perf's DWARF unwinding, sampling the same real programs at
the same time: python3 running a recursive function, and llvm-symbolizer demangling
through libLLVM (a big stripped C++ library, no frame pointers)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.perf_ref import (
    ADDRESS_FEEDER,
    FIB,
    LLVM,
    children,
    livesym_totals,
    start_perf,
)

# Two samplers take different samples: at 299 Hz for 8 s, about 2,400 each, one
# standard error of their difference is 1.3 points at 50 %, so 5 points is a real miss.
SECONDS = 8.0
RATE = 299

pytestmark = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is the reference")


def compare(cli, pid: int, tmp_path: Path) -> tuple[dict[str, float], dict[str, float], float]:
    """(perf's children %, livesym's TOTAL %, livesym's share of stacks reaching root)."""
    data = tmp_path / "perf.data"
    perf = start_perf(pid, SECONDS, data, RATE)
    # perf's reference samples user mode only (cpu-clock:u): so does livesym here
    ours = cli("top", str(pid), "--sampler", "perf", "--rate", str(RATE), "--duration",
               str(SECONDS), "--json", "--limit", "400", "--no-kernel", timeout=120)  # fmt: skip
    assert perf.wait(timeout=120) == 0
    assert ours.code == 0, ours.err
    doc = json.loads(ours.out)
    total, cut = livesym_totals(doc)
    assert doc["lost"] == 0
    theirs, perf_whole = children(data, 10.0)
    assert perf_whole >= 50, f"only {perf_whole:.0f} % of perf's own stacks reached the root"
    return theirs, total, 100.0 - cut


def assert_agree(theirs: dict[str, float], ours: dict[str, float], reached: float) -> None:
    assert theirs, "perf reported no function"
    far = {n: (t, ours.get(n)) for n, t in theirs.items()
           if ours.get(n) is None or abs(t - ours[n]) > 5}  # fmt: skip
    assert far == {}, far
    assert reached >= 95


@pytest.fixture
def python_fib() -> Iterator[int]:
    proc = subprocess.Popen(["/usr/bin/python3", "-c", FIB])
    time.sleep(0.5)
    yield proc.pid
    proc.kill()
    proc.wait()


def test_python3_callers_agree_with_perf(cli, python_fib, tmp_path):
    assert_agree(*compare(cli, python_fib, tmp_path))


@pytest.mark.skipif(
    shutil.which("llvm-symbolizer") is None or not LLVM.exists(), reason="needs llvm-15"
)
def test_a_big_stripped_cpp_library_s_callers_agree_with_perf(cli, tmp_path):
    # GIVEN llvm-symbolizer demangling an endless stream of addresses (its time under
    # DemangleName -> nonMicrosoftDemangle -> itaniumDemangle, in libLLVM)
    feed = subprocess.Popen([sys.executable, "-c", ADDRESS_FEEDER], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    proc = subprocess.Popen(["llvm-symbolizer", f"--obj={LLVM}", "--functions=linkage"],
                            stdin=feed.stdout, stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        time.sleep(1.0)
        theirs, ours, reached = compare(cli, proc.pid, tmp_path)
        # THEN the demangler's callers are there as perf finds them
        assert theirs.get("llvm::itaniumDemangle", 0) >= 10
        assert_agree(theirs, ours, reached)
    finally:
        for p in (proc, feed):
            p.kill()
            p.wait()
