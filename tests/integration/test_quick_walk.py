"""The stack walk in C (livesym.unwind.quick) on real programs' stacks, against the Python walk.

Busy programs whose code keeps no frame pointers are interrupted again and again
(tests/support/stackshot.py: registers and the whole stack, through ptrace): xz in
Debian's stripped liblzma, python3's interpreter, and recurse (-O2
-fomit-frame-pointer, 100 frames deep; 2,000 deep, which is left to the Python walk).
Each stack is walked as the engine walks it: in C where it can, else in Python, which
teaches the C walk the rules it met. Every
walk the C walk gives must be the Python walk's, whole, to the root; and once it has
learnt, it must take most of them (it is there to: a recording's samples).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from livesym.records import StackEnd
from livesym.sampling import ptrace_abi as abi
from livesym.symbolize.process import cache_for
from livesym.symbolize.resolver import AddressResolver
from livesym.target.maps_watcher import MapsWatcher
from livesym.target.process import TargetProcess
from livesym.unwind import quick
from livesym.unwind.quick import QuickWalk
from livesym.unwind.walk import unwind_copy
from tests.support.procs import running
from tests.support.stackshot import shoot_all

pytestmark = [
    pytest.mark.skipif(abi.arch_for().machine != "x86_64", reason="the C walk is x86-64's"),
    pytest.mark.skipif(
        not quick.available(), reason="livesym._cfiwalk was not built (no compiler or headers)"
    ),
]
ROUNDS = 60
BUSY_PYTHON = "import sys\nprint('ready', flush=True)\nwhile True: sum(i * i for i in range(999))"


def _walk_rounds(pid: int) -> tuple[int, int, int]:
    """Stacks of ``pid``'s threads, ROUNDS times: (walks the Python walk took to the root,
    of those in the second half, how many the C walk took)."""
    target = TargetProcess(pid)
    watcher = MapsWatcher(target)
    resolver = AddressResolver(target, watcher, cache_for(target))
    walker = QuickWalk()
    rooted = late = late_quick = 0
    for i in range(ROUNDS):
        for shot in shoot_all(pid):
            when = time.monotonic()
            generation = watcher.at(when).number
            rules = resolver.rules_at(when)
            sites = walker.walk(shot.regs, shot.stack.data, generation, rules)
            python = unwind_copy(shot.regs, shot.stack.data, shot.stack.complete,
                                 walker.teaching(rules, generation))  # fmt: skip
            if sites is not None:
                assert python.end is StackEnd.ROOT, python.detail
                assert sites == python.call_sites()
            if python.end is StackEnd.ROOT:
                rooted += 1
                if i >= ROUNDS // 2:
                    late += 1
                    late_quick += sites is not None
        time.sleep(0.01)
    return rooted, late, late_quick


@pytest.fixture
def python_busy() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["/usr/bin/python3", "-c", BUSY_PYTHON], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith(b"ready")
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_xz_s_walks_in_c_are_the_python_walk_s(xz: subprocess.Popen[bytes]) -> None:
    rooted, late, late_quick = _walk_rounds(xz.pid)
    assert rooted >= ROUNDS // 2, "xz's stacks did not reach their root in Python"
    assert late_quick >= 0.8 * late, f"the C walk took {late_quick} of {late}"


def test_python3_s_walks_in_c_are_the_python_walk_s(python_busy: subprocess.Popen[bytes]) -> None:
    if not Path("/usr/bin/python3").exists():
        pytest.skip("Debian's python3 is not installed")
    rooted, late, late_quick = _walk_rounds(python_busy.pid)
    assert rooted >= ROUNDS // 2
    # The interpreter's loop is a big function: a leaf at an instruction not seen yet
    # is walked in Python once, then in C.
    assert late_quick >= 0.5 * late, f"the C walk took {late_quick} of {late}"


def test_a_recursion_s_walks_in_c_are_the_python_walk_s(built: Callable[[str], Path]) -> None:
    # 100 frames deep: under MAX_QUICK_FRAMES (a deeper one is the Python walk's, memo
    # and all); each step of descend the same rule, learnt once.
    with running(built("recurse"), "30", "--depth", "100") as proc:
        time.sleep(0.2)
        rooted, late, late_quick = _walk_rounds(proc.pid)
    assert rooted >= ROUNDS // 2
    assert late_quick >= 0.8 * late, f"the C walk took {late_quick} of {late}"


def test_a_2000_frame_recursion_is_left_to_the_python_walk_and_its_memo(
    built: Callable[[str], Path],
) -> None:
    with running(built("recurse"), "30") as proc:
        time.sleep(0.2)
        rooted, late, late_quick = _walk_rounds(proc.pid)
    assert rooted >= ROUNDS // 2
    assert late_quick <= 0.1 * late, f"the C walk took {late_quick} of {late}"
