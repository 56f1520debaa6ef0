"""The hard cases of unwinding, each on a real process sampled by perf: the dynamic
loader's lazy binding, JIT code (no CFI, no frame of its own), code with neither CFI
nor a frame pointer, libraries that come and go between a sample and its unwinding,
and a distro program's epilogues.

The reference is the construction of each target (sample_targets/): where every
stack must pass, and where no unwinder can go on.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import running

TRUNCATED_NO_CFI = "[stack ends early: no call-frame information]"


def sampled(cli: Callable[..., Any], pid: int, seconds: str = "3") -> dict[str, Any]:
    result = cli("top", str(pid), "--sampler", "perf", "--rate", "499", "--duration", seconds,
                 "--json", "--limit", "200", timeout=90)  # fmt: skip
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(result.out)
    assert doc["samples"] > 500, doc
    return doc


def totals(doc: dict[str, Any]) -> dict[str, float]:
    """TOTAL % by name, the largest where two objects have one (ld.so has a _start)."""
    found: dict[str, float] = {}
    for f in doc["functions"]:
        found[f["demangled"]] = max(found.get(f["demangled"], 0.0), f["total_pct"])
    return found


def test_stacks_through_the_dynamic_loader_s_lazy_binding_reach_their_root(
    cli, built: Callable[[str], Path]
):
    # GIVEN lazybind under LD_BIND_NOT=1: every labs call resolved again by ld.so,
    # whose trampoline keeps its CFA in rbx after realigning the stack
    env = {**os.environ, "LD_BIND_NOT": "1"}
    with running(built("lazybind"), env=env) as proc:
        doc = sampled(cli, proc.pid)
    loader = [f for f in doc["functions"] if "ld-linux" in (f["module"] or "")]
    share = totals(doc)
    # THEN most of the time is in the dynamic loader ...
    assert sum(f["self_pct"] for f in loader) >= 70, doc["functions"][:10]
    # ... and its stacks go on through it to resolve_loop, main and _start
    assert doc["stacks_cut_short"] <= 0.02 * doc["samples"], doc["functions"][:10]
    for caller in ("resolve_loop", "main", "_start"):
        assert share[caller] >= 97, (caller, doc["functions"][:10])


def test_code_with_neither_cfi_nor_a_frame_pointer_ends_its_stacks_there_and_says_so(
    cli, run_target
):
    # GIVEN nocfi: about half its time in count_down, assembly with no FDE whose rbp
    # is a loop counter, the rest in c_work (C, with CFI), both called by outer
    doc = sampled(cli, run_target("nocfi").pid)
    share = totals(doc)
    rows = {f["demangled"]: f for f in doc["functions"]}
    down, work = share["count_down"], share["c_work"]
    assert 20 <= down <= 80 and 20 <= work <= 80, share
    # THEN count_down's stacks end at count_down, marked and counted as cut short,
    # with no caller made up for it ...
    assert rows[TRUNCATED_NO_CFI]["total_pct"] == pytest.approx(down, abs=1.0)
    assert doc["stacks_cut_short"] == rows[TRUNCATED_NO_CFI]["total"]
    # ... while c_work's go on to the root: outer and main hold them, and only them
    for caller in ("outer", "main", "_start"):
        assert share[caller] == pytest.approx(100 - down, abs=1.5), (caller, share)


def test_jit_code_without_cfi_or_a_frame_of_its_own_keeps_its_caller(cli, run_target):
    # GIVEN jitmap: its time in a copy of a leaf loop in anonymous memory (named by a
    # perf map, no CFI anywhere) that keeps no frame: the frame pointer is main's, so
    # stepping by it alone would skip main
    doc = sampled(cli, run_target("jitmap").pid)
    share = totals(doc)
    assert share["jit_alpha"] >= 60, share
    # THEN its return address, found at the stack pointer (a call ends before it),
    # gives main, and main's CFI takes its stacks on to _start
    assert doc["stacks_cut_short"] <= 0.03 * doc["samples"], doc["functions"][:10]
    assert share["main"] >= 95 and share["_start"] >= 95, doc["functions"][:10]


def test_libraries_that_come_and_go_unwind_against_the_maps_of_their_sample(cli, run_target):
    # GIVEN churn: libchurn_a and libchurn_b loaded, run for 20 ms and unloaded in
    # turn, usually at the same address, so most samples are unwound after the
    # library they were taken in is gone, or after the other one took its place
    doc = sampled(cli, run_target("churn").pid, seconds="4")
    share = totals(doc)
    # THEN both libraries' functions are there, with the caller that loaded them
    assert share["churn_a_work"] >= 25 and share["churn_b_work"] >= 25, share
    assert doc["stacks_cut_short"] <= 0.03 * doc["samples"], doc["functions"][:10]
    assert share["main"] >= 95 and share["_start"] >= 95, doc["functions"][:10]


@pytest.mark.skipif(not Path("/usr/bin/dd").exists(), reason="coreutils' dd is not installed")
def test_a_distro_program_s_stacks_reach_their_root_even_from_an_epilogue(cli):
    # GIVEN dd copying one byte at a time: stripped, no frame pointers, most of its
    # time in read and write, and a few percent of its samples in epilogues, where
    # GCC's CFI still places the registers just popped below the stack pointer,
    # outside any stack copy (2.5-2.9 % of its stacks stopped there before)
    dd = subprocess.Popen(["/usr/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1"],
                          stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        time.sleep(0.3)
        doc = sampled(cli, dd.pid)
    finally:
        dd.kill()
        dd.wait()
    share = totals(doc)
    # THEN its stacks reach the root, through dd's own unnamed functions
    assert doc["stacks_cut_short"] <= 0.01 * doc["samples"], doc["functions"][:12]
    assert share["__libc_start_main"] >= 99, doc["functions"][:12]
    assert share["read"] + share["write"] >= 40, share
