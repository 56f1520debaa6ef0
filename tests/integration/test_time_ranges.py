"""Time ranges of a capture (``--from``/``--to`` on report, ``--tree`` and export): a
program that runs one function for 3 s and then another for 3 s, recorded from its first
instruction, each range showing what ran in it; and ranges that are not ranges refused
in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _report(cli: Callable[..., Any], capture: Path, *extra: str) -> dict[str, Any]:
    done = cli("report", str(capture), "--json", *extra)
    assert done.code == 0, done.err
    doc: dict[str, Any] = json.loads(done.out)
    return doc


def _self(doc: dict[str, Any]) -> dict[str, float]:
    return {f["symbol"]: f["self_pct"] for f in doc["functions"] if f["symbol"]}


def test_each_range_shows_the_function_that_ran_in_it(cli, phases_capture):
    # WHEN the first phase's seconds are reported, with 0.3 s kept off its ends
    first = _report(cli, phases_capture, "--from", "0.3", "--to", "2.7")
    # THEN the first function is nearly all of it, and the range is 2.4 s long
    assert _self(first).get("first_phase", 0.0) >= 95, _self(first)
    assert abs(first["duration_s"] - 2.4) <= 0.05, first["duration_s"]
    assert 0.9 * 2.4 * 199 <= first["samples"] <= 1.05 * 2.4 * 199, first["samples"]
    # ... the second phase's seconds the second function
    second = _report(cli, phases_capture, "--from", "3.3", "--to", "5.7")
    assert _self(second).get("second_phase", 0.0) >= 95, _self(second)
    # ... and the whole capture about half each
    whole = _self(_report(cli, phases_capture))
    for name in ("first_phase", "second_phase"):
        assert abs(whole.get(name, 0.0) - 50) <= 5, whole
    # AND a range from a moment to the end, or from the start to one, is one too
    tail = _self(_report(cli, phases_capture, "--from", "3.3"))
    assert tail.get("second_phase", 0.0) >= 95, tail


def test_the_call_tree_and_an_export_hold_to_the_range(cli, phases_capture, tmp_path):
    # WHEN the first phase's call tree is asked for
    tree = cli("report", str(phases_capture), "--tree", "--to", "2.7")
    assert tree.code == 0, tree.err
    # THEN it holds the first function, not the second
    assert "first_phase" in tree.out and "second_phase" not in tree.out, tree.out
    # AND an export of the second phase holds the second function's stacks alone
    folded = tmp_path / "second.folded"
    done = cli("export", str(phases_capture), "--format", "collapsed", "-o", str(folded),
               "--from", "3.3", "--to", "5.7")  # fmt: skip
    assert done.code == 0, done.err
    counts: dict[str, int] = {}
    for line in folded.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        leaf = stack.rsplit(";", 1)[-1]
        counts[leaf] = counts.get(leaf, 0) + int(n)
    assert counts.get("second_phase", 0) >= 0.95 * sum(counts.values()), counts


@pytest.mark.parametrize(
    "args",
    [("--from", "3", "--to", "1"), ("--from", "2", "--to", "2"), ("--from", "-1"),
     ("--to", "nan")],
)  # fmt: skip
def test_a_range_that_is_not_one_is_refused_in_one_line(cli, phases_capture, args):
    done = cli("report", str(phases_capture), *args)
    assert done.code == 2, done.err
    (line,) = done.err.strip().splitlines()
    assert line.startswith("livesym") and "Traceback" not in done.err, done.err


def test_replay_shows_the_range_on_the_dashboard(phases_capture, monkeypatch):
    # GIVEN the dashboard taken out of the way: what replay would show it, kept
    from livesym import cli
    from livesym.commands import attach
    from livesym.ui import app

    shown = []
    monkeypatch.setattr(attach, "has_terminal", lambda: True)
    monkeypatch.setattr(app, "run_dashboard", lambda engine, **kw: shown.append(engine) or 0)
    # WHEN the second phase's seconds are replayed
    assert (
        cli.main(["replay", str(phases_capture), "--instant", "--from", "3.3", "--to", "5.7"]) == 0
    )
    # THEN the dashboard is fed the range alone
    (engine,) = shown
    engine.replay_all()
    view = engine.snapshot().view
    assert view.functions[0].frame.symbol == "second_phase", view.functions[0]
    assert view.functions[0].self_pct >= 95


def test_two_ranges_of_one_capture_diff_as_two_captures(cli, phases_capture):
    # WHEN the first phase's seconds are compared with the second's, of one capture
    done = cli("diff", f"{phases_capture}@0.3-2.7", f"{phases_capture}@3.3-5.7", "--json")
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    got = {f["symbol"]: f for f in doc["functions"] if f["symbol"]}
    # THEN one function leaves and the other takes its place, both marked
    assert got["first_phase"]["delta_self_pp"] <= -95 and got["first_phase"]["significant"]
    assert got["second_phase"]["delta_self_pp"] >= 95 and got["second_phase"]["significant"]
    assert doc["base"]["from"] == 0.3 and doc["new"]["to"] == 5.7


def test_the_svg_flame_graph_of_a_range_holds_that_range_alone(cli, phases_capture, tmp_path):
    import xml.etree.ElementTree as ET

    svg = tmp_path / "first.svg"
    done = cli("export", str(phases_capture), "--format", "svg", "--from", "0.3", "--to", "2.7",
               "-o", str(svg))  # fmt: skip
    assert done.code == 0, done.err
    root = ET.parse(svg).getroot()
    widths = {g.get("data-name"): float(g.get("data-w", "0")) for g in root.iter()
              if g.get("class") == "f"}  # fmt: skip
    assert widths.get("first_phase", 0) >= 0.95 * widths["all"], widths
    assert "second_phase" not in widths, widths


def test_the_engine_s_range_view_is_what_report_shows_of_the_range(phases_capture):
    # (the dashboard's timeline asks the engine for a range of the session it has)
    from livesym.capture.reader import read_capture
    from livesym.capture.window import within
    from livesym.engine import Engine, replay_snapshot

    capture = read_capture(phases_capture)
    engine = Engine.for_capture(capture)
    engine.replay_all()
    for start, end in ((0.3, 2.7), (3.3, 5.7), (2.0, 4.0)):
        # (a sample within a microsecond of an edge is on either side of it: the engine
        # compares moments on the session's clock, the capture's range from its start)
        edge = [row for row in capture.samples
                if min(abs(row[0] - start), abs(row[0] - end)) < 1e-6]  # fmt: skip
        got = engine.snapshot(between=(start, end)).view
        want = replay_snapshot(within(capture, start, end)).view
        assert want.samples > 0 and abs(got.samples - want.samples) <= len(edge), (start, end)
        if edge:
            continue
        assert sorted((r.frame.label, r.self_samples, r.total_samples)
                      for r in got.functions.unordered()) == sorted(
            (r.frame.label, r.self_samples, r.total_samples)
            for r in want.functions.unordered())  # fmt: skip
