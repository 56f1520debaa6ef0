"""What the dashboard asks of the engine, live and replayed, on real processes.

One recording of spin (perf, 499 Hz) is shared by the tests that only read it;
replays of it must answer every question exactly as the live engine did.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from livesym.capture.reader import read_capture
from livesym.commands.top import top_json
from livesym.engine import Engine, replay_snapshot
from livesym.records import Frame
from livesym.sampling.perf_event import PerfSampler
from livesym.symbolize import resolver
from livesym.target.process import TargetProcess
from tests.support.capture_json import capture_json
from tests.support.procs import running


@pytest.fixture(scope="module")
def session(built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path, int]]:
    """A finished live engine on spin, its capture, and spin's pid."""
    path = tmp_path_factory.mktemp("session") / "spin.json.gz"
    with running(built("spin")) as proc:
        engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
        engine.captures.record_to(path)
        asyncio.run(engine.run(asyncio.Event(), duration=2.5))
        yield engine, path, proc.pid


def function(engine: Engine, name: str) -> Frame:
    return next(r.frame for r in engine.snapshot().view.functions if r.frame.symbol == name)


def test_the_header_facts_name_the_target_and_follow_its_cpu(session):
    engine, _path, pid = session
    snap = engine.snapshot()
    assert snap.target.pid == pid
    assert snap.target.exe is not None and Path(snap.target.exe).name == "spin"
    assert snap.target.user == pwd.getpwuid(os.getuid()).pw_name
    assert "spin" in snap.target.command_line
    # Readings once a second; spin runs three busy threads plus main.
    assert len(snap.process) >= 1
    assert all(p.threads == 4 for p in snap.process)
    assert all(p.cpu_pct > 50 and p.rss > 0 for p in snap.process)
    # Samples per second add up to the samples counted.
    assert sum(snap.rate_history) == snap.view.samples


def test_hot_addresses_cover_every_sample_of_the_function(session):
    engine, _path, _pid = session
    view = engine.snapshot().view
    for row in view.functions[:4]:
        hot = engine.hot_addresses(row.frame, limit=10_000)
        # One innermost occurrence per sample holding the function: executing (as the
        # leaf) for its self samples, a call it was making for the others.
        assert sum(h.samples for h in hot) == row.total_samples
        assert sum(h.samples for h in hot if not h.call) == row.self_samples
        assert [h.samples for h in hot] == sorted((h.samples for h in hot), reverse=True)
        for record, _n, _call in hot:
            assert record.symbol == row.frame.symbol
            assert record.symbol_offset is not None and record.symbol_size is not None
            assert 0 <= record.symbol_offset < record.symbol_size
    # spin's hot_alpha both runs and calls leaf_work: both kinds show, apart.
    alpha = next(r for r in view.functions if r.frame.symbol == "hot_alpha")
    kinds = {h.call for h in engine.hot_addresses(alpha.frame, limit=10_000)}
    assert kinds == {True, False}


def test_hot_addresses_select_the_samples_the_view_does(session):
    engine, _path, _pid = session
    full = engine.snapshot().view
    threads = [t.tid for t in full.threads]
    assert len(threads) >= 2
    for row in full.functions[:6]:
        per_thread = 0
        for tid in threads:
            view = engine.snapshot(thread=tid).view
            hot = engine.hot_addresses(row.frame, 10_000, thread=tid)
            theirs = next((r for r in view.functions if r.frame == row.frame), None)
            assert sum(h.samples for h in hot) == (theirs.total_samples if theirs else 0)
            per_thread += sum(h.samples for h in hot)
        assert per_thread == row.total_samples
        recent = engine.snapshot(recent=True).view
        hot = engine.hot_addresses(row.frame, 10_000, recent=True)
        theirs = next((r for r in recent.functions if r.frame == row.frame), None)
        assert sum(h.samples for h in hot) == (theirs.total_samples if theirs else 0)
        module = row.frame.module
        by_module = engine.snapshot(module=module).view
        hot = engine.hot_addresses(row.frame, 10_000, module=module)
        theirs = next((r for r in by_module.functions if r.frame == row.frame), None)
        assert sum(h.samples for h in hot) == (theirs.total_samples if theirs else 0)


def test_mapping_rows_carry_facts_and_the_leaf_samples(session):
    engine, _path, _pid = session
    rows = engine.mappings()
    snap = engine.snapshot()
    text = next(r for r in rows if Path(r.record.path).name == "spin" and "x" in r.record.perms)
    assert text.status == "live" and not text.flagged
    assert text.record.e_type == "ET_DYN" and text.record.build_id
    assert text.record.base is not None and text.record.base % 4096 == 0
    assert text.record.symbol_source is not None and "symtab" in text.record.symbol_source
    hot_self = sum(r.self_samples for r in snap.view.functions if r.frame.symbol in {
        "hot_alpha", "hot_beta", "hot_gamma", "leaf_work"})  # fmt: skip
    assert text.samples >= hot_self > 0
    # Every sample whose leaf is in a mapping is counted in exactly one row (a kernel
    # frame's module, [kernel], is no mapping of the process).
    mapped = sum(
        r.self_samples for r in snap.view.functions if r.frame.module and r.frame.kind != "kernel"
    )
    assert sum(r.samples for r in rows) == mapped
    assert [r.record.start for r in rows] == sorted(r.record.start for r in rows)


async def counted(engine: Engine, within: float = 30.0) -> int:
    """The samples counted, once there are some (``within`` seconds at most)."""
    deadline = time.monotonic() + within
    while (samples := engine.snapshot().view.samples) == 0:
        assert time.monotonic() < deadline, "no sample was counted"
        await asyncio.sleep(0.05)
    return samples


def test_reset_forgets_the_counts_but_the_capture_keeps_everything(built, tmp_path):
    async def go() -> None:
        with running(built("spin")) as proc:
            engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
            stop = asyncio.Event()
            task = asyncio.create_task(engine.run(stop))
            # (until samples were counted: on a busy machine the first take a while)
            before = await counted(engine)
            engine.reset()
            snap = engine.snapshot()
            assert snap.view.samples == 0 and snap.view.functions == ()
            assert all(r.samples == 0 for r in engine.mappings())
            assert engine.hot_addresses(Frame("hot_alpha", "hot_alpha", None)) == []
            await counted(engine)
            stop.set()
            await task
            after = engine.snapshot().view.samples
            assert after > 0
            doc = engine.captures.document()
            assert len(doc["samples"]) == before + after

    asyncio.run(go())


def test_a_replay_answers_every_question_as_the_live_session_did(session):
    engine, path, _pid = session
    replay = Engine.for_capture(read_capture(path))
    replay.replay_all()
    live, again = engine.snapshot(), replay.snapshot()
    assert top_json(again, 100) == top_json(live, 100)
    assert again.source == "replay" and again.progress == 1.0
    assert again.target == live.target
    assert [(p.cpu_pct, p.rss, p.threads) for p in again.process] == [
        (round(p.cpu_pct, 1), p.rss, p.threads) for p in live.process
    ]
    _same_answers(replay, engine)
    assert top_json(replay_snapshot(read_capture(path)), 100) == top_json(again, 100)
    # The recent window (the last 5 s) agrees too.
    assert (
        replay.snapshot(recent=True).view.functions == engine.snapshot(recent=True).view.functions
    )


def _same_answers(replay: Engine, engine: Engine) -> None:
    """The maps pane, the hot addresses of the busiest functions and a thread's view."""
    assert [(r.record, r.samples) for r in replay.mappings()] == [
        (r.record, r.samples) for r in engine.mappings()
    ]
    live = engine.snapshot()
    for row in live.view.functions[:4]:
        ours = [(r.vma, r.steps, n, c) for r, n, c in replay.hot_addresses(row.frame)]
        theirs = [(r.vma, r.steps, n, c) for r, n, c in engine.hot_addresses(row.frame)]
        assert ours == theirs
    tid = live.view.threads[0].tid
    assert replay.snapshot(thread=tid).view == engine.snapshot(thread=tid).view


def test_a_recording_counts_when_asked_and_answers_as_its_replay_does(built, tmp_path):
    # GIVEN a session that counts its samples only when a view is asked for, as
    # ``record`` runs it (nobody looks until it ends)
    path = tmp_path / "deferred.json.gz"
    with running(built("spin")) as proc:
        engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
        engine.counted.deferred = True
        engine.captures.record_to(path)
        asked: list[tuple[int, int, int]] = []
        named: set[str] = set()

        async def session() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(engine.run(stop, duration=2.5))
            await asyncio.sleep(1.5)
            # WHILE it runs, its profile holds nothing until asked; asked, everything
            log = engine.counted.profile.log
            before = len(log.moments)
            # (its capture names the threads as they ran, though nothing was counted)
            named.update(read_capture(path).threads.values())
            snap = engine.snapshot()
            asked.append((before, snap.view.samples, engine.counted.samples))
            await task

        asyncio.run(session())
    ((before, seen, counted),) = asked
    assert before == 0 and seen == counted > 300, asked
    assert {"alpha", "beta", "gamma"} <= named, named
    # THEN at its end it answers every question as its replay does
    replay = Engine.for_capture(read_capture(path))
    replay.replay_all()
    live, again = engine.snapshot(), replay.snapshot()
    assert live.view.samples == live.stacks_counted == sum(live.rate_history) > seen
    assert top_json(again, 100) == top_json(live, 100)
    _same_answers(replay, engine)


def test_a_capture_with_repeated_stacks_replays_by_its_own_ids(session, tmp_path):
    """Stack ids are the capture's, duplicates included (a hand-edited or foreign file)."""
    _engine, path, _pid = session
    doc = capture_json(path)
    doc["stacks"].append(doc["stacks"][0])  # the same frames under a new id
    moved = len(doc["stacks"]) - 1
    for sample in doc["samples"][::2]:
        if sample[2] == 0:
            sample[2] = moved
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert (
        top_json(replay_snapshot(read_capture(edited)), 100)["functions"]
        == top_json(replay_snapshot(read_capture(path)), 100)["functions"]
    )


async def test_a_replay_at_speed_advances_with_the_clock(session):
    _engine, path, _pid = session
    capture = read_capture(path)
    span = capture.session["end"] - capture.session["start"]  # type: ignore[operator]
    replay = Engine.for_capture(capture, speed=span / 3.0)  # the whole capture in ~3 s
    stop = asyncio.Event()
    begun = time.monotonic()
    task = asyncio.create_task(replay.run(stop))
    middle = replay.snapshot()
    while (middle.progress or 0.0) < 0.1 and not task.done():  # polled: a busy machine lags
        await asyncio.sleep(0.02)
        middle = replay.snapshot()
    assert middle.state == "replay"
    assert middle.progress is not None and 0.1 <= middle.progress < 0.9
    assert 0 < middle.view.samples < len(capture.samples)
    # The clock sets the pace: a tenth of the capture takes a good part of 0.3 s.
    assert time.monotonic() - begun > 0.2
    await asyncio.wait_for(task, 10)
    assert time.monotonic() - begun > 2.5
    end = replay.snapshot()
    assert end.progress == 1.0 and end.state == capture.session["end_reason"]
    assert top_json(end, 100) == top_json(replay_snapshot(capture), 100)


def test_libraries_loaded_and_unloaded_keep_their_rows_and_samples(built):
    built("libchurn_a.so"), built("libchurn_b.so")
    with running(built("churn")) as proc:
        engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
        asyncio.run(engine.run(asyncio.Event(), duration=2.0))
        rows = engine.mappings()
    churn = [r for r in rows if Path(r.record.path).name.startswith("libchurn_")]
    if {Path(r.record.path).name for r in churn} != {"libchurn_a.so", "libchurn_b.so"}:
        pytest.skip("the maps were never read while each churn library was loaded")
    current = {m.key for m in engine.generations[-1].mappings}
    for row in churn:
        assert (row.status == "removed") == (row.key not in current), row
    # The samples of each library's rows are the samples of that library's
    # functions: nearly all in its busy function, the odd one in its PLT stub
    # for clock_gettime, on the way out of the loop to read the clock.
    view = engine.snapshot().view
    for lib, func in (("libchurn_a.so", "churn_a_work"), ("libchurn_b.so", "churn_b_work")):
        in_rows = sum(r.samples for r in churn if Path(r.record.path).name == lib)
        in_lib = [f for f in view.functions if Path(f.frame.module or "").name == lib]
        assert in_rows == sum(f.self_samples for f in in_lib)
        assert all(f.frame.symbol for f in in_lib), in_lib  # the PLT stub has its name
        in_func = sum(f.self_samples for f in in_lib if f.frame.symbol == func)
        assert in_func >= 0.95 * in_rows, in_lib


def test_source_lines_match_addr2line_and_the_final_capture_has_them(session):
    engine, path, _pid = session
    addr2line = shutil.which("addr2line")
    if addr2line is None:
        pytest.skip("addr2line is not installed (binutils)")
    frame = function(engine, "hot_alpha")
    (record, _n, _call), *_ = engine.hot_addresses(frame)
    found = engine.source_line(record)
    assert found is not None and Path(found[0]).name == "spin.c"
    assert record.module is not None and record.elf_vaddr is not None
    out = subprocess.run(
        [addr2line, "-e", record.module, f"{record.elf_vaddr:#x}"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    file, _, line = out.rpartition(":")
    assert (Path(file).name, int(line.split()[0])) == (Path(found[0]).name, found[1])
    # The last write of a recording carries the lines; a replay answers from them.
    replay = Engine.for_capture(read_capture(path))
    replay.replay_all()
    again = next(h.record for h in replay.hot_addresses(frame) if h.record.vma == record.vma)
    assert (again.source_file, again.line) == found
    assert replay.source_line(again) == found


# Code of the C runtime's start and init/fini files, compiled without debug info.
NO_DWARF = frozenset({"_start", "_init", "_fini", "deregister_tm_clones", "register_tm_clones",
                      "__do_global_dtors_aux", "frame_dummy"})  # fmt: skip


GENERATIONS_PAST_HELD = 6  # maps generations the churn run reaches, past the 3 held


async def _run_past_generations(engine: Engine, seconds: float, generations: int) -> None:
    """Run ``engine`` for ``seconds`` and until it has seen ``generations`` maps
    generations (30 s at most)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    began = loop.time()

    async def watch() -> None:
        while loop.time() - began < 30 and (
            loop.time() - began < seconds or len(engine.generations) < generations
        ):
            await asyncio.sleep(0.05)
        stop.set()

    watcher = asyncio.create_task(watch())
    await engine.run(stop)
    await watcher


def test_an_address_gets_its_source_line_in_every_generation_that_mapped_it(
    built, tmp_path, monkeypatch
):
    """churn maps its libraries again and again: one address is one frame per maps
    generation, and the generations the resolver no longer holds must still get their
    lines, the same line for the same address. (The resolver is made to hold 3 of them,
    not 16, so that a short run certainly outlives some.)"""
    monkeypatch.setattr(resolver, "MAX_SYMBOLIZERS", 3)
    # Every line, however busy the machine: the budget is not what this test is about.
    monkeypatch.setattr("livesym.engine.lines.LINES_BUDGET", 60.0)
    built("libchurn_a.so"), built("libchurn_b.so")
    with running(built("churn")) as proc:
        engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
        # Two seconds, and on until the resolver has let generations go (a busy machine
        # slows churn's remapping: 3 generations in 2 s there)
        asyncio.run(_run_past_generations(engine, 2.0, GENERATIONS_PAST_HELD))
        engine.captures.write(tmp_path / "churn.json")
    capture = read_capture(tmp_path / "churn.json")
    held = {g.number for g in capture.maps[-3:]}
    ours = [f for f in capture.frames if f.object is not None and "churn" in (f.module or "")]
    if not {f.generation for f in ours} - held:
        pytest.skip(f"all samples fell in the last 3 of {len(capture.maps)} maps generations")
    lines: dict[tuple[int, int | None], set[int | None]] = {}
    # PLT stubs are made by the linker, _start comes from glibc's crt1.o (reached now that
    # stacks are unwound to their root), a library's _init from crti.o (reached when
    # dlopen runs it, its first touch a page fault, now that kernel time is sampled):
    # DWARF has no line for them.
    stubs = set()
    for f in ours:
        assert f.object is not None
        lines.setdefault((f.object, f.elf_vaddr), set()).add(f.line)
        if (f.symbol or "").endswith("@plt") or f.symbol in NO_DWARF:
            stubs.add((f.object, f.elf_vaddr))
    assert all(len(found) == 1 for found in lines.values()), lines
    unexplained = [
        (f.object, hex(f.elf_vaddr or 0), f.symbol, f.generation)
        for f in ours
        if (None in lines[(f.object, f.elf_vaddr)]) != ((f.object, f.elf_vaddr) in stubs)
    ]
    assert unexplained == [], (unexplained, [(o.id, o.path) for o in capture.objects])


def test_jit_code_named_after_its_first_samples_gets_its_name(built, tmp_path):
    """jit_beta runs for a second before its perf map line is written (a JIT that buffers
    its map): its first samples cannot be named when they are stored; once the map is
    read again they are named, the earlier samples' frames too, as perf names them all
    from the map."""
    capture = tmp_path / "jit.json"
    renamed: list[int] = []

    async def go() -> None:
        with running(built("jitmap"), "--late-line", "1000") as proc:
            engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 499))
            engine.captures.record_to(capture)
            stop = asyncio.Event()
            task = asyncio.create_task(engine.run(stop))
            await asyncio.sleep(0.25)  # the first drain has read the perf map
            os.kill(proc.pid, signal.SIGUSR1)
            await asyncio.sleep(3.0)  # a second unnamed, then the map read again
            stop.set()
            await task
            renamed.extend(engine.tables.renamed)

    asyncio.run(go())
    recorded = read_capture(capture)
    leaves = [(t, recorded.frames[recorded.stacks[sid][0]]) for t, _tid, sid, *_ in
              sorted(recorded.samples) if recorded.stacks[sid]]  # fmt: skip
    named = {name: [t for t, f in leaves if f.symbol == name] for name in ("jit_alpha", "jit_beta")}
    assert named["jit_alpha"] and named["jit_beta"], {n: len(ts) for n, ts in named.items()}
    # THEN no JIT sample is left unnamed, whenever it was taken or processed: rings are
    # drained apart, so samples taken after ones the map named were processed before it
    # was read again (CI run 132: two, 3 ms after jit_beta's first named sample)
    jit = [(t, f) for t, f in leaves if f.kind == "native" and f.object is None and f.vma]
    unnamed = [(round(t, 3), f.reason) for t, f in jit if not f.symbol]
    assert len(jit) > len(named["jit_alpha"]) // 2, len(jit)  # (the check sees JIT frames)
    assert unnamed == [], unnamed
    # (and some were first stored unnamed, then named in place: what this is about)
    beta = {f.id for _t, f in jit if f.symbol == "jit_beta"}
    assert beta & set(renamed), (sorted(beta), renamed)


def test_a_finished_session_reuses_its_views_when_filters_are_toggled_back(session):
    engine, _path, _pid = session
    tids = [row.tid for row in engine.snapshot().view.threads]
    assert len(tids) >= 2
    first = engine.snapshot(thread=tids[0]).view
    engine.snapshot(thread=tids[1])
    engine.snapshot()
    assert engine.snapshot(thread=tids[0]).view is first  # nothing new was counted
    assert engine.snapshot(thread=tids[0], recent=True).view is not first


def _long_capture(seconds: float) -> object:
    """tests/ui/data/spin.json (2 s of spin at 99 Hz) repeated over ``seconds``."""
    import dataclasses

    from livesym.capture.reader import read_capture

    base = read_capture(Path(__file__).resolve().parents[1] / "ui" / "data" / "spin.json")
    span = 2.1
    rows = [
        (t + k * span, tid, stack, flags, weight)
        for k in range(int(seconds / span))
        for t, tid, stack, flags, weight in base.samples
    ]
    session = {**base.session, "end": base.session["start"] + seconds, "samples": len(rows)}
    return dataclasses.replace(base, samples=tuple(rows), session=session)


@pytest.mark.parametrize(("speed", "watch"), [(1.0, 3.0), (10.0, 3.0)])
async def test_a_replay_at_speed_x_shows_what_the_session_had_at_the_same_elapsed_time(
    speed, watch
):
    import bisect

    capture = _long_capture(60.0)
    times = [row[0] for row in capture.samples]
    rate = len(times) / 60.0  # samples per second of the capture
    engine = Engine.for_capture(capture, speed=speed)
    stop = asyncio.Event()
    running = asyncio.create_task(engine.run(stop))
    seen = []
    for _ in range(int(watch / 0.5)):
        await asyncio.sleep(0.5)
        snap = engine.snapshot()
        seen.append((snap.elapsed, snap.view.samples, snap.samples, snap.progress))
    stop.set()
    await running
    refresh = 0.25 + 0.1  # the dashboard's refresh period and the engine's tick
    for elapsed, counted, header, progress in seen:
        due = bisect.bisect_right(times, elapsed)
        # What the tables count is what the session had then, within one refresh ...
        assert abs(counted - due) <= rate * refresh * speed + 2, (elapsed, counted, due)
        # ... and the header's count and the progress say the same
        assert abs(header - counted) <= rate * refresh * speed + 2, (header, counted)
        assert progress is not None and abs(progress - elapsed / 60.0) <= refresh * speed / 60
    assert seen[-1][0] == pytest.approx(watch * speed, rel=0.15)


def test_samples_lost_are_marked_on_the_timeline_live_and_in_the_capture(built, tmp_path):
    """Issue 30: the timeline marks where samples were lost. Each thread's ring holds a
    quarter to half a second of its samples; the event loop is blocked for 2 s a second
    in, and the kernel drops samples then."""
    from livesym.capture.reader import lost_at
    from livesym.records import MARK_LOST

    path = tmp_path / "lossy.json"

    async def go() -> tuple[Engine, float]:
        with running(built("spin")) as proc:
            engine = Engine(TargetProcess(proc.pid), PerfSampler(proc.pid, 999))
            engine.captures.record_to(path)
            stop = asyncio.Event()
            task = asyncio.create_task(engine.run(stop))
            await asyncio.sleep(1.0)
            blocked_at = engine.clock() - engine.started
            time.sleep(2.0)  # blocks the event loop: nothing reads the rings meanwhile
            await asyncio.sleep(0.6)
            stop.set()
            await task
            return engine, blocked_at

    engine, blocked = asyncio.run(go())
    snap = engine.snapshot()
    assert snap.lost > 0
    # THEN the capture says in which seconds, adding up to the total, nearly all of them
    # lost in the seconds the loop was blocked in (or the tick after: when livesym
    # learnt of it)
    doc = read_capture(path)
    seconds = dict(lost_at(doc.session))
    assert sum(seconds.values()) == doc.session["lost"] == snap.lost
    then = sum(n for s, n in seconds.items() if int(blocked) <= s <= blocked + 2.5)
    assert then >= 0.9 * snap.lost, (seconds, blocked)
    # ... each such second is marked on the timeline, live and in its replay alike
    marked = sorted(m for m, kind in snap.timeline.marks if kind == MARK_LOST)
    assert marked == sorted(float(s) for s in seconds), (marked, seconds)
    replayed = replay_snapshot(doc)
    assert sorted(m for m, kind in replayed.timeline.marks if kind == MARK_LOST) == marked
