"""The processes pane and the process filter, on a capture of a shell and its two busy
children (spin and crunch, each with functions of its own)."""

from __future__ import annotations

from livesym.ui.app import DashboardApp
from livesym.ui.table import SyncTable
from tests.ui.screen import replay_done, rows, screen_lines

SIZE = (100, 30)


def functions(app: DashboardApp) -> list[str]:
    return [cells[0] for cells in rows(app.dashboard.table_of("functions"), "function")]


def status(app: DashboardApp) -> str:
    return str(app.dashboard.query_one("#functions-status").render())


def pid_of(table: SyncTable, name: str) -> int:
    return next(int(key) for key in table.row_keys() if table.cell(key, "name").plain == name)


async def test_enter_on_a_process_shows_only_its_samples_in_every_pane(family_capture, replay_app):
    app = replay_app(family_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        held = app.dashboard.held
        assert held is not None and len(held.processes) >= 3
        assert f"+{len(held.processes) - 1} processes" in screen_lines(app)[0]
        await pilot.press("6")
        table = app.dashboard.table_of("processes")
        assert table.has_focus
        # Every process of the session is a row: the shell that only waited too
        listed = {int(key) for key in table.row_keys()}
        assert listed == set(held.processes)
        samples = {int(k): int(table.cell(k, "samples").plain) for k in table.row_keys()}
        assert sum(samples.values()) == held.view.samples
        crunch, spin = pid_of(table, "crunch"), pid_of(table, "spin")
        assert samples[crunch] > 0 and samples[spin] > 0
        table.select_key(str(crunch))
        await pilot.press("enter")
        assert app.dashboard.pane == "functions"
        assert f"process {crunch} crunch" in status(app)
        shown = functions(app)
        assert "crunch_work" in shown and "hot_alpha" not in shown
        view = app.dashboard.view
        assert view is not None and view.samples == samples[crunch]
        # The mappings pane follows: crunch's own mappings, not spin's
        await pilot.press("4")
        paths = {m.record.path for m in app.dashboard.maps or ()}
        assert any(p.endswith("/crunch") for p in paths)
        assert not any(p.endswith("/spin") for p in paths)
        # The tree too: its root holds crunch's samples only
        await pilot.press("5")
        filtered = app.dashboard.view
        root = filtered.tree if filtered is not None else None
        assert root is not None and root.total_samples == samples[crunch]
        # Another process, then none
        await pilot.press("6")
        table.select_key(str(spin))
        await pilot.press("enter")
        shown = functions(app)
        assert "hot_alpha" in shown and "crunch_work" not in shown
        await pilot.press("x")
        assert "process" not in status(app)
        shown = functions(app)
        assert "hot_alpha" in shown and "crunch_work" in shown
