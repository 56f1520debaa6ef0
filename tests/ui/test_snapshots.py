"""A few pinned screens as plain text: an --instant replay of a capture kept in the repo.

The replay's clock stops at the capture's end, so every number on these screens is
fixed. Textual upgrades change how screens draw: review the difference, then
regenerate with ``LIVESYM_UPDATE_SNAPSHOTS=1 pytest tests/ui/test_snapshots.py``.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from tests.ui.screen import replay_done, screen_text

HERE = Path(__file__).parent
CAPTURE = HERE / "data" / "spin.json"  # 2 s of spin, paths rewritten to /opt/livesym
SNAPSHOTS = HERE / "snapshots"
UPDATE = bool(os.environ.get("LIVESYM_UPDATE_SNAPSHOTS"))

CASES = {
    "functions-80x24": ((80, 24), ()),
    "threads-80x24": ((80, 24), ("2",)),
    "mappings-120x30": ((120, 30), ("4",)),
    "details-100x40": ((100, 40), ("enter",)),
    "help-80x30": ((80, 30), ("question_mark",)),
    "filtered-sorted-100x24": ((100, 24), ("slash", "h", "o", "t", "enter", "s")),
    "tree-80x24": ((80, 24), ("5",)),
    "tree-inverted-120x40": ((120, 40), ("5", "i")),
    "flame-80x24": ((80, 24), ("f",)),
    "flame-zoomed-120x40": ((120, 40), ("5", "down", "down", "f", "enter")),
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_screen_matches_its_golden(name, replay_app):
    size, keys = CASES[name]
    app = replay_app(CAPTURE)
    async with app.run_test(size=size) as pilot:
        await replay_done(pilot)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        text = screen_text(app)
    golden = SNAPSHOTS / f"{name}.txt"
    if UPDATE:
        golden.write_text(text)
    expected = golden.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            "golden", "now"))  # fmt: skip
        pytest.fail(f"{name} differs from {golden} (see the module docstring):\n{diff}")
