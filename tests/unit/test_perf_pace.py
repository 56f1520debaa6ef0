"""The perf sampler woken as seldom as its engine takes samples (``PerfSampler.pace``):
its rings read every tick, holding two ticks of a busy thread's samples, so that their
watermark does not wake it between; a dashboard's quick tick keeps the defaults."""

from __future__ import annotations

import os

from livesym.sampling import perf_event
from livesym.sampling.perf_event import DEFAULT_STACK_SIZE, RECORD_EXTRA, PerfSampler


def test_a_slow_pace_reads_the_rings_each_tick_and_sizes_them_for_two():
    sampler = PerfSampler(os.getpid(), 99)
    before = sampler.data_pages
    sampler.pace(0.25)
    assert sampler.drain_interval == 0.25 and sampler.rescan_interval == 0.5
    sampler.pace(0.5)
    # (new threads are still looked for every half second: MAX_RESCAN_INTERVAL)
    assert sampler.drain_interval == 0.5
    assert sampler.rescan_interval == perf_event.MAX_RESCAN_INTERVAL == 0.5
    # two ticks of one busy thread's samples at 99 Hz fit, where the default held 16
    held = sampler.data_pages * perf_event.PAGE // (DEFAULT_STACK_SIZE + RECORD_EXTRA)
    assert held >= 99 * 2 * 0.5 and sampler.data_pages > before


def test_a_quick_pace_keeps_the_defaults():
    sampler = PerfSampler(os.getpid(), 99)
    pages = sampler.data_pages
    sampler.pace(0.05)
    assert sampler.drain_interval == perf_event.DRAIN_INTERVAL
    assert sampler.rescan_interval == perf_event.RESCAN_INTERVAL
    assert sampler.data_pages == pages


def test_given_ring_pages_stay_as_given():
    sampler = PerfSampler(os.getpid(), 99, data_pages=8)
    sampler.pace(1.0)
    assert sampler.data_pages == 8 and sampler.drain_interval == 1.0
