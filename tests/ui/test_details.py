"""The details screen on a recorded spin capture: hot addresses, the conversion chain
(numbers as the capture's explanation record has them), callers and callees."""

from __future__ import annotations

import re
import subprocess
import sys

from livesym.capture.reader import read_capture
from livesym.ui.details import DetailsScreen
from livesym.ui.table import SyncTable
from tests.ui.screen import key_of, replay_done, rows, screen_text

SIZE = (120, 50)


async def open_details(pilot, name: str) -> DetailsScreen:
    app = pilot.app
    table = app.dashboard.table_of("functions")
    key = key_of(table, "function", name)
    assert table.select_key(key)
    await pilot.press("enter")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, DetailsScreen) and screen.frame.symbol == name
    return screen


async def test_enter_shows_the_hottest_addresses_and_the_chain_of_the_highlighted_one(
    spin_capture, replay_app
):
    capture = read_capture(spin_capture)
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        screen = await open_details(pilot, "hot_alpha")
        hot = screen.query_one("#details-hot", SyncTable)
        cells = rows(hot, "where", "vaddr", "symbol", "samples", "pct")
        assert cells, "no hot addresses"
        counts = [int(c[3]) for c in cells]
        assert counts == sorted(counts, reverse=True)
        assert all(c[2].startswith("hot_alpha+0x") for c in cells)
        assert abs(sum(float(c[4]) for c in cells) - 100.0) < 0.5 * len(cells)

        # The chain of the highlighted (hottest) address, from its record in the capture.
        record = next(f for f in capture.frames if f"{f.vma:#x}" == cells[0][0])
        obj = capture.objects[record.object]
        text = screen_text(app)
        flat = " ".join(text.split())  # long formulas wrap inside their column
        for step in record.steps:
            assert " ".join(step.split()) in flat, step
        seg = next(s for s in obj.segments if s["index"] == record.segment)
        pt_load = f"PT_LOAD[{record.segment}] p_offset={seg['p_offset']} p_vaddr={seg['p_vaddr']}"
        assert pt_load in flat
        assert f"build-id {obj.build_id}" in flat
        assert f"hot_alpha+{record.symbol_offset:#x}" in flat
        assert f"at ELF vaddr {record.symbol_vaddr:#x}" in flat
        # The recording's last write looked the source line up in spin's DWARF.
        assert record.source_file is not None and record.source_file.endswith("spin.c")
        assert f"source {record.source_file}:{record.line}" in flat

        # Moving to another address shows that one's chain.
        if len(cells) > 1:
            await pilot.press("down")
            second = next(f for f in capture.frames if f"{f.vma:#x}" == cells[1][0])
            flat = " ".join(screen_text(app).split())
            assert f"elf_vaddr = vma - base = {second.vma:#x}" in flat

        callers = dict(rows(screen.query_one("#details-callers", SyncTable), "function", "samples"))
        callees = dict(rows(screen.query_one("#details-callees", SyncTable), "function", "samples"))
        assert "worker_main" in callers
        assert "leaf_work" in callees


async def test_enter_on_a_callee_opens_it_and_escape_comes_back(spin_capture, replay_app):
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        first = await open_details(pilot, "hot_alpha")
        callees = first.query_one("#details-callees", SyncTable)
        callees.focus()
        key = key_of(callees, "function", "leaf_work")
        callees.select_key(key)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailsScreen) and app.screen.frame.symbol == "leaf_work"
        await pilot.press("escape")
        assert app.screen is first
        await pilot.press("escape")
        assert app.screen is app.dashboard


async def test_details_count_the_samples_the_functions_pane_selects(spin_capture, replay_app):
    """Under a thread filter the hot addresses are that thread's, and they say which
    samples ran there and which were calls being made."""
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        alpha = await open_details(pilot, "hot_alpha")
        roles = {c[0] for c in rows(alpha.query_one("#details-hot", SyncTable), "as")}
        assert roles == {"run", "call"}  # hot_alpha runs, and calls leaf_work
        await pilot.press("escape")
        # A function more than one thread ran (worker_main, start_thread...).
        session = app.session
        full = session.snapshot().view

        def threads_of(name: str) -> list[int]:
            return [
                t.tid
                for t in full.threads
                if any(
                    r.frame.symbol == name for r in session.snapshot(thread=t.tid).view.functions
                )
            ]

        name = next(
            r.frame.symbol
            for r in full.functions
            if r.frame.symbol and len(threads_of(r.frame.symbol)) > 1
        )
        tid = threads_of(name)[0]
        await pilot.press("2")
        assert app.dashboard.table_of("threads").select_key(str(tid))
        await pilot.press("enter")
        await pilot.pause()
        view = app.dashboard.view
        assert view is not None and app.dashboard.options.thread == tid
        row = next(r for r in view.functions if r.frame.symbol == name)
        screen = await open_details(pilot, name)
        counts = [int(c[0]) for c in rows(screen.query_one("#details-hot", SyncTable), "samples")]
        assert 0 < sum(counts) <= row.total_samples
        assert counts == [h.samples for h in session.hot_addresses(row.frame, 20, thread=tid)]
        assert counts != [h.samples for h in session.hot_addresses(row.frame, 20)]


async def test_at_80x24_tab_brings_the_callers_into_view_and_the_state_stays_in_sight(
    spin_capture, replay_app
):
    app = replay_app(spin_capture)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay_done(pilot)
        functions = app.dashboard.table_of("functions")
        functions.select_key(key_of(functions, "function", "hot_beta"))
        await pilot.press("enter")
        assert isinstance(app.screen, DetailsScreen)
        assert screen_text(app).splitlines()[0].startswith("REPLAY END")
        callers = app.screen.query_one("#details-callers", SyncTable)
        box = app.screen.query_one("#details")
        assert not box.region.contains_region(callers.region)  # below the fold at first
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is callers
        assert box.region.contains_region(callers.region)  # scrolled into view
        assert "worker_main" in screen_text(app)  # hot_beta's caller
        await pilot.press("question_mark")
        await pilot.pause()
        sections = dict(app.screen.sections)  # what the help screen lists, by section
        details = dict(sections["Details"])
        assert "callers -> callees" in details["Tab"] and "Esc" in details
        assert {"Details", "A mapping", "Help"} <= set(sections)


async def test_an_unnamed_function_s_hot_addresses_name_it_as_its_title_does(
    xz, replay_app, tmp_path
):
    # GIVEN a recording of xz -9: its time in liblzma's functions that no symbol names
    capture = tmp_path / "xz.json"
    done = subprocess.run(
        [sys.executable, "-m", "livesym", "record", str(xz.pid), "--duration", "2",
         "--no-kernel", "-o", str(capture)], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    app = replay_app(capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        # WHEN the details of the hottest one open
        table = app.dashboard.table_of("functions")
        label = next(
            name for (name,) in rows(table, "function") if re.fullmatch(r"liblzma\S* @ 0x\w+", name)
        )
        assert table.select_key(key_of(table, "function", label))
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailsScreen)
        # THEN every hot address says the same function, with its offset in it
        cells = rows(screen.query_one("#details-hot", SyncTable), "symbol")
        assert cells and all(c[0].startswith(f"{label}+0x") for c in cells), (label, cells[:3])
