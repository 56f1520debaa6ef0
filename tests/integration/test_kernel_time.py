"""Kernel time, sampled where perf may sample it (root, here), against perf over the same
window: a system-call-bound distro program's kernel share and hottest kernel function,
a process that lives in system calls shown busy, --no-kernel, and kernel frames kept
through a capture, its replay, scrub and a pprof export."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from livesym.capture.reader import read_capture
from livesym.records import KIND_KERNEL
from livesym.sampling.perf_event import kernel_refused
from livesym.symbolize.kernel import KernelSymbols

SECONDS = 6.0
RATE = 299
pytestmark = [
    pytest.mark.skipif(shutil.which("perf") is None, reason="perf is the reference"),
    pytest.mark.skipif(kernel_refused() is not None, reason=f"kernel mode: {kernel_refused()}"),
    pytest.mark.skipif(
        KernelSymbols().problem is not None, reason=f"/proc/kallsyms: {KernelSymbols().problem}"
    ),
]
DD = ["/usr/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1"]


@pytest.fixture
def busy() -> Iterator[Callable[[list[str]], int]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str]) -> int:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        time.sleep(0.3)
        return proc.pid

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def livesym_top(cli: Callable[..., Any], pid: int, *extra: str) -> dict[str, Any]:
    result = cli("top", str(pid), "--sampler", "perf", "--rate", str(RATE), "--duration",
                 str(SECONDS), "--json", "--limit", "1000", *extra, timeout=120)  # fmt: skip
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(result.out)
    return doc


def kernel_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["functions"] if f["kind"] == KIND_KERNEL]


def perf_report(data: Path, sort: str) -> list[tuple[float, str]]:
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                          "--sort", sort, "-g", "none"], capture_output=True, text=True,
                         check=True, timeout=120).stdout  # fmt: skip
    return [(float(m[1]), m[2].strip()) for m in re.finditer(r"^\s+([\d.]+)%\s+(.+)$", out, re.M)]


def test_a_system_call_bound_program_s_kernel_time_agrees_with_perf(cli, busy, tmp_path):
    # GIVEN dd copying one byte at a time: most of its time in the kernel
    pid = busy(DD)
    data = tmp_path / "perf.data"
    perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(RATE), "-g",
                             "-p", str(pid), "-o", str(data), "--", "sleep", str(SECONDS)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    # WHEN livesym samples it over the same window as perf
    doc = livesym_top(cli, pid)
    assert perf.wait(timeout=120) == 0
    # THEN its kernel share is perf's, within 5 points
    assert doc["kernel"] == "sampled"
    kernel = kernel_rows(doc)
    ours = 100.0 * sum(f["self"] for f in kernel) / doc["samples"]
    theirs = sum(share for share, dso in perf_report(data, "dso") if dso.startswith("[kernel"))
    assert theirs >= 30, theirs
    print(f"kernel share: livesym {ours:.1f} %, perf {theirs:.1f} %")
    assert abs(ours - theirs) <= 5, (ours, theirs)
    # ... perf's hottest kernel function is among its five hottest kernel rows
    hottest = next(name.removeprefix("[k] ").strip() for _, name in perf_report(data, "sym")
                   if name.startswith("[k]"))  # fmt: skip
    top5 = [f["demangled"] for f in sorted(kernel, key=lambda f: -f["self"])[:5]]
    assert hottest in top5, (hottest, top5)
    # ... and the kernel frames sit above the user frames that made the system calls
    rows = {f["demangled"]: f for f in doc["functions"]}
    assert rows["__libc_start_main"]["total_pct"] >= 99
    assert rows["read"]["total_pct"] + rows["write"]["total_pct"] >= ours - 5


def test_a_process_that_lives_in_system_calls_is_shown_busy(cli, busy):
    # GIVEN cat reading /dev/urandom: nearly all its time in the kernel
    pid = busy(["/bin/sh", "-c", "exec cat /dev/urandom > /dev/null"])
    doc = livesym_top(cli, pid)
    # THEN it has the samples a busy thread gives, most of them in the kernel
    assert doc["samples"] >= 0.7 * RATE * SECONDS, doc["samples"]
    share = 100.0 * sum(f["self"] for f in kernel_rows(doc)) / doc["samples"]
    assert share >= 80, share


def perf_kernel_share(pid: int, data: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(RATE),
                             "-p", str(pid), "-o", str(data), "--", "sleep", str(SECONDS)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def test_where_the_kernel_is_not_sampled_its_time_is_estimated_from_system_time(
    cli, busy, tmp_path
):
    # GIVEN cat reading /dev/urandom, sampled by ptrace, which cannot see into the kernel
    # (as an unprivileged user's perf cannot), with perf (as root) beside it
    pid = busy(["/bin/sh", "-c", "exec cat /dev/urandom > /dev/null"])
    data = tmp_path / "perf.data"
    perf = perf_kernel_share(pid, data)
    result = cli("top", str(pid), "--sampler", "ptrace", "--duration", str(SECONDS),
                 "--json", "--limit", "100", timeout=120)  # fmt: skip
    assert perf.wait(timeout=120) == 0 and result.code == 0, result.err
    doc = json.loads(result.out)
    # THEN the kernel's share is there, estimated from the threads' system time, and
    # said to be: within 10 points of what perf sampled
    assert doc["kernel"].startswith("estimated from system time"), doc["kernel"]
    (row,) = kernel_rows(doc)
    assert row["demangled"] == "[kernel] (estimated from system time)"
    ours = row["self_pct"]
    theirs = sum(share for share, dso in perf_report(data, "dso") if dso.startswith("[kernel"))
    assert abs(ours - theirs) <= 10, (ours, theirs)
    # ... and the process is busy, not idle: about a sample per tick of its one thread
    assert doc["samples"] >= 0.6 * 49 * SECONDS, doc["samples"]


def test_no_kernel_leaves_the_kernel_out_and_says_so(cli, busy):
    doc = livesym_top(cli, busy(DD), "--no-kernel")
    assert kernel_rows(doc) == [] and doc["kernel"] == "left out (--no-kernel)"


def test_kernel_frames_survive_capture_replay_scrub_and_export(cli, busy, tmp_path):
    # GIVEN a recording of dd with its kernel frames
    capture = tmp_path / "dd.json.gz"
    pid = busy(DD)
    result = cli("record", str(pid), "--sampler", "perf", "--rate", str(RATE), "--duration",
                 "2", "-o", str(capture), timeout=60)  # fmt: skip
    assert result.code == 0, result.err
    frames = [f for f in read_capture(capture).frames if f.kind == KIND_KERNEL]
    named = [f for f in frames if f.symbol is not None]
    assert len(named) >= 0.9 * len(frames) > 0  # (code kallsyms does not list: unnamed)
    assert all(f.symbol_vaddr is not None and f.symbol_offset is not None for f in named)
    # THEN report shows them as top does: named, kernel, in [kernel]
    report = json.loads(cli("report", str(capture), "--json", "--limit", "1000").out)
    assert report["kernel"] == "sampled"
    assert {f["demangled"] for f in kernel_rows(report)} >= {"do_syscall_64"}
    # ... scrub moves kernel addresses as layout, keeping each offset in its function
    scrubbed = tmp_path / "scrubbed.json.gz"
    assert cli("scrub", str(capture), "-o", str(scrubbed)).code == 0
    after = [f for f in read_capture(scrubbed).frames if f.kind == KIND_KERNEL]
    assert [f.symbol for f in after] == [f.symbol for f in frames]
    assert all(a.vma != b.vma for a, b in zip(after, frames, strict=True))
    assert all(
        a.vma - a.symbol_vaddr == b.vma - b.symbol_vaddr  # type: ignore[operator]
        for a, b in zip(after, frames, strict=True)
        if b.symbol is not None
    )
    # ... and go tool pprof reads them from the export
    if shutil.which("go") is None:
        pytest.skip("go is not installed (go tool pprof reads the export)")
    out = tmp_path / "dd.pb.gz"
    assert cli("export", str(capture), "--format", "pprof", "-o", str(out)).code == 0
    listed = subprocess.run(["go", "tool", "pprof", "-top", str(out)], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "do_syscall_64" in listed.stdout
