"""Maps generations: a sample meets the maps of its own time, never a later library's.

The churn target dlopen()s libchurn_a.so and libchurn_b.so in turn, and the
loader puts them at the same address. An address inside that range means
churn_a_work while a is loaded and churn_b_work while b is.
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

import pytest

from livesym.addr.convert import BaseDerivation
from livesym.records import TimeMode
from livesym.symbolize.resolver import AddressResolver
from livesym.target.maps_watcher import MappingEvent, MapsGeneration, MapsWatcher
from livesym.target.process import TargetProcess

FUNCS = {"libchurn_a.so": "churn_a_work", "libchurn_b.so": "churn_b_work"}


def churn_lib(generation: MapsGeneration) -> tuple[str, int] | None:
    """(library name, start of its executable mapping) if one is loaded."""
    for e in generation.snapshot.entries:
        name = Path(e.path).name
        if name in FUNCS and e.executable:
            return name, e.start
    return None


def test_watcher_numbers_only_changed_maps(run_target):
    proc = run_target("spin")
    clock = iter(range(1000)).__next__
    watcher = MapsWatcher(TargetProcess(proc.pid), clock=lambda: float(clock()), min_interval=0)
    first = watcher.current
    assert watcher.refresh() is first  # nothing changed: same generation
    assert watcher.reads == 2 and first.number == 1


def test_samples_resolve_against_the_generation_of_their_time(run_target):
    proc = run_target("churn")
    watcher = MapsWatcher(TargetProcess(proc.pid), min_interval=0)
    seen: dict[str, MapsGeneration] = {}
    deadline = time.monotonic() + 15
    while len(seen) < 2 and time.monotonic() < deadline:
        loaded = churn_lib(watcher.refresh())
        if loaded and loaded[0] not in seen:
            seen[loaded[0]] = watcher.current
        time.sleep(0.003)
    if len(seen) < 2:
        pytest.skip("never caught both churn libraries loaded within 15 s")
    starts = {work_vma(g)[0] for g in seen.values()}
    assert len(starts) == 1, "the loader used different addresses; the case needs the same one"
    resolver = AddressResolver(TargetProcess(proc.pid), watcher)
    for name, generation in seen.items():
        _start, vma = work_vma(generation, resolver)
        # A sample stamped with this generation's time gets this generation's library.
        expl = resolver.explain(vma, generation.taken_at)
        assert expl.symbol is not None and expl.symbol.name == FUNCS[name], (name, expl)


def work_vma(
    generation: MapsGeneration, resolver: AddressResolver | None = None
) -> tuple[int, int]:
    """(start of the churn library's executable mapping, an address inside its work function)."""
    loaded = churn_lib(generation)
    assert loaded is not None
    name, start = loaded
    if resolver is None:
        return start, 0
    symbolizer = resolver.symbolizer(generation)
    entry = generation.snapshot.find(start)
    assert entry is not None
    obj, base = symbolizer.object_for(entry), symbolizer.base_for(entry)
    assert obj is not None and obj.symbols is not None and isinstance(base, BaseDerivation)
    work = next(e for e in obj.symbols.entries() if e.name == FUNCS[name])
    return start, base.base + work.vaddr + 1


def test_unmapped_address_after_the_target_exits_stays_unmapped(built):
    from tests.support.procs import running

    with running(built("spin")) as proc:
        target = TargetProcess(proc.pid)
        resolver = AddressResolver(target, MapsWatcher(target, min_interval=0))
    # The process is gone now: resolving an unknown address must not raise.
    generation, expl = resolver.resolve(0x10, time.monotonic())
    assert expl.symbol is None and expl.reason is not None
    assert expl.reason.value == "unmapped"
    assert generation.number == 1


def test_a_mapping_created_after_the_sample_never_takes_it(tmp_path):
    """The sample's own mapping came and went between two reads of the maps, and
    another took its place: the sampler's mmap record says the new one is younger
    than the sample, so the address stays unmapped instead of changing hands."""
    target = TargetProcess(os.getpid())  # this process: it maps a file on cue
    watcher = MapsWatcher(target, min_interval=0)
    data = tmp_path / "replacement.bin"
    data.write_bytes(b"\0" * 8192)
    sample_time = time.monotonic()  # a sample after the first read, before the file
    with open(data, "rb") as f, mmap.mmap(f.fileno(), 8192, prot=mmap.PROT_READ):
        created = time.monotonic()  # when perf would have stamped its mmap record
        later = watcher.refresh(force=True)
        entry = next(e for e in later.snapshot.entries if e.path == str(data))
        vma = entry.start + 16
        assert watcher.at(sample_time).snapshot.find(vma) is None

        plain = AddressResolver(target, watcher)
        generation, expl = plain.resolve(vma, sample_time)
        # Without mmap records nothing says the file is younger: it is used.
        assert generation is later and expl.mapping == entry

        told = AddressResolver(target, watcher)
        told.note_mappings([MappingEvent(created, entry.start, entry.end, 0, str(data))])
        generation, expl = told.resolve(vma, sample_time)
        assert generation.number == 1 and expl.mapping is None
        assert expl.reason is not None and expl.reason.value == "unmapped"
        assert "came and went" in expl.detail and str(data) in expl.detail
        # A sample taken after the mapping was created does get it.
        generation, expl = told.resolve(vma, created + 1e-6)
        assert generation is later and expl.mapping == entry


def test_generations_kept_are_bounded_by_mappings_and_share_plain_records(run_target, monkeypatch):
    # GIVEN an engine on churn (its maps change with every dlopen), allowed few mappings
    import livesym.engine.tables as tables_module
    from livesym.engine import Engine
    from livesym.engine.live import LiveSide
    from livesym.sampling.choice import choose_sampler

    proc = run_target("churn")
    engine = Engine(
        TargetProcess(proc.pid), choose_sampler("auto", proc.pid, 99, TimeMode.CPU).sampler
    )
    side = engine.side
    assert isinstance(side, LiveSide)
    per_generation = len(side.watcher.current.snapshot.entries)
    monkeypatch.setattr(tables_module, "MAX_KEPT_MAPPINGS", per_generation * 3)
    # WHEN many generations are noted
    deadline = time.monotonic() + 15
    while side.watcher.current.number < 8 and time.monotonic() < deadline:
        side.watcher.refresh()
        side.prepare()  # notes the current generation
        time.sleep(0.01)
    if side.watcher.current.number < 8:
        pytest.skip("churn's maps changed fewer than 8 times in 15 s")
    kept = engine.generations
    # THEN the oldest went, so that the mappings kept stay within the bound ...
    total = sum(len(g.mappings) for g in kept)
    assert 1 < len(kept) < side.watcher.current.number
    assert total <= per_generation * 3 + max(len(g.mappings) for g in kept)
    # ... and a mapping with nothing behind it is one record in every generation
    anon = {id(m) for g in kept for m in g.mappings if m.object is None and not m.path}
    distinct = {(m.start, m.end, m.perms) for g in kept for m in g.mappings
                if m.object is None and not m.path}  # fmt: skip
    assert anon and len(anon) == len(distinct)


def test_a_process_letting_its_address_space_go_as_it_exits_is_no_new_generation(built):
    """An exiting process (a zombie, here) has empty maps: not a maps change (a timeline
    showed it as one, an 'M' at the session's end, in a CI run beside a busy core)."""
    import subprocess

    proc = subprocess.Popen([str(built("spin")), "0.3"], stdout=subprocess.DEVNULL)
    try:
        watcher = MapsWatcher(TargetProcess(proc.pid), min_interval=0)
        first = watcher.refresh(force=True)
        assert first.snapshot.entries
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "spin did not exit"
            time.sleep(0.05)
        assert Path(f"/proc/{proc.pid}/maps").read_text() == ""  # (what the watcher reads)
        # THEN the generation current is the one it had, and no other was made
        assert watcher.refresh(force=True) is first
        assert watcher.history[-1] is first and all(g.snapshot.entries for g in watcher.history)
    finally:
        proc.wait()
