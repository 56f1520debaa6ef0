"""PtraceSampler on real processes: what it sees of `spin`, and that it always lets go.

The sampler counts on-CPU time, as perf does. The shares of `spin` are of
the CPU time its threads actually got, so the split is checked twice:
against the CPU time schedstat says each thread got during the run (always),
and against the nominal 52.6/31.6/15.8 % and the hot leaves (skipped, with
the figures, when the threads spent much of their runnable time waiting for
a CPU: a busy machine; for the split, even two CPUs, which spin's three
threads share at the start of each period). Waiting makes the moments a
thread is on a CPU irregular, so the tolerance then grows to what ~150
random samples allow.

After every way a run can end, the target must be running and untraced:
TracerPid 0 and no stopped state on every thread, and CPU time still growing.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from livesym.addr.kinds import Vma
from livesym.errors import EXIT_TARGET, TargetError, UsageError
from livesym.sampling.base import Sample, SamplerEnd, ThreadState
from livesym.sampling.ptrace import PtraceSampler
from livesym.symbolize.process import ProcessSymbolizer
from livesym.target.process import TargetProcess
from tests.support.procs import running, sched_ns, thread_names, thread_waits
from tests.support.spin import HOT, NOMINAL
from tests.support.stackshot import unwound

pytestmark = pytest.mark.ptrace

_REASON = PtraceSampler.available()
if _REASON is not None:
    pytest.skip(f"ptrace sampling unavailable: {_REASON}", allow_module_level=True)

# Where a runnable thread that waits for a CPU is found: the syscall it was
# preempted on the way out of (the busy loops read CLOCK_THREAD_CPUTIME_ID, a
# syscall made from the vDSO, where EEVDF ends a slice), the barrier that ends each
# round, or the sleep between its bursts.
# The vdso is symbolized from the target's memory: its clock_gettime is __vdso_clock_gettime.
# The rate of the shared run: ~750 samples of spin's 0.95 of a core in 4 s, so that a
# thread's share is known to within 5 points (3 standard deviations of a binomial share)
SPLIT_RATE = 199
PREEMPTION_POINTS = {
    "clock_gettime",
    "__clock_gettime",
    "__vdso_clock_gettime",
    "clock_nanosleep",
    "pthread_barrier_wait",
}
Spawn = Callable[..., subprocess.Popen[bytes]]


# --- helpers --------------------------------------------------------------------------------


def task_status(pid: int) -> dict[int, dict[str, str]]:
    """/proc/<pid>/task/*/status as {tid: {field: value}}."""
    out: dict[int, dict[str, str]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        fields: dict[str, str] = {}
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    fields[key] = value.strip()
        except OSError:
            continue  # exited meanwhile
        out[int(tid)] = fields
    return out


def assert_released(pid: int, *, stopped_ok: bool = False) -> None:
    """Every thread untraced and (unless ``stopped_ok``) not stopped; CPU time grows."""
    statuses = task_status(pid)
    assert statuses, f"{pid} has no threads"
    traced = {tid: s["TracerPid"] for tid, s in statuses.items() if s["TracerPid"] != "0"}
    assert not traced, f"still traced: {traced}"
    if stopped_ok:
        return
    stopped = {tid: s["State"] for tid, s in statuses.items() if s["State"][0] in "tT"}
    assert not stopped, f"left stopped: {stopped}"
    # Running: 30 ms of CPU time soon (on an idle machine spin burns 0.95 CPU;
    # on a busy one it may take a while to get that much).
    before, deadline = thread_waits(pid)[0], time.monotonic() + 3.0
    while thread_waits(pid)[0] - before < 0.03e9:
        assert time.monotonic() < deadline, "the target does not run any more"
        time.sleep(0.02)


def settle(pid: int) -> None:
    """Wait until spin's non-worker threads sleep (5 s at most).

    spin prints ``ready`` before its main and idle threads reach pause(); on a
    busy machine they stay runnable (and rightly get sampled) for a while.
    """
    deadline = time.monotonic() + 5.0
    while any(s["Name"] not in NOMINAL and s["State"][0] != "S" for s in task_status(pid).values()):
        assert time.monotonic() < deadline, "spin's idle threads do not go to sleep"
        time.sleep(0.05)


def shares(counts: Mapping[str, float]) -> dict[str, float]:
    total = sum(counts.values()) or 1
    return {name: 100 * value / total for name, value in counts.items()}


def figures(found: Mapping[str, float]) -> str:
    return "/".join(f"{found.get(name, 0):.1f}" for name in NOMINAL)


async def sample_for(
    sampler: PtraceSampler, seconds: float, sink: Callable[[list[Sample]], None] | None = None
) -> tuple[SamplerEnd, list[Sample]]:
    samples: list[Sample] = []
    stop = asyncio.Event()
    task = asyncio.create_task(sampler.run(sink or samples.extend, stop))
    await asyncio.wait({task}, timeout=seconds)
    stop.set()
    return await task, samples


# --- what it sees of spin ---------------------------------------------------------------------


@dataclass
class Run:
    """One 4 s run at SPLIT_RATE on spin, and what the kernel says happened meanwhile."""

    pid: int
    end: SamplerEnd
    samples: list[Sample]
    sampler: PtraceSampler
    names: dict[int, str]
    cpu: dict[str, float]  # seconds on a CPU, per thread name
    runnable: dict[str, float]  # seconds on a CPU or waiting for one
    leaf: dict[int, str | None] = field(default_factory=dict)  # ip -> function
    caller: dict[int, str | None] = field(default_factory=dict)  # return address -> function

    @property
    def waiting(self) -> float:
        """The fraction of the workers' runnable time spent waiting for a CPU."""
        runnable = sum(self.runnable[n] for n in NOMINAL)
        return 1 - sum(self.cpu[n] for n in NOMINAL) / runnable if runnable else 0.0


@pytest.fixture(scope="module")
def spin_run(built: Callable[[str], Path]) -> Iterator[Run]:
    with running(built("spin")) as proc:
        pid = proc.pid
        settle(pid)
        names = thread_names(pid)
        before = sched_ns(pid)
        sampler = PtraceSampler(pid, SPLIT_RATE)
        end, samples = asyncio.run(sample_for(sampler, 4.0))
        after = sched_ns(pid)
        cpu = {names[t]: (after[t][0] - before[t][0]) / 1e9 for t in after}
        runnable = {names[t]: (sum(after[t]) - sum(before[t])) / 1e9 for t in after}
        symbolizer = ProcessSymbolizer(TargetProcess(pid))
        # The sampler copies registers and stacks; the engine unwinds them (as here).
        samples = [unwound(s, symbolizer) for s in samples]
        run = Run(pid, end, samples, sampler, names, cpu, runnable)

        def name(vma: int) -> str | None:
            hit = symbolizer.explain(Vma(vma)).symbol
            return hit.name if hit is not None else None

        for s in samples:
            run.leaf.setdefault(s.ips[0], name(s.ips[0]))
            if len(s.ips) > 1:
                run.caller.setdefault(s.ips[1], name(s.ips[1] - 1))  # the call instruction
        yield run


def test_run_ends_stopped_with_samples_at_the_rate(spin_run: Run) -> None:
    assert spin_run.end is SamplerEnd.STOPPED
    assert spin_run.sampler.stats.samples == len(spin_run.samples)
    # SPLIT_RATE ticks a second, each sampling the threads on a CPU then: a sample a
    # tick's worth of their CPU time, within 3 standard deviations of that count, busy
    # machine or not (a thread waiting for a CPU is not taken for one on it: its CPU
    # time allows no sample, sampling/run_credit.py; 12-20 % too many before)
    expected = SPLIT_RATE * sum(spin_run.cpu[n] for n in NOMINAL)
    n = len(spin_run.samples)
    assert abs(n - expected) <= 3 * expected**0.5, (n, expected)
    assert all(s.pid == spin_run.pid and s.state is ThreadState.RUNNING for s in spin_run.samples)
    assert all(abs(s.time - time.monotonic()) < 30 for s in spin_run.samples)
    assert set(spin_run.names[s.tid] for s in spin_run.samples) <= set(NOMINAL)


def test_thread_split_matches_cpu_time(spin_run: Run) -> None:
    sampled = shares(collections.Counter(spin_run.names[s.tid] for s in spin_run.samples))
    measured = shares({n: spin_run.cpu[n] for n in NOMINAL})
    n = len(spin_run.samples)
    for name in NOMINAL:
        # 5 points, or 3 standard deviations of a binomial share of n samples
        p = measured[name] / 100
        tolerance = max(5.0, 300 * (p * (1 - p) / n) ** 0.5)
        assert abs(sampled.get(name, 0) - measured[name]) <= tolerance, (sampled, measured, n)


def test_thread_split_matches_nominal(spin_run: Run) -> None:
    sampled = shares(collections.Counter(spin_run.names[s.tid] for s in spin_run.samples))
    # spin's split of its CPU time is nominal whatever else runs (its workers burn their
    # budgets in rounds); the sampler must see that split, busy machine or not
    cpu = shares({n: spin_run.cpu[n] for n in NOMINAL})
    assert all(abs(cpu[n] - NOMINAL[n]) <= 3 for n in NOMINAL), figures(cpu)
    n = len(spin_run.samples)
    for name, share in NOMINAL.items():
        # 5 points, or 3 standard deviations of a binomial share of n samples.
        p = share / 100
        tolerance = max(5.0, 300 * (p * (1 - p) / n) ** 0.5)
        assert abs(sampled.get(name, 0) - share) <= tolerance, (sampled, n)


def test_leaf_functions_are_the_hot_ones(spin_run: Run) -> None:
    leaves = collections.Counter(spin_run.leaf[s.ips[0]] for s in spin_run.samples)
    hot = sum(n for name, n in leaves.items() if name in HOT)
    # Always: every leaf is a hot function or where a preempted thread waits.
    known = hot + sum(n for name, n in leaves.items() if name in PREEMPTION_POINTS)
    assert known >= 0.95 * len(spin_run.samples), leaves.most_common(8)
    # Outside the hot functions a sampled thread is checking its CPU time (a system
    # call, a few % at most) or was taken for on a CPU while it waited for one: 10 % at
    # most, busy machine or not (1.6-4.2 % alone and beside a busy core; 6.5-15.6 % when
    # a thread queued elsewhere at the round's start was taken for the tracer's own
    # displaced one, CI run 132: ptrace._displaced)
    n = len(spin_run.samples)
    noise = 3 * (0.1 * 0.9 / n) ** 0.5
    assert n - hot <= (0.1 + noise) * n, (leaves.most_common(8), f"{spin_run.waiting:.0%}")


def test_alpha_stacks_unwind_to_their_callers(spin_run: Run) -> None:
    alpha = [s for s in spin_run.samples if spin_run.names[s.tid] == "alpha"]
    assert alpha
    assert sum(len(s.ips) >= 2 for s in alpha) >= 0.9 * len(alpha)
    in_leaf = [s for s in alpha if spin_run.leaf[s.ips[0]] == "leaf_work"]
    called = [s for s in in_leaf if spin_run.caller.get(s.ips[1]) == "hot_alpha"]
    assert len(called) >= 0.9 * len(in_leaf), collections.Counter(
        spin_run.caller.get(s.ips[1]) for s in in_leaf
    )


def test_target_runs_untraced_after_a_normal_stop(spin_run: Run) -> None:
    assert_released(spin_run.pid)


# --- every way a run can end ------------------------------------------------------------------


async def test_cancelling_run_detaches(run_target: Spawn) -> None:
    pid = run_target("spin").pid
    sampler = PtraceSampler(pid, 49)
    samples: list[Sample] = []
    task = asyncio.create_task(sampler.run(samples.extend, asyncio.Event()))
    await asyncio.sleep(1.0)
    assert sampler.traced_threads() and samples
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Detaching takes milliseconds; a thread that will not stop is given up on
    # after DETACH_TIMEOUT (1 s), and the kernel detaches it when our thread ends.
    assert time.monotonic() - started < 1.5, sampler.stats.errors
    assert sampler.traced_threads() == frozenset()
    assert_released(pid)


async def test_exception_in_the_sink_surfaces_after_detaching(run_target: Spawn) -> None:
    pid = run_target("spin").pid
    batches: list[list[Sample]] = []

    def sink(batch: list[Sample]) -> None:
        if len(batches) == 5:
            raise RuntimeError("sink failed")
        batches.append(batch)

    sampler = PtraceSampler(pid, 49)
    with pytest.raises(RuntimeError, match="sink failed"):
        await sample_for(sampler, 10.0, sink)
    assert sampler.stats.samples == sum(len(b) for b in batches)
    assert_released(pid)


async def test_target_exit_ends_the_run(run_target: Spawn) -> None:
    proc = run_target("spin", "1")
    started = time.monotonic()
    # A pidfd polls readable once the process has exited (a zombie, not yet reaped).
    exited: list[float] = []
    loop = asyncio.get_running_loop()
    pidfd = os.pidfd_open(proc.pid)

    def on_exit() -> None:
        exited.append(time.monotonic())
        loop.remove_reader(pidfd)

    loop.add_reader(pidfd, on_exit)
    try:
        end, samples = await sample_for(PtraceSampler(proc.pid, 49), 10.0)
        ended = time.monotonic()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    assert end is SamplerEnd.TARGET_EXITED and samples
    assert exited and ended - exited[0] < 0.5, "run() did not notice the exit promptly"
    # spin exits 1 s after it starts: ~1.05 s after ``started`` on an idle machine
    # (a busy one can delay the exit itself, which the check above allows for).
    assert ended - started < max(1.5, exited[0] - started + 0.5)


async def test_signals_reach_the_target(run_target: Spawn) -> None:
    # A traced thread stops for every signal until the tracer passes it on:
    # SIGTERM must still end spin (its default action), and promptly.
    proc = run_target("spin")
    sampler = PtraceSampler(proc.pid, 49)
    task = asyncio.create_task(sampler.run(lambda batch: None, asyncio.Event()))
    await asyncio.sleep(0.5)
    os.kill(proc.pid, signal.SIGTERM)
    sent = time.monotonic()
    assert await asyncio.wait_for(task, 5) is SamplerEnd.TARGET_EXITED
    assert time.monotonic() - sent < 0.5
    assert proc.wait(5) in (-signal.SIGTERM, 0)  # 0: the tracer reaped it (same process)


async def until_states(pid: int, wanted: Callable[[set[str]], bool]) -> None:
    """Wait (2 s at most) until the set of the threads' state letters is as wanted.

    Every change of state needs the thread, and often the tracer, to get a CPU:
    on a busy machine that takes a while.
    """
    deadline = time.monotonic() + 2.0
    while True:
        statuses = task_status(pid)
        if wanted({s["State"][0] for s in statuses.values()}):
            return
        assert time.monotonic() < deadline, statuses
        await asyncio.sleep(0.01)


async def test_job_control_stops_survive_sampling_and_detach(run_target: Spawn) -> None:
    pid = run_target("spin").pid
    sampler = PtraceSampler(pid, 49)
    stop = asyncio.Event()
    task = asyncio.create_task(sampler.run(lambda batch: None, stop))
    await asyncio.sleep(0.3)
    os.kill(pid, signal.SIGSTOP)
    await until_states(pid, lambda states: states <= {"t", "T"})  # stopped, listening
    await asyncio.sleep(0.2)
    await until_states(pid, lambda states: states <= {"t", "T"})  # and staying so
    os.kill(pid, signal.SIGCONT)
    await until_states(pid, lambda states: not states & {"t", "T"})
    # Stopped again and detached while stopped: the kernel puts it back in its
    # group-stop, so the stop the user asked for outlives the sampler.
    os.kill(pid, signal.SIGSTOP)
    await until_states(pid, lambda states: states <= {"t", "T"})
    stop.set()
    assert await task is SamplerEnd.STOPPED
    await until_states(pid, lambda states: states == {"T"})
    assert_released(pid, stopped_ok=True)
    os.kill(pid, signal.SIGCONT)
    await asyncio.sleep(0.1)
    assert_released(pid)


async def test_hundreds_of_threads(run_target: Spawn) -> None:
    pid = run_target("spin", "--threads", "300").pid
    names = thread_names(pid)
    assert len(names) == 304
    settle(pid)
    sampler = PtraceSampler(pid, 49)
    end, samples = await sample_for(sampler, 1.5)
    assert end is SamplerEnd.STOPPED and samples
    # Idle threads sleep: not sampled, so not stopped, without idle=True.
    assert {names[s.tid] for s in samples} <= set(NOMINAL)
    assert_released(pid)

    sampler = PtraceSampler(pid, 10, idle=True)
    end, samples = await sample_for(sampler, 1.0)
    assert end is SamplerEnd.STOPPED
    # ... with it, every thread, those asleep said to be so (/proc's S before the stop)
    idle = [s for s in samples if s.state is ThreadState.SLEEPING]
    assert len({s.tid for s in idle if names[s.tid] == "idle"}) >= 250
    symbolizer = ProcessSymbolizer(TargetProcess(pid))
    assert all(len(unwound(s, symbolizer).ips) >= 2 for s in idle)
    assert_released(pid)


async def test_the_time_it_holds_a_thread_stopped_is_the_kernels_count(run_target: Spawn) -> None:
    # One thread that never sleeps: its wall time is its time on a CPU, waiting for one,
    # or stopped (schedstat counts the first two), so the kernel counts what the tracer
    # held it for, the attach and the detach's stops too. The sampler counts each stop
    # from when it is seen to its resume: short by the notice's latency (0.75-1.0 of
    # the kernel's beside two busy cores, 0.90-0.96 idle), never over it. Found by
    # probing /proc from the event loop instead, it read 0-1 % where this is 5 %.
    proc = run_target("crunch", "1", "1000000", "0")
    deadline = time.monotonic() + 5
    while len(tids := [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]) < 2:
        assert time.monotonic() < deadline, "crunch started no worker"
        time.sleep(0.01)
    (tid,) = [t for t in tids if t != proc.pid]  # the main thread waits in pthread_join
    sampler = PtraceSampler(proc.pid, 199)
    before, began = sched_ns(proc.pid)[tid], time.monotonic()
    end, samples = await sample_for(sampler, 3.0)
    after, wall = sched_ns(proc.pid)[tid], time.monotonic() - began
    assert end is SamplerEnd.STOPPED and len(samples) > 100
    held = wall - (after[0] - before[0] + after[1] - before[1]) / 1e9
    assert 0.6 * held <= sampler.held() <= held, (sampler.held(), held, wall)
    assert sampler.held() > 0.005 * wall  # 199 stops a second of some 0.2 ms each
    assert_released(proc.pid)


def test_a_session_weighs_the_hold_the_sampler_counted(run_target: Spawn) -> None:
    # The engine sets the sampler's own count of its hold against the target's CPU time
    # (probing /proc from the event loop found it stopped in 0-1 % of looks where it was
    # held 5 %); whether that passes a tenth, and is said, is the box's (CI run 130: not
    # beside a busy core at 999 Hz)
    from livesym.engine import Engine
    from livesym.engine.live import LiveSide

    proc = run_target("crunch", "1", "1000000", "0")
    sampler = PtraceSampler(proc.pid, 499)
    engine = Engine(TargetProcess(proc.pid), sampler)
    asyncio.run(engine.run(asyncio.Event(), duration=2.0))
    side = engine.side
    assert isinstance(side, LiveSide)
    share = side.stop_share
    if share is None:  # said already: over a tenth
        assert any("ptrace sampler kept the target's threads stopped" in e
                   for e in engine.snapshot().errors)  # fmt: skip
        return
    assert share.measured and share.probes == 0
    assert 0 < share.held <= sampler.held() and share.held > 0.5 * sampler.held()
    assert share.ran > 0.5  # crunch's thread ran most of the 2 s
    assert_released(proc.pid)


async def test_already_traced_target_is_refused(run_target: Spawn) -> None:
    pid = run_target("spin").pid
    first = PtraceSampler(pid, 49)
    stop = asyncio.Event()
    task = asyncio.create_task(first.run(lambda batch: None, stop))
    while not first.traced_threads():
        await asyncio.sleep(0.01)
    with pytest.raises(TargetError) as info:
        await PtraceSampler(pid, 49).run(lambda batch: None, asyncio.Event())
    assert str(info.value) == (
        f"cannot attach to {pid}: already traced by pid {os.getpid()} (a debugger?); "
        "detach it first, or use --sampler perf"
    )
    assert info.value.exit_code == EXIT_TARGET
    stop.set()
    assert await task is SamplerEnd.STOPPED
    assert_released(pid)


async def test_missing_process_and_bad_rate_are_one_line_errors(run_target: Spawn) -> None:
    proc = run_target("spin")
    proc.kill()
    proc.wait()
    with pytest.raises(TargetError) as info:
        await PtraceSampler(proc.pid, 49).run(lambda batch: None, asyncio.Event())
    assert str(info.value) == (
        f"cannot attach to {proc.pid}: no such process; check the PID with ps or pgrep"
    )
    with pytest.raises(UsageError, match="use 1 to 1000 Hz"):
        await PtraceSampler(os.getppid(), 5000).run(lambda batch: None, asyncio.Event())


# --- our own process ending -------------------------------------------------------------------

SCRIPT = textwrap.dedent(
    """
    import asyncio, signal, sys
    from livesym.sampling.ptrace import PtraceSampler

    async def main(pid):
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        first = True

        def sink(batch):
            nonlocal first
            if first:
                print("sampling", flush=True)
                first = False

        end = await PtraceSampler(pid, 49).run(sink, stop)
        print(end.value, flush=True)

    asyncio.run(main(int(sys.argv[1])))
    """
)


def start_script(tmp_path: Path, pid: int) -> subprocess.Popen[str]:
    script = tmp_path / "sample.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(pid)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "sampling\n", (line, proc.stderr.read() if proc.stderr else "")
    return proc


def test_sigterm_to_the_sampling_process_detaches(run_target: Spawn, tmp_path: Path) -> None:
    pid = run_target("spin").pid
    script = start_script(tmp_path, pid)
    time.sleep(1.0)
    script.send_signal(signal.SIGTERM)
    out, err = script.communicate(timeout=10)
    assert script.returncode == 0, err
    assert out == "stopped\n"
    assert_released(pid)


def test_sigkill_of_the_sampling_process_detaches(run_target: Spawn, tmp_path: Path) -> None:
    # Nothing of ours runs on SIGKILL: the kernel detaches every tracee when its
    # tracer dies, resuming those it had stopped. This documents that guarantee.
    pid = run_target("spin").pid
    script = start_script(tmp_path, pid)
    time.sleep(1.0)
    script.kill()
    script.communicate(timeout=10)
    assert_released(pid)
