"""Several processes in one session, against real ones: a started shell's children (the
one started late included), a running parent's child started after attaching, the bound
on processes, and what a capture of several processes gives report, scrub and export.

The children are copies of the spin target, each run for a few seconds with its output
sent away: three processes of one program, each at its own addresses (ASLR).
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.capture_json import capture_json
from tests.support.spin import HOT


def spin_copy(built, directory: Path, name: str = "lsymkid") -> Path:
    exe = directory / name
    shutil.copy2(built("spin"), exe)
    return exe


@pytest.fixture(scope="module")
def family(
    built, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``record --children -- sh -c 'A & A & sleep 1; A & wait'``: its capture and report."""
    directory = tmp_path_factory.mktemp("family")
    kid = spin_copy(built, directory)
    capture = directory / "family.json"
    script = f"{kid} 2.5 >/dev/null & {kid} 2.5 >/dev/null & sleep 1; {kid} 2 >/dev/null & wait"
    done = subprocess.run(
        [sys.executable, "-m", "livesym", "record", "--children", "-o", str(capture),
         "--", "sh", "-c", script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sh exited with status 0" in done.stderr
    report = subprocess.run(
        [sys.executable, "-m", "livesym", "report", str(capture), "--json", "--limit", "200"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    yield capture, json.loads(report.stdout)


def kids(doc: dict[str, Any], kid_name: str = "lsymkid") -> list[dict[str, Any]]:
    return [p for p in doc["processes"] if Path(p["command"].split()[0]).name == kid_name]


def test_every_child_is_sampled_the_one_started_late_too(family):
    capture, report = family
    found = kids(report)
    assert len(found) == 3, report["processes"]
    doc = capture_json(capture)
    started = {p["pid"]: p["started"] for p in doc["processes"]}
    # Found within a second of their start (a scan every half second; one caught between
    # its fork and its exec is taken at the next): two at once, one after the shell's
    # second of sleep
    order = sorted(started[p["pid"]] for p in found)
    assert order[1] < 0.9 <= order[2] < 2.1, order
    for process in found:
        # Each spun on its share of two cores for 2 s or more at 99 Hz: far more than 20.
        assert process["samples"] >= 40, report["processes"]
    assert sum(p["samples"] for p in report["processes"]) == report["samples"]
    assert set(HOT) <= {f["demangled"] for f in report["functions"]}


def test_the_capture_holds_each_process_with_its_parent_threads_and_maps(family):
    capture, _ = family
    doc = capture_json(capture)
    assert doc["version"] == 6
    processes = {p["pid"]: p for p in doc["processes"]}
    shell = doc["target"]["pid"]
    assert processes[shell]["name"] == "sh"
    children = [p for p in processes.values() if p["name"] == "lsymkid"]
    assert len(children) == 3 and all(p["parent"] == shell for p in children)
    # Every sampled thread is placed in its process, and each child has maps of its own
    sampled = {tid for _, tid, _, _ in doc["samples"]}
    pids = {int(tid): pid for tid, pid in doc["thread_pids"].items()}
    assert sampled <= set(pids) and set(pids.values()) <= set(processes)
    numbers = [g["generation"] for g in doc["maps"]]
    assert len(numbers) == len(set(numbers))  # unique over all the processes
    with_maps = {g["pid"] for g in doc["maps"]}
    assert {p["pid"] for p in children} <= with_maps
    # The same program at its own base in each child (ASLR): three address spaces
    bases = {
        g["pid"]: e[8]["base"]
        for g in doc["maps"]
        for e in g["entries"]
        if e[6].endswith("/lsymkid") and "base" in e[8]
    }
    assert len({bases[p["pid"]] for p in children}) == 3
    # Frames name their generation, hence their process: a child's hot frames are its own
    owner = {g["generation"]: g["pid"] for g in doc["maps"]}
    hot_owners = {owner.get(f["generation"]) for f in doc["frames"] if f["symbol"] in HOT}
    assert {p["pid"] for p in children} <= hot_owners


def test_each_child_s_end_is_kept_and_marked_on_the_timeline(family):
    """Issue 30: the timeline marks where a process ended. The first two children run
    2.5 s from the start, the third 2 s from 1 s on: they end 2.5, 2.5 and 3 s into the
    session (their ``started`` is when the session first saw them, a scan later)."""
    from livesym.capture.reader import read_capture
    from livesym.engine import replay_snapshot
    from livesym.records import MARK_EXITED
    from livesym.sampling.perf_event import RESCAN_INTERVAL

    capture, _ = family
    doc = capture_json(capture)
    children = sorted((p for p in doc["processes"] if p["name"] == "lsymkid"),
                      key=lambda p: p["ended"])  # fmt: skip
    ended = [p["ended"] for p in children]
    # (never before the exit; after it, by what the sampler takes to see it: it looks at
    # the process's threads every RESCAN_INTERVAL, 0.2 s; by hand 0.14-0.33 s late, spin's
    # own ending of its threads included)
    late = [t - want for t, want in zip(ended, (2.5, 2.5, 3.0), strict=True)]
    assert all(0 <= t <= 2 * RESCAN_INTERVAL + 0.3 for t in late), ended
    assert all(p["started"] < p["ended"] for p in children)
    marks = replay_snapshot(read_capture(capture)).timeline.marks
    exits = sorted(moment for moment, kind in marks if kind == MARK_EXITED)
    for child in children:
        assert any(abs(moment - child["ended"]) < 1e-3 for moment in exits), (exits, child)


def test_scrub_moves_each_process_on_its_own_and_reports_the_same(family, tmp_path):
    capture, report = family
    out = tmp_path / "scrubbed.json"
    done = subprocess.run(
        [sys.executable, "-m", "livesym", "scrub", str(capture), "-o", str(out), "--drop-host"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    original, scrubbed = capture_json(capture), json.loads(out.read_text())
    text = out.read_text().lower()
    moved = set()
    for g in original["maps"]:
        for e in g["entries"]:
            moved |= {int(e[0], 16), int(e[1], 16)}
    left = [hex(a) for a in moved if a > 0x10000 and f"{a:x}" in text]
    assert not left, left

    # The program's base: the same in every child after the scrub (each space laid out
    # the same way from its start), where it was different in each before
    def bases(doc: dict[str, Any]) -> set[str]:
        return {e[8]["base"] for g in doc["maps"] for e in g["entries"]
                if e[6].endswith("lsymkid") and "base" in e[8]}  # fmt: skip

    assert len(bases(original)) >= 3 and len(bases(scrubbed)) == 1
    # --drop-host leaves each process its program's name, not its arguments
    assert {tuple(p["argv"]) for p in scrubbed["processes"] if p["name"] == "lsymkid"} == {
        ("lsymkid",)
    }
    again = subprocess.run(
        [sys.executable, "-m", "livesym", "report", str(out), "--json", "--limit", "200"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    after = json.loads(again.stdout)
    assert [(p["pid"], p["samples"]) for p in after["processes"]] == [
        (p["pid"], p["samples"]) for p in report["processes"]
    ]
    assert after["functions"] == report["functions"]


def test_exports_say_each_samples_process(family, cli, tmp_path):
    capture, report = family
    per_pid = {p["pid"]: p["samples"] for p in report["processes"]}
    folded = tmp_path / "f.txt"
    assert (
        cli("export", str(capture), "--format", "collapsed", "--pid", "-o", str(folded)).code == 0
    )
    by_process: dict[str, int] = {}
    for line in folded.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        by_process[stack.split(";")[0]] = by_process.get(stack.split(";")[0], 0) + int(n)
    names = {p["pid"]: p["name"] for p in capture_json(capture)["processes"]}
    assert by_process == {f"{names[pid]}-{pid}": n for pid, n in per_pid.items() if n}
    scope = tmp_path / "s.json"
    assert cli("export", str(capture), "--format", "speedscope", "-o", str(scope)).code == 0
    profiles = json.loads(scope.read_text())["profiles"]
    for pid, n in per_pid.items():
        mine = [p for p in profiles if f" {pid}: " in p["name"]]
        assert sum(sum(p["weights"]) for p in mine) == n
    pprof = tmp_path / "p.pb.gz"
    assert cli("export", str(capture), "--format", "pprof", "-o", str(pprof)).code == 0
    assert gzip.decompress(pprof.read_bytes())
    if shutil.which("go") is None:
        pytest.skip("go is not installed (go tool pprof reads the pid labels)")
    tags = subprocess.run(["go", "tool", "pprof", "-tags", str(pprof)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert tags.returncode == 0, tags.stderr
    pid_section = tags.stdout.split(" pid:", 1)[1].split("\n\n", 1)[0]
    shown = {int(line.rpartition(": ")[2]) for line in pid_section.splitlines()[1:]}
    assert shown == {pid for pid, n in per_pid.items() if n}


def test_a_child_started_after_attaching_is_picked_up(built, cli, tmp_path):
    kid = spin_copy(built, tmp_path)
    # The parent waits, then starts a CPU-bound child a second and a half in; "; true"
    # keeps the shell from exec'ing the child in its own place.
    parent = subprocess.Popen(["sh", "-c", f"sleep 1.5; {kid} 2 >/dev/null; true"])
    try:
        time.sleep(0.2)
        done = cli("top", str(parent.pid), "--children", "--duration", "3.5", "--json")
        assert done.code == 0, done.err
        doc = json.loads(done.out)
        found = kids(doc)
        assert len(found) == 1 and found[0]["samples"] >= 40, doc["processes"]
        assert parent.pid in {p["pid"] for p in doc["processes"]}
    finally:
        parent.kill()
        parent.wait()


def test_the_bound_on_processes_is_said_and_counted(built, cli, tmp_path):
    kid = spin_copy(built, tmp_path)
    script = f"{kid} 1.5 >/dev/null & {kid} 1.5 >/dev/null & {kid} 1.5 >/dev/null & wait"
    done = cli("top", "--children", "--max-processes", "2", "--json", "--", "sh", "-c", script)
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    assert len(doc["processes"]) <= 2
    assert any("--max-processes" in e for e in doc["errors"]), doc["errors"]


def test_each_process_gets_the_sampler_for_what_it_runs(built, cli, tmp_path):
    # A shell starting a Python program and a native one: mixed stacks for the first (its
    # Python functions), perf (or ptrace) for the second, in one session. The Python
    # program works well past the time its discovery takes (a scan every FOLLOW_PERIOD,
    # one more for a child still running the shell's program): with 8 million iterations
    # it ended 0.54 s after its start, 0.13 s after livesym found it, and its work was
    # over before that in 4 runs of 6.
    import livesym.sample_targets as targets

    pycrunch = Path(targets.__file__).resolve().parent / "pycrunch.py"
    spin = spin_copy(built, tmp_path)
    script = f"{sys.executable} {pycrunch} 1 24 0 >/dev/null & {spin} 2.5 >/dev/null & wait"
    capture = tmp_path / "mixed.json"
    done = cli("record", "--children", "-o", str(capture), "--", "sh", "-c", script)
    assert done.code == 0, done.err
    doc = capture_json(capture)
    assert "mixed" in doc["sampler"]["name"].split("+"), doc["sampler"]
    by_name = {p["name"]: p["pid"] for p in doc["processes"]}
    python = next(pid for name, pid in by_name.items() if name.startswith("python"))
    own = cli("report", str(capture), "--json", "--process", str(python))
    functions = {(f["symbol"], f["kind"]) for f in json.loads(own.out)["functions"]}
    assert ("crunch_work", "python") in functions, functions
    native = cli("report", str(capture), "--json", "--process", str(by_name["lsymkid"]))
    assert set(HOT) <= {f["symbol"] for f in json.loads(native.out)["functions"]}
