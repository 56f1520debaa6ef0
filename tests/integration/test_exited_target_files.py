"""A process's files after it has exited: its CFI and code still read.

livesym opens a target's objects through /proc/PID/root (containers, chroots), and
reads an object's call-frame information only when the first stack is unwound
through it. A short-lived child (``--children`` on a shell script) has often exited
by then, and its /proc/PID/root with it: every one of its stacks ended with "no
call-frame information" although its libc was named. The same file by its path in
livesym's own view is read instead, where it is that very file (same identity).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from livesym.addr.kinds import Vma
from livesym.elf.image import load_image
from livesym.errors import FileError
from livesym.records import StackEnd
from livesym.sampling import ptrace_abi as abi
from livesym.symbolize.process import ProcessSymbolizer
from livesym.target.process import TargetProcess
from livesym.unwind.walk import walk
from tests.support.procs import running, stop
from tests.support.stackshot import shoot_all

pytestmark = pytest.mark.skipif(
    abi.arch_for().machine != "x86_64", reason="stack shots are taken on x86-64"
)


def test_a_stack_unwinds_after_its_process_is_gone(built: Callable[[str], Path]) -> None:
    # GIVEN deep's parked threads (CFI only: -O2 -fomit-frame-pointer), their shots,
    # and every frame's object loaded through /proc/PID/root -- symbols, no CFI yet
    with running(built("deep")) as proc:
        time.sleep(0.1)  # every thread parked (as test_unwind waits)
        shots = shoot_all(proc.pid)
        symbolizer = ProcessSymbolizer(TargetProcess(proc.pid))
        leaves = [symbolizer.explain(Vma(s.regs.values[16] or 0)) for s in shots]  # rip
        assert all(e.mapping is not None for e in leaves)
        paths = {symbolizer.object_path(e.mapping).open_path for e in leaves if e.mapping}
        assert all(p.startswith(f"/proc/{proc.pid}/") for p in paths), paths
        stop(proc)
    assert not os.path.exists(f"/proc/{proc.pid}/root/")
    # WHEN the threads are unwound after the process exited
    for shot in shots:
        unwound = walk(shot.regs, shot.stack, symbolizer.rules_for)
        # THEN each reaches its thread's root, by CFI read from the files by their paths
        assert unwound.end is StackEnd.ROOT, unwound
        assert unwound.by_frame_pointer == 0


def test_a_fallback_is_taken_only_while_it_is_the_same_file(tmp_path: Path) -> None:
    original = tmp_path / "a.so"
    shutil.copy2("/bin/true", original)
    twin = tmp_path / "b.so"
    shutil.copy2("/bin/true", twin)
    image = load_image(original)
    # A copy is another file: never a fallback, however alike its bytes
    assert image.also_at(str(twin)).fallbacks == ()
    link = tmp_path / "c.so"
    os.link(original, link)
    image = image.also_at(str(link))
    assert image.fallbacks == (str(link),)
    original.unlink()
    assert image.read(0, 4) == b"\x7fELF"  # through the hard link, the same inode
    # Replaced at the fallback's path too: neither names the file any more
    link.unlink()
    shutil.copy("/bin/true", link)
    with pytest.raises(FileError, match=r"a\.so: no such file"):
        image.read(0, 4)


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd is the short-lived child")
def test_a_child_that_exits_before_the_session_ends_keeps_its_stacks() -> None:
    # A shell whose dd child copies byte by byte for well under a second, found by
    # --children after its exec; both are gone when the session's last stacks unwind.
    script = "dd if=/dev/zero of=/dev/null bs=1 count=3000000 2>/dev/null; true"
    done = subprocess.run(
        [sys.executable, "-m", "livesym", "top", "--json", "--children", "--duration", "3",
         "--", "sh", "-c", script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    dd = [p for p in doc["processes"] if p["command"].startswith("dd ")]
    # (found by a scan every half second: sampled for a few tenths of a second)
    assert dd and dd[0]["samples"] >= 5, doc["processes"]
    # Its stacks reach main through libc and dd's own (stripped: FDE-named) code
    assert doc["stacks_cut_short"] <= doc["samples"] // 10, doc
