"""``livesym top PID``: sample for a while, then print the hot-function table.

Ctrl-C or SIGTERM ends sampling early; what was gathered is still printed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys

from livesym.commands.calltree import dumps, tree_json, tree_lines
from livesym.commands.profiled import profiled
from livesym.commands.text import TEXT_ROWS, note_line, text_lines
from livesym.engine import Engine, EngineSnapshot
from livesym.errors import EXIT_HANGUP, EXIT_OK, UsageError
from livesym.interrupts import routed
from livesym.printable import printable
from livesym.profile import FunctionRow, ProfileView, ThreadRow
from livesym.profile.aggregate import SPLIT_LABELS
from livesym.records import KIND_TRUNCATED, TimeMode
from livesym.target.launch import Launched
from livesym.target.threads import task_age

MAX_PROCESS_LINES = 10  # processes a text output lists
DEFAULT_DURATION = 5.0  # seconds, for a running process (a started command: until it exits)


def run(args: argparse.Namespace) -> int:
    duration = args.duration
    if duration is None and args.launch is None:
        duration = DEFAULT_DURATION
    with profiled(args) as prof:
        engine = Engine(prof.target, prof.sampler)
        engine.fetch_wait = args.debuginfod_wait
        signum = asyncio.run(_sample(engine, duration, prof.launched))
        snapshot = checked_process(engine.snapshot(process=args.process), args.process)
        snapshot = dataclasses.replace(snapshot, started_after=started_after(engine))
        sys.stdout.write(output(args, snapshot, prof.pid, "top"))
        ending = prof.ending()
    if ending is not None:
        line, code = ending
        print(f"livesym: {printable(line)}", file=sys.stderr)
        return code
    return exit_code_after(signum)


async def _sample(engine: Engine, duration: float | None, launched: Launched | None) -> int | None:
    from livesym.commands.progress import shown

    async with shown(engine, "sampling", duration=duration, shares_terminal=launched is not None):
        return await run_until_signalled(engine, duration, launched)


def started_after(engine: Engine) -> float | None:
    """Seconds from this process's start to ``engine``'s sampler's being in place (the
    interpreter, the imports, the processes and events opened: time nobody sampled)."""
    age = task_age()
    return None if age is None else max(0.0, age - (engine.clock() - engine.started))


def checked_process(snapshot: EngineSnapshot, process: int | None) -> EngineSnapshot:
    """``snapshot``, once ``--process`` is known to name one of the session's processes."""
    if process is not None and process not in snapshot.processes:
        pids = ", ".join(map(str, sorted(snapshot.processes)[:8]))
        raise UsageError(f"--process {process}: no such process in this session (its pids: {pids})")
    return snapshot


LAUNCH_GRACE = 2.0  # seconds a started command has to exit after SIGTERM/SIGHUP is passed on


async def run_until_signalled(
    engine: Engine, duration: float | None, launched: Launched | None = None
) -> int | None:
    """Run the engine for ``duration`` (or until the target exits); Ctrl-C, SIGTERM and
    SIGHUP end it early and normally, so what was sampled is kept. Returns the signal
    that ended it, if one did.

    With a command livesym started, Ctrl-C is the command's first, as with ``time``: the
    terminal sent it to the command too, and sampling goes on until the command exits (a
    second Ctrl-C ends it now). SIGTERM and SIGHUP are passed on to the command, which has
    LAUNCH_GRACE seconds to exit before sampling ends anyway."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        if signum != signal.SIGINT:  # whoever sent it waits for the process to leave
            engine.hurry()
        if launched is None:
            loop.call_soon_threadsafe(stop.set)
        elif signum == signal.SIGINT:
            # The command's end ends sampling (its exit is the sampler's end); only a
            # second Ctrl-C stops it first.
            if received.count(signal.SIGINT) > 1:
                loop.call_soon_threadsafe(stop.set)
        else:
            launched.signal(signum)
            loop.call_soon_threadsafe(loop.call_later, LAUNCH_GRACE, stop.set)

    with routed(on_signal):
        await engine.run(stop, duration)
    return received[0] if received else None


def exit_code_after(signum: int | None) -> int:
    """A session ended by SIGHUP says so (its terminal is gone); any other end is 0."""
    return EXIT_HANGUP if signum == signal.SIGHUP else EXIT_OK


def _function_json(row: FunctionRow) -> dict[str, object]:
    f = row.frame
    return {
        "symbol": f.symbol,
        "demangled": f.demangled if f.resolved else f.label,
        "module": f.module,
        "kind": f.kind,
        "self": row.self_samples,
        "total": row.total_samples,
        "self_pct": round(row.self_pct, 3),
        "total_pct": round(row.total_pct, 3),
    }


def cut_short(view: ProfileView) -> tuple[int, list[tuple[str, int]]]:
    """Samples whose stacks stopped early, in all and by why (their truncated frames)."""
    rows = [r for r in view.functions.unordered() if r.frame.kind == KIND_TRUNCATED]
    by_why = sorted(((r.frame.symbol or "?", r.total_samples) for r in rows), key=lambda x: -x[1])
    return sum(n for _, n in by_why), by_why


def _processes_json(snapshot: EngineSnapshot) -> list[dict[str, object]]:
    """Every process of the session: those with samples, busiest first, then the rest
    (a shell that only waited was sampled too, and found nothing to count)."""
    out: list[dict[str, object]] = []
    for pid, name, samples, _ in snapshot.all_processes():
        record = snapshot.processes.get(pid)
        command = record.command_line if record is not None else name
        out.append({"pid": pid, "command": command, "samples": samples})
    return out


# A thread's split in JSON: its weight on a CPU and off it by why (ThreadRow.split).
SPLIT_KEYS = ("on_cpu", "off_cpu_unknown", "waiting_for_cpu", "sleeping", "disk")


def _thread_json(row: ThreadRow) -> dict[str, object]:
    return {
        "tid": row.tid,
        "name": row.name,
        "samples": row.samples,
        "pct": round(row.pct, 3),
        "states": dict(zip(SPLIT_KEYS, row.split, strict=False)),
    }


def time_line(snapshot: EngineSnapshot) -> str | None:
    """What time the table counts, and where the session collected off-CPU time, how
    its threads' time split (``time: wall: 25.0 % on CPU, 50.2 % sleeping, ...``)."""
    mode = snapshot.mode
    if mode is TimeMode.CPU and not snapshot.off_cpu_collected:
        return None
    totals = [sum(t.split[i] for t in snapshot.view.threads if len(t.split) > i)
              for i in range(len(SPLIT_LABELS))]  # fmt: skip
    whole = sum(totals)
    parts = [f"{100 * n / whole:.1f} % {label}" for label, n in zip(SPLIT_LABELS, totals,
             strict=True) if n]  # fmt: skip
    line = f"time: {mode.value}"
    if parts:
        line += ": " + ", ".join(parts)
    if snapshot.off_cpu:
        line += f" (off-CPU: {printable(snapshot.off_cpu)})"
    return line


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def top_json(snapshot: EngineSnapshot, limit: int | None) -> dict[str, object]:
    """The session as one JSON object: every function, or the first ``limit`` with the
    number left out said (a script summing kernel time or looking for a caller must not
    get a part for the whole)."""
    view = snapshot.view
    cut, _ = cut_short(view)
    rows = view.functions if limit is None else view.functions[:limit]
    return {
        "samples": view.samples,
        "stacks_cut_short": cut,  # samples whose stack did not reach the thread's root
        "lost": snapshot.lost,
        "duration_s": round(snapshot.elapsed, 3),
        "sampler": snapshot.sampler,
        "rate_hz": snapshot.rate_hz,
        "kernel": str(snapshot.kernel),
        "mode": snapshot.mode.value,
        "off_cpu": snapshot.off_cpu,
        "period_s": round(1 / snapshot.rate_hz, 9) if snapshot.rate_hz else None,
        "scope": snapshot.scope,
        "priority": snapshot.priority,
        "started_after_s": _rounded(snapshot.started_after),
        "state": snapshot.state,
        "errors": list(snapshot.errors),
        "processes": _processes_json(snapshot),
        "threads": [_thread_json(t) for t in view.threads],
        "functions": [_function_json(r) for r in rows],
        "functions_left_out": len(view.functions) - len(rows),  # by --limit
    }


def render_top(snapshot: EngineSnapshot, pid: int, limit: int | None, command: str = "top") -> str:
    """The hot-function table as ``livesym COMMAND`` prints it (``top`` or ``report``):
    a screenful unless ``limit`` says how many, and how many more there are."""
    view = snapshot.view
    limit = TEXT_ROWS if limit is None else limit
    lines = summary_lines(snapshot, pid, command)
    lines += ["", f"{'SELF%':>6} {'TOTAL%':>6} {'SELF':>7} {'TOTAL':>7}  FUNCTION  (MODULE)"]
    for row in view.functions[:limit]:
        module = os.path.basename(row.frame.module) if row.frame.module else "?"
        lines.append(
            f"{row.self_pct:6.1f} {row.total_pct:6.1f} {row.self_samples:7d} "
            f"{row.total_samples:7d}  {row.frame.label}  ({module})"
        )
    if not view.functions:
        lines.append("  (no samples: the target was idle, or exited at once)")
    elif len(view.functions) > limit:
        more = len(view.functions) - limit
        lines.append(f"  ... {more} more function{'s' * (more != 1)} (--limit N, or --json)")
    for error in snapshot.errors:
        lines.append(note_line(error))
    return text_lines(lines)


def render_tree(
    snapshot: EngineSnapshot, pid: int, inverted: bool, min_share: float, command: str = "top"
) -> str:
    """The call tree as ``livesym COMMAND --tree`` prints it."""
    lines = [*summary_lines(snapshot, pid, command), ""]
    lines += tree_lines(snapshot.view, inverted, min_share)
    lines += [note_line(error) for error in snapshot.errors]
    return text_lines(lines)


def output(args: argparse.Namespace, snapshot: EngineSnapshot, pid: int, command: str) -> str:
    """What ``top`` or ``report`` prints: the table or the tree, text or JSON."""
    if args.tree and args.json:
        doc = {**top_json(snapshot, 0), **tree_json(snapshot.view, args.inverted, args.min_share)}
        del doc["functions"], doc["functions_left_out"]
        return dumps(doc) + "\n"
    if args.json:
        return json.dumps(top_json(snapshot, args.limit)) + "\n"
    if args.tree:
        return render_tree(snapshot, pid, args.inverted, args.min_share, command)
    return render_top(snapshot, pid, args.limit, command)


def summary_lines(snapshot: EngineSnapshot, pid: int, command: str) -> list[str]:
    """What a text output says first: the session, the kernel's view, stacks cut short."""
    view = snapshot.view
    lines = [
        f"livesym {command}: {who(snapshot, pid)}, {snapshot.elapsed:.1f} s, "
        f"{view.samples} samples ({snapshot.lost} lost), sampler {snapshot.sampler} at "
        f"{snapshot.rate_hz} Hz{scope_words(snapshot.scope)}, {snapshot.state}",
    ]
    if snapshot.kernel.text:
        lines.append(f"kernel: {printable(snapshot.kernel.text)}")
    time_said = time_line(snapshot)
    if time_said is not None:
        lines.append(time_said)
    if snapshot.priority:
        lines.append(f"livesym's priority: {printable(snapshot.priority)}")
    cut, by_why = cut_short(view)
    if cut:
        why = ", ".join(f"{n} {what}" for what, n in by_why)
        lines.append(
            f"stacks: {100 * (1 - cut / max(view.samples, 1)):.1f} % reached their thread's "
            f"root; {cut} ended early ({why})"
        )
    return lines + process_lines(snapshot)


def scope_words(scope: str) -> str:
    """`` (events per CPU)``, `` (events per thread: why)``; nothing where unsaid."""
    if not scope:
        return ""
    head, _, why = scope.partition(" (")
    return f" (events {printable(head)}{': ' + printable(why.rstrip(')')) if why else ''})"


def who(snapshot: EngineSnapshot, pid: int) -> str:
    """Whom the session sampled: ``pid 42``, or ``5 processes from pid 42``."""
    n = len(snapshot.processes)
    return f"pid {pid}" if n <= 1 else f"{n} processes from pid {pid}"


def process_lines(snapshot: EngineSnapshot, limit: int = MAX_PROCESS_LINES) -> list[str]:
    """With several processes: each one's samples, busiest first, then those sampled
    without a sample (a shell that only waited), and those left out."""
    if len(snapshot.processes) <= 1:
        return []
    if snapshot.selected_process is not None:
        return [f"process: only {snapshot.selected_process}, of {len(snapshot.processes)} "
                "in the session (--process)"]  # fmt: skip
    rows = snapshot.all_processes()
    lines = ["", f"{'SHARE%':>6} {'SAMPLES':>7} {'PID':>7}  COMMAND"]
    for pid, name, samples, pct in rows[:limit]:
        record = snapshot.processes.get(pid)
        command = record.command_line if record is not None else name
        share = f"{pct:6.1f}" if pct is not None else f"{'-':>6}"
        lines.append(f"{share} {samples:7d} {pid:7d}  {printable(command)}")
    if len(rows) > limit:
        more = len(rows) - limit
        lines.append(f"  ... {more} more process{'es' * (more != 1)} (--json lists them all)")
    if snapshot.processes_left_out:
        lines.append(f"  {snapshot.processes_left_out} processes left out (--max-processes)")
    return lines
