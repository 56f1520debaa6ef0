"""Off-CPU time from switch-outs (``sampling.off_cpu``): each sampled wait weighs its own
length times the waits it stands for, never its count; waits still going on counted as
they go and not twice; the clock ring's bulk parse refuses what is not its records; the
scheduler's frames left out and a preemption told from a sleep (``frames.waits``)."""

from __future__ import annotations

import dataclasses
import random
import struct

from livesym.frames.waits import wait_state, without_scheduler
from livesym.records import (
    KIND_KERNEL,
    WAITING_FOR_CPU,
    Frame,
    FrameRecord,
    Reason,
)
from livesym.sampling import perf_abi as abi
from livesym.sampling.base import Sample, ThreadState
from livesym.sampling.off_cpu import QUIETER_AFTER, OffCpuIntervals
from livesym.sampling.perf_switches import clock_records

RATE = 100  # a period is 10 ms


def stack(tid: int, when: float, pc: int) -> Sample:
    return Sample(when, 1, tid, (pc,))


def weights(out: list[Sample]) -> dict[int, int]:
    got: dict[int, int] = {}
    for s in out:
        got[s.ips[0]] = got.get(s.ips[0], 0) + s.weight
    return got


def test_every_wait_sampled_weighs_its_own_length() -> None:
    # GIVEN a thread that runs 1 ms, then waits 20 ms (A) or 5 ms (B), alternately
    off = OffCpuIntervals(1, RATE)
    off.opened(7, 0.0)
    out: list[Sample] = []
    t, ran = 0.001, 1_000_000
    for k in range(200):
        wait, pc = (0.020, 0xA) if k % 2 == 0 else (0.005, 0xB)
        out += off.switched_out(stack(7, t, pc))
        out += off.clocked(7, [(t, ran)])
        t += wait + 0.001
        ran += 1_000_000
    out += off.clocked(7, [(t, ran)])
    # THEN A has four fifths of the time off the CPU, B one: by length, not by count
    got = weights(out)
    assert abs(got[0xA] - 100 * 2) <= 1  # 100 waits of 2 periods (fractions carried)
    assert abs(got[0xB] - 100 * 0.5) <= 1  # 100 waits of half a period
    assert abs(got[0xA] + got[0xB] - 250) <= 1
    assert all(s.state is ThreadState.SLEEPING for s in out if s.ips[0] in (0xA, 0xB))


def test_one_wait_sampled_in_p_stands_for_the_waits_since_the_last_by_its_length() -> None:
    # GIVEN a thread cycling A (20 ms), B (5 ms), C (5 ms), its stacks sampled at one
    # switch in P, P drawn at random around 7 (as the sampler draws it)
    rng = random.Random(3)
    off = OffCpuIntervals(1, RATE)
    off.opened(7, 0.0)
    lengths = {0xA: 0.020, 0xB: 0.005, 0xC: 0.005}
    cycle = [0xA, 0xB, 0xC]
    out: list[Sample] = []
    t, ran, until_sample = 0.0, 0, 1
    for k in range(30000):
        pc = cycle[k % 3]
        until_sample -= 1
        if until_sample == 0:
            out += off.switched_out(stack(7, t, pc))
            until_sample = rng.randint(5, 9)
        out += off.clocked(7, [(t, ran)])
        t += lengths[pc] + 0.0001
        ran += 100_000
    # THEN each weighs its share of the time off the CPU (2/3, 1/6, 1/6), not of the
    # switches (1/3 each), within 3 points, and the whole is the whole
    got = weights(out)
    total = sum(got.values())
    assert abs(total - 10000 * 3.0) <= 0.05 * 10000 * 3.0
    assert abs(got[0xA] / total - 2 / 3) <= 0.03, got
    assert abs(got[0xB] / total - 1 / 6) <= 0.03, got


def test_a_long_wait_is_counted_as_it_goes_and_once() -> None:
    off = OffCpuIntervals(1, RATE)
    off.opened(7, 0.0)
    out = off.switched_out(stack(7, 1.0, 0xA)) + off.clocked(7, [(1.0, 1_000_000_000)])
    # While it sleeps, its time so far is counted, each second
    out += off.open_waits(2.5, lambda tid: True)
    assert weights(out).get(0xA) == 150
    out += off.open_waits(2.6, lambda tid: True)  # not a second since: nothing yet
    assert weights(out).get(0xA) == 150
    # It comes back at 4.0: the rest, not the whole again
    out += off.clocked(7, [(4.5, 1_500_000_000)])  # 0.5 s run after it woke at 4.0
    assert weights(out)[0xA] == 300
    # A thread that runs is not counted as waiting
    assert off.open_waits(9.0, lambda tid: False) == []


def test_a_thread_waiting_when_the_events_opened_has_that_wait_with_its_stack() -> None:
    off = OffCpuIntervals(1, RATE)
    blocked = stack(7, 0.0, 0xD)
    off.opened(7, 0.0, blocked)
    out = off.open_waits(1.5, lambda tid: True)
    out += off.clocked(7, [(3.0, 500_000_000)])  # woke at 2.5, ran 0.5 s, left at 3.0
    assert weights(out) == {0xD: 250}
    # ... and one never seen leaving counts under the unseen-wait frame, not dropped
    off.opened(8, 0.0)
    unseen = off.clocked(8, [(1.0, 200_000_000)])
    assert sum(s.weight for s in unseen) == 80 and unseen[0].frames is not None


def test_a_fast_thread_is_sampled_about_rate_times_a_second_at_a_prime_period() -> None:
    off = OffCpuIntervals(1, RATE)
    off.opened(7, 0.0)
    for k in range(1000):  # 1,000 stack samples in 0.1 s at every switch
        off.switched_out(stack(7, k * 1e-4, 0xA))
    # 10,000 switches a second over four times 100 Hz: 25, a prime
    assert off.periods(0.1) == {7: 29}
    for k in range(16):  # at that period: 345 samples a second, the same rate
        off.switched_out(stack(7, 0.1 + k * 29e-4, 0xA))
    assert off.periods(0.147) == {}  # unchanged: setting a period restarts it
    assert off.periods(0.2) == {}  # not looked at again before 16 samples or 0.1 s
    assert off.periods(0.26) == {7: 1}  # quiet for 0.1 s at P > 1: every switch again
    # A thread that has switched fast all its life starts at its rate's period
    assert off.first_every(8, 5000.0) == 13 and off.first_every(9, 750.0) == 1


def test_the_clock_ring_parses_in_bulk_and_walks_what_is_not_its_own() -> None:
    sample = struct.pack("=IHHQQQQ", abi.PERF_RECORD_SAMPLE, 0, 40, 2_000_000_000, 1, 5, 5)
    assert clock_records(sample * 3) == ([(2.0, 5)] * 3, 0)
    lost = struct.pack("=IHHQQ", abi.PERF_RECORD_LOST, 0, 24, 9, 17)
    assert clock_records(sample + lost + sample) == ([(2.0, 5)] * 2, 17)
    # A record longer than its fields (the kernel's size for a switch's later events)
    longer = struct.pack("=IHHQQQQ", abi.PERF_RECORD_SAMPLE, 0, 72, 3_000_000_000, 1, 6, 6)
    assert clock_records(sample + longer + b"\0" * 32) == ([(2.0, 5), (3.0, 6)], 0)
    hostile = struct.pack("=IHH", abi.PERF_RECORD_SAMPLE, 0, 4) + sample
    assert clock_records(hostile) == ([], 0)  # a size below a header ends the walk
    assert clock_records(sample[:30]) == ([], 0)


def kernel(symbol: str) -> FrameRecord:
    return dataclasses.replace(WAITING_FOR_CPU, kind=KIND_KERNEL, symbol=symbol, reason=None,
                               module="[kernel]")  # fmt: skip


def names(frames: tuple[FrameRecord, ...]) -> list[str | None]:
    return [f.symbol if f is not WAITING_FOR_CPU else "[waiting]" for f in frames]


def test_the_wait_is_the_leaf_and_a_preemption_is_a_wait_for_a_cpu() -> None:
    sleep = [kernel(n) for n in ("schedule", "do_nanosleep", "hrtimer_nanosleep")]
    assert names(without_scheduler(sleep)) == ["do_nanosleep", "hrtimer_nanosleep"]
    preempted = [kernel(n) for n in ("schedule", "irqentry_exit_to_user_mode",
                                     "asm_sysvec_apic_timer_interrupt")]  # fmt: skip
    assert names(without_scheduler(preempted)) == ["[waiting]"]
    in_kernel = [kernel(n) for n in ("__schedule", "preempt_schedule_common", "__cond_resched",
                                     "ext4_writepages", "do_fsync")]  # fmt: skip
    assert names(without_scheduler(in_kernel)) == ["[waiting]", "ext4_writepages", "do_fsync"]
    assert names(without_scheduler([kernel("schedule")])) == ["schedule"]  # never emptied


def test_a_sleep_in_io_schedule_is_disk_and_a_wait_for_a_cpu_is_runnable() -> None:
    disk = (Frame("io_schedule", None, "[kernel]", kind=KIND_KERNEL),
            Frame("folio_wait_bit", None, "[kernel]", kind=KIND_KERNEL))  # fmt: skip
    assert wait_state(ThreadState.SLEEPING, disk) is ThreadState.DISK
    futex = (Frame("futex_do_wait", None, "[kernel]", kind=KIND_KERNEL),)
    assert wait_state(ThreadState.SLEEPING, futex) is ThreadState.SLEEPING
    waiting = (WAITING_FOR_CPU.frame(), Frame("work", None, "/bin/app"))
    assert waiting[0].reason is Reason.WAITING_FOR_CPU
    assert wait_state(ThreadState.SLEEPING, waiting) is ThreadState.RUNNABLE
    assert wait_state(ThreadState.RUNNING, disk) is ThreadState.RUNNING  # on a CPU: as said


def test_the_threads_that_switch_most_leave_the_events_until_the_rest_fit_the_budget() -> None:
    # GIVEN three threads that switched 30,000, 4,000 and 500 times in their first second
    off = OffCpuIntervals(1, RATE)
    for tid, n in ((7, 30_000), (8, 4_000), (9, 500)):
        off.opened(tid, 0.0)
        for k in range(n):
            off.switched_out(stack(tid, k / n, 0xA))
    off.periods(1.0)
    # THEN with a budget of 5,000 the fastest goes; with 600, the next too; with 40,000
    # none; and a thread forgotten (it ended, or went) no longer counts
    assert off.over_budget(5_000) == [7]
    assert off.over_budget(600) == [7, 8]
    assert off.over_budget(40_000) == []
    off.forget(7)
    assert off.over_budget(5_000) == []


def test_a_burst_of_switches_does_not_hand_a_thread_over() -> None:
    # GIVEN a thread that switched 1,000 times in its first 10 ms (preempted by
    # livesym's own start), then 50 times a second
    off = OffCpuIntervals(1, RATE)
    off.opened(7, 0.0)
    for k in range(1_000):
        off.switched_out(stack(7, k / 100_000, 0xA))
    assert off.periods(0.01) != {}  # its stack period follows at once (its ring must not fill)
    # THEN the budget does not see it yet: its rate is counted over BUDGET_WINDOW
    assert off.over_budget(5_000) == []
    # WHEN it goes on at 50 a second for a second: its event (one switch in P, P set
    # from the burst) samples none of them
    assert off.periods(0.01 + 0.005) == {}
    # THEN it is back to every switch within QUIETER_AFTER (no JUDGE_SAMPLES came)
    assert off.periods(0.01 + QUIETER_AFTER) == {7: 1}
    off.periods(1.2)
    # THEN over the window it switched about 1,000 times a second: it stays
    assert off.over_budget(5_000) == []
    assert off.over_budget(500) == [7]


def test_one_long_wait_sampled_among_short_ones_stands_for_no_more_than_the_clocks_timed() -> None:
    # GIVEN a thread whose stacks are sampled at one switch in 60, waiting 0.1 ms between
    # 0.1 ms runs, but for 400 ms once (preempted by a burst), and that wait sampled
    off = OffCpuIntervals(1, RATE)
    off.opened(7, 0.0)
    out: list[Sample] = []
    t, ran = 0.0, 0
    for k in range(1, 3001):
        wait = 0.4 if k == 60 else 0.0001
        if k % 60 == 0:
            out += off.switched_out(stack(7, t, 0xA if k == 60 else 0xB))
        out += off.clocked(7, [(t, ran)])
        t += wait + 0.0001
        ran += 100_000
    out += off.clocked(7, [(t, ran)])
    # THEN that wait, standing for the 60 around it by its own length (24 s), is held to
    # the time the clocks gave the thread off the CPU so far (0.41 s, and a quarter more
    # and 0.1 s), and the whole is the thread's time off the CPU within that much
    exact = t - ran / 1e9
    got = weights(out)
    assert got[0xA] <= (0.406 * 1.25 + 0.1) * RATE + 1, got
    assert sum(got.values()) <= (exact * 1.25 + 0.1) * RATE + 1, (got, exact)
    assert got[0xB] > 0, got
