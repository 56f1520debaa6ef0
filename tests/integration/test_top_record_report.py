"""top / record / report on real processes with the perf sampler.

Shares are compared with `perf record` over the same window rather than with
the nominal duty cycles alone: both tools then see the same CPU, whatever else
the machine is doing.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from livesym.capture.model import VERSION
from livesym.capture.reader import read_capture
from livesym.commands.top import top_json
from livesym.engine import Engine, replay_snapshot
from livesym.errors import EXIT_CAPTURE, EXIT_TARGET
from livesym.records import TimeMode
from livesym.sampling.perf_event import PerfSampler
from livesym.target.cpython_files import runs_cpython
from livesym.target.process import TargetProcess
from tests.support.capture_json import capture_json
from tests.support.spin import HOT


def self_shares(functions: list[dict]) -> dict[str, float]:
    return {f["symbol"]: f["self_pct"] for f in functions if f["symbol"]}


def test_top_json_names_the_hot_functions_and_symbolizes_nearly_everything(run_target, cli):
    proc = run_target("spin")
    # 499 Hz: 199 Hz aliases with spin's 5 ms busy slices (leaf_work can go unseen).
    began = time.monotonic()
    result = cli("top", str(proc.pid), "--duration", "2", "--rate", "499", "--json")
    wall = time.monotonic() - began
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["sampler"] == "perf" and doc["lost"] == 0 and doc["samples"] > 50
    assert 1.8 <= doc["duration_s"] <= 4
    # Its start before the window: the interpreter, imports, the sampler put in place.
    assert 0.02 < doc["started_after_s"] < wall - doc["duration_s"], (doc, wall)
    functions = doc["functions"]
    for f in functions:
        assert set(f) >= {"symbol", "demangled", "module", "self", "total", "self_pct", "total_pct"}
        assert 0 <= f["self_pct"] <= f["total_pct"] <= 100
    assert {f["symbol"] for f in functions} >= HOT
    # Every sample's leaf resolved to a function (>= 95 % of samples).
    resolved = sum(f["self"] for f in functions if f["symbol"])
    assert resolved >= 0.95 * sum(f["self"] for f in functions)
    assert sum(f["self_pct"] for f in functions) == pytest.approx(100, abs=0.5)


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_top_agrees_with_perf_record_over_the_same_window(run_target, cli, tmp_path):
    proc = run_target("spin")
    data = tmp_path / "perf.data"
    perf = subprocess.Popen(
        [
            "perf",
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            "499",
            "-p",
            str(proc.pid),
            "-o",
            str(data),
            "--",
            "sleep",
            "4",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    time.sleep(0.3)
    ours = json.loads(cli("top", str(proc.pid), "--duration", "3", "--rate", "499", "--json").out)
    perf.wait(timeout=30)
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "sym", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # perf is the reference here, installed by .ci/run: its failure fails the test
    assert perf.returncode == 0, perf.stderr.read().decode()[:400]
    assert report.returncode == 0, report.stderr[:400]
    line = re.compile(r"^\s*([\d.]+)%\s+\[\.\]\s+(\S+)", re.M)
    theirs = {m[2]: float(m[1]) for m in line.finditer(report.stdout)}
    mine = self_shares(ours["functions"])
    top_theirs = {name for name in theirs if theirs[name] >= 5}
    assert top_theirs and top_theirs <= HOT, theirs
    for name in top_theirs:
        assert mine.get(name, 0) == pytest.approx(theirs[name], abs=5), (name, mine, theirs)


async def test_report_of_a_recording_equals_what_top_shows_for_the_same_samples(
    run_target, tmp_path
):
    proc = run_target("spin")
    engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
    path = tmp_path / "cap.json.gz"
    engine.captures.record_to(path)
    await engine.run(asyncio.Event(), duration=1.5)
    live = top_json(engine.snapshot(), 50)
    replayed = top_json(replay_snapshot(read_capture(path)), 50)
    assert live["samples"] > 0
    assert replayed == live


def test_record_survives_the_target_exiting_and_says_so(built, cli, tmp_path):
    from tests.support.procs import running

    path = tmp_path / "cap.json"
    with running(built("spin"), "1") as proc:
        result = cli("record", str(proc.pid), "-o", str(path), "--duration", "10")
    assert result.code == 0, result.err
    doc = capture_json(path)
    assert doc["session"]["end_reason"] == "target exited"
    assert doc["session"]["end"] - doc["session"]["start"] < 5
    assert len(doc["samples"]) > 0
    report = json.loads(cli("report", str(path), "--json").out)
    assert report["state"] == "target exited"
    assert report["started_after_s"] is None  # (a replay: no start of livesym's to tell)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_record_stops_on_a_signal_keeps_everything_and_the_target_runs_on(
    run_target, tmp_path, sig
):
    proc = run_target("spin")
    path = tmp_path / "cap.json.gz"
    rec = subprocess.Popen(
        [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    rec.send_signal(sig)
    _out, err = rec.communicate(timeout=30)
    assert rec.returncode == 0, err
    assert "Traceback" not in err
    capture = read_capture(path)
    assert len(capture.samples) > 10
    assert capture.session["end_reason"] == "stopped"
    assert proc.poll() is None  # the target keeps running
    fds = os.listdir(f"/proc/{proc.pid}/fd")
    assert fds  # still alive and well


def test_a_killed_recording_still_leaves_a_readable_capture(run_target, tmp_path):
    proc = run_target("spin")
    path = tmp_path / "cap.json"
    rec = subprocess.Popen(
        [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.2)
    rec.kill()
    rec.wait(timeout=10)
    capture = read_capture(path)
    assert len(capture.samples) > 0


def test_record_of_a_missing_process_is_one_line(cli, tmp_path):
    result = cli("record", "999999999", "-o", str(tmp_path / "x.json"))
    assert result.code == EXIT_TARGET
    assert result.err.strip().splitlines() == [
        "livesym: cannot inspect 999999999: no such process; check the PID with ps or pgrep"
    ]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "not a readable capture (empty file)"),
        (b"root:x:0:0:root:/root:/bin/bash\n", "not a readable capture (not JSON"),
        (b'{"format": "livesym-capture", "version": 1, "samp', "truncated"),
        (b"\x1f\x8b\x08\x00garbage", "damaged gzip"),
        (json.dumps({"format": "other", "version": 1}).encode(), "format is 'other'"),
        (json.dumps({"format": "livesym-capture", "version": 99}).encode(), "version 99"),
        (json.dumps({"format": "livesym-capture", "version": 1}).encode(), "missing field"),
    ],
)
def test_report_rejects_bad_captures_in_one_line(cli, tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = cli("report", str(path))
    assert result.code == EXIT_CAPTURE
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.err


def test_report_rejects_a_capture_whose_references_dangle(cli, tmp_path, run_target):
    proc = run_target("spin")
    path = tmp_path / "cap.json"
    assert cli("record", str(proc.pid), "-o", str(path), "--duration", "1").code == 0
    doc = capture_json(path)
    doc["samples"].append([0.5, 1, len(doc["stacks"]) + 7, 0])
    path.write_text(json.dumps(doc))
    result = cli("report", str(path))
    assert result.code == EXIT_CAPTURE and "does not exist" in result.err


def test_gzip_captures_are_gzip(cli, tmp_path, run_target):
    proc = run_target("spin")
    path = tmp_path / "cap.json.gz"
    assert cli("record", str(proc.pid), "-o", str(path), "--duration", "1").code == 0
    gzip.decompress(Path(path).read_bytes())  # whole gzip data (a member a chunk)
    doc = capture_json(path)
    assert doc["format"] == "livesym-capture" and doc["version"] == VERSION


def test_top_with_ptrace_names_the_hot_functions_and_releases_the_target(run_target, cli):
    proc = run_target("spin")
    result = cli("top", str(proc.pid), "--sampler", "ptrace", "--duration", "2", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["sampler"] == "ptrace" and doc["rate_hz"] == 49 and doc["samples"] > 20
    assert {"hot_alpha", "hot_beta", "hot_gamma"} <= {f["symbol"] for f in doc["functions"]}
    status = Path(f"/proc/{proc.pid}/status").read_text()
    assert "TracerPid:\t0" in status
    assert re.search(r"^State:\s+[RS]", status, re.M)


def test_record_with_ptrace_stopped_by_sigterm_leaves_the_target_untraced(run_target, tmp_path):
    proc = run_target("spin")
    path = tmp_path / "cap.json"
    rec = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "livesym",
            "record",
            str(proc.pid),
            "-o",
            str(path),
            "--sampler",
            "ptrace",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    rec.send_signal(signal.SIGTERM)
    _out, err = rec.communicate(timeout=30)
    assert rec.returncode == 0, err
    assert len(read_capture(path).samples) > 0
    for task in Path(f"/proc/{proc.pid}/task").iterdir():
        status = (task / "status").read_text()
        assert "TracerPid:\t0" in status, task
        assert not re.search(r"^State:\s+[tT]", status, re.M), task


def test_auto_falls_back_to_ptrace_and_says_why(monkeypatch, capsys, run_target):
    from livesym.commands.profiled import said
    from livesym.sampling.choice import choose_sampler
    from livesym.sampling.ptrace import PtraceSampler

    proc = run_target("spin")
    reason = "perf_event_open not permitted (perf_event_paranoid=3); run as root"
    monkeypatch.setattr(PerfSampler, "available", classmethod(lambda cls: reason))
    sampler = said(choose_sampler("auto", proc.pid, None, TimeMode.CPU))
    assert isinstance(sampler, PtraceSampler) and sampler.rate_hz == 49
    assert capsys.readouterr().err.strip() == f"livesym: sampling with ptrace: {reason}"


def test_auto_takes_mixed_stacks_for_python_and_says_why_when_it_cannot(monkeypatch, capsys):
    from livesym.commands.profiled import said
    from livesym.sampling.choice import choose_sampler
    from livesym.sampling.mixed import MixedSampler
    from livesym.sampling.pyspy import PySpySampler

    me = os.getpid()  # pytest runs in CPython
    assert runs_cpython(me)
    monkeypatch.setattr(PySpySampler, "available", classmethod(lambda cls: None))
    monkeypatch.setattr(PerfSampler, "available", classmethod(lambda cls: None))
    assert isinstance(said(choose_sampler("auto", me, None, TimeMode.CPU)), MixedSampler)
    assert capsys.readouterr().err == ""
    # wall time too: perf's waits with their Python frames; --nonblocking (py-spy's
    # own option) takes py-spy
    wall = said(choose_sampler("auto", me, None, TimeMode.WALL))
    assert isinstance(wall, MixedSampler) and wall.idle and wall.native.idle
    assert (
        type(said(choose_sampler("auto", me, None, TimeMode.CPU, nonblocking=True))) is PySpySampler
    )
    assert capsys.readouterr().err == ""
    # perf not permitted: py-spy alone, which stops the target, and why
    denied = "perf_event_open not permitted (perf_event_paranoid=3); run as root"
    monkeypatch.setattr(PerfSampler, "available", classmethod(lambda cls: denied))
    assert type(said(choose_sampler("auto", me, None, TimeMode.CPU))) is PySpySampler
    err = capsys.readouterr().err.strip()
    assert err == f"livesym: sampling with pyspy, which stops the target for each sample: {denied}"
    reason = "py-spy is not installed; pip install py-spy, or use --sampler perf"
    monkeypatch.setattr(PySpySampler, "available", classmethod(lambda cls: reason))
    monkeypatch.setattr(PerfSampler, "available", classmethod(lambda cls: None))
    assert isinstance(said(choose_sampler("auto", me, None, TimeMode.CPU)), PerfSampler)
    err = capsys.readouterr().err.strip()
    assert err == f"livesym: sampling with perf: {me} runs Python, but {reason}"


def test_auto_with_no_permitted_sampler_is_one_target_error(monkeypatch):
    from livesym.commands.profiled import said
    from livesym.errors import TargetError
    from livesym.sampling.choice import choose_sampler
    from livesym.sampling.ptrace import PtraceSampler

    monkeypatch.setattr(PerfSampler, "available", classmethod(lambda cls: "perf says no"))
    monkeypatch.setattr(PtraceSampler, "available", classmethod(lambda cls: "ptrace says no"))
    with pytest.raises(TargetError, match=r"perf: perf says no; ptrace: ptrace says no"):
        said(choose_sampler("auto", 4242, None, TimeMode.CPU))


def test_record_to_a_directory_that_does_not_exist_fails_soon_with_one_line(cli, built, tmp_path):
    from tests.support.procs import running

    with running(built("spin")) as proc:
        started = time.monotonic()
        result = cli("record", str(proc.pid), "-o", str(tmp_path / "gone" / "cap.json"),
                     "--duration", "20")  # fmt: skip
        took = time.monotonic() - started
    assert result.code == 4, result.err
    assert result.err.count("\n") == 1 and "cannot write the capture" in result.err
    assert took < 10, f"the first periodic write failed, yet sampling went on {took:.0f} s"


def test_json_lists_every_function_unless_a_limit_says_how_many_are_left_out(xz, cli, tmp_path):
    # GIVEN a recording of xz -9 (stripped liblzma, kernel time): more functions than a
    # screenful, most of them callers or kernel rows with little self time
    capture = tmp_path / "xz.json"
    recorded = cli("record", str(xz.pid), "--duration", "2", "-o", str(capture))
    assert recorded.code == 0, recorded.err
    doc = capture_json(capture)
    frames = doc["frames"]
    sampled = {sample[2] for sample in doc["samples"]}
    named = {frames[i]["symbol"] for s in sampled for i in doc["stacks"][s] if frames[i]["symbol"]}
    # WHEN report prints JSON without --limit
    full = json.loads(cli("report", str(capture), "--json").out)
    # THEN every function any sampled stack names is there (callers and kernel rows too)
    functions = full["functions"]
    assert len(functions) > 20 and full["functions_left_out"] == 0, len(functions)
    listed = {f["symbol"] for f in functions}
    assert named <= listed, sorted(named - listed)
    assert any(f["total_pct"] > 99 for f in functions)  # the thread's root: in every stack
    assert sum(f["self_pct"] for f in functions) == pytest.approx(100, abs=0.5)
    # ... and with --limit the first N, the rest counted
    cut = json.loads(cli("report", str(capture), "--json", "--limit", "5").out)
    assert cut["functions"] == functions[:5]
    assert cut["functions_left_out"] == len(functions) - 5
    # ... while the text table keeps a screenful and says how many more there are
    text = cli("report", str(capture)).out
    assert f"  ... {len(functions) - 20} more functions (--limit N, or --json)" in text
