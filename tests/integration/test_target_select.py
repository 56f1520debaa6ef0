"""Targets named as pidof names them, against real processes: a copy of sleep under a
name of its own, started twice."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from livesym.errors import TargetError
from livesym.target.select import by_name


def test_a_name_selects_every_process_of_that_name_and_a_typo_gets_close_matches(tmp_path):
    name = "lsymsleeper"
    exe = tmp_path / name
    shutil.copy2("/bin/sleep", exe)
    procs = [subprocess.Popen([str(exe), "30"]) for _ in range(2)]
    try:
        time.sleep(0.2)
        # THEN both are found, by comm and by argv[0]
        assert by_name(name) == sorted(p.pid for p in procs)
        # ... and a near miss names them in its one line
        with pytest.raises(TargetError) as e:
            by_name("lsymsleepr")
        assert "no process is named 'lsymsleepr'" in str(e.value) and name in str(e.value)
        assert "\n" not in str(e.value)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_argv0_names_a_process_whose_comm_was_cut(tmp_path: Path):
    name = "a-process-name-longer-than-comm"
    exe = tmp_path / name
    shutil.copy2("/bin/sleep", exe)
    proc = subprocess.Popen([str(exe), "30"])
    try:
        time.sleep(0.2)
        assert by_name(name) == [proc.pid]
        assert by_name(name[:15]) == [proc.pid]  # comm: the kernel's first 15 bytes
    finally:
        proc.kill()
        proc.wait()


def test_top_by_name_profiles_the_process_of_that_name(cli, built, tmp_path: Path):
    import json

    from tests.support.spin import HOT

    exe = tmp_path / "lsymspinner"
    shutil.copy2(built("spin"), exe)
    proc = subprocess.Popen([str(exe)], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        done = cli("top", "lsymspinner", "--duration", "1", "--json", "--limit", "200")
        assert done.code == 0, done.err
        assert set(HOT) <= {f["demangled"] for f in json.loads(done.out)["functions"]}
        # two of that name: both profiled, each with its samples and its own share
        other = subprocess.Popen([str(exe)], stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            two = cli("top", "lsymspinner", "--duration", "1.5", "--json")
            assert two.code == 0, two.err
            doc = json.loads(two.out)
            by_pid = {p["pid"]: p for p in doc["processes"]}
            assert set(by_pid) == {proc.pid, other.pid}
            # both spin on every core they get: about half the samples each
            for pid in (proc.pid, other.pid):
                assert by_pid[pid]["command"] == str(exe)
                assert by_pid[pid]["samples"] > 0.3 * doc["samples"], doc["processes"]
            assert sum(p["samples"] for p in doc["processes"]) == doc["samples"]
            text = cli("top", "lsymspinner", "--duration", "0.5")
            assert text.code == 0 and "2 processes from pid" in text.out, text.out
            assert f"{proc.pid}  {exe}" in text.out and f"{other.pid}  {exe}" in text.out
        finally:
            other.kill()
            other.wait()
        missing = cli("top", "lsymspinnr", "--duration", "1")
        assert missing.code == 3 and "close: lsymspinner" in missing.err, missing.err
    finally:
        proc.kill()
        proc.wait()
