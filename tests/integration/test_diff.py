"""``livesym diff``: a program that splits its CPU 70/30 between two functions against
itself at 30/70 (each moves by its real 40 points, marked significant), against itself
at 70/30 again (nothing marked), the call trees laid over each other, and what is not a
diff refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SECONDS = 1.5  # of mix's own CPU time: as many samples however busy the box
RATE = 499  # about 750 samples a side


@pytest.fixture(scope="module")
def mixes(
    built: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Captures of ``mix 70`` (twice) and ``mix 30``, each recorded from its start."""
    out = tmp_path_factory.mktemp("diff")
    captures = {}
    for name, percent in (("a70", 70), ("b70", 70), ("c30", 30)):
        captures[name] = out / f"{name}.lsym"
        done = subprocess.run(
            [sys.executable, "-m", "livesym", "record", "-o", str(captures[name]), "--rate",
             str(RATE), "--", str(built("mix")), str(percent), str(SECONDS)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    return captures


def _diff(cli: Callable[..., Any], *args: str) -> dict[str, Any]:
    done = cli("diff", *args, "--json")
    assert done.code == 0, done.err
    doc: dict[str, Any] = json.loads(done.out)
    return doc


def _by_symbol(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["symbol"]: f for f in doc["functions"] if f["symbol"]}


def test_a_70_30_split_against_30_70_moves_each_function_by_40_points(cli, mixes):
    # WHEN the 30/70 run is compared with a 70/30 one
    doc = _diff(cli, str(mixes["a70"]), str(mixes["c30"]))
    got = _by_symbol(doc)
    # THEN each function moves by its real change within 6 points, and is marked
    for name, real in (("first_part", -40.0), ("second_part", 40.0)):
        f = got[name]
        assert abs(f["delta_self_pp"] - real) <= 6, (name, f)
        assert f["significant"] and f["p_value"] < 1e-6, f
        assert f["delta_self_pp"] == pytest.approx(f["new_self_pct"] - f["base_self_pct"], abs=2e-3)
    # ... the largest changes first, every field the docs name there
    assert {doc["functions"][0]["symbol"], doc["functions"][1]["symbol"]} == {
        "first_part", "second_part"}  # fmt: skip
    for key in ("symbol", "demangled", "module", "base_self_pct", "new_self_pct",
                "delta_self_pp", "base_total_pct", "new_total_pct", "delta_total_pp",
                "significant"):  # fmt: skip
        assert key in doc["functions"][0], key
    assert doc["base"]["samples"] >= 400  # (what a 10-point move needs at 20-30 %)
    # ... and main, in every stack on both sides, did not move
    assert not got["main"]["significant"] and abs(got["main"]["delta_total_pp"]) < 1


def test_two_runs_of_one_workload_mark_nothing(cli, mixes):
    doc = _diff(cli, str(mixes["a70"]), str(mixes["b70"]))
    assert doc["significant"] == 0, [f for f in doc["functions"] if f["significant"]]
    assert doc["test"]["tests"] >= 2  # the two functions were tested, and passed
    got = _by_symbol(doc)
    assert abs(got["first_part"]["delta_self_pp"]) <= 6, got["first_part"]


def test_the_text_table_and_the_tree_say_the_same(cli, mixes):
    table = cli("diff", str(mixes["a70"]), str(mixes["c30"]))
    assert table.code == 0, table.err
    rows = {line.split()[-2]: line for line in table.out.splitlines() if "_part" in line}
    assert "*" in rows["first_part"].split() and "*" in rows["second_part"].split(), table.out
    tree = cli("diff", str(mixes["a70"]), str(mixes["c30"]), "--tree", "--json")
    assert tree.code == 0, tree.err
    root = json.loads(tree.out)["tree"]
    flat, todo = {}, [root]
    while todo:
        node = todo.pop()
        flat[node["symbol"]] = node
        todo.extend(node["children"])
    got = _by_symbol(_diff(cli, str(mixes["a70"]), str(mixes["c30"])))
    for name in ("first_part", "second_part"):
        assert flat[name]["delta_total_pp"] == pytest.approx(got[name]["delta_total_pp"], abs=0.01)


def test_what_is_not_a_diff_is_refused_in_one_line(cli, mixes, tmp_path):
    base = str(mixes["a70"])
    bad = cli("diff", base, f"{base}@x-2")
    assert bad.code == 2 and bad.err.count("\n") == 1 and "FROM-TO" in bad.err, bad.err
    backwards = cli("diff", base, f"{base}@2-1")
    assert backwards.code == 2 and "not a time range" in backwards.err, backwards.err
    missing = cli("diff", base, str(tmp_path / "nothing.lsym"))
    assert missing.code == 5 and missing.err.count("\n") == 1, missing.err
    wall = cli("diff", base, str(mixes["c30"]), "--mode", "wall")
    assert wall.code == 2 and "--mode cpu" in wall.err, wall.err
    for done in (bad, backwards, missing, wall):
        assert "Traceback" not in done.err


def _report_totals(cli: Callable[..., Any], capture: Path) -> dict[str, float]:
    """Each function's total share, from the report's counts (its ``total_pct`` is rounded
    to 3 places: rounded again to 2, 31.425 gave 31.43 where the share is 31.4247)."""
    done = cli("report", str(capture), "--json")
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    return {f["symbol"]: 100.0 * f["total"] / doc["samples"]
            for f in doc["functions"] if f["symbol"]}  # fmt: skip


def test_the_svg_flame_graph_renders_each_share_at_its_width_and_zooms(cli, mixes, tmp_path):
    from tests.support.browser import rendered

    # GIVEN a capture exported as an SVG flame graph
    svg = tmp_path / "a70.svg"
    done = cli("export", str(mixes["a70"]), "--format", "svg", "-o", str(svg))
    assert done.code == 0, done.err
    # WHEN Chromium renders it, a click lands on first_part, and "_part$" is searched
    page = rendered(svg, tmp_path, click="first_part", search="_part$")
    # THEN each function is drawn as wide as its share of 1200 pixels, within a pixel,
    # and named on its frame
    shares = _report_totals(cli, mixes["a70"])
    drawn = {b.name: b for b in page.before}
    for name in ("first_part", "second_part", "main"):
        assert abs(drawn[name].width - shares[name] * 12) <= 1, (name, drawn[name], shares)
        assert f"{shares[name]:.2f} %" in drawn[name].title
    assert drawn["first_part"].label == "first_part"
    # ... the click zoomed to first_part: the whole width, its sibling gone, main above it
    assert page.hit == "first_part" and page.after is not None
    after = {b.name: b for b in page.after}
    assert abs(after["first_part"].width - 1200) <= 1, after["first_part"]
    assert not after["second_part"].shown and after["main"].shown
    # ... and the search matched both parts, each sample once
    total = shares["first_part"] + shares["second_part"]
    assert page.matched is not None and abs(page.matched - total) <= 0.5, (page.matched, total)


def test_the_differential_flame_graph_is_sized_by_new_and_coloured_by_change(cli, mixes, tmp_path):
    from tests.support.browser import rendered

    svg = tmp_path / "diff.svg"
    done = cli("diff", str(mixes["a70"]), str(mixes["c30"]), "--svg", str(svg))
    assert done.code == 0, done.err
    page = rendered(svg, tmp_path)
    drawn = {b.name: b for b in page.before}
    shares = _report_totals(cli, mixes["c30"])
    for name in ("first_part", "second_part"):
        assert abs(drawn[name].width - shares[name] * 12) <= 1, (name, drawn[name], shares)
    # first_part lost 40 points: blue; second_part gained them: red
    red, green, blue = (int(v) for v in drawn["second_part"].fill[4:-1].split(","))
    assert red == 255 and green < 64 and blue < 64, drawn["second_part"].fill
    red, green, blue = (int(v) for v in drawn["first_part"].fill[4:-1].split(","))
    assert blue == 255 and red < 64 and green < 64, drawn["first_part"].fill
    assert "base " in drawn["first_part"].title and "points" in drawn["first_part"].title
