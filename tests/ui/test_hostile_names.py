"""Names and paths are data: markup in them is shown as typed, long ones are cut, never
spilled. The names come in the way hostile names do: inside a capture file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from livesym.ui.details import DetailsScreen
from tests.support.capture_json import capture_json
from tests.ui.screen import key_of, replay_done, screen_lines, screen_text

BOLD = "[bold]x[/]"
RED = "[red"
TEMPLATE = (
    "std::__detail::_Executor<"
    + ", ".join(f"ns{i}::Allocator<std::pair<const Key{i}, Value{i}>>" for i in range(12))
    + ">::_M_dfs(_Match_mode, long)"
)
COMMAND = "[blink]evil[/blink] --x=[red"


@pytest.fixture
def hostile_capture(spin_capture: Path, tmp_path: Path) -> Path:
    doc = capture_json(spin_capture)
    renames = {"hot_beta": BOLD, "hot_gamma": RED, "leaf_work": TEMPLATE}
    for frame in doc["frames"]:
        if frame["symbol"] in renames:
            frame["symbol"] = frame["demangled"] = renames[frame["symbol"]]
    doc["target"]["cmdline"] = COMMAND.split(" ")
    out = tmp_path / "hostile.json"
    out.write_text(json.dumps(doc))
    return out


def test_the_template_name_is_long():
    assert len(TEMPLATE) >= 600


async def test_markup_in_names_is_shown_literally_and_long_names_are_cut(
    hostile_capture, replay_app
):
    app = replay_app(hostile_capture)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        lines = screen_lines(app)
        text = "\n".join(lines)
        assert BOLD in text and RED in text
        assert COMMAND in lines[0]
        assert len(lines) == 30 and all(len(line) <= 100 for line in lines)
        template_row = next(line for line in lines if "std::__detail::_Executor<" in line)
        assert "…" in template_row and template_row.rstrip().endswith("spin")

        table = app.dashboard.table_of("functions")
        key = key_of(table, "function", BOLD)
        table.select_key(key)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailsScreen)
        details = screen_text(app)
        # Under the session's state line, the function's name, as data
        state, title = details.splitlines()[:2]
        assert state.startswith("REPLAY END") and title.startswith(BOLD)
        assert f"symbol      {BOLD}+0x" in details


async def test_a_long_name_wraps_inside_the_chain_without_overlapping(hostile_capture, replay_app):
    app = replay_app(hostile_capture)
    async with app.run_test(size=(100, 60)) as pilot:
        await replay_done(pilot)
        table = app.dashboard.table_of("functions")
        key = key_of(table, "function", TEMPLATE)
        table.select_key(key)
        await pilot.press("enter")
        await pilot.pause()
        lines = screen_lines(app)
        assert all(len(line) <= 100 for line in lines)
        flat = "".join(line.strip() for line in lines)
        assert TEMPLATE.replace(" ", "") in flat.replace(" ", "")  # every character is there


async def test_the_tree_the_flame_graph_and_the_paths_show_names_as_data(
    hostile_capture, replay_app
):
    app = replay_app(hostile_capture)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        for keys in (("5",), ("5", "i"), ("f",), ("f", "down", "down", "down", "down", "right")):
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            lines = screen_lines(app)
            text = "\n".join(lines)
            # THEN markup is shown as typed, long names cut, nothing past the width
            assert BOLD in text or RED in text or "std::__detail::_Executor<" in text, keys
            assert len(lines) == 30 and all(len(line) <= 100 for line in lines), keys
            await pilot.press("escape") if keys[0] == "f" else await pilot.press("1")
        # ... and every path through the template function, its name cut in the title
        table = app.dashboard.table_of("functions")
        table.select_key(key_of(table, "function", TEMPLATE))
        await pilot.press("enter", "t")
        lines = screen_lines(app)
        assert lines[1].startswith("every path through std::__detail::_Executor<")
        assert all(len(line) <= 100 for line in lines)


EVIL_SYMBOL = "evil\x1b]0;owned\x07\nname"
EVIL_COMMAND = ["spin\nforged", "\x1b[31mred\u202e"]


async def test_control_characters_in_names_are_shown_escaped_never_sent(
    spin_capture: Path, tmp_path: Path, replay_app
):
    """An escape sequence (a terminal title set, a colour) and a line break in a symbol
    and in the command line: shown as their escapes, in the header, the table, the
    details and the flame graph; none reaches the terminal, no line is forged."""
    doc = capture_json(spin_capture)
    for frame in doc["frames"]:
        if frame["symbol"] == "hot_beta":
            frame["symbol"] = frame["demangled"] = EVIL_SYMBOL
    doc["target"]["cmdline"] = EVIL_COMMAND
    capture = tmp_path / "controls.json"
    capture.write_text(json.dumps(doc))
    shown = "evil\\x1b]0;owned\\x07\\nname"
    app = replay_app(capture)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        lines = screen_lines(app)
        assert "spin\\nforged \\x1b[31mred\\u202e" in lines[0]
        assert any(shown in line for line in lines)
        table = app.dashboard.table_of("functions")
        table.select_key(key_of(table, "function", shown))
        for keys in ((), ("enter",), ("escape", "f")):
            await pilot.press(*keys)
            await pilot.pause()
            lines = screen_lines(app)
            text = "\n".join(lines)
            assert not any(c in text for c in "\x1b\x07\u202e"), keys
            assert len(lines) == 30 and all(len(line) <= 100 for line in lines), keys
        assert any("evil\\x1b" in line for line in lines)  # the flame graph's block
