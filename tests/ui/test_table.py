"""SyncTable on its own, in a real Textual app: what it draws, what it redraws, keys, mouse."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from textual import events
from textual.app import App, ComposeResult
from textual.message import Message

from livesym.ui.format import number, plain
from livesym.ui.table import Column, Row, SyncTable
from tests.ui.screen import screen_lines

COLUMNS = (
    Column("n", "N", 5, right=True),
    Column("name", "NAME", 8, flex=True),
    Column("extra", "EXTRA", 10, drop_below=40),
)


def row(key: str, n: int, name: str | None = None) -> Row:
    return Row(key, {"n": number(str(n)), "name": plain(name or key), "extra": plain("x" + key)})


def rows(count: int) -> list[Row]:
    return [row(f"item{i}", i) for i in range(count)]


class TableApp(App[None]):
    def __init__(self, first: Sequence[Row]) -> None:
        super().__init__()
        self.first = list(first)
        self.messages: list[Message] = []

    def compose(self) -> ComposeResult:
        yield SyncTable(COLUMNS, id="t")

    def on_mount(self) -> None:
        self.table.sync(self.first)
        self.table.focus()

    @property
    def table(self) -> SyncTable:
        return self.query_one(SyncTable)

    def on_sync_table_row_selected(self, event: SyncTable.RowSelected) -> None:
        self.messages.append(event)

    def on_sync_table_header_selected(self, event: SyncTable.HeaderSelected) -> None:
        self.messages.append(event)

    def on_sync_table_row_highlighted(self, event: SyncTable.RowHighlighted) -> None:
        self.messages.append(event)


def cursor_style(app: TableApp, y: int) -> list[object]:
    """The styles of the screen line ``y`` (the cursor row has its own)."""
    strip = app.screen._compositor.render_strips()[y]
    return [segment.style for segment in strip if segment.text.strip()]


async def test_rows_are_drawn_in_order_with_the_header_above():
    app = TableApp(rows(3))
    async with app.run_test(size=(50, 8)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        assert lines[0].split() == ["N", "NAME", "EXTRA"]
        assert [line.split()[:2] for line in lines[1:4]] == [
            ["0", "item0"], ["1", "item1"], ["2", "item2"]
        ]  # fmt: skip
        # Numbers to the right of their column, names to the left.
        assert lines[1].index("0") == 5 and lines[1].index("item0") == 8


async def test_a_sync_redraws_only_the_rows_that_changed():
    app = TableApp(rows(5))
    async with app.run_test(size=(50, 10)) as pilot:
        await pilot.pause()
        drawn = app.table.rendered
        assert drawn == 5
        changed = rows(5)
        changed[3] = row("item3", 333)
        app.table.sync(changed)
        await pilot.pause()
        assert app.table.rendered == drawn + 1
        assert screen_lines(app)[4].split()[0] == "333"
        app.table.sync(changed)  # the same rows: nothing to draw
        await pilot.pause()
        assert app.table.rendered == drawn + 1


async def test_a_changed_row_repaints_only_its_changed_cells():
    # GIVEN a table of 5 rows on the screen
    from textual.geometry import Region

    app = TableApp(rows(5))
    async with app.run_test(size=(50, 10)) as pilot:
        await pilot.pause()
        asked: list[tuple[Region, ...]] = []
        original = app.table.refresh
        app.table.refresh = lambda *r, **k: asked.append(r) or original(*r, **k)  # type: ignore[method-assign]
        # WHEN one row's count goes from 3 to 4, and a new row comes at the end
        changed = [*rows(5), row("item5", 5)]
        changed[3] = row("item3", 4)
        app.table.sync(changed)
        await pilot.pause()
        # THEN its one changed cell is repainted (line 4: the header, then rows 0-3), and
        # the new row's line whole; no full repaint, and the screen shows both
        regions = [r for call in asked for r in call]
        assert () not in asked, asked
        assert Region(5, 4, 1, 1) in regions, regions
        assert all(r.height == 1 for r in regions) and {r.y for r in regions} == {4, 6}, regions
        lines = screen_lines(app)
        assert lines[4].split()[:2] == ["4", "item3"] and lines[6].split()[:2] == ["5", "item5"]


async def test_the_highlighted_item_keeps_the_cursor_when_rows_move():
    app = TableApp(rows(5))
    async with app.run_test(size=(50, 10)) as pilot:
        app.table.select_key("item2")
        await pilot.pause()
        app.table.sync(list(reversed(rows(5))))
        await pilot.pause()
        assert app.table.selected_key == "item2"
        assert app.table.cursor_row == 2 and app.table.row_keys()[2] == "item2"
        app.table.sync([row(f"new{i}", i) for i in range(3)] + rows(5))
        await pilot.pause()
        assert app.table.selected_key == "item2"
        assert app.table.cursor_row == 3 + 2  # the reversed order is gone: item2 is 5th


async def test_the_cursor_is_clamped_when_its_item_and_rows_go():
    app = TableApp(rows(10))
    async with app.run_test(size=(50, 14)) as pilot:
        await pilot.press("end")
        assert app.table.selected_key == "item9"
        app.table.sync(rows(4))
        await pilot.pause()
        assert app.table.cursor_row == 3 and app.table.selected_key == "item3"
        lines = screen_lines(app)
        assert lines[4].split()[:2] == ["3", "item3"]
        assert lines[5].strip() == "", "a row that is gone is still drawn"


async def test_keys_move_the_cursor_and_scroll_only_to_keep_it_in_view():
    app = TableApp(rows(50))
    async with app.run_test(size=(50, 11)) as pilot:  # header + 10 rows
        await pilot.pause()
        await pilot.press("down", "down")
        assert app.table.cursor_row == 2 and app.table.scroll_y == 0
        await pilot.press("pagedown")
        assert app.table.cursor_row == 12
        assert app.table.scroll_y <= 12 < app.table.scroll_y + 10
        await pilot.press("end")
        assert app.table.cursor_row == 49 and app.table.scroll_y == 40
        assert screen_lines(app)[10].split()[:2] == ["49", "item49"]
        await pilot.press("pageup", "up")
        assert app.table.cursor_row == 38 and app.table.scroll_y == 38
        await pilot.press("home")
        assert app.table.cursor_row == 0 and app.table.scroll_y == 0
        assert screen_lines(app)[1].split()[:2] == ["0", "item0"]


async def test_a_sync_does_not_scroll_while_the_item_stays_in_view():
    app = TableApp(rows(50))
    async with app.run_test(size=(50, 11)) as pilot:
        await pilot.press("end", "up")
        top = app.table.scroll_y
        app.table.sync(rows(50))
        await pilot.pause()
        assert app.table.scroll_y == top and app.table.selected_key == "item48"
        # The item moves far up: the view follows it.
        app.table.sync([rows(50)[48], *rows(48), rows(50)[49]])
        await pilot.pause()
        assert app.table.cursor_row == 0 and app.table.scroll_y == 0


async def test_enter_selects_the_highlighted_item():
    app = TableApp(rows(3))
    async with app.run_test(size=(50, 8)) as pilot:
        await pilot.press("down", "enter")
        selected = [m for m in app.messages if isinstance(m, SyncTable.RowSelected)]
        assert [m.key for m in selected] == ["item1"]
        assert selected[0].control is app.table


async def test_a_click_highlights_a_row_and_a_second_click_selects_it():
    app = TableApp(rows(5))
    async with app.run_test(size=(50, 8)) as pilot:
        await pilot.click(SyncTable, offset=(10, 3))  # the third row
        assert app.table.selected_key == "item2"
        assert not [m for m in app.messages if isinstance(m, SyncTable.RowSelected)]
        await pilot.click(SyncTable, offset=(10, 3))
        selected = [m for m in app.messages if isinstance(m, SyncTable.RowSelected)]
        assert [m.key for m in selected] == ["item2"]


async def test_a_click_on_a_label_names_its_column():
    app = TableApp(rows(3))
    async with app.run_test(size=(50, 8)) as pilot:
        x = app.table.column_x("extra")
        assert x is not None
        await pilot.click(SyncTable, offset=(x + 1, 0))
        await pilot.click(SyncTable, offset=(1, 0))
        headers = [m for m in app.messages if isinstance(m, SyncTable.HeaderSelected)]
        assert [m.column for m in headers] == ["extra", "n"]


@pytest.mark.parametrize(
    "name", ["[bold]not bold[/bold]", "[link=x]y[/]", "operator[](unsigned long)", "a\\[b]"]
)
async def test_names_are_data_not_markup(name):
    app = TableApp([row("k", 1, name)])
    async with app.run_test(size=(60, 5)) as pilot:
        await pilot.pause()
        assert name in screen_lines(app)[1]


async def test_a_long_name_is_cut_with_an_ellipsis_and_columns_drop_when_narrow():
    long = "std::vector<" * 60
    app = TableApp([row("k", 7, long)])
    async with app.run_test(size=(60, 5)) as pilot:
        await pilot.pause()
        line = screen_lines(app)[1]
        assert "…" in line and "xk" in line  # the EXTRA column is still there, after the cut
        assert len(line.rstrip()) <= 60
        await pilot.resize_terminal(30, 5)
        await pilot.pause()
        assert app.table.visible_columns() == ["n", "name"]
        line = screen_lines(app)[1]
        assert "xk" not in line and "…" in line


async def test_the_cursor_row_is_marked_without_colour(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = TableApp(rows(3))
    async with app.run_test(size=(50, 8)) as pilot:
        await pilot.press("down")
        assert app.no_color
        assert all(style is not None and style.reverse for style in cursor_style(app, 2))
        assert not any(style is not None and style.reverse for style in cursor_style(app, 1))


async def test_an_empty_table_takes_keys_and_clicks():
    app = TableApp([])
    async with app.run_test(size=(50, 8)) as pilot:
        await pilot.press("down", "end", "pagedown", "enter")
        await pilot.click(SyncTable, offset=(5, 3))
        assert app.table.selected_key is None
        assert not [m for m in app.messages if isinstance(m, SyncTable.RowSelected)]
        app.table.sync(rows(2))
        await pilot.pause()
        assert app.table.selected_key == "item0"
        assert screen_lines(app)[2].split()[:2] == ["1", "item1"]


async def test_a_highlight_is_told_when_the_item_changes_not_when_it_moves():
    app = TableApp(rows(5))
    async with app.run_test(size=(50, 10)) as pilot:
        await pilot.pause()

        def told() -> list[str]:
            keys = [m.key for m in app.messages if isinstance(m, SyncTable.RowHighlighted)]
            app.messages.clear()
            return keys

        assert told() == ["item0"]  # the first rows: the first is highlighted
        await pilot.press("down")
        assert told() == ["item1"]
        app.table.sync(list(reversed(rows(5))))  # item1 moves to slot 3
        await pilot.pause()
        assert told() == []
        app.table.sync([r for r in rows(5) if r.key != "item1"])  # it goes: slot 3 is item4
        await pilot.pause()
        assert told() == ["item4"]


async def test_narrower_than_its_columns_it_crops_rather_than_scrolls_sideways():
    app = TableApp([row("k", 7, "a_rather_long_function_name")])
    async with app.run_test(size=(12, 5)) as pilot:  # less than N + NAME's least width
        await pilot.pause()
        assert not app.table.show_horizontal_scrollbar
        lines = screen_lines(app)
        assert all(len(line.rstrip()) <= 12 for line in lines)
        assert lines[1].split()[0] == "7"


async def test_the_wheel_scrolls_the_rows_under_the_header():
    app = TableApp(rows(50))
    async with app.run_test(size=(50, 11)) as pilot:
        await pilot.pause()
        for _ in range(3):
            app.table.post_message(
                events.MouseScrollDown(app.table, 5, 5, 0, 1, 0, False, False, False)
            )
        await pilot.pause()
        top = round(app.table.scroll_y)
        assert top > 0
        lines = screen_lines(app)
        assert lines[0].split() == ["N", "NAME", "EXTRA"]  # the header stays
        assert lines[1].split()[:2] == [str(top), f"item{top}"]
        assert app.table.cursor_row == 0  # the wheel scrolls; it does not move the cursor
