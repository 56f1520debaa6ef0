"""Keys that act on the session: w writes a capture, r resets, n shows raw names."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from livesym.engine import Engine
from livesym.records import TimeMode
from livesym.sampling.choice import choose_sampler
from livesym.target.process import TargetProcess
from livesym.ui.app import DashboardApp
from tests.support.capture_json import capture_json
from tests.ui.screen import key_of, replay_done, rows, until

CAPTURE = Path(__file__).parent / "data" / "spin.json"
NOON = 1_700_000_000.0  # the wall clock the dashboard is given


async def test_w_writes_the_session_to_a_named_capture_that_reports_the_same(
    replay_app, tmp_path, cli
):
    app = replay_app(CAPTURE, wall_clock=lambda: NOON)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        await pilot.press("w")
        await app.capture_written()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(NOON))
    written = tmp_path / f"livesym-{app.pid}-{stamp}.json.gz"
    assert written.exists(), sorted(p.name for p in tmp_path.iterdir())
    before = json.loads(cli("report", str(CAPTURE), "--json", "--limit", "1000").out)
    after = json.loads(cli("report", str(written), "--json", "--limit", "1000").out)
    assert after["functions"] == before["functions"]
    assert after["samples"] == before["samples"]


async def test_w_reports_a_file_it_cannot_write_and_carries_on(replay_app, tmp_path):
    app = replay_app(CAPTURE)
    app.directory = tmp_path / "missing" / "dir"
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await replay_done(pilot)
        await pilot.press("w")
        await app.capture_written()
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any(m.startswith("cannot write ") for m in messages), messages
        assert app.is_running


async def test_w_through_symlinks_planted_at_its_predictable_names(replay_app, tmp_path):
    from livesym.capture.reader import read_capture
    from livesym.ui.app import capture_name
    from tests.integration.test_file_safety import VICTIM_TEXT, assert_safe, plant

    victim = tmp_path / "passwd"
    victim.write_text(VICTIM_TEXT)
    app = replay_app(CAPTURE, wall_clock=lambda: NOON)
    name = capture_name(app.pid, NOON)
    plant(tmp_path / name, victim)
    plant(tmp_path / f"{name}.tmp", victim)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        await pilot.press("w")
        await app.capture_written()
        await pilot.pause()
    assert_safe(tmp_path / name, victim)
    assert read_capture(tmp_path / name).samples


@pytest.fixture
def mangled_capture(tmp_path: Path) -> Path:
    doc = capture_json(CAPTURE)
    for frame in doc["frames"]:
        if frame["symbol"] == "hot_beta":
            frame["symbol"], frame["demangled"] = "_ZN4spin4betaEv", "spin::beta()"
    out = tmp_path / "mangled.json"
    out.write_text(json.dumps(doc))
    return out


async def test_n_switches_between_demangled_and_raw_names(mangled_capture, replay_app):
    app = replay_app(mangled_capture)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        table = app.dashboard.table_of("functions")
        key = key_of(table, "function", "spin::beta()")
        await pilot.press("n")
        assert table.cell(key, "function").plain == "_ZN4spin4betaEv"
        await pilot.press("slash", "_", "Z", "N", "enter")  # the filter matches what is shown
        assert [c[0] for c in rows(table, "function")] == ["_ZN4spin4betaEv"]
        await pilot.press("x", "n")
        assert table.cell(key, "function").plain == "spin::beta()"


async def test_r_forgets_the_samples_counted_so_far(run_target, tmp_path):
    proc = run_target("spin")
    engine = Engine(
        TargetProcess(proc.pid), choose_sampler("auto", proc.pid, 199, TimeMode.CPU).sampler
    )
    app = DashboardApp(engine, pid=proc.pid, directory=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.dashboard.table_of("functions")

        def counted() -> int:
            return sum(int(c[0]) for c in rows(table, "samples"))

        await until(pilot, lambda: counted() > 100, timeout=15, what="100 samples")
        taken = app.dashboard.last.samples
        await pilot.press("r")
        assert counted() < 30
        assert app.dashboard.last.samples >= taken  # the sampler's own count goes on


async def test_w_during_a_live_session_replays_as_written_mid_session(run_target, tmp_path, cli):
    proc = run_target("spin")
    engine = Engine(
        TargetProcess(proc.pid), choose_sampler("auto", proc.pid, 199, TimeMode.CPU).sampler
    )
    app = DashboardApp(engine, pid=proc.pid, directory=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.dashboard.last is not None and app.dashboard.last.samples
                    > 50, timeout=15, what="50 samples")  # fmt: skip
        await pilot.press("w")
        await app.capture_written()
        await pilot.pause()
    (written,) = tmp_path.glob("livesym-*.json.gz")
    report = json.loads(cli("report", str(written), "--json").out)
    assert report["state"] == "written mid-session" and report["samples"] > 0


def test_the_demo_writes_its_captures_in_livesyms_data_directory(monkeypatch, tmp_path):
    from livesym.commands.demo import captures_dir

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert captures_dir() == tmp_path / "livesym" / "captures"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert captures_dir() == tmp_path / "home" / ".local" / "share" / "livesym" / "captures"
