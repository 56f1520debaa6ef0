"""Sizing a window's samples of a thread by the kernel's accounting of its CPU time."""

from __future__ import annotations

from livesym.sampling.cpu_split import CpuSplit, Seen, Verdict, spread

U, K, W = Verdict.USER, Verdict.KERNEL, Verdict.IDLE  # W: waiting
RUN, EXIT, READ, WAIT = Seen.RUNNING, Seen.AT_CALL, Seen.READING, Seen.WAITING


def test_spread_takes_evenly_spaced_candidates() -> None:
    assert spread(range(10), 2) == [2, 7]
    assert spread(range(10), 5) == [1, 3, 5, 7, 9]
    assert spread([4, 8], 5) == [4, 8]
    assert spread(range(10), 0) == []


def test_a_thread_found_reading_at_every_sample_but_on_a_cpu_runs_and_is_in_the_kernel() -> None:
    # os.read of /dev/zero in a loop: the leaf is read(), taken for waiting; the kernel
    # says on a CPU all along, 60 % of it in system time
    found, beyond = CpuSplit().verdicts(1, [READ] * 10, on_cpu=1.0, in_kernel=0.6)
    assert found.count(K) == 6 and found.count(U) == 4 and beyond == 0


def test_a_sleep_or_a_lock_wait_never_runs_whatever_the_cpu_time() -> None:
    # a thread that sleeps and wakes to work between samples: its work was not where
    # its samples were
    found, _ = CpuSplit().verdicts(1, [WAIT] * 10, on_cpu=0.3, in_kernel=0.1)
    assert found == [W] * 10
    found, _ = CpuSplit().verdicts(1, [WAIT, READ] * 5, on_cpu=0.3, in_kernel=0.0)
    assert found == [W, U, W, W, W, U, W, W, W, U]


def test_kernel_time_goes_to_samples_in_a_system_call_first() -> None:
    seen = [RUN, RUN, EXIT, RUN, RUN, RUN, EXIT, RUN, RUN, RUN]
    found, _ = CpuSplit().verdicts(1, seen, on_cpu=1.0, in_kernel=0.3)
    assert found[2] is K and found[6] is K and found.count(K) == 3


def test_a_thread_that_really_reads_stays_waiting() -> None:
    seen = [READ] * 8 + [RUN] * 2
    found, beyond = CpuSplit().verdicts(1, seen, on_cpu=0.2, in_kernel=0.0)
    assert found == [W] * 8 + [U] * 2 and beyond == 0


def test_running_samples_beyond_the_cpu_time_are_not_dropped() -> None:
    # py-spy's own stops wake sleepers: its reference counts them as running too
    found, _ = CpuSplit().verdicts(1, [RUN] * 10, on_cpu=0.5, in_kernel=0.0)
    assert found == [U] * 10


def test_kernel_samples_come_from_those_that_ran_and_what_they_cannot_hold_is_given_back() -> None:
    found, beyond = CpuSplit().verdicts(1, [READ] * 10, on_cpu=0.3, in_kernel=0.3)
    assert found.count(K) == 3 and found.count(W) == 7 and beyond == 0
    # the kernel share is bounded by the CPU share: never more kernel than CPU
    found, beyond = CpuSplit().verdicts(1, [READ] * 4, on_cpu=0.5, in_kernel=0.9)
    assert found.count(K) == 2 and found.count(W) == 2 and beyond == 0
    # a thread blocked at every sample but busy in the kernel between them: its
    # kernel time has no sample to stand on
    found, beyond = CpuSplit().verdicts(1, [WAIT] * 10, on_cpu=0.5, in_kernel=0.4)
    assert found == [W] * 10 and beyond == 4


def test_fractions_of_a_kernel_sample_carry_to_the_next_window_per_thread() -> None:
    split = CpuSplit()
    kernel = [
        split.verdicts(tid, [RUN] * 10, 1.0, 0.05)[0].count(K) for _ in range(4) for tid in (1, 2)
    ]
    assert kernel == [0, 0, 1, 1, 0, 0, 1, 1]


def test_a_thread_without_samples_owes_its_kernel_time_whole() -> None:
    split = CpuSplit()
    assert [split.unseen(7, 2.5) for _ in range(3)] == [2, 3, 2]
    split.forget(7)
    assert split.unseen(7, 0.5) == 0


def test_out_of_range_fractions_are_clamped() -> None:
    found, beyond = CpuSplit().verdicts(1, [READ] * 4, on_cpu=3.0, in_kernel=-1.0)
    assert found == [U] * 4 and beyond == 0
