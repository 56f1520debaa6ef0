"""80x24 (the SSH default): every pane, the details and the help fit, nothing overlaps,
and without colour (NO_COLOR) the states and marks are still there in words."""

from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widget import Widget

from livesym.capture.reader import read_capture
from livesym.ui.details import DetailsScreen
from livesym.ui.footer import KeysFooter
from livesym.ui.help import HelpScreen
from livesym.ui.pane_tabs import PaneTabs
from livesym.ui.table import SyncTable
from tests.ui.screen import replay_done, rows, screen_lines, screen_text

SIZE = (80, 24)
SCREEN = Region(0, 0, *SIZE)

# Columns that must survive at 80 columns, per pane.
ESSENTIAL = {
    "1": ("self", "total", "samples", "function", "module"),
    "2": ("tid", "name", "samples", "pct", "top"),
    "3": ("module", "samples", "pct"),
    "4": ("mark", "range", "perms", "samples", "base", "object"),
}


def assert_apart(widgets: list[Widget]) -> None:
    """Each widget is shown, inside the screen, and overlaps none of the others."""
    for w in widgets:
        assert w.region.area > 0, f"{w} is not shown"
        assert SCREEN.contains_region(w.region), f"{w} at {w.region} leaves the screen"
    for a, b in combinations(widgets, 2):
        assert not a.region.overlaps(b.region), f"{a} at {a.region} overlaps {b} at {b.region}"


@pytest.mark.parametrize("pane", sorted(ESSENTIAL))
async def test_each_pane_fits_80x24_without_overlap(spin_capture, replay_app, pane):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press(pane)
        screen = app.dashboard
        table = screen.table_of(screen.pane)
        parts = [
            screen.query_one("#header-text"),
            screen.query_one("#header-graph"),
            screen.query_one("#timeline"),
            screen.query_one(PaneTabs),
            table,
            screen.query_one(KeysFooter),
        ]
        if screen.pane == "functions":
            parts.append(screen.query_one("#functions-status"))
        assert_apart(parts)
        assert table.region.height >= 10
        assert set(ESSENTIAL[pane]) <= set(table.visible_columns())
        assert table.row_count > 0
        lines = screen_lines(app)
        assert lines[0].startswith("pid ")
        assert "q Quit" in lines[-1] and "? Help" in lines[-1]
        # The shown pane is marked in the characters, not only by colour.
        name = {"1": "Functions", "2": "Threads", "3": "Modules", "4": "Mappings"}[pane]
        assert f"[{name}]" in lines[5] and lines[5].count("[") == 1  # (under the timeline)


async def test_the_filter_is_typed_on_the_status_line_and_moves_nothing(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        screen = app.dashboard
        parts = [screen.table_of("functions"), screen.query_one("#functions-status"),
                 screen.query_one(KeysFooter)]  # fmt: skip
        before = [w.region for w in parts]
        await pilot.press("slash", "h")
        assert_apart(parts)
        assert [w.region for w in parts] == before
        assert any(line.startswith("/ h") for line in screen_lines(app))


async def test_details_and_help_fit_80x24(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("enter")
        assert isinstance(app.screen, DetailsScreen)
        details = app.screen
        assert_apart([details.query_one("#details"), details.query_one(KeysFooter)])
        assert details.query_one("#details-hot").region.height >= 2
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert SCREEN.contains_region(app.screen.query_one("#help-box").region)


async def test_narrow_terminal_drops_columns_but_keeps_the_function_name(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=(50, 20)) as pilot:
        await replay_done(pilot)
        table = app.dashboard.table_of("functions")
        assert "module" not in table.visible_columns()
        assert "function" in table.visible_columns()
        assert not app.dashboard.query_one("#header-graph").display
        await pilot.resize_terminal(120, 30)
        await pilot.pause()
        assert "module" in table.visible_columns()
        assert app.dashboard.query_one("#header-graph").display


@pytest.mark.parametrize("width", [40, 50, 58, 63, 64, 70, 80, 120])
async def test_every_table_fits_its_width_without_scrolling_sideways(
    spin_capture, replay_app, width
):
    """Columns drop before the numbers are cut: no table is wider than its place, on
    any pane or in the details."""
    app = replay_app(spin_capture)
    async with app.run_test(size=(width, 24)) as pilot:
        await replay_done(pilot)
        tables = []
        for pane in "1234":
            await pilot.press(pane)
            tables.append(app.dashboard.table_of(app.dashboard.pane))
        for table in tables:
            if table.region.width:
                assert table.virtual_size.width <= table.size.width, (table.id, width)
        await pilot.press("1", "enter")
        assert isinstance(app.screen, DetailsScreen)
        hot = app.screen.query_one("#details-hot", SyncTable)
        assert hot.virtual_size.width <= hot.size.width, width
        assert {"samples", "pct"} <= set(hot.visible_columns())


async def test_without_colour_states_and_marks_are_words(spin_capture, replay_app, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = replay_app(spin_capture)
    assert app.no_color
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("p")
        assert "REPLAY END (STOPPED), PAUSED" in screen_lines(app)[1].upper()


async def test_tab_goes_round_the_panes_and_a_click_on_a_name_shows_its_pane(
    spin_capture, replay_app
):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        screen = app.dashboard
        seen = []
        for _ in range(6):
            await pilot.press("tab")
            seen.append(screen.pane)
            assert screen.focused is screen.table_of(screen.pane)
            assert screen.table_of(screen.pane).row_count > 0
        assert seen == ["threads", "modules", "mappings", "tree", "processes", "functions"]
        await pilot.press("shift+tab")
        assert screen.pane == "processes"
        tabs = screen.query_one(PaneTabs)
        line = screen_lines(app)[tabs.region.y]
        await pilot.click(PaneTabs, offset=(line.index("Modules"), 0))
        assert screen.pane == "modules"
        assert screen.focused is screen.table_of("modules")
        await pilot.click(PaneTabs, offset=(line.index("Threads") + 2, 0))
        assert screen.pane == "threads"


async def test_a_click_on_a_footer_key_presses_it(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        footer = app.dashboard.query_one(KeysFooter)
        line = screen_lines(app)[footer.region.y]
        await pilot.click(KeysFooter, offset=(line.index("Pane"), 0))
        assert app.dashboard.pane == "threads"
        await pilot.click(KeysFooter, offset=(line.index("? Help"), 0))
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_at_the_smallest_size_every_promise_holds(replay_app):
    # The committed capture: it holds a function whose name is longer than 40 columns
    app = replay_app(Path(__file__).parent / "data" / "spin.json")
    async with app.run_test(size=(40, 12)) as pilot:
        await replay_done(pilot)
        names = {"1": "Functions", "2": "Threads", "3": "Modules", "4": "Mappings"}
        for key, name in names.items():
            await pilot.press(key)
            lines = screen_lines(app)
            tabs = next(line for line in lines if "[" in line and "]" in line)
            assert f"[{name}]" in tabs, (name, tabs)  # the shown pane is named, whole
            assert "q Quit" in lines[-1] and "? Help" in lines[-1], lines[-1]
        await pilot.press("1")
        table = app.dashboard.table_of("functions")
        # A name longer than its column is cut with '…', never cropped mid-word
        long = [c[0] for c in rows(table, "function") if "no_symbol" in c[0] or len(c[0]) > 20]
        shown = "\n".join(screen_lines(app))
        assert long and all(name not in shown for name in long)
        assert any(line.rstrip(" ▆▇█▂▃▄▅").endswith("…") for line in screen_lines(app))
        await pilot.press("enter")
        assert isinstance(app.screen, DetailsScreen)
        details = screen_lines(app)
        assert details[0].startswith("REPLAY END")
        # The conversion chain is on the screen, not pushed below it by the hot table
        assert any(line.startswith("address ") for line in details), details
        assert "q Quit" in details[-1]


@pytest.mark.parametrize("size", [(39, 12), (40, 11), (30, 8)])
async def test_below_the_smallest_size_it_says_so_and_q_still_quits(spin_capture, replay_app, size):
    app = replay_app(spin_capture)
    async with app.run_test(size=size) as pilot:
        await replay_done(pilot)
        text = " ".join(screen_lines(app))
        assert "terminal too small: 40x12 needed" in " ".join(text.split()), text
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert "terminal too small" not in " ".join(screen_lines(app))
        assert "[Functions]" in "\n".join(screen_lines(app))
        await pilot.resize_terminal(*size)
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_at_80_columns_the_header_and_the_flame_status_cut_names_not_facts(
    spin_capture, replay_app
):
    app = replay_app(spin_capture)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay_done(pilot)
        # The first header line: who runs it comes before the (long) command line
        first = screen_text(app).splitlines()[0]
        user = read_capture(spin_capture).target.get("user")
        assert user and f"user {user}  " in first, first
        # The flame graph's status line: the cursor's numbers before its name
        await pilot.press("f")
        await pilot.pause()
        line = str(app.screen.query_one("#flame-status").render())
        assert re.match(r"total \d+ \([\d.]+ %\)  self \d+ \([\d.]+ %\)  ", line), line
        assert line.index("total") < line.index(app.screen.graph.cursor.node.frame.label)
