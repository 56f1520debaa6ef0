"""``record --keep-last S``: a flight recorder on a real target. SIGUSR1 writes the last
S seconds to FILE, whole, and recording goes on; ``--trigger cpu>PCT`` writes them to a
file of their own when the target's CPU is above PCT; the end writes them once more.
Each dump reads as a capture of its own seconds (``report --json``'s ``duration_s``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from livesym.capture.reader import read_capture
from livesym.commands.flight import Trigger
from livesym.errors import UsageError
from livesym.files import stamped
from tests.support.procs import running

KEEP = 3.0  # seconds the recorder keeps (the 20, scaled to the suite's time)


def _livesym(*args: str) -> list[str]:
    return [sys.executable, "-m", "livesym", *args]


def _report(cli: Callable[..., object], path: Path) -> dict[str, object]:
    result = subprocess.run(_livesym("report", str(path), "--json"), capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def _wait_for(path: Path, newer_than: float, seconds: float) -> float:
    """How long ``path`` took to appear (or change) after now; fails after ``seconds``."""
    asked = time.monotonic()
    while time.monotonic() - asked < seconds:
        if path.exists() and path.stat().st_mtime > newer_than:
            return time.monotonic() - asked
        time.sleep(0.05)
    pytest.fail(f"{path} was not written within {seconds} s")


def test_sigusr1_writes_the_last_seconds_and_recording_goes_on(
    built: Callable[[str], Path], tmp_path: Path, cli
):
    path = tmp_path / "flight.json"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with running(built("spin")) as target:
        recorder = subprocess.Popen(
            _livesym("record", str(target.pid), "-o", str(path), "--keep-last", str(KEEP),
                     "--rate", "499"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            time.sleep(KEEP + 2)
            # GIVEN a flight recorder that has run longer than it keeps: nothing written yet
            assert not path.exists()
            # WHEN it is sent SIGUSR1
            recorder.send_signal(signal.SIGUSR1)
            # THEN the last seconds are written within 3 s, and it records on
            assert _wait_for(path, 0.0, 3.0) <= 3.0
            assert recorder.poll() is None
            first = read_capture(path)
            first_written = path.stat().st_mtime
            time.sleep(1.2)
            recorder.send_signal(signal.SIGUSR1)  # a second dump replaces the first
            _wait_for(path, first_written, 3.0)
            assert recorder.poll() is None
            second = read_capture(path)
        finally:
            recorder.send_signal(signal.SIGTERM)
            _, err = recorder.communicate(timeout=30)
    assert recorder.returncode == 0, err
    for dump in (first, second):
        # ... each holds the last KEEP seconds, every thread of them, and begins there
        times = [row[0] for row in dump.samples]
        assert min(times) >= 0 and max(times) <= KEEP + 0.5
        assert max(times) - min(times) >= KEEP - 1.0
        assert len({row[1] for row in dump.samples}) == 3
    assert second.session["start"] > first.session["start"] + 1.0
    # ... and the end wrote them once more: a capture of KEEP seconds, by the report
    report = _report(cli, path)
    assert KEEP - 1.0 <= float(report["duration_s"]) <= KEEP + 0.5, report["duration_s"]
    assert read_capture(path).session["start"] > second.session["start"]


def test_a_trigger_writes_a_file_of_its_own_once_while_the_cpu_stays_above(
    built: Callable[[str], Path], tmp_path: Path
):
    path = tmp_path / "flight.json.gz"
    with running(built("spin")) as target:  # about 95 % of one CPU
        result = subprocess.run(
            _livesym("record", str(target.pid), "-o", str(path), "--keep-last", "2",
                     "--trigger", "cpu>50", "--duration", "3.5", "--rate", "299"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    dumps = sorted(tmp_path.glob("flight.*.json.gz"))
    # THEN one dump beside FILE, named by its moment, said in one line; the CPU never
    # went back under the trigger, so it did not fire again
    assert len(dumps) == 1, (dumps, result.stderr)
    said = [line for line in result.stderr.splitlines() if "CPU above 50 %" in line]
    assert len(said) == 1 and str(dumps[0]) in said[0], result.stderr
    dump = read_capture(dumps[0])
    assert dump.samples and max(row[0] for row in dump.samples) <= 2.5
    assert read_capture(path).samples  # (and the end's dump to FILE)


def test_the_trigger_and_the_dump_names_are_read_and_made_as_documented():
    assert Trigger.parse("cpu>90") == Trigger(90.0)
    assert Trigger.parse(" cpu > 150.5% ") == Trigger(150.5)
    for bad in ("cpu<90", "mem>5", "cpu>", "cpu>x"):
        with pytest.raises(UsageError, match="is not a trigger"):
            Trigger.parse(bad)
    when = time.mktime((2026, 12, 7, 3, 15, 0, 0, 0, -1)) + 0.25
    assert stamped("/x/cap.json.gz", when) == "/x/cap.20261207-031500.250.json.gz"
    assert stamped("cap.json", when) == "cap.20261207-031500.250.json"
    assert stamped("cap", when, 2) == "cap.20261207-031500.250-2"
    # ... and names sort as their moments do
    moments = [when + d for d in (0.0, 0.001, 0.999, 1.0, 59.5, 3600.0)]
    names = [stamped("cap.json", m) for m in moments]
    assert sorted(names) == names


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--trigger", "cpu>50"], "--trigger needs --keep-last"),
        (["--keep", "3"], "--keep needs --max-size"),
        (["--keep-last", "5", "--max-size", "1M"], "do not go together"),
        (["--push", "ftp://x"], "is not an http(s) URL"),
        (["--push", "http://x", "--push-label", "nolabel"], "is not KEY=VALUE"),
        (["--push-name", "app"], "need --push URL"),
    ],
)
def test_options_that_do_not_go_together_are_refused_in_one_line(cli, options, said):
    result = cli("record", "1", "-o", "/nonexistent/x.json", *options)
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and said in result.err, result.err
