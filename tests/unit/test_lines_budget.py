"""A capture's final source-line lookup ends on time: LINES_BUDGET after it starts, or
HURRIED_LINES after the process is told to leave, even in the middle of a lookup that
takes longer (one big DWARF unit), whose result then stays out."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from livesym.engine import lines
from livesym.engine.lines import LinesBudget, lines_within
from livesym.records import FrameRecord, named_frame_record


class SlowLines:
    """A side whose every lookup takes ``seconds`` (as pyelftools on a big unit)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.asked: list[str] = []

    def with_line(self, record: FrameRecord) -> FrameRecord:
        self.asked.append(record.symbol or "")
        time.sleep(self.seconds)
        return dataclasses.replace(record, source_file="f.c", line=len(self.asked))


def frames(n: int) -> list[FrameRecord]:
    return [dataclasses.replace(named_frame_record(f"f{i}", None, None), id=i) for i in range(n)]


def test_every_line_within_the_budget_when_there_is_time() -> None:
    side = SlowLines(0.001)
    out = lines_within(frames(20), lambda f: side, LinesBudget())
    assert [f.line for f in out] == list(range(1, 21))
    assert [f.id for f in out] == list(range(20))


def test_the_budget_ends_a_slow_lookup_and_keeps_what_was_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lines, "LINES_BUDGET", 0.3)
    side = SlowLines(0.12)
    started = time.monotonic()
    out = lines_within(frames(10), lambda f: side, LinesBudget())
    took = time.monotonic() - started
    assert 0.3 <= took < 0.3 + 0.1
    found = [f.line for f in out if f.line is not None]
    # Those looked up before the end keep their lines, in order; the rest none.
    assert found == list(range(1, len(found) + 1)) and 2 <= len(found) <= 3
    assert all(f.line is None for f in out[len(found) :])


def test_hurry_during_a_lookup_cuts_it_short() -> None:
    budget = LinesBudget()
    side = SlowLines(5.0)  # one lookup far beyond any budget
    threading.Timer(0.2, budget.hurry).start()
    started = time.monotonic()
    out = lines_within(frames(3), lambda f: side, budget)
    took = time.monotonic() - started
    assert 0.2 + lines.HURRIED_LINES - 0.05 <= took < 0.2 + lines.HURRIED_LINES + 0.15
    assert all(f.line is None for f in out) and side.asked == ["f0"]


def test_hurried_before_the_lookup_leaves_it_the_hurried_time_from_then() -> None:
    budget = LinesBudget()
    budget.hurry()
    time.sleep(lines.HURRIED_LINES + 0.05)
    side = SlowLines(0.0)
    out = lines_within(frames(5), lambda f: side, budget)
    assert budget.hurried and side.asked == [] and all(f.line is None for f in out)


def test_hurry_never_lengthens_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines, "LINES_BUDGET", 0.1)
    budget = LinesBudget()
    started = time.monotonic()
    budget.hurry()
    assert budget.until(started) == pytest.approx(started + 0.1)
