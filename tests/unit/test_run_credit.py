"""A ptrace sample taken for on a CPU is kept only while the thread's CPU time allows
one: as many samples as its CPU time at the rate, whatever the judgement at each tick."""

from __future__ import annotations

from livesym.sampling.run_credit import MAX_CREDIT, RunCredit

RATE = 100  # a tick every 10 ms
TICK_NS = 10_000_000


def kept(credit: RunCredit, tid: int, ran_share: float, judged_on: list[bool]) -> int:
    """Ticks of a thread that runs ``ran_share`` of the time, judged on a CPU as given."""
    run, count = 0, 0
    for on in judged_on:
        credit.tick(tid, int(run))
        run += ran_share * TICK_NS
        count += on and credit.allows(tid)
    return count


def test_a_thread_judged_on_a_cpu_too_often_keeps_its_cpu_time_s_samples():
    # a thread running half the time, judged on a CPU at every tick (waiting taken for
    # running): 1,000 ticks give the 500 samples its CPU time is worth, not 1,000
    credit = RunCredit(RATE)
    n = kept(credit, 1, 0.5, [True] * 1000)
    assert 495 <= n <= 500 and credit.refused == 1000 - n


def test_a_thread_judged_on_a_cpu_as_often_as_it_runs_loses_nothing():
    credit = RunCredit(RATE)
    judged = [i % 2 == 1 for i in range(1000)]  # every other tick: its share, exactly
    assert kept(credit, 1, 0.5, judged) >= 498


def test_a_thread_that_hardly_ran_since_its_last_sample_is_refused():
    credit = RunCredit(RATE)
    credit.tick(7, 0)
    credit.tick(7, 1_000)  # woke for a microsecond
    assert not credit.allows(7)
    credit.tick(7, 1_000 + TICK_NS)  # then ran a whole period
    assert credit.allows(7)


def test_credit_is_capped_so_an_unsampled_stretch_gives_no_burst():
    credit = RunCredit(RATE)
    credit.tick(3, 0)
    credit.tick(3, 100 * TICK_NS)  # a second of CPU time, not sampled (a late stop)
    bursts = sum(credit.allows(3) for _ in range(100))
    assert bursts == int(MAX_CREDIT + 0.5)


def test_without_scheduler_statistics_every_sample_is_kept_and_a_gone_thread_forgotten():
    credit = RunCredit(RATE)
    credit.tick(5, None)
    assert all(credit.allows(5) for _ in range(10))
    credit.tick(6, 0)
    credit.tick(6, 5 * TICK_NS)
    credit.forget(6)
    assert credit.allows(6)  # (as with no statistics: nothing known of it any more)
