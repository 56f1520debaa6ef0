"""A capture's final source-line lookup ends on time: LINES_BUDGET after it starts, or
HURRIED_LINES after the process is told to leave, even in the middle of a lookup that
takes longer (one big DWARF unit), whose result then stays out.

Time is an injected clock that the lookups themselves move: each test's outcome is
decided, never a race with the machine's load."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from livesym.engine import lines
from livesym.engine.lines import LinesBudget, lines_within
from livesym.records import FrameRecord, named_frame_record


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class SlowLines:
    """A side whose every lookup takes ``seconds`` of the clock (as pyelftools on a big
    unit), then runs ``then`` (while the lookup still runs, for the test to act)."""

    def __init__(self, clock: Clock, seconds: float, then: Callable[[], None] = lambda: None):
        self.clock = clock
        self.seconds = seconds
        self.then = then
        self.asked: list[str] = []

    def with_line(self, record: FrameRecord) -> FrameRecord:
        self.asked.append(record.symbol or "")
        self.clock.now += self.seconds
        self.then()
        return dataclasses.replace(record, source_file="f.c", line=len(self.asked))


def frames(n: int) -> list[FrameRecord]:
    return [dataclasses.replace(named_frame_record(f"f{i}", None, None), id=i) for i in range(n)]


def test_every_line_within_the_budget_when_there_is_time() -> None:
    clock = Clock()
    side = SlowLines(clock, lines.LINES_BUDGET / 40)
    out = lines_within(frames(20), lambda f: side, LinesBudget(clock))
    assert [f.line for f in out] == list(range(1, 21))
    assert [f.id for f in out] == list(range(20))


def test_the_budget_ends_a_slow_lookup_and_keeps_what_was_found() -> None:
    # Each lookup takes 0.4 of the budget: the third starts at 0.8 and ends past it (its
    # result kept or not, as it lands before the caller looks or after), no fourth begins.
    clock = Clock()
    side = SlowLines(clock, lines.LINES_BUDGET * 0.4)
    out = lines_within(frames(10), lambda f: side, LinesBudget(clock))
    assert side.asked == ["f0", "f1", "f2"]
    # Those looked up before the end keep their lines, in order; the rest none.
    assert [f.line for f in out[:2]] == [1, 2] and out[2].line in (3, None)
    assert all(f.line is None for f in out[3:])


def test_hurry_during_a_lookup_cuts_it_short_and_its_result_stays_out() -> None:
    clock = Clock()
    budget = LinesBudget(clock)
    released = threading.Event()

    def told_to_leave_meanwhile() -> None:
        budget.hurry()  # 0.2 s into a lookup that would take far beyond any budget
        clock.now += lines.HURRIED_LINES  # ... and the hurried time passes
        released.wait(30)  # the lookup goes on, past the caller's return

    side = SlowLines(clock, 0.2, told_to_leave_meanwhile)
    out = lines_within(frames(3), lambda f: side, budget)
    released.set()
    assert all(f.line is None for f in out) and side.asked == ["f0"]


def test_hurried_before_the_lookup_leaves_it_the_hurried_time_from_then() -> None:
    clock = Clock()
    budget = LinesBudget(clock)
    budget.hurry()
    clock.now += lines.HURRIED_LINES  # all of it gone before the lookup starts
    side = SlowLines(clock, 0.0)
    out = lines_within(frames(5), lambda f: side, budget)
    assert budget.hurried and side.asked == [] and all(f.line is None for f in out)


def test_hurried_with_time_left_looks_up_within_it() -> None:
    clock = Clock()
    budget = LinesBudget(clock)
    budget.hurry()
    side = SlowLines(clock, lines.HURRIED_LINES * 0.4)
    out = lines_within(frames(5), lambda f: side, budget)
    assert side.asked == ["f0", "f1", "f2"]  # the third starts within the hurried time
    assert [f.line for f in out[:2]] == [1, 2] and all(f.line is None for f in out[3:])


def test_hurry_never_lengthens_the_budget() -> None:
    clock = Clock()
    budget = LinesBudget(clock)
    started = clock()
    clock.now += lines.LINES_BUDGET  # the whole budget gone: hurrying gives no more
    budget.hurry()
    assert budget.until(started) == started + lines.LINES_BUDGET
