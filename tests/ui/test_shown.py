"""What the terminal shows (``ui.shown``), as the dashboard's updates go out (``ui.crop``):
a screen changed by a run of Textual's updates, sent as livesym sends them, shows every
cell as it does when they are sent as Textual sends them; an update of cells that did
not change sends nothing; what is not known (after an inline update, Ctrl+L, a link, a
wide character) is sent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyte")

WIDTH, HEIGHT = 16, 4
STYLES: list[dict[str, Any] | None] = [
    None, {"bold": True}, {"color": "red"}, {"bold": True, "color": "red", "bgcolor": "blue"},
    {"color": "#ff8800", "bgcolor": "#102030"}, {"reverse": True}, {"bgcolor": "grey23"},
]  # fmt: skip
CHARS = "ab █▇1"

Cells = list[list[tuple[str, int]]]  # the model: per row, each cell's character and style


def _strip(cells: list[tuple[str, int]], cuts: list[int]) -> Any:
    """A row of cells as a Strip, its segments split at the runs of a style and at
    ``cuts`` (Textual's segments are split anywhere)."""
    from rich.segment import Segment
    from textual.strip import Strip

    segments, text, style = [], "", None
    for x, (char, index) in enumerate(cells):
        if text and (index != style or x in cuts):
            segments.append(Segment(text, _style(style)))
            text = ""
        text, style = text + char, index
    segments.append(Segment(text, _style(style)))
    return Strip(segments)


def _style(index: int | None) -> Any:
    from rich.style import Style

    given = STYLES[index] if index is not None else None
    return Style(**given) if given else None


def _layout(cells: Cells) -> Any:
    return _layout_of(cells, HEIGHT)


def _layout_of(cells: Cells, height: int) -> Any:
    from textual._compositor import LayoutUpdate
    from textual.geometry import Region

    return LayoutUpdate([[_strip(row, [])] for row in cells], Region(0, 0, WIDTH, height))


def _chops_of(cells: Cells, spans: list[tuple[int, int, int]], height: int) -> Any:
    return _chops(cells, spans, [], height)


def _chops(
    cells: Cells, spans: list[tuple[int, int, int]], cuts: list[int], height: int = HEIGHT
) -> Any:
    """Textual's update of the cells of ``spans`` (row, first, end): each row's whole chop
    and the spans of it to paint, as the compositor makes them (sorted, merged) from the
    regions that changed; cells outside them are as shown already."""
    from textual._compositor import ChopsUpdate, Compositor
    from textual.geometry import Region

    regions = [Region(x1, y, x2 - x1, 1) for y, x1, x2 in spans]
    spans = list(Compositor._regions_to_spans(regions))
    rows = {y for y, _, _ in spans}
    chops = [{0: _strip(row, cuts)} if y in rows else {} for y, row in enumerate(cells)]
    ends = [[WIDTH] if y in rows else [] for y in range(height)]
    return ChopsUpdate(chops, spans, ends)


def _painted(sent: str, height: int = HEIGHT) -> list[list[tuple[object, ...]]]:
    import pyte

    screen = pyte.Screen(WIDTH, height)
    pyte.Stream(screen).feed(sent)
    cells = [[screen.buffer[y][x] for x in range(WIDTH)] for y in range(height)]
    return [[(c.data, c.fg, c.bg, c.bold, c.reverse) for c in row] for row in cells]


def _console(system: str = "256") -> Any:
    from rich.console import Console

    return Console(force_terminal=True, color_system=system)  # (a fresh one: nothing known)


cell = st.tuples(st.sampled_from(CHARS), st.integers(0, len(STYLES) - 1))
change = st.tuples(
    st.integers(0, HEIGHT - 1), st.integers(0, WIDTH - 1), st.integers(1, WIDTH),
    st.lists(cell, min_size=WIDTH, max_size=WIDTH),
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    first=st.lists(st.lists(cell, min_size=WIDTH, max_size=WIDTH), min_size=HEIGHT,
                   max_size=HEIGHT),
    updates=st.lists(st.tuples(st.lists(change, min_size=1, max_size=3),
                               st.lists(st.integers(1, WIDTH - 1), max_size=4)),
                     min_size=1, max_size=5),
    system=st.sampled_from(["truecolor", "256", "standard"]),
)  # fmt: skip
def test_a_run_of_updates_shows_what_textual_shows_and_sends_no_more(first, updates, system):
    from livesym.ui import crop

    assert crop.install()
    console = _console(system)
    # GIVEN a screen Textual painted whole (a LayoutUpdate), sent as each sends it
    model = [list(row) for row in first]
    full = _layout(model)
    ours, theirs = full.render_segments(console), crop.LAYOUTS(full, console)
    assert ours == theirs  # (a full repaint goes out as Textual writes it)
    for changes, cuts in updates:
        # WHEN spans of rows change (some of their new cells as they were) and Textual's
        # update of them is sent
        spans = []
        for y, x, width, new in changes:
            end = min(WIDTH, x + width)
            model[y][x:end] = new[x:end]
            spans.append((y, x, end))
        update = _chops(model, spans, cuts)
        sent, textuals = update.render_segments(console), crop.TEXTUALS(update, console)
        ours, theirs = ours + sent, theirs + textuals
        # THEN the terminal shows every cell as Textual's own updates leave it
        assert _painted(ours) == _painted(theirs), (repr(sent), repr(textuals))
        # AND no update is longer than Textual's crop of its cells would be
        assert len(sent) <= len(textuals) + 4, (repr(sent), repr(textuals))
    # AND it shows the model, character by character
    assert ["".join(ch for ch, _ in row) for row in model] == [
        "".join(c[0] for c in row) for row in _painted(ours)
    ]


def test_an_update_of_cells_that_did_not_change_sends_nothing():
    from livesym.ui import crop

    assert crop.install()
    console = _console()
    cells = [[("a", 1)] * WIDTH for _ in range(HEIGHT)]
    _layout(cells).render_segments(console)
    # GIVEN a scrollbar's column repainted as it was (its table grew a row)
    same = _chops(cells, [(y, WIDTH - 2, WIDTH) for y in range(HEIGHT)], [])
    assert same.render_segments(console) == ""
    # WHEN one cell of a counter changes, THEN that cell alone goes out, in its pen
    cells[2][5] = ("7", 1)
    sent = _chops(cells, [(2, 3, 9)], []).render_segments(console)
    assert sent == "\x1b[3;6H\x1b[1m7\x1b[m", repr(sent)


def test_what_is_not_known_is_sent():
    from textual._compositor import InlineUpdate

    from livesym.ui import crop

    assert crop.install()
    console = _console()
    cells = [[("a", 0)] * WIDTH for _ in range(HEIGHT)]
    _layout(cells).render_segments(console)
    whole_row = _chops(cells, [(1, 0, WIDTH)], [])
    assert whole_row.render_segments(console) == ""
    # Ctrl+L: nothing known, the row goes out again
    crop.forget(console)
    assert whole_row.render_segments(console) == "\x1b[2;1H" + "a" * WIDTH
    assert whole_row.render_segments(console) == ""
    # an inline update's rows are not the screen's: nothing known after it
    InlineUpdate([_strip(cells[0], [])]).render_segments(console)
    assert whole_row.render_segments(console) == "\x1b[2;1H" + "a" * WIDTH
    # a character two cells wide is sent each time it is painted, as Rich renders it
    from rich.segment import Segment
    from textual._compositor import ChopsUpdate
    from textual.strip import Strip

    wide = ChopsUpdate([{}, {0: Strip([Segment("漢" + "a" * (WIDTH - 2))])}, {}, {}],
                       [(1, 0, WIDTH)], [[], [WIDTH], [], []])  # fmt: skip
    assert "漢" in wide.render_segments(console)
    assert "漢" in wide.render_segments(console)


@settings(max_examples=100, deadline=None)
@given(
    first=st.lists(st.lists(cell, min_size=WIDTH, max_size=WIDTH), min_size=HEIGHT + 4,
                   max_size=HEIGHT + 4),
    moves=st.lists(st.tuples(st.integers(0, HEIGHT + 3), st.integers(0, HEIGHT + 3),
                             st.integers(-3, 3), st.lists(cell, min_size=WIDTH, max_size=WIDTH),
                             st.integers(0, HEIGHT + 3)),
                   min_size=1, max_size=4),
    beside=st.sampled_from([0, 2]),
    also=st.booleans(),
)  # fmt: skip
def test_rows_that_moved_are_moved_by_the_terminal_and_show_what_textual_shows(
    first, moves, beside, also
):
    from livesym.ui import crop

    assert crop.install()
    console = _console()
    height = HEIGHT + 4
    # GIVEN a screen Textual painted whole (``beside``: a scrollbar's columns at the right,
    # its track the same in each row, its thumb in the first)
    model = [list(row) for row in first]
    right = WIDTH - beside
    for y, row in enumerate(model):
        row[right:] = [("█" if y == 0 else " ", 6)] * beside
    full = _layout_of(model, height)
    ours, theirs = full.render_segments(console), crop.LAYOUTS(full, console)
    for a, b, by, new, changed in moves:
        # WHEN the rows of a block move up or down (a table's, after a row entered or left
        # above them; ``beside`` it, a scrollbar's columns that stay), a new row comes in
        # where they left, one row changes too, and Textual repaints the block
        top, bottom = min(a, b), max(a, b)
        block = [row[:right] for row in model[top : bottom + 1]]
        if by > 0:
            block = [new[:right]] * min(by, len(block)) + block[: max(0, len(block) - by)]
        elif by < 0:
            block = block[-by:] + [new[:right]] * min(-by, len(block))
        for y, row in enumerate(block, top):
            model[y][:right] = row
        model[changed][changed % right] = ("1", 2)
        rows = sorted({*range(top, bottom + 1), changed})
        # (``also``: the columns beside repainted too in every other row, as they stand)
        spans = [(y, 0, WIDTH if also and y % 2 else right) for y in rows]
        update = _chops_of(model, spans, height)
        sent, textuals = update.render_segments(console), crop.TEXTUALS(update, console)
        ours, theirs = ours + sent, theirs + textuals
        # THEN the terminal shows every cell as Textual's own updates leave it
        assert _painted(ours, height) == _painted(theirs, height), (repr(sent), repr(textuals))
        assert len(sent) <= len(textuals) + 4, (repr(sent), repr(textuals))


def test_a_table_whose_rows_moved_down_a_row_is_sent_as_a_line_inserted():
    from livesym.ui import crop

    assert crop.install()
    console = _console()
    height = 12
    words = ["parse", "render", "blend", "hash", "crunch", "sort", "copy", "scan", "walk",
             "fold", "emit", "wait"]  # fmt: skip
    names = [f"{word}_{'xyz'[i % 3] * (i + 2)}".ljust(WIDTH) for i, word in enumerate(words)]
    model = [[(ch, 0) for ch in name] for name in names]
    _layout_of(model, height).render_segments(console)
    # GIVEN rows 2-11 of a table: WHEN a function enters at row 3, the rest move down
    model[3:] = [[(ch, 0) for ch in "a_new_one".ljust(WIDTH)], *model[3:-1]]
    update = _chops_of(model, [(y, 0, WIDTH) for y in range(2, height)], height)
    sent = update.render_segments(console)
    # THEN the terminal inserts a line at row 3 in a region to the last row, and only
    # the new row's cells go out
    assert sent.startswith("\x1b[4;12r\x1b[4;1H\x1b[L\x1b[r"), repr(sent)
    assert not any(word in sent for word in words) and "a_new_one" in sent, repr(sent)
    assert len(sent) < len(crop.TEXTUALS(update, console)) // 4
