"""The timeline (issue 30): a replay of a program that runs one function for 3 s and then
another, its timeline at 80 columns, a range chosen with the keys and with the mouse, and
every pane following it; and the rows it draws, from made-up data."""

from __future__ import annotations

import pytest

from livesym.engine.snapshot import TimelineData
from livesym.records import MARK_LOST, MARK_MAPS, MARK_PROCESS
from livesym.ui.timeline import columns_of, timeline_text
from tests.ui.screen import replay_done, rows, said_under_marks, screen_lines

SIZE = (80, 24)


def _shares(app) -> dict[str, float]:
    table = app.dashboard.table_of("functions")
    return {name: float(pct) for name, pct in rows(table, "function", "self")}


def test_the_rows_draw_each_second_s_samples_the_range_and_the_marks():
    # GIVEN 4 s of samples, none in the third second, the maps changed at 1.5 s, a
    # process seen at 2.6 s, samples lost in the first second, and the range 2-4 s chosen
    marked = ((0.0, MARK_LOST), (1.5, MARK_MAPS), (2.6, MARK_PROCESS))
    data = TimelineData((100, 50, 0, 100), marked, (2.0, 4.0))
    text = timeline_text(data, 4.0, 80)
    bars, marks = text.plain.split("\n")
    # THEN a column is a power of two of a second, the shortest with which the session
    # fits (1/16 s: 64 of the 80 columns), and each 16 draw their second: full, half,
    # nothing, full; nothing after the session's end
    assert bars == "█" * 16 + "▄" * 16 + " " * 16 + "█" * 16 + " " * 16
    # ... the range is its columns, in reverse
    reversed_columns = [span for span in text.spans if "reverse" in str(span.style)]
    assert (min(s.start for s in reversed_columns), max(s.end for s in reversed_columns)) == (
        32, 64)  # fmt: skip
    # ... and the marks stand at their moments, the range and the length said at the right
    assert marks[24] == "M" and marks[41] == "+" and marks[0] == "!" and len(marks) == 80
    assert marks.endswith("of 4.0 s") and "range 2.0-4.0" in marks
    # ... a mark over the words where they meet (at 40 columns, 1/8 s each, the
    # process's '+' is in them)
    narrow = timeline_text(data, 4.0, 40).plain.split("\n")[1]
    assert narrow[12] == "M" and narrow[20] == "+"
    # Where off-CPU time was collected: a labelled row of it, on its own scale, and
    # the columns after the labels (whose samples, where a thread was chosen, said)
    waits = TimelineData((10, 10), (), None, off_cpu=(0, 400), threads="thread 7")
    cpu_row, off_row, said = timeline_text(waits, 2.0, 44).plain.split("\n")
    assert cpu_row == "cpu " + "█" * 32 + " " * 8
    assert off_row == "off " + " " * 16 + "█" * 16 + " " * 8
    assert said.endswith("thread 7 · 2.0 s") and len(said) == 44
    # A last second only begun is drawn at its rate, not as a dip (1.1 s in 1/8 s
    # columns: the ninth holds the tenth of a second the session had of its second)
    assert columns_of((100, 10), 1.1, 11)[7:] == pytest.approx([100.0, 100.0, 0.0, 0.0])
    # ... and as the session grows, the columns it had stay as they were: only the
    # newest changes, until the session fills the row and the columns double
    alternating = TimelineData((100, 50) * 25, (), None)
    grown = [timeline_text(alternating, s, 40).plain.split("\n")[0]
             for s in (21.0, 21.5, 30.0, 39.9)]  # fmt: skip
    assert len({g[:21] for g in grown}) == 1 and grown[0][:4] == "█▄█▄", grown
    assert len(grown[3].rstrip()) == 40
    doubled = timeline_text(alternating, 40.5, 40).plain.split("\n")[0]
    assert len(set(doubled[:20])) == 1 and doubled[21:] == " " * 19, doubled  # (pairs of 2 s)


async def test_a_range_chosen_with_the_keys_and_the_mouse_is_what_every_pane_shows(
    phases_capture, replay_app
):
    app = replay_app(phases_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        lines = screen_lines(app)
        # GIVEN the timeline under the header: bars, then the session's length
        assert set(lines[3].strip()) <= set("▁▂▃▄▅▆▇█") and lines[3].strip(), lines[3]
        seconds = app.dashboard.last.elapsed
        assert said_under_marks(lines[4], f"{seconds:.1f} s"), lines[4]
        whole = _shares(app)
        assert 40 <= whole["first_phase"] <= 60, whole
        # WHEN '<' picks the last quarter: the second phase alone
        await pilot.press("less_than_sign")
        await pilot.pause()
        assert "range" in screen_lines(app)[4]
        assert _shares(app)["second_phase"] >= 95, _shares(app)
        # ... the tree pane follows (its root counts the range's samples)
        between = app.dashboard.options.between
        assert between is not None
        view, everything = app.dashboard.view, app.dashboard.session.snapshot().view
        assert view is not None and view.samples < 0.4 * everything.samples, (view, everything)
        await pilot.press("5")
        assert any("second_phase" in line for line in screen_lines(app))
        assert not any("first_phase" in line for line in screen_lines(app))
        await pilot.press("1")
        # ... and so do a function's details: its hot addresses hold the range's samples
        table = app.dashboard.table_of("functions")
        table.select_key(next(k for k in table.row_keys() if "second_phase" in k))
        await pilot.press("enter")
        hot = app.screen.query_one("#details-hot")
        held = sum(int(n) for (n,) in rows(hot, "samples"))
        row = view.functions.row_of(next(f for f in view.functions.frames()
                                         if f.symbol == "second_phase"))  # fmt: skip
        assert row is not None and held == row.total_samples, (held, row)
        await pilot.press("escape")
        # ... '=' drops it
        await pilot.press("equals_sign")
        await pilot.pause()
        assert app.dashboard.options.between is None
        assert 40 <= _shares(app)["first_phase"] <= 60
        # AND a press and release on the timeline's first 2.5 s picks the first phase
        timeline = app.dashboard.query_one("#timeline")
        # (the column that holds 2.5 s ends after it: the one before it, whatever the
        # session's length made a column)
        third = timeline.column_of(2.5) - 1
        await pilot.mouse_down(timeline, offset=(2, 0))
        await pilot.mouse_up(timeline, offset=(third, 0))
        await pilot.pause()
        chosen = app.dashboard.options.between
        assert chosen is not None and chosen[1] < 3.0, chosen
        assert _shares(app)["first_phase"] >= 95, _shares(app)
        # ... and the threads pane counts the range's samples too
        await pilot.press("2")
        threads = app.dashboard.table_of("threads")
        counted = sum(int(n) for (n,) in rows(threads, "samples"))
        assert counted == app.dashboard.held.view.samples


async def test_a_pinned_baseline_shows_each_function_s_change_against_it(
    phases_capture, replay_app
):
    app = replay_app(phases_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        # GIVEN the whole session pinned as the baseline (about half each)
        await pilot.press("b")
        await pilot.pause()
        table = app.dashboard.table_of("functions")
        assert "delta" in table.visible_columns()
        # WHEN the last quarter (the second phase alone) is shown
        await pilot.press("less_than_sign")
        await pilot.pause()
        # THEN each function shows its change of self share, marked significant
        deltas = dict(rows(table, "function", "delta"))
        second, first = deltas["second_phase"], deltas["first_phase"]
        assert second.endswith("*") and 40 <= float(second[:-1]) <= 60, deltas
        # ... first_phase too, gone from the range: listed last, at nothing, and by how
        # much it fell
        assert first.endswith("*") and -60 <= float(first[:-1]) <= -40, deltas
        listed = rows(table, "function", "self")
        assert listed[-1] == ("first_phase", "0.0"), listed
        status = screen_lines(app)[6]
        assert "vs baseline 0-" in status, status
        # AND 'b' again unpins it: the column goes
        await pilot.press("b")
        await pilot.pause()
        assert "delta" not in table.visible_columns()
