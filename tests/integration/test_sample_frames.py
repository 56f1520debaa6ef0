"""From a raw sample to frame ids, without a session (livesym.frames.SampleFrames).

deep (sample_targets/deep.c, -O2 -fomit-frame-pointer) parks its threads at the
bottom of known call chains; each thread's registers and stack copy, taken through
ptrace (tests/support/stackshot.py), is a raw sample as a perf or ptrace sampler
hands it over. The component alone (a maps watcher, a resolver and a table; no
engine, no sampler) unwinds it, names each frame, adds the kernel's frame a sampler
saw and says how each stack ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from livesym.engine.tables import SessionTables
from livesym.frames.sample_frames import SampleFrames
from livesym.records import KIND_KERNEL, KIND_TRUNCATED, FrameRecord, StackEnd
from livesym.sampling import ptrace_abi as abi
from livesym.sampling.base import Sample
from livesym.symbolize.kernel import KernelSymbols
from livesym.symbolize.process import cache_for
from livesym.symbolize.resolver import AddressResolver
from livesym.target.maps_watcher import MapsWatcher
from livesym.target.process import TargetProcess
from livesym.unwind.walk import MACHINES, StackCopy
from tests.support.procs import running
from tests.support.stackshot import Shot, shoot_all

pytestmark = pytest.mark.skipif(
    abi.arch_for().machine != "x86_64", reason="deep's chains are checked on x86-64"
)
CHAIN = ["park", "chain_c", "chain_b", "chain_a"]


@pytest.fixture
def parked(built: Callable[[str], Path]) -> Iterator[tuple[int, list[Shot]]]:
    with running(built("deep")) as proc:
        time.sleep(0.1)
        yield proc.pid, shoot_all(proc.pid)


def _component(pid: int) -> tuple[SampleFrames, SessionTables, list[int]]:
    target = TargetProcess(pid)
    watcher = MapsWatcher(target)
    tables = SessionTables()
    told: list[int] = []
    resolver = AddressResolver(target, watcher, cache_for(target))
    return SampleFrames(pid, resolver, tables, KernelSymbols(), told.append), tables, told


def _sample(pid: int, shot: Shot, **more: object) -> Sample:
    regs = shot.regs
    pc = regs.values[MACHINES[regs.machine].pc]
    assert pc is not None
    return Sample(
        time.monotonic(), pid, shot.tid, (pc,), user_regs=regs, user_stack=shot.stack.data,
        user_stack_complete=shot.stack.complete, **more,  # type: ignore[arg-type]
    )  # fmt: skip


def _frames(tables: SessionTables, stack_id: int) -> list[FrameRecord]:
    return [tables.frames[i] for i in tables.stacks[stack_id]]


def test_a_raw_sample_becomes_its_named_chain_down_to_the_root(parked) -> None:
    pid, shots = parked
    frames, tables, told = _component(pid)
    samples = [_sample(pid, shot) for shot in shots]
    stack_ids = frames.stack_ids(samples)
    chains = 0
    for stack_id in stack_ids:
        names = [f.symbol for f in _frames(tables, stack_id)]
        if "on_signal" in names or "on_trap" in names:
            continue  # (their chains run through signal frames: test_unwind's)
        chains += 1
        at = names.index("park")
        assert names[at : at + 4] == CHAIN, names
        assert names[at + 4] in ("main", "worker"), names
        # Reached the thread's root: no frame says why the stack stopped
        assert all(f.kind != KIND_TRUNCATED for f in _frames(tables, stack_id)), names
    assert chains == 2
    assert told == []  # no stack went past its copy
    # The same samples again are the same stacks, and name no new frame
    known = len(tables.frames)
    assert frames.stack_ids(samples) == stack_ids
    assert len(tables.frames) == known
    # The maps generation the samples were named against is kept, its objects too
    assert tables.generations and tables.generations[-1].pid == pid
    exe = next(o for o in tables.objects if o.path.endswith("/deep"))
    assert any(f.object == exe.id for f in tables.frames if f.symbol == "chain_a")


def test_a_copy_cut_short_ends_in_a_frame_that_says_so_and_the_sampler_hears(parked) -> None:
    pid, shots = parked
    frames, tables, told = _component(pid)
    shot = shots[0]
    whole = _frames(tables, frames.stack_ids([_sample(pid, shot)])[0])
    cut = Shot(shot.tid, shot.regs, StackCopy(shot.stack.start, shot.stack.data[:24]))
    short = _frames(tables, frames.stack_ids([_sample(pid, cut)])[0])
    assert short[-1].kind == KIND_TRUNCATED, short
    assert short[-1].symbol == StackEnd.STACK_COPY.value, short[-1]
    # What it found is the whole stack's start
    assert [f.id for f in short[:-1]] == [f.id for f in whole[: len(short) - 1]]
    assert told == [shot.tid]


def test_the_kernel_s_part_goes_at_the_leaf(parked) -> None:
    pid, shots = parked
    frames, tables, _ = _component(pid)
    shot = shots[0]
    user = _frames(tables, frames.stack_ids([_sample(pid, shot)])[0])
    # A system call a ptrace sampler saw the thread in (0: read on x86-64) ...
    in_call = _frames(tables, frames.stack_ids([_sample(pid, shot, syscall=0)])[0])
    assert in_call[0].kind == KIND_KERNEL and in_call[0].symbol == "sys_read", in_call[0]
    assert [f.id for f in in_call[1:]] == [f.id for f in user]
    # ... and kernel time estimated from system time
    estimated = _frames(tables, frames.stack_ids([_sample(pid, shot, in_kernel=True)])[0])
    assert estimated[0].kind == KIND_KERNEL and estimated[0].symbol != "sys_read"
    assert [f.id for f in estimated[1:]] == [f.id for f in user]
