"""A key's screen is drawn whole in the first frame it causes.

Each frame Textual writes is caught as it is displayed, and the screen it leaves
(characters and styles) is kept. The first frame after a key must already be
the screen the key leads to: the new pane with its rows and its focused row,
a pushed screen with its footer. Before, Tabs moved their underline, focus
arrived and Footer recomposed in later frames, each 15-30 ms after the last.
"""

from __future__ import annotations

from typing import Any

import pytest

from livesym.ui.app import DashboardApp
from tests.ui.screen import replay_done, screen_text

SIZE = (100, 30)
# (keys pressed first, the key whose frames are checked), from the functions pane.
CASES = {
    "Tab: threads": ((), "tab"),
    "4: mappings": ((), "4"),
    "Shift+Tab: back to a pane seen before": (("tab", "tab"), "shift+tab"),
    "Enter on a thread": (("2",), "enter"),
    "Enter on a function: details": ((), "enter"),
    "Esc: back from details": (("enter",), "escape"),
    "?: help": ((), "question_mark"),
    "s: sort": ((), "s"),
}


def frames_of(app: DashboardApp) -> list[str]:
    """Collects the screen (with styles) after each frame the app displays."""
    frames: list[str] = []
    display = app._display

    def keep(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        if renderable is not None:
            frames.append(screen_text(app, styles=True))

    app._display = keep  # type: ignore[method-assign]
    return frames


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_first_frame_after_a_key_is_the_screen_it_leads_to(
    spin_capture, replay_app, case
):
    before, key = CASES[case]
    app = replay_app(spin_capture)
    async with app.run_test(size=SIZE) as pilot:
        await replay_done(pilot)
        for k in before:
            await pilot.press(k)
        await pilot.pause(0.3)
        frames = frames_of(app)
        shown = screen_text(app, styles=True)
        await pilot.press(key)
        await pilot.pause(0.3)  # a finished replay does not refresh on its own
        changed = [f for f in frames if f != shown]
        assert changed, f"{case}: the key changed nothing on the screen"
        assert frames[0] == frames[-1], f"{case}: {len(frames)} frames, the first is not the last"
