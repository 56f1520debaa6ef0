"""The session header: what is profiled, how, and how it is going.

It shows the counters of every snapshot, paused or not (pause freezes the
tables, not the counters), and a sparkline of samples per second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from livesym.printable import printable
from livesym.records import TimeMode
from livesym.ui.format import duration, size_bytes
from livesym.ui.graph import RateGraph
from livesym.ui.quiet import QuietStatic

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot

# States that need the user's attention, styled as such (the words say it too,
# for terminals without colour).
ALERT_STATES = ("target exited", "failed")


def state_text(snap: EngineSnapshot, paused: bool) -> str:
    """The session state in words: live, paused, target exited, replay at x %, ..."""
    if snap.source == "replay":
        if snap.state == "replay":
            state = f"replay at {(snap.progress or 0.0) * 100:.0f}%"
        else:
            state = f"replay end ({snap.state})"
    else:
        state = snap.state
    return f"{state}, paused" if paused else state


def header_lines(snap: EngineSnapshot, paused: bool) -> list[Text]:
    """The three lines of the header, as data (names are never markup)."""
    target = snap.target
    who = Text(no_wrap=True, overflow="ellipsis", end="")
    who.append(f"pid {target.pid} ", style="bold")
    if len(snap.processes) > 1:  # the whole session's counters below are theirs together
        who.append(f"+{len(snap.processes) - 1} processes ", style="bold")
    if target.user:  # before the command line, which is what a narrow terminal cuts
        who.append(f"user {printable(target.user)}  ")
    who.append(printable(target.command_line or target.exe or "?"))

    state = state_text(snap, paused)
    how = Text(no_wrap=True, overflow="ellipsis", end="")
    alert = snap.source == "live" and snap.state in ALERT_STATES
    style = "bold reverse" if alert else "bold"
    how.append(state.upper(), style=style)
    if snap.off_cpu_collected or snap.mode is not TimeMode.CPU:
        # Which time the tables count: it changes every share in them ('o').
        how.append(f"  {snap.mode.value} time", style="bold")
    scope = f" {snap.scope.partition(' (')[0]}" if snap.scope else ""  # per CPU / per thread
    how.append(f"  {snap.sampler} {snap.rate_hz} Hz{scope}  {duration(snap.elapsed)}")
    how.append(f"  samples {snap.samples}")
    how.append(f"  lost {snap.lost}", style="bold" if snap.lost else "")
    if snap.stacks_cut:
        # Stacks that did not reach their thread's root: shown, never passed off as whole.
        cut = 100 * snap.stacks_cut / max(snap.stacks_counted, 1)
        how.append(f"  cut short {cut:.0f}%", style="bold" if cut >= 5 else "")
    if snap.priority.startswith("not raised:"):
        # Refused: on a box whose cores are all taken the dashboard may lag; say why.
        how.append("  priority not raised", style="bold")
    elif snap.priority.startswith("raised"):
        how.append("  nice -20")
    if snap.errors:
        how.append(f"  errors {len(snap.errors)}", style="bold")
    if snap.fetching:
        # Names wait for a debuginfod server: say so, or they look missing.
        how.append(f"  fetching debug info ({snap.fetching})", style="bold")

    proc = Text(no_wrap=True, overflow="ellipsis", end="")
    if snap.process:
        last = snap.process[-1]  # (the last read while it ran: an ended one is not read)
        proc.append(f"cpu {last.cpu_pct:.1f}%  rss {size_bytes(last.rss)}")
        proc.append(f"  threads {last.threads}")
    else:
        proc.append("cpu -  rss -  threads -")
    proc.append(f"  maps gen {snap.maps_generation}")
    if snap.kernel.text:
        # Whether kernel time is in the profile: a process busy in system calls is
        # otherwise shown lighter than it is. Why not, and how to permit it: in --help.
        seen = snap.kernel.seen
        proc.append(f"  kernel {seen.value}", style="" if snap.kernel.sampled else "bold")
    return [who, how, proc]


class SessionHeader(Horizontal):
    """Target, state and counters on the left; samples per second on the right."""

    def compose(self) -> ComposeResult:
        # A line each: the target's line never changes, and a line whose counters did
        # not move is not sent to the terminal again (``QuietStatic``).
        with Vertical(id="header-text"):
            for _ in range(3):
                yield QuietStatic(classes="header-line", markup=False)
        yield RateGraph(id="header-graph")

    def show(self, snap: EngineSnapshot, paused: bool) -> None:
        """Show one snapshot's counters."""
        lines = self.query(".header-line").results(QuietStatic)
        # Their size is fixed by the stylesheet (1fr x 1): updating them once a refresh
        # must not lay the whole screen out again.
        for line, text in zip(lines, header_lines(snap, paused), strict=True):
            line.show(text, layout=False)
        self.query_one(RateGraph).show(snap.rate_history)
