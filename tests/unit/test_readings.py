"""The target's readings kept as machine words (issue 31: a recorder's memory stays flat)."""

from __future__ import annotations

import tracemalloc

import pytest

from livesym.engine.readings import Readings
from livesym.records import ProcessStat


def test_readings_read_back_as_they_were_given():
    readings = Readings()
    stats = [ProcessStat(0.5 * i, 99.5 - i, 1_500_000 + i, 4 + i % 3) for i in range(10)]
    readings.extend(stats[:6])
    readings.extend(stats[6:])
    assert len(readings) == 10
    assert list(readings) == stats
    assert readings[3:7] == stats[3:7] and readings[-2:] == stats[-2:] and readings[8:3] == []
    assert readings[-1] == stats[-1] and readings[0] == stats[0]
    with pytest.raises(IndexError):
        readings[10]


def test_a_day_of_readings_is_a_few_megabytes():
    # GIVEN a reading a second for an hour, as a recorder left on takes them
    readings = Readings()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for second in range(3600):
            readings.extend([ProcessStat(float(second), 99.9, 1_600_000_000 + second, 5)])
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # THEN they hold about 32 bytes each (arrays grow by some spare room): under 3.5 MB a
    # day, where ProcessStat objects in a list held ~160 bytes each (14 MB a day)
    assert grown / 3600 < 40, grown
