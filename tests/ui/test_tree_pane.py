"""The Tree pane on a replayed spin capture: the hottest path open at first, → ← and
Enter, the inverted tree, the thread filter, and the counts of the profile's tree."""

from __future__ import annotations

from livesym.ui.app import DashboardApp
from livesym.ui.calltree import SEP, TreePane
from livesym.ui.functions import frame_key
from livesym.ui.table import SyncTable
from tests.support.spin import HOT
from tests.ui.screen import replay_done, rows, screen_text

SIZE = (110, 30)


def tree(app: DashboardApp) -> SyncTable:
    return app.dashboard.table_of("tree")


def names(app: DashboardApp) -> list[str]:
    return [cells[0].strip(" ▸▾") for cells in rows(tree(app), "function")]


def pane(app: DashboardApp) -> TreePane:
    return app.dashboard.query_one(TreePane)


async def test_5_shows_the_tree_with_its_hottest_path_open(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("5")
        assert app.dashboard.pane == "tree" and app.focused is tree(app)
        view = app.dashboard.view
        assert view is not None and view.tree is not None
        # THEN the first level is the tree's, hottest first, with the view's counts
        first = [k for k in tree(app).row_keys() if SEP not in k]
        assert len(first) == len(view.tree.children)
        scale = 100.0 / view.samples
        shown = [float(tree(app).cell(k, "total").plain) for k in first]
        assert shown == [round(c.total_samples * scale, 1) for c in view.tree.children]
        # ... and the hottest path is open as long as it holds half of its parent's
        # samples: from the thread's root down to a spin hot function
        node, key, keys = view.tree, "", tree(app).row_keys()
        while node.children and (node is view.tree or 2 * node.children[0].total_samples
                                  >= node.total_samples):  # fmt: skip
            node = node.children[0]
            key = frame_key(node.frame) if not key else key + SEP + frame_key(node.frame)
            assert key in keys, node.frame.label
            if node.has_children:
                assert tree(app).cell(key, "function").plain.lstrip().startswith("▾")
        assert any(h in names(app) for h in HOT)  # (open, or the rows under the last open)
        assert "top-down" in screen_text(app)


async def test_arrows_and_enter_open_and_close_and_the_cursor_stays(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("5")
        table = tree(app)
        top = table.row_keys()[0]
        count = len(table.row_keys())
        # ← on an open node closes it (and everything under it)
        await pilot.press("left")
        assert len(table.row_keys()) < count and table.selected_key == top
        # → opens it again, one level
        await pilot.press("right")
        opened = table.row_keys()
        assert opened[0] == top and all(k.startswith(top) for k in opened[1:2])
        # → on an open node steps into its first child; ← on a closed child to its parent
        await pilot.press("right")
        child = table.selected_key
        assert child is not None and child.startswith(top + SEP)
        await pilot.press("left")
        if child in pane(app).opened:
            await pilot.press("left")
        assert table.selected_key in (top, child)
        # Enter toggles; a refresh keeps the same row under the cursor
        table.select_key(child)
        await pilot.press("enter")
        before = table.row_keys()
        app.tick()
        await pilot.pause()
        assert table.row_keys() == before and table.selected_key == child


async def test_i_inverts_the_tree_to_the_functions_where_time_was_spent(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("5", "i")
        view = app.dashboard.view
        assert view is not None
        first = [k for k in tree(app).row_keys() if SEP not in k]
        leaves = [r for r in view.functions if r.self_samples]
        # THEN its first level is every function with self time, most first
        assert len(first) == len(leaves)
        shown = [float(tree(app).cell(k, "self").plain) for k in first]
        assert shown == sorted(shown, reverse=True)
        assert "inverted" in screen_text(app)
        await pilot.press("i")
        assert "top-down" in screen_text(app)


async def test_a_thread_chosen_in_the_threads_pane_filters_the_tree(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("2")
        threads = app.dashboard.table_of("threads")
        beta = next(k for k, (name,) in zip(threads.row_keys(), rows(threads, "name"),
                                            strict=True) if name == "beta")  # fmt: skip
        threads.select_key(beta)
        await pilot.press("enter", "5")
        # THEN the tree holds beta's samples only: its hot function, not the others
        assert "hot_beta" in names(app)
        assert not {"hot_alpha", "hot_gamma"} & set(names(app))
        assert "thread" in screen_text(app)


async def test_t_in_a_function_s_details_shows_every_path_through_it(spin_capture, replay_app):
    from livesym.ui.sandwich import SandwichScreen

    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        functions = app.dashboard.table_of("functions")
        pane = app.dashboard.query_one("FunctionsPane")
        key = next(k for k in functions.row_keys() if pane.frames[k].label == "hot_alpha")
        functions.select_key(key)
        await pilot.press("enter", "t")
        assert isinstance(app.screen, SandwichScreen)
        view = app.dashboard.view
        assert view is not None
        callers = app.screen.query_one("#sandwich-callers-table", SyncTable)
        callees = app.screen.query_one("#sandwich-callees-table", SyncTable)
        # THEN its callers climb to the thread's root, and its callee is leaf_work
        caller_names = [c[0].strip(" ▸▾") for c in rows(callers, "function")]
        assert caller_names[:3] == ["worker_main", "start_thread", "clone3"]
        callee_rows = {c[0].strip(" ▸▾"): float(c[1]) for c in rows(callees, "function", "total")}
        leaf = next(r for r in view.functions if r.frame.label == "leaf_work")
        assert callee_rows["leaf_work"] == round(leaf.total_pct, 1)
        # ... the title has the table's counts, and Tab goes from one tree to the other
        row = view.functions.row_of(pane.frames[key])
        assert f"on {row.total_samples} samples' stacks" in screen_text(app)
        assert app.focused is callers
        await pilot.press("tab")
        assert app.focused is callees
        await pilot.press("escape")
        assert not isinstance(app.screen, SandwichScreen)


async def test_the_functions_text_filter_marks_its_rows_in_the_tree(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        await pilot.press("slash", *"beta", "enter", "5")
        table = tree(app)
        marked = {
            table.cell(k, "function").plain.strip(" ▸▾")
            for k in table.row_keys()
            if "underline" in str(table.cell(k, "function").style)
        }
        assert marked == {"hot_beta"}
        assert "'beta' marked" in screen_text(app)
