"""A recording appends to its capture (docs/capture-format.md, the chunked layout): a
``livesym record`` killed outright (SIGKILL: no handler, no last write) leaves a
capture that reads and holds all but its last moments, and one whose disk fills up
ends in one line with its exit code and leaves what was written readable.

The disk is a real tmpfs of a few dozen kilobytes, mounted in a mount namespace of
the test's own (``unshare -m``), as a container's small volume is."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from livesym.capture.reader import TORN, read_capture
from livesym.errors import EXIT_FILE
from tests.support.procs import running

# What a kill may cost: the must-hold of issue 31 (a chunk every half second, and the
# samples' way to the tables).
KILL_LOSS = 1.5


def _livesym(*args: str) -> list[str]:
    return [sys.executable, "-m", "livesym", *args]


def test_a_recording_killed_outright_holds_all_but_its_last_moments(
    built: Callable[[str], Path], tmp_path: Path
):
    # GIVEN a recording of three busy threads at 999 Hz, gzipped (a member a chunk; the
    # plain layout's cuts: tests/unit/test_chunks.py)
    path = tmp_path / "killed.json.gz"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with running(built("spin")) as target:
        recorder = subprocess.Popen(
            _livesym("record", str(target.pid), "-o", str(path), "--rate", "999"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert path.exists(), "the recording wrote nothing in 30 s"
            time.sleep(3)
            # WHEN it is killed outright
            killed = time.monotonic()
            recorder.kill()
        finally:
            recorder.kill()
            recorder.wait(10)
    # THEN its capture reads (livesym's reader: the tail cut short, if any, left out)
    capture = read_capture(path)
    start = capture.session["start"]
    last = max(row[0] for row in capture.samples)
    # ... and holds the session up to its last moments (the clocks are both
    # CLOCK_MONOTONIC), on every thread
    assert killed - (start + last) <= KILL_LOSS, (killed, start, last)
    assert len({row[1] for row in capture.samples}) >= 3
    assert capture.session["end_reason"] == "live"  # it never said it stopped
    # ... and the report says what it holds, as for any capture
    report = subprocess.run(
        _livesym("report", str(path), "--json"), capture_output=True, text=True, timeout=60
    )
    assert report.returncode == 0, report.stderr
    torn = TORN in capture.session["errors"]
    assert torn == (TORN in report.stdout)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_a_disk_that_fills_up_ends_the_recording_in_one_line_and_keeps_what_was_written(
    built: Callable[[str], Path], tmp_path: Path
):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    # GIVEN a 64 KiB disk, and a recording onto it at 999 Hz that would run for 60 s
    disk, kept = tmp_path / "disk", tmp_path / "kept.json"
    disk.mkdir()
    script = (
        'mount -t tmpfs -o size=64k none "$1" || exit 99\n'
        'shift; "$@"; code=$?\n'
        'cp "$DISK/cap.json" "$KEPT"\n'
        "exit $code\n"
    )
    with running(built("spin")) as target:
        started = time.monotonic()
        result = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(disk),
             *_livesym("record", str(target.pid), "-o", f"{disk}/cap.json", "--rate", "999",
                       "--duration", "60")],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "DISK": str(disk), "KEPT": str(kept)},
        )  # fmt: skip
        took = time.monotonic() - started
    if result.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    # THEN it ends early, with the file error's exit code and one line that says why
    assert result.returncode == EXIT_FILE, (result.returncode, result.stderr)
    assert took < 50
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    failure = [line for line in lines if "No space left on device" in line]
    assert len(failure) == 1, lines
    assert "Traceback" not in result.stderr
    assert failure[0].startswith("livesym: cannot write the capture")
    # ... and what was written before the disk refused reads, whole
    capture = read_capture(kept)
    assert len(capture.samples) > 100
    assert TORN not in capture.session["errors"]  # the refused part was cut back off
    assert kept.stat().st_size <= 64 << 10


def test_a_full_file_is_renamed_and_a_new_one_begun_each_reading_on_its_own(
    built: Callable[[str], Path], tmp_path: Path
):
    # GIVEN a recording at 999 Hz that begins a new file every 16 KiB and keeps two
    path = tmp_path / "rot.json"
    with running(built("spin")) as target:
        result = subprocess.run(
            _livesym("record", str(target.pid), "-o", str(path), "--rate", "999",
                     "--duration", "3", "--max-size", "16K", "--keep", "2"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # THEN two full files are kept beside FILE, named by when they ended
    rotated = sorted(tmp_path.glob("rot.*.json"))
    assert len(rotated) == 2, rotated
    assert not list(tmp_path.glob("*.tmp"))
    # ... each reads on its own: its stacks, frames and objects all there, its samples
    # following the last file's, and every full one at least the size it was cut at
    spans = []
    for f in rotated:
        capture = read_capture(f)
        times = [float(capture.session["start"]) + row[0] for row in capture.samples]
        assert len({row[1] for row in capture.samples}) == 3, f
        assert f.stat().st_size >= 16 << 10
        spans.append((min(times), max(times)))
    # ... and FILE holds what came after the last rotation: a little, or nothing where that
    # rotation fell on the chunk before the last (its tables and the session's end alone)
    last = read_capture(path)
    assert last.session["end_reason"] == "stopped"
    spans += [(float(last.session["start"]) + row[0],) * 2 for row in last.samples[:1]]
    assert all(a[1] <= b[0] + 0.05 for a, b in itertools.pairwise(spans)), spans
