"""``livesym demo``: build the bundled target, start it, and profile it.

On a terminal the demo opens the dashboard on the target (``livesym attach``)
and stops the target when the dashboard quits. With ``--text``, or without a
terminal, it prints what the dashboard shows instead: the target's mappings
with their base addresses, the hot-function table after a few seconds of
sampling, and for the hottest sampled instruction of each top function the
whole conversion chain (mapping -> PT_LOAD -> base -> ELF vaddr -> file
offset -> symbol), as ``livesym addr`` prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from livesym.addr.kinds import Vma
from livesym.commands.addr import render_text
from livesym.commands.attach import has_terminal
from livesym.commands.maps import render_table
from livesym.commands.profiled import said
from livesym.commands.top import render_top
from livesym.engine import Engine, tick_for
from livesym.errors import EXIT_DEMO, EXIT_OK, LivesymError
from livesym.interrupts import held
from livesym.printable import printable
from livesym.records import TimeMode
from livesym.sampling.choice import choose_sampler
from livesym.symbolize.process import ProcessSymbolizer
from livesym.target.process import TargetProcess

TARGET = "spin"
READY_TIMEOUT = 10.0


class DemoError(LivesymError):
    """The demo target could not be built or started."""

    exit_code = EXIT_DEMO


def captures_dir() -> Path:
    """Where ``w`` writes the demo's captures: livesym's data directory (XDG), not
    wherever the demo was started (a clone of the repository, often)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(base) / "livesym" / "captures"


def run(args: argparse.Namespace) -> int:
    # The report is for pipes and files; the dashboard needs the terminal (stdin, stderr).
    text = args.text or not (has_terminal() and sys.stdout.isatty())
    scratch = _scratch_dir()
    try:
        exe = _build(scratch)
        proc = _start(exe)
        code = EXIT_OK
        try:
            if text:
                _show(proc.pid, exe, args.seconds)
            else:
                code = _dashboard(proc, keep=args.keep, refresh=args.refresh)
        finally:
            if args.keep:
                print(
                    f"\nthe target keeps running as pid {proc.pid}; stop it with: kill {proc.pid}"
                )
            else:
                proc.terminate()
                proc.wait(timeout=5)
    finally:
        if scratch is not None and not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return code


def _scratch_dir() -> Path | None:
    """A private temporary folder to build the target in when livesym's cache cannot be
    written (a user without a home, such as nobody's /nonexistent), else None."""
    from livesym.sample_targets import cache_dir

    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if os.access(cache, os.W_OK | os.X_OK):
            return None
    except OSError:
        pass
    scratch = Path(tempfile.mkdtemp(prefix="livesym-demo-"))
    print(f"{printable(str(cache))} cannot be written: building in {scratch}, removed at the end")
    return scratch


def _build(scratch: Path | None) -> Path:
    from livesym.sample_targets import TARGETS, BuildError, build

    hot = ", ".join(name for name, _share in TARGETS[TARGET].hot_functions)
    print(f"building the sample target '{TARGET}' (threads burning CPU in {hot})", flush=True)
    try:
        exe: Path = build(TARGET, scratch)
    except BuildError as e:
        raise DemoError(f"cannot build the demo target: {e}") from None
    return exe


def _start(exe: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT)
    line = proc.stdout.readline() if ready else b""
    if not line.startswith(b"ready"):
        proc.kill()
        proc.wait()
        raise DemoError(f"the demo target {exe} did not start; run it by hand to see why")
    time.sleep(0.2)  # let its threads reach their busy loops
    return proc


def _show(pid: int, exe: Path, seconds: float) -> None:
    symbolizer = ProcessSymbolizer(TargetProcess(pid))
    out = sys.stdout
    out.write(f"\nstarted {exe.name} as pid {pid}\n\n$ livesym maps {pid}\n")
    rows = [r for r in symbolizer.mappings() if r.entry.file_backed or r.entry.path]
    out.write(render_table(rows))
    out.write(f"\n$ livesym top {pid} --duration {seconds:g}\n")
    out.flush()
    engine = asyncio.run(_profile(pid, seconds))
    snap = engine.snapshot()
    out.write(render_top(snap, pid, 8))
    for row in snap.view.functions[:3]:
        hottest = engine.hot_addresses(row.frame, 1)
        if not hottest:
            continue
        record, count, _ = hottest[0]
        out.write(
            f"\n$ livesym addr {pid} {record.vma:#x}    "
            f"# hottest of {printable(row.frame.label)}, {count} samples\n"
        )
        out.write(render_text(symbolizer.explain(Vma(record.vma))))


def _dashboard(proc: subprocess.Popen[bytes], *, keep: bool, refresh: float) -> int:
    with held():  # Textual's class set-up does not survive an interrupt
        from livesym.ui.app import run_dashboard

    # Each sampler's own default rate, as attach uses.
    engine = Engine(
        TargetProcess(proc.pid), said(choose_sampler("auto", proc.pid, None, TimeMode.CPU))
    )
    directory = captures_dir()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        directory = Path.cwd()  # w says so if it cannot write here either
    # Should the process have to leave from inside the dashboard, it stops its target.
    cleanups = () if keep else (proc.kill,)
    engine.tick = tick_for(refresh)
    return run_dashboard(engine, pid=proc.pid, cleanups=cleanups, directory=directory,
                         refresh=refresh)  # fmt: skip


async def _profile(pid: int, seconds: float) -> Engine:
    target = TargetProcess(pid)
    # Each sampler's own default rate: ptrace stops threads for every sample.
    engine = Engine(target, said(choose_sampler("auto", pid, None, TimeMode.CPU)))
    await engine.run(asyncio.Event(), seconds)
    return engine
