"""The mappings pane marks new (+), removed (-) and disputed (!) mappings, and Enter shows
one in full. The maps come from the stored spin capture, edited the way a target's maps
change: a library mapped late, one unmapped, a base check that disagreed."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from livesym.ui.mappings import MappingScreen
from tests.support.capture_json import capture_json
from tests.ui.screen import replay_done, rows, screen_text

CAPTURE = Path(__file__).parent / "data" / "spin.json"
PROBLEM = "base 0x1000 disagrees with 0x0 from the r--p mapping of the same object"
LATE_LIB = "/opt/livesym/liblate.so"


@pytest.fixture
def churned_capture(tmp_path: Path) -> Path:
    doc = capture_json(CAPTURE)
    first = doc["maps"][0]
    text = next(e for e in first["entries"] if e[2] == "r-xp" and e[6].endswith("/spin"))
    text[8]["problems"] = [PROBLEM]
    later = copy.deepcopy(first)
    later["generation"] = first["generation"] + 1
    later["time"] = doc["samples"][-1][0]  # at the end: still new when the replay ends
    later["entries"] = [e for e in later["entries"] if e[6] != "[heap]"]
    later["entries"].append(
        ["7f0000000000", "7f0000001000", "r-xp", "0", "fe:00", 4242, LATE_LIB, False, {}]
    )
    doc["maps"].append(later)
    out = tmp_path / "churned.json"
    out.write_text(json.dumps(doc))
    return out


async def test_new_removed_and_disputed_mappings_are_marked(churned_capture, replay_app):
    app = replay_app(churned_capture)
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_done(pilot)
        await pilot.press("4")
        table = app.dashboard.table_of("mappings")
        marks = {obj: (mark, perms) for mark, obj, perms in rows(table, "mark", "object", "perms")
                 if obj in ("liblate.so", "[heap]") or perms == "r-xp"}  # fmt: skip
        assert marks["liblate.so"][0] == "+ "
        assert marks["[heap]"][0] == "- "
        flagged = [r for r in rows(table, "mark", "object", "perms") if r[0].endswith("!")]
        assert flagged == [(" !", "spin", "r-xp")]
        # Removed mappings are listed after the live ones.
        objects = [cells[0] for cells in rows(table, "object")]
        assert objects[-1] == "[heap]"


async def test_enter_on_a_mapping_shows_every_field_and_its_problems(churned_capture, replay_app):
    app = replay_app(churned_capture)
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_done(pilot)
        await pilot.press("4")
        table = app.dashboard.table_of("mappings")
        key = next(k for k in table.row_keys() if table.cell(k, "mark").plain.endswith("!"))
        table.select_key(key)
        await pilot.press("enter")
        assert isinstance(app.screen, MappingScreen)
        text = " ".join(screen_text(app).split())
        assert PROBLEM in text
        assert "formula base = start - (pgoff - p_offset + p_vaddr) = " in text
        assert "build-id 3c4785d16fa258b8373e953684b0be9125ae1681" in text
        await pilot.press("escape")
        assert app.screen is app.dashboard
