"""The hot-function table on a replayed spin capture: sorting, filters, window, names."""

from __future__ import annotations

from itertools import pairwise

import pytest
from textual import events

from livesym.ui.app import DashboardApp
from livesym.ui.details import DetailsScreen
from livesym.ui.functions import CURSOR, MAX_FILTER
from livesym.ui.table import SyncTable
from tests.support.spin import HOT
from tests.ui.screen import key_of, replay_done, rows

SIZE = (100, 30)


def functions(app: DashboardApp) -> SyncTable:
    return app.dashboard.table_of("functions")


def column(app: DashboardApp, name: str) -> list[str]:
    return [cells[0] for cells in rows(functions(app), name)]


def numbers(app: DashboardApp, name: str) -> list[float]:
    return [float(v) for v in column(app, name)]


def status(app: DashboardApp) -> str:
    return str(app.dashboard.query_one("#functions-status").render())


def non_increasing(values: list[float]) -> bool:
    return all(a >= b for a, b in pairwise(values))


async def test_s_cycles_the_sort_column_and_shift_s_reverses_it(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        assert non_increasing(numbers(app, "self"))
        assert "sort self% ↓" in status(app)
        before = column(app, "function")

        await pilot.press("s")
        assert "sort total% ↓" in status(app)
        totals = numbers(app, "total")
        assert non_increasing(totals) and totals[0] == 100.0
        assert column(app, "function") != before  # callers with 100 % total come first now

        await pilot.press("s")  # no sort repeats another: SAMPLES is self% in counts
        names = column(app, "function")
        assert names == sorted(names, key=str.casefold)

        await pilot.press("S")
        assert "sort function ↑" in status(app)
        assert column(app, "function") == sorted(names, key=str.casefold, reverse=True)

        await pilot.press("s")
        modules = column(app, "module")
        assert modules == sorted(modules, key=str.casefold)

        await pilot.press("s")  # back to the start of the cycle
        assert column(app, "function") == before


async def test_clicking_a_header_sorts_by_it_and_again_reverses(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        table = functions(app)
        x = table.column_x("function")
        assert x is not None
        await pilot.click(table, offset=(x + 2, 0))
        await pilot.pause()
        names = column(app, "function")
        assert names == sorted(names, key=str.casefold)
        await pilot.click(table, offset=(x + 2, 0))
        await pilot.pause()
        assert column(app, "function") == sorted(names, key=str.casefold, reverse=True)


async def test_text_filter_narrows_the_table_and_escape_clears_it(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        everything = column(app, "function")
        await pilot.press("slash", "h", "o", "t", "_")
        shown = column(app, "function")
        assert set(shown) == {n for n in everything if "hot_" in n} == HOT - {"leaf_work"}
        # Typed on the status line, the table keeping focus.
        assert status(app).startswith("/ hot_") and "Enter keeps, Esc clears" in status(app)
        assert functions(app).has_focus
        await pilot.press("enter")  # keeps the filter, closes the prompt
        assert not isinstance(app.screen, DetailsScreen)  # Enter was the filter's
        assert column(app, "function") == shown
        assert "filter 'hot_'" in status(app) and not status(app).startswith("/")

        await pilot.press("slash")  # reopens with the text kept
        assert status(app).startswith("/ hot_")
        await pilot.press("escape")
        assert column(app, "function") == everything
        assert "filter" not in status(app)


async def test_while_typing_the_filter_keys_are_text_and_arrows_still_move(
    spin_capture, replay_app
):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        everything = column(app, "function")
        # s, p, c, q and x are keys of the screen and the app: here they are letters.
        await pilot.press("slash", "s", "p", "c", "q", "x")
        options = app.dashboard.options
        assert app.is_running and not app.dashboard.paused
        assert (options.sort, options.recent, options.text) == ("self", False, "spcqx")
        assert status(app).startswith("/ spcqx")
        assert column(app, "function") == []
        await pilot.press("ctrl+u", "l", "e", "a", "f", "_", "w", "o", "r", "k", "backspace")
        assert status(app).startswith("/ leaf_wor")
        assert column(app, "function") == ["leaf_work"]
        await pilot.press("backspace", "backspace", "backspace", "backspace")
        assert status(app).startswith(f"/ leaf{CURSOR} ")
        await pilot.press("ctrl+u")
        assert column(app, "function") == everything
        row = functions(app).cursor_row
        await pilot.press("down", "down")
        assert functions(app).cursor_row == row + 2
        await pilot.press("tab")  # another pane closes the prompt
        await pilot.press("1")
        assert not status(app).startswith("/")


async def test_a_filter_typed_at_once_loses_no_key(spin_capture, replay_app):
    """Keys that arrive together (tmux send-keys, a fast typist over SSH) reach the
    filter in order: the first one after / is not lost while / is handled."""
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        for key, char in (("slash", "/"), ("h", "h"), ("o", "o"), ("t", "t"), ("underscore", "_")):
            app.post_message(events.Key(key, char))  # no wait between them
        await pilot.pause(0.2)
        assert status(app).startswith(f"/ hot_{CURSOR}")
        assert set(column(app, "function")) == HOT - {"leaf_work"}
        # From another pane too: / switches to the functions and takes what follows.
        await pilot.press("escape", "2")
        for key, char in (("slash", "/"), ("l", "l"), ("e", "e"), ("a", "a"), ("f", "f")):
            app.post_message(events.Key(key, char))
        await pilot.pause(0.2)
        assert app.dashboard.pane == "functions"
        assert status(app).startswith(f"/ leaf{CURSOR}")
        assert column(app, "function") == ["leaf_work"]


async def test_a_pasted_filter_is_one_line_and_bounded(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("slash")
        functions(app).post_message(events.Paste("hot\n_" + "y" * 1000))
        await pilot.pause()
        assert status(app).startswith("/ hot _yyy")
        assert len(app.dashboard.options.text) == MAX_FILTER
        assert column(app, "function") == []


async def test_enter_on_a_thread_shows_only_its_functions(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("2")
        threads = app.dashboard.table_of("threads")
        assert threads.has_focus
        beta = key_of(threads, "name", "beta")
        threads.select_key(beta)
        await pilot.press("enter")
        assert app.dashboard.pane == "functions"
        assert f"thread {beta} beta" in status(app)
        self_pct = dict(rows(functions(app), "function", "self"))
        # beta runs hot_beta (a preemption point such as the vdso's clock_gettime may
        # take a sample or two); the other threads' functions are gone.
        assert float(self_pct["hot_beta"]) >= 95
        assert "hot_alpha" not in self_pct and "hot_gamma" not in self_pct
        assert sum(float(p) for p in self_pct.values()) == pytest.approx(100, abs=0.3)

        await pilot.press("x")  # clear every filter
        assert "thread" not in status(app)
        assert "hot_alpha" in column(app, "function")


async def test_enter_on_a_module_shows_only_samples_that_ended_in_it(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("3")
        modules = app.dashboard.table_of("modules")
        spin = next(key for key in modules.row_keys() if key.endswith("/spin"))
        others = [key for key in modules.row_keys() if key != spin]
        modules.select_key(spin)
        await pilot.press("enter")
        assert "module spin" in status(app)
        leaf_share = sum(
            float(pct) for pct, module in rows(functions(app), "self", "module") if module == "spin"
        )
        assert abs(leaf_share - 100.0) < 0.5  # every sample of this view ends in spin
        if others:  # and the unfiltered view had samples ending elsewhere
            assert app.dashboard.held is not None
            assert app.dashboard.held.view.samples > app.dashboard.view.samples


async def test_c_switches_to_the_recent_window(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        assert status(app).startswith("cumulative")
        await pilot.press("c")
        assert status(app).startswith("last 5 s")  # the window says how long it is
        # The whole capture is shorter than the window: the same samples either way.
        assert app.dashboard.view is not None and app.dashboard.held is not None
        assert app.dashboard.view.samples == app.dashboard.held.view.samples > 0
        await pilot.press("c")
        assert status(app).startswith("cumulative")


def first_shown(app: DashboardApp) -> int:
    """The index of the first row the functions table shows."""
    return round(functions(app).scroll_y)


@pytest.mark.parametrize(
    "away",
    [("enter", "escape"), ("2", "1"), ("2", "enter"), ("2", "enter", "x", "1")],
    ids=["details", "pane", "thread", "thread-cleared"],
)
async def test_the_table_reopens_with_its_top_rows_shown(spin_capture, replay_app, away):
    # GIVEN a table taller than its pane (14 rows), the cursor a few rows down
    app = replay_app(spin_capture)
    async with app.run_test(size=(80, 14)) as pilot:
        await replay_done(pilot)
        table = functions(app)
        page = table.scrollable_content_region.height - 1
        assert table.row_count > page, (table.row_count, page)
        for _ in range(page - 2):
            await pilot.press("down")
        assert first_shown(app) == 0 and table.cursor_row == page - 2
        # WHEN another view comes and goes
        for key in away:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause()
        # THEN the top rows are shown
        assert app.dashboard.pane == "functions"
        assert first_shown(app) == 0, (first_shown(app), functions(app).cursor_row)
