"""Reading what the dashboard shows, and waiting for it.

``screen_text`` renders the current screen to plain text the way Textual's own
``App.export_screenshot`` renders it to SVG (the compositor's full update),
so tests and golden files can compare characters rather than SVG markup.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from livesym.ui.app import DashboardApp
from livesym.ui.table import SyncTable


def screen_text(app: App[object], *, styles: bool = False) -> str:
    """The screen as text; with ``styles``, with the escape codes of its colours too."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor" if styles else None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    # The same render export_screenshot uses (textual/app.py), without the SVG.
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    console.print(update)
    return console.export_text(styles=styles)


def screen_lines(app: App[object]) -> list[str]:
    return screen_text(app).rstrip("\n").split("\n")


async def until(
    pilot: Pilot[object], condition: Callable[[], bool], timeout: float = 10.0, what: str = ""
) -> None:
    """Let the app run until ``condition()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.05)
    await pilot.pause()


async def replay_done(pilot: Pilot[object]) -> None:
    """Wait until the replayed capture has been fed and the tables show it."""
    app = pilot.app
    assert isinstance(app, DashboardApp)
    await until(pilot, lambda: app.end is not None, what="the replay to end")
    app.tick()
    await pilot.pause()


def rows(table: SyncTable, *columns: str) -> list[tuple[str, ...]]:
    """The table's cells as plain text, in display order."""
    out = []
    for key in table.row_keys():
        out.append(tuple(table.cell(key, c).plain for c in columns))
    return out


async def settle(pilot: Pilot[object], seconds: float = 0.0) -> None:
    await pilot.pause(seconds) if seconds else await pilot.pause()
    await asyncio.sleep(0)


def key_of(table: SyncTable, column: str, value: str) -> str:
    """The key of the first row whose ``column`` shows ``value``."""
    return next(k for k in table.row_keys() if table.cell(k, column).plain == value)


def said_under_marks(row: str, words: str) -> bool:
    """Whether the timeline's ``row`` ends with ``words`` where no mark is drawn over
    them (a mark is a fact, drawn over the words where they meet: a maps generation
    read as a process exits lands on the length's last cell)."""
    from livesym.ui.timeline import MARK_CHARS

    tail = row.rstrip()[-len(words) :]
    marks = set(MARK_CHARS.values())
    return len(tail) == len(words) and all(
        c == w or c in marks for c, w in zip(tail, words, strict=True)
    )
