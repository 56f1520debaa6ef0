"""The dashboard application: runs the session, refreshes the screens, quits cleanly.

The app starts the engine's ``run`` on its own event loop, takes snapshots a
few times per second and hands them down to the screens. Quitting (q, Ctrl+C,
SIGTERM, SIGINT, SIGHUP) stops the engine first, so the sampler detaches
and a capture being recorded is complete before the terminal is given back.
An engine failure ends the app; the command reports it once the terminal is
restored (``DashboardApp.failure``).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches

from livesym.errors import LivesymError
from livesym.ui.dashboard import DashboardScreen
from livesym.ui.details import DetailsScreen
from livesym.ui.functions import FunctionsPane
from livesym.ui.header import ALERT_STATES
from livesym.ui.help import TABLE_KEYS, HelpScreen, binding_lines
from livesym.ui.session import Selection

if TYPE_CHECKING:
    from livesym.engine import EngineSnapshot
    from livesym.sampling.base import SamplerEnd
    from livesym.ui.session import Session

REFRESH_HZ = 4.0
DETAILS_EVERY = 4  # ticks between refreshes of the details screen (hot addresses scan samples)
# A refresh of a huge profile takes a good part of a second (the engine's views);
# spacing refreshes to this many times their cost keeps the loop free for keys.
BUSY_SHARE = 4.0
STOP_TIMEOUT = 10.0  # seconds to wait for the sampler to detach when quitting
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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
    ]

    def __init__(
        self,
        session: Session,
        *,
        pid: int,
        include_idle: bool = False,
        wall_clock: Callable[[], float] = time.time,
        directory: Path | None = None,
        refresh_hz: float = REFRESH_HZ,
    ) -> None:
        super().__init__()
        # Over SSH every animation frame is bytes on the wire and a key waits for it.
        self.animation_level = "none"
        self.session = session
        self.pid = pid
        self.wall_clock = wall_clock
        self.directory = directory or Path.cwd()
        self.refresh_hz = refresh_hz
        self.dashboard = DashboardScreen(session, include_idle)
        self.failure: BaseException | None = None
        self.end: SamplerEnd | None = None
        self._stop = asyncio.Event()
        self._engine: asyncio.Task[None] | None = None
        self._ticks = 0
        self._state: str | None = None
        self._errors = 0

    # -- lifecycle -------------------------------------------------------------

    def on_mount(self) -> None:
        self.push_screen(self.dashboard)
        self._engine = asyncio.create_task(self._run_engine())
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self._on_signal)
        self._refresh()

    async def on_unmount(self) -> None:
        """However the app ends, the sampler stops (and detaches) before the terminal is back."""
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
        await self.stop_engine()

    def _on_signal(self) -> None:
        self.run_worker(self.action_quit(), exclusive=True, group="quit")

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
        if ended and shown:
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
        self.exit()

    # -- refresh ---------------------------------------------------------------

    def tick(self) -> bool:
        """Hand a new snapshot to the screens; False when there was nothing to show it on."""
        if not self.dashboard.is_mounted:
            return False
        try:
            snap = self.dashboard.tick()
            self._ticks += 1
            screen = self.screen
            due = self._ticks % DETAILS_EVERY == 0
            view = self.dashboard.view
            if isinstance(screen, DetailsScreen) and due and not self.dashboard.paused and view:
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
            selection = Selection(o.recent, o.thread, o.module, self.dashboard.include_idle)
            self.push_screen(DetailsScreen(self.session, event.frame, o.raw_names, view, selection))

    def action_help(self) -> None:
        """Show every key."""
        if isinstance(self.screen, HelpScreen):
            return
        sections = [
            ("Everywhere", binding_lines(self.BINDINGS)),
            ("Dashboard", binding_lines(DashboardScreen.BINDINGS)),
            ("Tables", list(TABLE_KEYS)),
            ("Details", binding_lines(DetailsScreen.BINDINGS)),
        ]
        self.push_screen(HelpScreen(sections))

    def action_write(self) -> None:
        """Write a capture of the session so far."""
        path = self.directory / capture_name(self.pid, self.wall_clock())
        try:
            self.session.write_capture(path)
        except (OSError, LivesymError) as e:
            self.notify(f"cannot write {path}: {e}", severity="error", markup=False)
            return
        self.notify(f"capture written to {path}", timeout=10, markup=False)


def run_dashboard(session: Session, *, pid: int, include_idle: bool = False) -> None:
    """Run the dashboard on this terminal until the user quits; raise what the engine raised."""
    app = DashboardApp(session, pid=pid, include_idle=include_idle)
    app.run()
    if app.failure is not None:
        raise app.failure
