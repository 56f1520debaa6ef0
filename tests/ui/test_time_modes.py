"""The dashboard's time: a live session of a thread that computes, sleeps and waits,
shown as wall time, off-CPU time and CPU time in turn ('o'), the header saying which, and
the threads pane splitting each thread's time; a session without off-CPU time says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from livesym.engine import Engine
from livesym.records import TimeMode
from livesym.sampling.choice import choose_sampler
from livesym.sampling.perf_event import kernel_refused
from livesym.target.process import TargetProcess
from livesym.ui.app import DashboardApp
from livesym.ui.timeline import Timeline
from tests.ui.screen import rows, screen_text, until

pytestmark = pytest.mark.skipif(
    kernel_refused() is not None,
    reason=f"perf's switch events need kernel mode: {kernel_refused()}",
)


def shares(table) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {name: float(total) for name, total in rows(table, "function", "total")}


def sleep_of_waits(parts: dict[str, float]) -> float:
    """The sleep's share of waits's two waits (its sleep and its wait on a futex), in %."""
    sleep, wait = parts.get("sleep_part", 0.0), parts.get("wait_part", 0.0)
    return 100 * sleep / (sleep + wait) if sleep + wait else 0.0


def app_for(run_target, tmp_path: Path, mode: TimeMode) -> tuple[int, DashboardApp]:  # type: ignore[no-untyped-def]
    proc = run_target("waits")
    sampler = choose_sampler("perf", proc.pid, 199, mode).sampler
    return proc.pid, DashboardApp(Engine(TargetProcess(proc.pid), sampler), pid=proc.pid,
                                  directory=tmp_path)  # fmt: skip


async def test_o_shows_wall_then_off_cpu_then_cpu_time_and_the_threads_split(run_target, tmp_path):
    pid, app = app_for(run_target, tmp_path, TimeMode.WALL)
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.dashboard.table_of("functions")
        # GIVEN the session's wall time, three seconds of it
        await until(pilot, lambda: app.dashboard.last is not None
                    and app.dashboard.last.elapsed > 3.0, timeout=20, what="3 s")  # fmt: skip
        await until(pilot, lambda: "sleep_part" in shares(table), timeout=5, what="sleep_part")
        assert "wall time" in screen_text(app)
        wall = shares(table)
        assert abs(wall["sleep_part"] - 50) <= 7 and abs(wall["cpu_part"] - 25) <= 7, wall
        # WHEN 'o' is pressed: off-CPU time, then CPU time
        await pilot.press("o")
        await until(pilot, lambda: "off-cpu time" in screen_text(app), timeout=5,
                    what="the off-CPU view")  # fmt: skip
        await until(pilot, lambda: abs(sleep_of_waits(shares(table)) - 67) <= 7,
                    timeout=5, what="its sleep two thirds of its waits")  # fmt: skip
        off = shares(table)
        # (Of its two waits: a busy box adds time waiting for a CPU, preempted in its
        # compute part, to its off-CPU time; CI run 118 had 9.5 % of it beside `yes`.)
        assert abs(sleep_of_waits(off) - 67) <= 7, off
        # (cpu_part only where it waited for a CPU: preempted)
        assert off.get("cpu_part", 0) <= off.get("[waiting for a CPU]", 0) + 0.5, off
        await pilot.press("o")
        await until(pilot, lambda: "cpu time" in screen_text(app), timeout=5, what="CPU view")
        # (no wait for a CPU in CPU time: that frame is off-CPU time's alone)
        await until(pilot, lambda: "[waiting for a CPU]" not in shares(table), timeout=5,
                    what="no off-CPU time in CPU time")  # fmt: skip
        assert shares(table).get("cpu_part", 0) >= 80
        # ... and the threads pane splits the thread's time: on a CPU a quarter, asleep the rest
        await pilot.press("2")
        threads = app.dashboard.table_of("threads")
        await until(pilot, lambda: bool(rows(threads, "tid")), timeout=5, what="thread rows")
        split = {int(tid): (float(on), float(sleep))
                 for tid, on, sleep in rows(threads, "tid", "on", "sleep")}  # fmt: skip
        on, sleep = split[pid]
        assert abs(on - 25) <= 7 and abs(sleep - 75) <= 7, split[pid]
        # AND the timeline has a row of time off the CPU; with the thread chosen, its rows
        # are its own: each full second on a CPU a quarter of the time, off it the rest
        assert [line[:4] for line in screen_text(app).split("\n")[3:5]] == ["cpu ", "off "]
        threads.select_key(str(pid))
        await pilot.press("enter")
        timeline = app.dashboard.query_one(Timeline)
        await until(pilot, lambda: timeline.data is not None
                    and timeline.data.threads == f"thread {pid}", timeout=5,
                    what="the thread's timeline")  # fmt: skip
        data = timeline.data
        assert data is not None and data.off_cpu is not None
        full = int(timeline.seconds)
        cpu, off = sum(data.per_second[:full]), sum(data.off_cpu[:full])
        assert abs(100 * cpu / (cpu + off) - 25) <= 7, (data.per_second, data.off_cpu)
        assert f"thread {pid}" in screen_text(app).split("\n")[5]
        await pilot.press("q")


async def test_o_in_a_session_without_off_cpu_time_says_how_to_have_it(run_target, tmp_path):
    _, app = app_for(run_target, tmp_path, TimeMode.CPU)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        table = app.dashboard.table_of("functions")
        await until(pilot, lambda: "cpu_part" in shares(table), timeout=15, what="cpu_part")
        await pilot.press("o")
        await until(pilot, lambda: any("start it with --mode wall" in str(n.message)
                                       for n in app._notifications), timeout=5,
                    what="the note")  # fmt: skip
        # ... and the view stays CPU time, the header saying nothing of a time it lacks
        assert app.dashboard.mode is None and "time" not in screen_text(app).split("\n")[1]
        seen = shares(table)
        assert "do_nanosleep" not in seen and "[waiting for a CPU]" not in seen, seen
        await pilot.press("q")
