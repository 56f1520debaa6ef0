"""A replay shows the numbers ``livesym report --json`` prints for the same capture."""

from __future__ import annotations

import json

from livesym.ui.format import basename, duration
from tests.ui.screen import replay_done, rows, screen_lines


async def test_replay_shows_exactly_what_report_prints(spin_capture, replay_app, cli):
    result = cli("report", str(spin_capture), "--json", "--limit", "100000")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    app = replay_app(spin_capture)
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_done(pilot)
        table = app.dashboard.table_of("functions")
        shown = rows(table, "function", "module", "samples", "self", "total")
        header = screen_lines(app)[1]

    assert len(shown) == len(report["functions"])
    for (name, module, samples, self_pct, total_pct), f in zip(
        shown, report["functions"], strict=True
    ):
        assert (name, module, int(samples)) == (f["demangled"], basename(f["module"]), f["self"])
        # report rounds to 3 decimals, the table shows 1: the same number, once rounded.
        assert abs(float(self_pct) - f["self_pct"]) <= 0.05 + 1e-9
        assert abs(float(total_pct) - f["total_pct"]) <= 0.05 + 1e-9
    assert sum(int(r[2]) for r in shown) == report["samples"]
    assert f"samples {report['samples']}" in header and f"lost {report['lost']}" in header
    assert f"{report['sampler']} {report['rate_hz']} Hz" in header


async def test_replay_header_shows_the_duration_report_prints(spin_capture, replay_app, cli):
    report = json.loads(cli("report", str(spin_capture), "--json").out)
    app = replay_app(spin_capture)
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_done(pilot)
        header = screen_lines(app)[1]
    assert f"  {duration(report['duration_s'])}  " in header


async def test_the_header_says_how_many_stacks_were_cut_short(
    replay_app, cli, run_target, tmp_path
):
    # GIVEN a capture whose stacks were copied too short to reach their root
    proc = run_target("frameless")
    path = tmp_path / "short.json"
    done = cli("record", str(proc.pid), "--sampler", "perf", "--stack-size", "64",
               "--duration", "1.5", "-o", str(path), timeout=90)  # fmt: skip
    assert done.code == 0, done.err
    report = json.loads(cli("report", str(path), "--json").out)
    share = 100 * report["stacks_cut_short"] / report["samples"]
    assert share >= 95
    # WHEN it is replayed
    app = replay_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_done(pilot)
        header = screen_lines(app)[1]
    # THEN the header says so, with report's share
    assert f"cut short {share:.0f}%" in header, header


async def test_the_header_says_nothing_of_cut_stacks_where_none_were(spin_capture, replay_app):
    app = replay_app(spin_capture)  # spin's stacks all unwind to their threads' roots
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_done(pilot)
        header = screen_lines(app)[1]
    assert "samples" in header and "cut short" not in header
