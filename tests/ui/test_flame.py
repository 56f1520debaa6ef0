"""The flame graph on a replayed spin capture: its layout against the view's tree, the
cursor, zooming in and out, search, inverting, merged narrow frames, NO_COLOR marks."""

from __future__ import annotations

from itertools import pairwise

import pytest

from livesym.profile import ProfileView, StackNode
from livesym.records import ROOT_FRAME
from livesym.ui.app import DashboardApp
from livesym.ui.flame import EDGE, SAME_COLOUR, FlameGraph, FlameScreen, layout
from tests.ui.screen import replay_done, screen_lines

SIZE = (100, 30)


def flame(app: DashboardApp) -> FlameScreen:
    assert isinstance(app.screen, FlameScreen)
    return app.screen


def graph(app: DashboardApp) -> FlameGraph:
    return flame(app).graph


def status(app: DashboardApp) -> str:
    return str(flame(app).query_one("#flame-status").render())


def cursor_name(app: DashboardApp) -> str:
    block = graph(app).cursor
    assert block is not None and block.node is not None
    return block.node.frame.label


def view_of(app: DashboardApp) -> ProfileView:
    view = app.dashboard.view
    assert view is not None
    return view


async def test_f_draws_the_tree_as_blocks_as_wide_as_their_share(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("f")
        levels = graph(app).levels
        view = view_of(app)
        width = graph(app).size.width
        # THEN the root spans the width, and each block is its node's share of it,
        # within the cell lost to rounding
        assert levels[0][0].width == width and levels[0][0].node.frame == ROOT_FRAME
        for line in levels[1:]:
            for block in line:
                if block.node is not None:
                    exact = block.samples * width / view.samples
                    assert exact - 1 <= block.width <= exact + 1, block
        # ... children sit inside their parents, left to right, none overlapping
        for line in levels[1:]:
            for a, b in pairwise(line):
                assert a.x + a.width <= b.x
            for block in line:
                parent = block.parent
                assert parent is not None
                assert parent.x <= block.x and block.x + block.width <= parent.x + parent.width
        # ... names are on the screen, and the cursor's frame is said in full
        text = "\n".join(screen_lines(app))
        assert "hot_alpha" in text and "hot_beta" in text
        assert "total" in status(app) and "self" in status(app)


async def test_arrows_move_enter_zooms_and_esc_zooms_out_then_closes(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("f")
        assert cursor_name(app) == "[all]"
        await pilot.press("down", "down", "down", "down")
        assert cursor_name(app) == "hot_alpha"  # the hottest callee, each time
        await pilot.press("right")
        assert cursor_name(app) == "hot_beta"
        await pilot.press("up")
        assert cursor_name(app) == "worker_main"
        await pilot.press("down", "right", "enter")
        # THEN the graph is hot_beta's: it spans the width, the cursor on it
        top = graph(app).levels[0][0]
        assert top.node is not None and top.node.frame.label == "hot_beta"
        assert top.width == graph(app).size.width and cursor_name(app) == "hot_beta"
        assert "zoomed" in screen_lines(app)[1] and "hot_beta" in screen_lines(app)[1]
        # ... Esc goes back out, the cursor on the frame zoomed into; again: back
        await pilot.press("escape")
        assert graph(app).levels[0][0].node.frame == ROOT_FRAME
        assert cursor_name(app) == "hot_beta"
        await pilot.press("escape")
        assert not isinstance(app.screen, FlameScreen)


async def test_search_marks_the_matches_and_says_their_share(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        # (opened from the functions, the highlighted one is marked: / types a new search)
        await pilot.press("f", "slash", *"hot_", "enter")
        assert graph(app).screen.search == "hot_"
        view = view_of(app)
        shares = {r.frame.label: r.total_pct for r in view.functions}
        # THEN every hot_* frame is marked, and the share is theirs together (each
        # sample once: hot_alpha's leaf_work samples are not counted twice)
        assert {f.label for f in graph(app).matching} == {"hot_alpha", "hot_beta", "hot_gamma"}
        together = sum(shares[n] for n in ("hot_alpha", "hot_beta", "hot_gamma"))
        assert f"'hot_': {together:.1f} % of samples" in status(app)
        # ... marked without colour: bold and underlined
        block = next(b for b in graph(app).levels[4] if b.node and b.node.frame.label == "hot_beta")
        assert graph(app)._matches(block)
        # Esc while typing clears it; the graph stays open
        await pilot.press("slash", "escape")
        assert graph(app).matching == frozenset() and isinstance(app.screen, FlameScreen)


async def test_from_the_functions_the_highlighted_function_is_marked(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        first = app.dashboard.table_of("functions").row_keys()[0]
        name = app.dashboard.query_one("FunctionsPane").frames[first].label
        await pilot.press("f")
        assert name in {f.label for f in graph(app).matching}


async def test_from_the_tree_the_cursor_starts_on_its_highlighted_node(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("5", "down", "down", "down", "f")
        assert cursor_name(app) == "hot_alpha"
        await pilot.press("escape", "i", "f")
        # the inverted tree's flame graph: the functions where time was spent below [all]
        assert "inverted" in screen_lines(app)[1]
        assert {b.node.frame.label for b in graph(app).levels[1] if b.node} >= {"hot_beta"}


def test_frames_narrower_than_a_cell_are_merged_not_dropped():
    from livesym.profile import Profile, StackSample
    from livesym.records import Frame

    main, hot = Frame("main", "main", "/a"), Frame("hot", "hot", "/a")
    p = Profile()
    p.add([StackSample(0, 1, "t", (hot, main), weight=1000)])
    p.add(StackSample(0, 1, "t", (Frame(f"cold{i}", None, "/a"), main)) for i in range(30))
    root = p.view().tree
    assert isinstance(root, StackNode)
    levels = layout(root, 20, 5)
    below_main = levels[2]
    # THEN hot gets its cells, and the thirty cold callees one "+30" block
    assert [b.node.frame.label for b in below_main if b.node] == ["hot"]
    merged = [b for b in below_main if b.node is None]
    assert len(merged) == 1 and merged[0].merged == 30 and merged[0].width >= 1


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_graph_is_readable_at_common_sizes_without_colour(
    spin_capture, replay_app, size, monkeypatch
):
    monkeypatch.setenv("NO_COLOR", "1")
    app = replay_app(spin_capture)
    async with app.run_test(size=size) as pilot:
        await replay_done(pilot)
        await pilot.press("f", "down", "down", "down", "down")
        lines = screen_lines(app)
        # THEN every block starts with its edge mark, the names fit, and the status says
        # the frame under the cursor in full
        graph_lines = lines[2:-2]
        assert any(line.startswith(EDGE + "hot_alpha") for line in graph_lines)
        assert all(len(line) <= size[0] for line in lines)
        assert "hot_alpha" in lines[-2] and "total" in lines[-2]


async def test_a_state_line_longer_than_the_terminal_is_cut_not_wrapped(phases_capture, replay_app):
    # (CI run 118: a capture with a stack cut short made the state line "... cut short 0%"
    # longer than 80 columns; it wrapped and pushed the title and the graph down a line.)
    app = replay_app(phases_capture)
    async with app.run_test(size=(60, 24)) as pilot:
        await replay_done(pilot)
        await pilot.press("less_than_sign", "b", "equals_sign", "f")
        await pilot.pause()
        lines = screen_lines(app)
        # THEN the state line, then the title, then the graph, each cut at the edge
        assert lines[0].startswith("REPLAY END") and lines[0].endswith("…"), lines[:3]
        assert lines[1].startswith("flame graph, top-down") and lines[1].endswith("…"), lines[:3]
        assert lines[2].startswith(EDGE + "[all]"), lines[:3]


def test_the_help_names_each_flame_graph_key_once():
    from livesym.ui.app import DashboardApp

    sections = dict(DashboardApp.help_sections())
    keys = [keys for keys, _ in sections["Flame graph"]]
    assert len(keys) == len(set(keys)), keys
    assert "Esc" in keys


def _blocks_of(app: DashboardApp, symbol: str) -> list:
    return [b for line in graph(app).levels for b in line
            if b.node is not None and b.node.frame.symbol == symbol]  # fmt: skip


def _background(app: DashboardApp, block) -> str:
    strip = graph(app).render_line(block.depth)
    x = 0
    for segment in strip:
        if x <= block.x < x + len(segment.text):
            assert segment.style is not None and segment.style.bgcolor is not None
            return segment.style.bgcolor.triplet.hex  # type: ignore[union-attr]
        x += len(segment.text)
    raise AssertionError(f"no segment at {block.x}")


async def test_with_a_baseline_pinned_the_graph_is_coloured_by_change(phases_capture, replay_app):
    """Issue 30: the differential flame graph in the dashboard. The phases program runs
    first_phase for 3 s, then second_phase for 3 s."""
    app = replay_app(phases_capture)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay_done(pilot)
        # GIVEN the last quarter (second_phase alone) pinned as the baseline, then the
        # whole session shown again (about half each)
        await pilot.press("less_than_sign", "b", "equals_sign")
        await pilot.pause()
        assert app.dashboard.baseline is not None and app.dashboard.options.between is None
        # WHEN the flame graph opens, inverted (each leaf under the root)
        await pilot.press("f", "i")
        await pilot.pause()
        (first,), (second,) = _blocks_of(app, "first_phase"), _blocks_of(app, "second_phase")
        diff = graph(app).diff
        assert diff is not None
        grew, shrank = diff.of(first), diff.of(second)
        # THEN first_phase grew from nothing to about half, second_phase shrank from all
        # of it to about half: both larger than noise, marked and coloured so
        assert grew is not None and grew.significant and 40 <= grew.delta_pp <= 60, grew
        assert shrank is not None and shrank.significant and -60 <= shrank.delta_pp <= -40
        red, blue = _background(app, first), _background(app, second)
        assert int(red[1:3], 16) > int(red[5:7], 16) + 0x40, red
        assert int(blue[5:7], 16) > int(blue[1:3], 16) + 0x40, blue
        text = "\n".join(screen_lines(app))
        assert f"{EDGE}▲first_phase" in text and f"{EDGE}▼second_phase" in text, text
        # ... the root, the same on both sides, is neither
        root = graph(app).levels[0][0]
        same = diff.of(root)
        assert same is not None and not same.significant
        assert _background(app, root) == SAME_COLOUR.lstrip("#").join(("#", ""))
        # ... the title says against what, and the status line the cursor's change
        assert "vs baseline" in screen_lines(app)[1]
        await pilot.press("down")
        assert cursor_name(app) in ("first_phase", "second_phase")
        assert " pp (own " in status(app), status(app)
        # AND without a baseline the graph is coloured by module again
        await pilot.press("escape", "b", "f")
        await pilot.pause()
        assert graph(app).diff is None
        assert "▲" not in "\n".join(screen_lines(app))
