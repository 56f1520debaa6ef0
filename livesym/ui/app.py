"""The dashboard application: runs the session, refreshes the screens, quits cleanly.

The app starts the engine's ``run`` on its own event loop, takes snapshots a
few times per second and hands them down to the screens. Quitting (q, Ctrl+C,
SIGTERM, SIGINT, SIGHUP) stops the engine first, so the sampler detaches
and a capture being recorded is complete before the terminal is given back.
An engine failure ends the app; the command reports it once the terminal is
restored (``DashboardApp.failure``).

A terminal that goes away (SIGHUP, or writes and reads that fail) ends the
session the same way, with exit code 129; ``lifeline`` keeps Textual's shutdown
from hanging on the dead terminal and, after a stop signal, guarantees the
process is gone a moment after the sampler has detached (docs/dashboard.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches

from livesym.errors import EXIT_HANGUP, EXIT_OK, LivesymError
from livesym.interrupts import routed
from livesym.ui import crop
from livesym.ui.calltree import TREE_KEYS, TreeTable
from livesym.ui.dashboard import DashboardScreen
from livesym.ui.details import DetailsScreen
from livesym.ui.flame import FLAME_KEYS, FlameScreen
from livesym.ui.functions import FunctionsPane
from livesym.ui.header import ALERT_STATES
from livesym.ui.help import TABLE_KEYS, HelpScreen, binding_lines
from livesym.ui.lifeline import Deadline, guarded_driver, terminal_alive
from livesym.ui.mappings import MappingScreen
from livesym.ui.sandwich import SandwichScreen
from livesym.ui.session import Selection
from livesym.ui.too_small import TooSmallScreen, too_small

if TYPE_CHECKING:
    from textual.driver import Driver
    from textual.worker import Worker

    from livesym.engine import EngineSnapshot
    from livesym.records import TimeMode
    from livesym.sampling.base import SamplerEnd
    from livesym.ui.session import Session

REFRESH_HZ = 4.0
DETAILS_EVERY = 4  # ticks between refreshes of the details screen (hot addresses scan samples)
# A refresh of a huge profile takes a good part of a second (the engine's views);
# spacing refreshes to this many times their cost keeps the loop free for keys.
BUSY_SHARE = 4.0
STOP_TIMEOUT = 10.0  # seconds to wait for the sampler to detach when quitting
# After a stop signal or a lost terminal, and once the sampler has detached: how long
# Textual may take to give the terminal back before the process leaves regardless.
EXIT_GRACE = 1.0


def capture_name(pid: int, now: float) -> str:
    """The file ``w`` writes: the target and the local time, sortable."""
    return f"livesym-{pid}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}.json.gz"


class DashboardApp(App[None]):
    """One live or replayed session on the dashboard."""

    CSS_PATH = "dashboard.tcss"
    ENABLE_COMMAND_PALETTE = False
    TITLE = "livesym"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="stop sampling and quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="quit, as q"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="this help (Esc closes)"),
        Binding("w", "write", "Write", tooltip="write a capture of the session so far"),
        Binding("ctrl+l", "redraw", "Redraw", show=False, tooltip="paint the whole screen again"),
    ]

    def __init__(
        self,
        session: Session,
        *,
        pid: int,
        mode: TimeMode | None = None,
        wall_clock: Callable[[], float] = time.time,
        directory: Path | None = None,
        refresh_hz: float = REFRESH_HZ,
        cleanups: tuple[Callable[[], None], ...] = (),
    ) -> None:
        super().__init__()
        # Over SSH every animation frame is bytes on the wire and a key waits for it.
        self.animation_level = "none"
        crop.install()  # ... and so is every cell before a changed one (``crop``)
        self.session = session
        self.pid = pid
        self.wall_clock = wall_clock
        self.directory = directory or Path.cwd()
        self.refresh_hz = refresh_hz
        self.dashboard = DashboardScreen(session, mode)
        self.failure: BaseException | None = None
        self.end: SamplerEnd | None = None
        self._stop = asyncio.Event()
        self._engine: asyncio.Task[None] | None = None
        self._ticks = 0
        self._state: str | None = None
        self._errors = 0
        self.exit_code = EXIT_OK
        self.terminal_lost = False
        # Armed by a stop signal or a lost terminal; run_dashboard cancels it.
        self.deadline = Deadline(EXIT_OK, cleanups)
        # Stop signals that came before the loop could take them, or while it is leaving.
        self._unheard: list[int] = []
        self._leaving = False
        self._loop_of_app: asyncio.AbstractEventLoop | None = None
        self.writer: Worker[None] | None = None  # writing the capture w asked for

    # -- lifecycle -------------------------------------------------------------

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, with an output that reports a dead terminal instead of
        hanging the shutdown (``lifeline``)."""
        return guarded_driver(super().get_driver_class(), self._output_failed)

    def on_mount(self) -> None:
        self._loop_of_app = asyncio.get_running_loop()
        if self._unheard:  # stopped while Textual started: the session never runs
            self.exit(return_code=self.exit_code)
            return
        self.push_screen(self.dashboard)
        self._fit_screen(self.size.width, self.size.height)
        # What exists now (the modules, Textual's and the dashboard's objects) lives as
        # long as the session: out of the collector's sight, or every full collection
        # walks it again, 50-75 ms holding up the loop (and keys) each time.
        gc.freeze()
        self._engine = asyncio.create_task(self._run_engine())
        self._refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_screen(event.size.width, event.size.height)

    def _fit_screen(self, width: int, height: int) -> None:
        """Say so, in place of every screen, while the terminal is too small."""
        showing = isinstance(self.screen, TooSmallScreen)
        if too_small(width, height) and not showing:
            self.push_screen(TooSmallScreen())
        elif showing and not too_small(width, height):
            self.pop_screen()

    async def on_unmount(self) -> None:
        """However the app ends, the sampler stops (and detaches) before the terminal is
        back, and a capture that w is writing is finished."""
        self._leaving = True
        await self.stop_engine()
        await self.capture_written()

    async def capture_written(self) -> None:
        """Wait for the capture w is writing, if any."""
        if self.writer is not None and self.writer.is_running:
            await self.writer.wait()

    def signalled(self, signum: int) -> None:
        """A stop signal, in the main thread between two bytecodes (``routed`` around the
        whole run): it only sets flags and hands work to the loop. An exception raised
        into Textual's start-up or shutdown would leave its driver half made (a writer
        thread joined before it started) and end in a traceback with exit code 1.

        Before the app is mounted the session has not run: the app leaves as soon as it
        is mounted, with 128 + the signal. While it is leaving, the signal hurries it.
        """
        loop = self._loop_of_app
        if loop is not None and not self._leaving and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile: handled below
                loop.call_soon_threadsafe(self._on_signal, signum)
                return
        if loop is None and not self._unheard:
            self.exit_code = self.deadline.code = 128 + signum
        elif signum == signal.SIGHUP:
            self.exit_code = self.deadline.code = EXIT_HANGUP
        if signum != signal.SIGINT:  # told to leave: the capture's last write hurries
            self.session.hurry()
        self._unheard.append(signum)
        self.deadline.arm(STOP_TIMEOUT + EXIT_GRACE)

    def _on_signal(self, signum: int) -> None:
        """A stop signal: quit as q does; SIGHUP says the terminal is gone."""
        if self._leaving:
            self.signalled(signum)
            return
        if signum == signal.SIGHUP:
            self.terminal_gone()
            return
        if signum == signal.SIGTERM:  # whoever sent it waits for the process to leave
            self.session.hurry()
        self.deadline.arm(STOP_TIMEOUT + EXIT_GRACE)
        self.run_worker(self.action_quit(), exclusive=True, group="quit")

    def _output_failed(self) -> None:
        """From Textual's writer thread: the terminal refused a write."""
        if self._loop_of_app is not None:
            self._loop_of_app.call_soon_threadsafe(self.terminal_gone)

    def terminal_gone(self) -> None:
        """The terminal went away: stop the session and leave with EXIT_HANGUP, whether
        or not Textual manages to shut down on a terminal that is not there."""
        if self.terminal_lost:
            return
        self.terminal_lost = True
        self._stop_reading()
        self.session.hurry()
        self.exit_code = self.deadline.code = EXIT_HANGUP
        self.deadline.arm(STOP_TIMEOUT + EXIT_GRACE)
        self.run_worker(self.action_quit(), exclusive=True, group="quit")

    def _stop_reading(self) -> None:
        """No more input from a terminal that is gone: Textual's input thread reads its
        end of file over and over (a hung-up terminal is always readable), a thread
        taking the interpreter from the session's last work."""
        driver = self._driver
        if driver is not None:
            driver.disable_input()  # every driver has it; Textual's swallows its failures

    def panic(self, *renderables: RenderableType) -> None:
        """A panic caused by a dead terminal (the driver's input thread cannot read) is
        the terminal going away, not a crash to print."""
        if self.terminal_lost or not terminal_alive(self._terminal_fd()):
            self.terminal_gone()
            return
        super().panic(*renderables)

    def _terminal_fd(self) -> int:
        stdin = sys.__stdin__
        try:
            return stdin.fileno() if stdin is not None else -1
        except (OSError, ValueError):
            return -1

    async def _run_engine(self) -> None:
        try:
            self.end = await self.session.run(self._stop)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # reported by the command once the terminal is back
            self.failure = e
            self.exit()
            return
        self.tick()

    def _refresh(self) -> None:
        """Refresh now, and again after 1/refresh_hz s, or longer when a refresh is slow.

        Once the session has ended and its end is on the screen, nothing changes but
        what the user asks for (which the screens fetch themselves): refreshing stops.
        """
        ended = self.end is not None or self.failure is not None
        started = time.perf_counter()
        shown = self.tick()
        if (ended and shown) or self.terminal_lost:
            return
        cost = time.perf_counter() - started
        self.set_timer(max(1 / self.refresh_hz, BUSY_SHARE * cost), self._refresh)

    async def stop_engine(self) -> None:
        """Stop sampling and wait until the sampler has detached and the capture is written."""
        self._stop.set()
        task = self._engine
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=STOP_TIMEOUT)
        if not done:  # a sampler that does not stop is cancelled; it detaches on cancellation
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def action_quit(self) -> None:
        """Stop sampling and quit."""
        await self.stop_engine()
        if self.deadline.armed:  # the sampler has detached: only the terminal is left
            self.deadline.arm(EXIT_GRACE)
        self.exit(return_code=self.exit_code)

    # -- refresh ---------------------------------------------------------------

    def tick(self) -> bool:
        """Hand a new snapshot to the screens; False when there was nothing to show it on
        (a terminal that is gone: rendering for it held up the session's last work)."""
        if not self.dashboard.is_mounted or self.terminal_lost:
            return False
        try:
            snap = self.dashboard.tick()
            self._ticks += 1
            screen = self.screen
            due = self._ticks % DETAILS_EVERY == 0
            view = self.dashboard.view
            if isinstance(screen, DetailsScreen | FlameScreen | SandwichScreen):
                screen.show_state(snap, self.dashboard.paused)
                if due and not self.dashboard.paused and view:
                    screen.show(view)
        except NoMatches:
            return False  # the screens are being taken down: the app is exiting
        self._announce(snap)
        return True

    def _announce(self, snap: EngineSnapshot) -> None:
        """Notify the state changes and errors a user must not miss."""
        if snap.state != self._state:
            if snap.source == "live" and snap.state in ALERT_STATES:
                self.notify(
                    f"{snap.state}: the dashboard stays open; w writes a capture, q quits",
                    severity="warning",
                    timeout=10,
                    markup=False,
                )
            self._state = snap.state
        for error in snap.errors[self._errors :]:
            self.notify(error, severity="error", timeout=8, markup=False)
        self._errors = len(snap.errors)

    # -- actions ---------------------------------------------------------------

    def on_functions_pane_chosen(self, event: FunctionsPane.Chosen) -> None:
        view = self.dashboard.view
        if view is not None:
            o = self.dashboard.options
            selection = Selection(o.recent, o.thread, o.module, self.dashboard.mode,
                                  o.process, o.between)  # fmt: skip
            details = DetailsScreen(self.session, event.frame, o.raw_names, view, selection)
            self.push_screen(details)
            if self.dashboard.last is not None:
                details.show_state(self.dashboard.last, self.dashboard.paused)

    def action_help(self) -> None:
        """Show every key."""
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.help_sections()))

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[tuple[str, str]]]]:
        """The help's sections: each screen's keys, as (keys, what they do)."""
        return [
            ("Everywhere", binding_lines(cls.BINDINGS)),
            ("Dashboard", binding_lines(DashboardScreen.BINDINGS)),
            ("Tables", list(TABLE_KEYS)),
            ("Tree", [*binding_lines(TreeTable.BINDINGS), *TREE_KEYS]),
            ("Flame graph", [*binding_lines(FlameScreen.BINDINGS), *FLAME_KEYS]),
            ("Details", binding_lines(DetailsScreen.BINDINGS)),
            ("Paths (t)", binding_lines(SandwichScreen.BINDINGS)),
            ("A mapping", binding_lines(MappingScreen.BINDINGS)),
            ("Help", binding_lines(HelpScreen.BINDINGS)),
        ]

    def action_redraw(self) -> None:
        """Paint every cell again: updates send only the cells that differ from what
        livesym last wrote (``ui.shown``), so what another program wrote over the
        dashboard stays until it is painted over, or until this."""
        crop.forget(self.console)
        self.screen.refresh()

    def action_write(self) -> None:
        """Write a capture of the session so far."""
        if self.writer is not None and self.writer.is_running:
            self.notify(f"still writing {self.writer.name}", timeout=4, markup=False)
            return
        path = self.directory / capture_name(self.pid, self.wall_clock())
        self.writer = self.run_worker(self._write(path), name=str(path), group="write")

    async def _write(self, path: Path) -> None:
        """Sampling and keys go on meanwhile: only the snapshot of the session's tables
        is taken on the loop; lines, encoding and the disk are a thread's work."""
        try:
            await self.session.write_capture_async(path)
        except (OSError, LivesymError) as e:
            self.notify(f"cannot write {path}: {e}", severity="error", markup=False)
        else:
            self.notify(f"capture written to {path}", timeout=10, markup=False)


def run_dashboard(
    session: Session,
    *,
    pid: int,
    mode: TimeMode | None = None,
    cleanups: tuple[Callable[[], None], ...] = (),
    directory: Path | None = None,
    refresh: float = 1 / REFRESH_HZ,
) -> int:
    """Run the dashboard on this terminal until the user quits; raise what the engine
    raised. Returns the exit code: EXIT_OK, or EXIT_HANGUP when the terminal went away.
    ``cleanups`` run if the process has to leave without returning here. ``refresh``:
    seconds between updates (--refresh)."""
    app = DashboardApp(session, pid=pid, mode=mode, cleanups=cleanups, directory=directory,
                       refresh_hz=1 / refresh)  # fmt: skip
    try:
        with routed(app.signalled):
            app.run()
    finally:
        app.deadline.cancel()
    if app.failure is not None:
        raise app.failure
    return app.exit_code
