"""Unwinding from call-frame information, against gdb's backtrace of the same threads.

deep (sample_targets/deep.c) parks four threads at the bottom of known call chains
(two through signal frames), built -O2 -fomit-frame-pointer: no frame pointer
anywhere, only call-frame information says where each caller's frame is: .eh_frame,
or built without unwind tables .debug_frame, or stripped its debug file's. Each
thread's registers and stack are taken through ptrace (tests/support/stackshot.py)
and unwound by livesym; gdb then prints its backtrace of the same, still parked,
threads. Every return address must be the one gdb found, and every stack must end
at its thread's root (``_start``, ``clone3``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from livesym.addr.kinds import Vma
from livesym.records import StackEnd
from livesym.sample_targets import TARGETS
from livesym.sampling import ptrace_abi as abi
from livesym.symbolize.process import ProcessSymbolizer
from livesym.target.process import TargetProcess
from livesym.unwind.walk import StackCopy, Unwound, walk
from tests.support.debugfiles import split_debug
from tests.support.procs import running
from tests.support.stackshot import Shot, shoot_all

pytestmark = [
    pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb's backtrace is the reference"),
    pytest.mark.skipif(abi.arch_for().machine != "x86_64", reason="gdb reference run on x86-64"),
]

THREAD = re.compile(r"^Thread \d+ \(.*\(LWP (\d+)\)", re.M)
FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(\S+)", re.M)


def gdb_backtraces(pid: int) -> dict[int, list[tuple[int | None, str]]]:
    """Per thread id, gdb's frames: (pc or None where gdb prints none, function)."""
    done = subprocess.run(
        ["gdb", "-nx", "-batch", "-p", str(pid),
         "-ex", "set debuginfod enabled off", "-ex", "set backtrace past-main on",
         "-ex", "thread apply all bt"],
        capture_output=True, text=True, timeout=120, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    sections = THREAD.split(done.stdout)
    traces = {}
    for tid, body in zip(sections[1::2], sections[2::2], strict=True):
        traces[int(tid)] = [
            (int(pc, 16) if pc else None, name) for _, pc, name in FRAME.findall(body)
        ]
    assert traces, done.stdout + done.stderr
    return traces


@pytest.fixture(
    params=[
        "deep",
        "deep-debugframe",
        "deep-debugframe --strip-all",
        "deep-debugframe --strip-debug",
    ]
)
def parked(
    request: pytest.FixtureRequest, built: Callable[[str], Path], tmp_path: Path
) -> Iterator[tuple[int, list[Shot]]]:
    """deep's threads, parked: its CFI in .eh_frame, in .debug_frame, or, stripped,
    only in its debug file's .debug_frame (found by its debuglink), with or without
    its own .symtab (without, the debug file is read at once for its symbols; with,
    on the first address no CFI of its own covers)."""
    name, _, strip = str(request.param).partition(" ")
    exe = built(name)
    if strip:
        exe, _ = split_debug(exe, tmp_path / "split", strip=strip)
    with running(exe) as proc:
        time.sleep(0.1)
        yield proc.pid, shoot_all(proc.pid)


def names_of(symbolizer: ProcessSymbolizer, unwound: Unwound) -> list[str | None]:
    symbols = [symbolizer.explain(Vma(a)).symbol for a in unwound.call_sites()]
    return [s.name if s is not None else None for s in symbols]


def in_signal_handler(trace: list[tuple[int | None, str]]) -> bool:
    return any(name == "<signal" for _, name in trace)


def test_every_return_address_is_gdbs_and_every_stack_reaches_its_root(parked):
    pid, shots = parked
    symbolizer = ProcessSymbolizer(TargetProcess(pid))
    traces = gdb_backtraces(pid)
    assert len(shots) == 4 and set(traces) == {s.tid for s in shots}
    chains = 0
    for shot in shots:
        gdb = traces[shot.tid]
        if in_signal_handler(gdb):
            continue  # the next tests'
        chains += 1
        # WHEN livesym unwinds the thread from its registers and stack copy
        unwound = walk(shot.regs, shot.stack, symbolizer.rules_for)
        # THEN it finds every frame gdb found, at the same addresses, by CFI alone
        assert len(unwound.ips) == len(gdb), (unwound, gdb)
        for ip, (pc, name) in zip(unwound.ips, gdb, strict=True):
            assert pc is None or ip == pc, (hex(ip), hex(pc), name)
        assert unwound.end is StackEnd.ROOT, unwound
        assert unwound.by_frame_pointer == 0
        # ... whose functions are the chain deep.c parks in, down to the thread's root
        named = names_of(symbolizer, unwound)
        assert named[1:5] == ["park", "chain_c", "chain_b", "chain_a"], named
        assert named[5] in ("main", "worker")
    assert chains == 2


def test_a_thread_parked_in_a_signal_handler_unwinds_through_the_signal_frame(parked):
    pid, shots = parked
    symbolizer = ProcessSymbolizer(TargetProcess(pid))
    traces = gdb_backtraces(pid)
    shot, unwound, named = _unwound_with(symbolizer, shots, "on_signal")
    # The handler's frames, then the signal frame the kernel built (__restore_rt, whose
    # rules read the registers saved in the ucontext), then the interrupted thread's
    # frames down to its root: gdb's return addresses, every one.
    assert named[1:3] == ["park_signal", "on_signal"], named
    # (libc's own start_thread and clone3 have names only where its debug file is there)
    assert named.index("chain_s") > 3 and named[-3] == "sigworker"
    gdb_pcs = [pc for pc, _ in traces[shot.tid] if pc is not None]
    # gdb also shows an inlined function of libc as a frame of its own (from libc's
    # DWARF): its address is not a return address; every other one is livesym's.
    inlined = {pc for pc, name in traces[shot.tid] if name == "__pthread_kill_internal"}
    assert [pc for pc in gdb_pcs if pc not in inlined] == [
        ip for ip in unwound.ips if ip in set(gdb_pcs)
    ]
    assert unwound.end is StackEnd.ROOT and unwound.by_frame_pointer == 0


def test_a_frame_interrupted_on_its_first_byte_is_named_by_that_byte(parked):
    pid, shots = parked
    symbolizer = ProcessSymbolizer(TargetProcess(pid))
    traces = gdb_backtraces(pid)
    # GIVEN a thread that faulted on trap_here's first instruction (before_trap's last
    # byte is the one before it), parked in its SIGILL handler
    shot, unwound, named = _unwound_with(symbolizer, shots, "on_trap")
    # WHEN its stack is unwound through the signal frame and each frame named
    # THEN the interrupted frame is named by its pc (not pc - 1, as a caller is)
    assert "before_trap" not in named, named
    at = named.index("trap_here")
    assert named[at + 1 :][:2] == ["chain_t", "trapworker"], named
    assert at in unwound.exact and at - 1 not in unwound.exact  # the frame after the kernel's
    assert unwound.call_sites()[at] == unwound.ips[at]
    # ... where gdb puts it, and the stack still reaches its root
    gdb = traces[shot.tid]
    assert [name for _, name in gdb][: at + 3][-3:] == ["trap_here", "chain_t", "trapworker"]
    assert unwound.end is StackEnd.ROOT and unwound.by_frame_pointer == 0


def test_a_stack_copy_cut_short_says_so(parked):
    pid, shots = parked
    symbolizer = ProcessSymbolizer(TargetProcess(pid))
    shot = shots[0]
    whole = walk(shot.regs, shot.stack, symbolizer.rules_for)
    # Only the leaf's frame and a little of its caller's were copied
    short = StackCopy(shot.stack.start, shot.stack.data[:24])
    cut = walk(shot.regs, short, symbolizer.rules_for)
    assert cut.end is StackEnd.STACK_COPY and "past the 24 bytes copied" in cut.detail
    assert 1 <= len(cut.ips) < len(whole.ips)
    assert cut.ips == whole.ips[: len(cut.ips)]  # what it did find is right
    # A copy of nothing at all stops at once, never reads outside it
    none = walk(shot.regs, StackCopy(shot.stack.start, b""), symbolizer.rules_for)
    assert none.end is StackEnd.STACK_COPY and none.ips == whole.ips[:1]


# About 4,000 samples with perf and 1,600 with ptrace (which stops the target, so runs
# slower): one standard error at 60 % is then at most 1.2 points, well inside 5.
@pytest.mark.parametrize(
    ("sampler", "rate", "seconds"), [("perf", "999", "4"), ("ptrace", "199", "8")]
)
def test_samples_are_unwound_from_cfi_where_frame_pointers_skip_callers(
    cli, run_target, sampler, rate, seconds
):
    # GIVEN frameless: every function keeps a frame pointer but the leaf spin_for,
    # and by construction parse, render and blend hold 30, 70 and 60 % of the time
    proc = run_target("frameless")
    # WHEN livesym samples it (registers and a stack copy per sample)
    result = cli("top", str(proc.pid), "--sampler", sampler, "--rate", rate,
                 "--duration", seconds, "--json", "--limit", "50", timeout=90)  # fmt: skip
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    total = {f["symbol"]: f["total_pct"] for f in doc["functions"] if f["symbol"]}
    self_ = {f["symbol"]: f["self_pct"] for f in doc["functions"] if f["symbol"]}
    assert doc["samples"] >= 300
    # THEN every caller of the frameless leaf is found, in the shares built in
    for name, share in TARGETS["frameless"].hot_functions:
        assert abs(total.get(name, 0.0) - 100 * share) <= 5, (name, total)
    assert self_["spin_for"] >= 95
    # ... and the stacks reach the thread's root, with next to nothing lost (ptrace
    # counts a look whose stop came too late)
    assert total.get("_start", 0.0) >= 95 and total.get("main", 0.0) >= 95
    assert doc["lost"] <= 0.01 * doc["samples"]
    # No error but what ptrace says of a busy box, rightly, when it is one (CI runs 119
    # and 120: a thread over 25 ms to stop; the target found stopped in 12 % of looks,
    # where the sampler now counts the time it held the threads).
    assert [e for e in doc["errors"] if not e.startswith(BUSY_BOX)] == []


BUSY_BOX = ("some threads took over", "the ptrace sampler kept the target's threads stopped")


def test_a_stack_copy_too_small_shows_as_a_truncated_frame_in_live_and_replay(
    cli, run_target, tmp_path
):
    # GIVEN frameless sampled with perf copying only 64 bytes of each stack
    proc = run_target("frameless")
    capture = tmp_path / "short.json"
    recorded = cli("record", str(proc.pid), "--sampler", "perf", "--stack-size", "64",
                   "--duration", "2", "-o", str(capture), timeout=90)  # fmt: skip
    assert recorded.code == 0, recorded.err
    report = cli("report", str(capture), "--json", "--limit", "50")
    assert report.code == 0, report.err
    rows = {f["demangled"]: f for f in json.loads(report.out)["functions"]}
    # THEN the stacks that stopped early end in a frame that says so, counted, in the
    # capture too: none reaches _start through 64 bytes
    cut = rows["[stack ends early: stack copy too small]"]
    assert cut["kind"] == "truncated" and cut["self"] == 0 and cut["total_pct"] >= 95
    assert "_start" not in rows
    # ... while the frames it did find are right
    assert rows["spin_for"]["self_pct"] >= 95
    # ... and the report says how many stacks were cut short, and why
    doc = json.loads(report.out)
    assert doc["stacks_cut_short"] >= 0.95 * doc["samples"]
    text = cli("report", str(capture)).out
    assert "% reached their thread's root;" in text and "stack copy too small)" in text


def test_stacks_through_the_vdso_and_the_plt_reach_their_root(cli, run_target):
    # GIVEN clockloop: nearly all its time in the vdso, some in clock_gettime's PLT stub
    proc = run_target("clockloop")
    result = cli("top", str(proc.pid), "--sampler", "perf", "--rate", "499",
                 "--duration", "2", "--json", "--limit", "50", timeout=60)  # fmt: skip
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    rows = {f["demangled"]: f for f in doc["functions"]}
    vdso = [f for f in doc["functions"] if f["module"] == "[vdso]"]
    # THEN the vdso's own CFI (read from the target's memory) and the PLT's CFA
    # expression take every stack on to main and _start
    assert sum(f["self_pct"] for f in vdso) >= 50, rows
    assert doc["stacks_cut_short"] == 0, rows
    assert rows["main"]["total_pct"] >= 99 and rows["_start"]["total_pct"] >= 99
    # (main's own loop, between the calls, has its share too: 1-2 % here)
    assert rows["tick"]["total_pct"] >= 95


def _unwound_with(
    symbolizer: ProcessSymbolizer, shots: list[Shot], handler: str
) -> tuple[Shot, Unwound, list[str | None]]:
    """The parked thread whose stack runs through ``handler``, unwound and named."""
    found = []
    for shot in shots:
        unwound = walk(shot.regs, shot.stack, symbolizer.rules_for)
        named = names_of(symbolizer, unwound)
        if handler in named:
            found.append((shot, unwound, named))
    assert len(found) == 1, found
    return found[0]
