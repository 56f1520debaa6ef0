"""How often the dashboard asks the engine: a few times per second while a session runs,
never again once it has ended (a finished replay costs nothing), and the functions pane
shows at most a few screens of rows, sorted and filtered before the cut."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.engine import Engine
from livesym.records import TimeMode
from livesym.sampling.choice import choose_sampler
from livesym.target.process import TargetProcess
from livesym.ui.app import DashboardApp
from livesym.ui.functions import select, status_line
from livesym.ui.options import ViewOptions
from tests.ui.screen import replay_done, until

CAPTURE = Path(__file__).parent / "data" / "spin.json"


class Counting:
    """Counts the engine snapshots the dashboard takes."""

    def __init__(self, engine: Engine) -> None:
        self.calls = 0
        self._snapshot = engine.snapshot
        engine.snapshot = self  # type: ignore[method-assign]

    def __call__(self, **kwargs: object):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self._snapshot(**kwargs)  # type: ignore[arg-type]


async def test_a_finished_replay_is_not_asked_again(replay_app):
    app = replay_app(CAPTURE)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        await pilot.pause(0.3)
        counter = Counting(app.session)  # type: ignore[arg-type]
        await pilot.pause(1.0)
        assert counter.calls == 0
        await pilot.press("c")  # asking for something else takes a fresh look
        assert counter.calls == 1


async def test_a_live_session_refreshes_a_few_times_per_second(run_target, tmp_path):
    proc = run_target("spin")
    engine = Engine(
        TargetProcess(proc.pid), choose_sampler("auto", proc.pid, 99, TimeMode.CPU).sampler
    )
    app = DashboardApp(engine, pid=proc.pid, directory=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.dashboard.last is not None and app.dashboard.last.samples)
        counter = Counting(engine)
        await pilot.pause(2.0)
        assert 4 <= counter.calls <= 10  # 4 Hz, give or take the machine's load


async def test_the_cut_comes_after_sorting_and_filtering(replay_app):
    app = replay_app(CAPTURE)
    async with app.run_test(size=(100, 30)) as pilot:
        await replay_done(pilot)
        view = app.dashboard.view
    assert view is not None and len(view.functions) == 6
    by_name = replace(ViewOptions(), sort="function")
    shown, matching = select(view, by_name, limit=2)
    assert [r.frame.label for r in shown] == sorted(r.frame.label for r in view.functions)[:2]
    assert matching == 6
    assert "6 functions  ·  first 2 shown" in status_line(by_name, 2, 6, 6).plain
    hot, matching = select(view, replace(by_name, text="hot_", flipped=True), limit=2)
    assert [r.frame.label for r in hot] == ["hot_gamma", "hot_beta"] and matching == 3
    assert "3 of 6 functions  ·  first 2 shown" in status_line(by_name, 2, 3, 6).plain


async def test_the_refresh_the_user_sets_is_the_one_taken(run_target, tmp_path):
    # GIVEN a live dashboard updated every 0.5 s (--refresh 0.5), not at its 4 Hz
    proc = run_target("spin")
    engine = Engine(
        TargetProcess(proc.pid), choose_sampler("auto", proc.pid, 99, TimeMode.CPU).sampler
    )
    app = DashboardApp(engine, pid=proc.pid, directory=tmp_path, refresh_hz=1 / 0.5)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.dashboard.last is not None and app.dashboard.last.samples)
        counter = Counting(engine)
        # WHEN 3 s pass
        await pilot.pause(3.0)
        # THEN it asked about 6 times (at 4 Hz it would be 12)
        assert 4 <= counter.calls <= 7, counter.calls


async def test_a_line_that_did_not_change_is_not_repainted():
    # GIVEN a QuietStatic on a screen, showing a line
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.geometry import Region

    from livesym.ui.quiet import QuietStatic

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield QuietStatic(id="line", markup=False)

    app = One()
    async with app.run_test(size=(40, 3)) as pilot:
        line = app.query_one("#line", QuietStatic)
        line.show(Text("samples 12", style="bold"))
        await pilot.pause()
        painted: list[object] = []
        original = line.refresh
        line.refresh = lambda *a, **k: painted.append(a) or original(*a, **k)  # type: ignore[method-assign]
        # WHEN the same line is shown again, as a new Text
        line.show(Text("samples 12", style="bold"))
        await pilot.pause()
        # THEN nothing is repainted (so nothing is sent to the terminal)
        assert painted == []
        # AND the same words in another style, or other words, are
        line.show(Text("samples 12"))
        assert len(painted) == 1
        await pilot.pause()
        line.show(Text("samples 13"))
        await pilot.pause()
        assert len(painted) == 2 and "samples 13" in str(line.render())
        # ... and only the cells that changed: the last digit, or from a shift on
        assert painted[-1] == (Region(9, 0, 1, 1),), painted
        line.show(Text("samples 130  lost 0"))
        assert painted[-1] == (Region(10, 0, 9, 1),), painted


def test_a_partial_update_is_sent_from_where_it_starts():
    # GIVEN Textual's update of a line's chop, "abcdefghij" at 0, cropped to cells 4-6
    from rich.console import Console
    from rich.segment import Segment
    from textual._compositor import ChopsUpdate
    from textual.strip import Strip

    from livesym.ui import crop

    update = ChopsUpdate([{0: Strip([Segment("abcdefghij")])}], [(0, 4, 6)], [[10]])
    # WHEN it is rendered, with livesym's crop installed
    assert crop.install()
    sent = update.render_segments(Console(force_terminal=True, color_system=None))
    # THEN only those cells go out, after a move to the first of them (Textual sent
    # "abcdef" from the chop's start)
    assert sent == "\x1b[1;5Hef", repr(sent)


def _painted(sent: str, width: int, height: int) -> list[list[tuple[object, ...]]]:
    """Every cell a terminal shows after ``sent``: its character and its pen."""
    import pyte

    screen = pyte.Screen(width, height)
    pyte.Stream(screen).feed(sent)
    return [
        [(c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse, c.strikethrough)
         for c in (screen.buffer[y][x] for x in range(width))]
        for y in range(height)
    ]  # fmt: skip


STYLES = [None, {"bold": True}, {"color": "red"},
          {"bold": True, "color": "red", "bgcolor": "blue"},
          {"italic": True, "color": "#ff8800", "bgcolor": "#102030"}, {"reverse": True},
          {"underline": True, "color": "green"}, {"strike": True},
          {"bgcolor": "grey23"}]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.tuples(st.text("ab █▇1 ", min_size=0, max_size=5), st.sampled_from(STYLES)),
                 min_size=1, max_size=8),
        min_size=1, max_size=3,
    ),
    cut=st.tuples(st.integers(0, 12), st.integers(0, 12)),
    system=st.sampled_from(["truecolor", "256", "standard"]),
)  # fmt: skip
def test_an_update_sent_as_its_styles_change_paints_what_textuals_paints(rows, cut, system):
    # GIVEN lines of segments in styles (an unstyled one among them), each line a chop
    # at cell 2 with a span of it to repaint
    from rich.console import Console
    from rich.segment import Segment
    from rich.style import Style
    from textual._compositor import ChopsUpdate
    from textual.strip import Strip

    from livesym.ui import crop

    assert crop.install()
    # (new Style objects: Rich keeps a style's codes in it, for the first colour system)
    strips = [Strip([Segment(t, Style(**s) if s else None) for t, s in row]) for row in rows]
    chops = [{2: strip} for strip in strips]
    ends = [[2 + strip.cell_length] for strip in strips]
    spans = [(y, min(cut) + 2, max(cut) + 2) for y in range(len(rows))]
    update = ChopsUpdate(chops, spans, ends)
    console = Console(force_terminal=True, color_system=system)
    # WHEN it is sent as livesym sends it (a style's part that changed), and as Textual
    # does (every segment its whole style and a reset), each onto a terminal showing a
    # styled line already
    before = "\x1b[1;1H\x1b[1;32;44m" + "x" * 20 + "\x1b[0m"
    ours, theirs = update.render_segments(console), crop.TEXTUALS(update, console)
    # THEN the terminal shows the same cells, in the same pens, where a cell was painted
    # (Textual's sends each chop from its start: its cells before the span are painted
    # too; livesym's sends none of those)
    shown, expected = _painted(before + ours, 24, 3), _painted(before + theirs, 24, 3)
    for y in range(len(rows)):
        for x in range(spans[y][1], min(spans[y][2], ends[y][0])):
            assert shown[y][x] == expected[y][x], (y, x, repr(ours), repr(theirs))
    # AND the update leaves no pen in force (text written next is unstyled)
    after = _painted(before + ours + "\x1b[3;23Hz", 24, 3)
    assert after[2][22] == _painted("\x1b[3;23Hz", 24, 3)[2][22]
    # AND it is never longer than Textual's crop of the same cells would be
    assert len(ours) <= len(theirs) + 4
