"""Smoke tests in a real terminal: the commands run inside tmux, keys and signals arrive
the way a user sends them, and the exit status is what the shell sees."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from livesym.capture.reader import read_capture
from tests.support.procs import running
from tests.ui.screen import said_under_marks

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

WIDTH, HEIGHT = 100, 30


class Terminal:
    """One command in a detached tmux session on a private server."""

    def __init__(self, socket: str, status: Path) -> None:
        self.socket = socket
        self.status = status

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(
        self, args: list[str], env: dict[str, str], redirect: str = "", width: int = WIDTH,
        cwd: Path | None = None, height: int = HEIGHT,
    ) -> None:  # fmt: skip
        command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable,
                              "-m", "livesym", *args])  # fmt: skip
        if cwd is not None:
            command = f"cd {shlex.quote(str(cwd))} && {command}"
        # The shell writes the command's exit status where the test can read it, then
        # keeps the pane (and what the command left on it) until the server is killed.
        script = f"{command} {redirect}; echo $? > {shlex.quote(str(self.status))}; sleep 60"
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "t", script)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, *words: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(w in screen for w in words):
                return screen
            if self.status.exists() or time.monotonic() > deadline:
                raise AssertionError(f"never showed {words}; last screen:\n{screen}")
            time.sleep(0.1)

    def wait_for_gone(self, word: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while word in (screen := self.screen()):
            assert time.monotonic() < deadline, f"{word!r} stays on screen:\n{screen}"
            time.sleep(0.1)
        return screen

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def exit_status(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while not self.status.exists() or not self.status.read_text().strip():
            assert time.monotonic() < deadline, f"still running; screen:\n{self.screen()}"
            time.sleep(0.1)
        return int(self.status.read_text())

    def command_pid(self, wait: float = 0.0) -> int:
        """The livesym process (the child of the pane's shell), waiting up to ``wait``
        seconds for the shell to start it."""
        shell = self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        deadline = time.monotonic() + wait
        while True:
            children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
            if children or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        assert len(children) == 1, children
        return int(children[0])


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(f"livesym-test-{os.getpid()}-{tmp_path.name}", tmp_path / "status")
    yield term
    subprocess.run(["tmux", "-L", term.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def spin(built: Callable[[str], Path]) -> Iterator[subprocess.Popen[bytes]]:
    with running(built("spin")) as proc:
        yield proc


def assert_complete(capture: Path) -> None:
    """A capture that a stopped session completed: every sample it counted is in it."""
    recorded = read_capture(capture)
    assert recorded.session["end_reason"] == "stopped"
    assert len(recorded.samples) == recorded.session["samples"] > 0


def untraced(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    return "TracerPid:\t0" in status


def test_replay_in_xterm_256color_shows_the_capture_and_q_exits_0(terminal, spin_capture):
    terminal.start(["replay", "--instant", str(spin_capture)], {"TERM": "xterm-256color"})
    screen = terminal.wait_for("REPLAY END", "hot_alpha", "leaf_work", "q Quit")
    lines = screen.splitlines()
    assert lines[0].startswith("pid ") and "SELF%" in screen
    terminal.keys("q")
    assert terminal.exit_status() == 0


def test_cells_sent_as_they_differ_leave_what_a_full_repaint_paints_and_ctrl_l_repaints(
    terminal, spin_capture
):
    # GIVEN a replay at a quarter of real speed: 8 s of updates, each sending only the
    # cells that differ from what livesym wrote before (ui.shown), then a still screen
    terminal.start(["replay", "--speed", "0.25", "--refresh", "0.25", str(spin_capture)],
                   {"TERM": "xterm-256color"})  # fmt: skip
    terminal.wait_for("REPLAY END", "hot_alpha", timeout=40)
    time.sleep(1.0)  # (the last refresh out)
    updated = terminal.tmux("capture-pane", "-p", "-e", "-t", "t")
    # WHEN another program writes over the dashboard, and the user presses Ctrl+L
    tty = terminal.tmux("display-message", "-p", "-t", "t", "#{pane_tty}").strip()
    with open(tty, "w") as out:
        out.write("\x1b[12;30HNOT-LIVESYM\x1b[20;5H!!")
    terminal.wait_for("NOT-LIVESYM")
    terminal.keys("C-l")
    terminal.wait_for_gone("NOT-LIVESYM")
    time.sleep(0.5)
    # THEN the screen is painted whole again, and it is cell for cell and pen for pen
    # what the updates had left: none was skipped that differed, none sent wrong
    repainted = terminal.tmux("capture-pane", "-p", "-e", "-t", "t")
    assert "!!" not in repainted
    assert repainted == updated
    terminal.keys("q")
    assert terminal.exit_status() == 0


def test_at_80x24_a_range_chosen_with_keys_is_what_panes_show_and_a_baseline_gives_deltas(
    terminal, phases_capture
):
    # GIVEN a replay of a program that ran one function for 3 s, then another, at 80x24
    terminal.start(["replay", str(phases_capture), "--instant"],
                   {"TERM": "xterm-256color"}, width=80, height=24)  # fmt: skip
    screen = terminal.wait_for("REPLAY END", "first_phase", "second_phase")
    lines = screen.splitlines()
    # THEN the timeline is under the header: bars, then the session's length
    assert set(lines[3].strip()) <= set("▁▂▃▄▅▆▇█") and lines[3].strip(), screen
    length = re.search(r" (\d+\.\d s) ", lines[1])
    assert length is not None and said_under_marks(lines[4], length[1]), screen
    # WHEN '<' picks the last quarter of the session
    terminal.keys("<")
    screen = terminal.wait_for("range ")
    # THEN the functions pane holds the second function alone; the tree too
    assert "second_phase" in screen and "first_phase" not in screen, screen
    terminal.keys("5")
    screen = terminal.wait_for("[Tree]")
    assert "second_phase" in screen and "first_phase" not in screen, screen
    # AND '=' gives the whole session back
    terminal.keys("1", "=")
    terminal.wait_for_gone("range ")
    terminal.wait_for("first_phase", "second_phase")
    # ... which 'b' pins as the baseline: with the last quarter shown again, the table
    # shows the second function's change against it, marked significant
    terminal.keys("b", "<")
    screen = terminal.wait_for("ΔSELF", "range ")
    (row,) = [line for line in screen.splitlines() if "second_phase" in line]
    assert re.search(r"\+[4-6]\d\.\d\*", row), screen
    terminal.keys("q")
    assert terminal.exit_status() == 0


def test_the_tree_and_the_flame_graph_in_a_real_terminal(terminal, spin):
    # GIVEN the dashboard attached to spin, without colour
    terminal.start(["attach", str(spin.pid)], {"TERM": "xterm-256color", "NO_COLOR": "1"})
    terminal.wait_for("LIVE", "hot_alpha")
    # WHEN 5 shows the tree: its hottest path is open down to spin's hot functions
    terminal.keys("5")
    screen = terminal.wait_for("top-down", "▾ worker_main", "hot_alpha", "hot_beta")
    assert "TOTAL%" in screen
    # ... i inverts it: the functions where time was spent come first
    terminal.keys("i")
    terminal.wait_for("inverted", "leaf_work")
    # ... f opens its flame graph; Enter zooms, Esc zooms out, Esc again goes back
    terminal.keys("i", "f")
    screen = terminal.wait_for("flame graph", "▏[all]", "▏hot_alpha", "total")
    terminal.keys("Down", "Enter")
    terminal.wait_for("zoomed")
    terminal.keys("Escape")
    terminal.wait_for_gone("zoomed")
    terminal.keys("Escape")
    terminal.wait_for("[Tree]")
    terminal.keys("q")
    assert terminal.exit_status() == 0
    assert spin.poll() is None and untraced(spin.pid)


def test_attach_starts_a_command_and_its_output_goes_to_a_log(terminal, built, tmp_path):
    # GIVEN the dashboard starting spin for 2 s, from a directory of the test's own
    terminal.start(["attach", "--", str(built("spin")), "2"], {"TERM": "xterm-256color"},
                   redirect="", cwd=tmp_path)  # fmt: skip
    # THEN it shows spin's samples, then that it exited; q leaves with spin's status
    terminal.wait_for("LIVE", "hot_alpha")
    terminal.wait_for("TARGET EXITED")
    terminal.keys("q")
    assert terminal.exit_status() == 0
    (log,) = tmp_path.glob("livesym-spin-*.log")
    assert log.read_text().startswith("ready ")  # spin's own output, not on the dashboard
    terminal.wait_for(f"spin exited with status 0; its output is in {log.name}")


def test_q_stops_the_command_attach_started_and_leaves_no_empty_log(terminal, built, tmp_path):
    # GIVEN the dashboard on a command of a minute that writes nothing
    script = f"exec {built('spin')} 60 >/dev/null"
    terminal.start(["attach", "--", "sh", "-c", script], {"TERM": "xterm-256color"},
                   redirect="", cwd=tmp_path)  # fmt: skip
    terminal.wait_for("LIVE", "hot_alpha")
    # WHEN q ends the session
    terminal.keys("q")
    # THEN the command is stopped and said to be, and no empty log is left behind
    assert terminal.exit_status() == 0
    terminal.wait_for("sh still ran when sampling ended: stopped it (SIGTERM)")
    assert list(tmp_path.glob("livesym-*.log")) == []


def test_attach_by_name_to_two_processes_shows_and_filters_each(terminal, built, tmp_path):
    # GIVEN two copies of spin under one name of their own
    exe = tmp_path / "lsymtwin"
    shutil.copy2(built("spin"), exe)
    twins = [subprocess.Popen([str(exe)], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        # WHEN the dashboard attaches by that name, without colour
        terminal.start(["attach", "lsymtwin"], {"TERM": "xterm-256color", "NO_COLOR": "1"})
        # THEN the header counts the second process, and 6 lists both
        terminal.wait_for("LIVE", "+1 processes", "hot_alpha")
        terminal.keys("6")
        first, second = sorted(str(t.pid) for t in twins)
        screen = terminal.wait_for("[Processes]", first, second)
        assert screen.count("lsymtwin") >= 2
        # ... Enter on the highlighted one shows its samples alone, and says so
        terminal.keys("Enter")
        terminal.wait_for("[Functions]", "process ", "hot_alpha")
        terminal.keys("q")
        assert terminal.exit_status() == 0
        assert all(t.poll() is None and untraced(t.pid) for t in twins)
    finally:
        for t in twins:
            t.kill()
            t.wait()


def test_attach_to_a_command_that_cannot_start_leaves_no_log(terminal, tmp_path):
    terminal.start(["attach", "--", "no-such-command-livesym"], {"TERM": "xterm-256color"},
                   cwd=tmp_path)  # fmt: skip
    assert terminal.exit_status() == 127
    assert "no such command" in terminal.screen()
    assert list(tmp_path.glob("livesym-*.log")) == []


def test_attach_without_colour_records_and_ctrl_c_exits_0(terminal, spin, tmp_path):
    capture = tmp_path / "live.json"
    terminal.start(
        ["attach", str(spin.pid), "--record", str(capture)],
        {"TERM": "xterm-256color", "NO_COLOR": "1"},
    )
    terminal.wait_for("LIVE", "hot_alpha", "hot_beta", "hot_gamma")
    terminal.keys("C-c")
    assert terminal.exit_status() == 0
    recorded = read_capture(capture)
    assert recorded.session["end_reason"] == "stopped" and recorded.samples
    assert spin.poll() is None and untraced(spin.pid)


def test_sigterm_stops_attach_cleanly_with_a_complete_capture(terminal, spin, tmp_path):
    capture = tmp_path / "live.json.gz"
    terminal.start(["attach", str(spin.pid), "--record", str(capture)], {})
    terminal.wait_for("LIVE", "hot_alpha")
    time.sleep(0.5)
    os.kill(terminal.command_pid(), signal.SIGTERM)
    assert terminal.exit_status() == 0
    assert_complete(capture)
    assert spin.poll() is None and untraced(spin.pid)


def _input_threads(pid: int) -> int:
    """Textual's terminal input threads in ``pid``, by their Python names (py-spy)."""
    from livesym.sampling.pyspy import find_py_spy

    exe = find_py_spy()
    assert exe is not None
    dump = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    assert dump.returncode == 0, dump.stderr
    return dump.stdout.count('"textual-input"')


def test_a_sigcont_without_ctrl_z_starts_no_second_terminal_session(terminal, spin):
    """A hung-up terminal sends SIGHUP and SIGCONT to its foreground group. Textual took
    any SIGCONT for the end of a Ctrl-Z and started application mode again, terminal
    threads and all: on a terminal that was gone, a second input thread spun on its end
    of file while the session wrote its capture (seconds more to leave, beside a busy
    core). A SIGCONT alone now changes nothing; q still quits."""
    terminal.start(["attach", str(spin.pid), "--sampler", "perf"], {})
    terminal.wait_for("LIVE", "hot_alpha")
    pid = terminal.command_pid()
    assert _input_threads(pid) == 1
    os.kill(pid, signal.SIGCONT)
    time.sleep(0.5)
    assert _input_threads(pid) == 1
    terminal.keys("q")
    assert terminal.exit_status() == 0


def test_demo_opens_the_dashboard_and_stops_its_target_on_q(terminal):
    terminal.start(["demo"], {})
    screen = terminal.wait_for("LIVE", "hot_alpha", timeout=60)
    pid = int(screen.split("pid ", 1)[1].split()[0])
    terminal.keys("q")
    assert terminal.exit_status() == 0
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), "demo left its target running"


def test_attach_refuses_a_stderr_that_is_not_the_terminal(terminal, spin, tmp_path):
    errors = tmp_path / "errors.txt"
    terminal.start(["attach", str(spin.pid)], {}, redirect=f"2> {shlex.quote(str(errors))}")
    assert terminal.exit_status() == 2
    message = errors.read_text()
    assert message.startswith("livesym: attach needs a terminal on stdin and stderr")
    assert "\x1b" not in message and message.count("\n") == 1


def test_a_sampler_failing_inside_the_dashboard_ends_it_with_one_line(terminal, spin):
    from livesym.sampling.pyspy import PySpySampler

    if PySpySampler.available() is not None:
        pytest.skip(f"py-spy unavailable: {PySpySampler.available()}")
    terminal.start(["attach", str(spin.pid), "--sampler", "pyspy"], {})
    assert terminal.exit_status() == 3
    text = "".join(line for line in terminal.screen().splitlines() if line.strip())
    # One message (the terminal wraps it at 100 columns), after the dashboard is gone.
    assert text.startswith(f"livesym: cannot attach to {spin.pid}: "), text
    assert text.count("livesym:") == 1 and "Traceback" not in text


# -- the terminal goes away ---------------------------------------------------------------

GONE_WITHIN = 2.0  # seconds from the hang-up to the process being gone (issue 12)
PYLOAD = Path(__file__).resolve().parents[2] / "sample_targets" / "pyload.py"


def hang_up(terminal: Terminal, how: str) -> int:
    """End the terminal the way ``how`` says; returns the livesym pid."""
    pid = terminal.command_pid()
    if how == "kill-session":  # the SSH connection drops: the pty closes under livesym
        terminal.tmux("kill-session", "-t", "t")
    else:
        os.kill(pid, {"HUP": signal.SIGHUP, "TERM": signal.SIGTERM, "INT": signal.SIGINT}[how])
    return pid


def gone_within(pid: int, seconds: float) -> float:
    """Seconds until ``pid`` is gone (or only a zombie waiting for its reaper)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return time.monotonic() - started
        if state == "Z":
            return time.monotonic() - started
        time.sleep(0.02)
    # Not left running for the rest of the suite (one spun at nice -20 for half an hour
    # and took two cores from every later test).
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"livesym ({pid}) still running {seconds} s after its terminal went")


def running_untraced(pid: int) -> bool:
    """The target runs on: not traced, and not stopped (T) or in a trace stop (t)."""
    status = Path(f"/proc/{pid}/status").read_text()
    state = status.split("State:\t", 1)[1][0]
    return "TracerPid:\t0" in status and state not in "Tt"


@pytest.fixture
def python_target() -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with running(Path(sys.executable), str(PYLOAD), env=env) as proc:
        yield proc


def sampler_available(name: str) -> str | None:
    from livesym.sampling.mixed import MixedSampler
    from livesym.sampling.perf_event import PerfSampler
    from livesym.sampling.ptrace import PtraceSampler
    from livesym.sampling.pyspy import PySpySampler

    samplers = {"perf": PerfSampler, "ptrace": PtraceSampler, "pyspy": PySpySampler,
                "mixed": MixedSampler}  # fmt: skip
    return samplers[name].available()


@pytest.mark.parametrize(
    ("sampler", "how"),
    [("perf", "kill-session"), ("ptrace", "kill-session"), ("pyspy", "kill-session"),
     ("mixed", "kill-session"), ("perf", "HUP"), ("ptrace", "HUP"), ("pyspy", "HUP"),
     ("mixed", "HUP"), ("ptrace", "TERM"), ("pyspy", "TERM"), ("mixed", "TERM"), ("perf", "INT")],
)  # fmt: skip
def test_attach_ends_within_two_seconds_of_losing_its_terminal_and_leaves_the_target_running(
    request, terminal, tmp_path, sampler, how
):
    reason = sampler_available(sampler)
    if reason is not None:
        pytest.skip(f"{sampler} unavailable: {reason}")
    python = sampler in ("pyspy", "mixed")
    target = request.getfixturevalue("python_target" if python else "spin")
    capture = tmp_path / "live.json.gz"
    terminal.start(["attach", str(target.pid), "--sampler", sampler, "--record", str(capture)], {})
    terminal.wait_for("LIVE", "samples", timeout=30)
    time.sleep(1.0)  # some samples, a capture written once
    pid = hang_up(terminal, how)
    gone_within(pid, GONE_WITHIN)
    if how != "kill-session":  # with the session killed, its shell is gone too
        assert terminal.exit_status() == (129 if how == "HUP" else 0)
    assert target.poll() is None and running_untraced(target.pid)
    assert_complete(capture)
    if python:
        assert not [p for p in _children_named("py-spy")], "py-spy left running"


def _children_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("how", ["kill-session", "HUP"])
def test_demo_stops_its_target_when_its_terminal_goes_away(terminal, how):
    terminal.start(["demo"], {})
    screen = terminal.wait_for("LIVE", "hot_alpha", timeout=60)
    target = int(screen.split("pid ", 1)[1].split()[0])
    pid = hang_up(terminal, how)
    gone_within(pid, GONE_WITHIN)
    deadline = time.monotonic() + 2
    while Path(f"/proc/{target}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{target}").exists(), "demo left its target running"
    if how == "HUP":
        assert terminal.exit_status() == 129


@pytest.mark.parametrize("how", ["kill-session", "HUP", "TERM"])
def test_replay_ends_within_two_seconds_of_losing_its_terminal(terminal, spin_capture, how):
    terminal.start(["replay", str(spin_capture)], {})
    terminal.wait_for("REPLAY", "hot_alpha")
    pid = hang_up(terminal, how)
    gone_within(pid, GONE_WITHIN)
    if how != "kill-session":
        assert terminal.exit_status() == {"HUP": 129, "TERM": 0}[how]


@pytest.mark.parametrize(
    ("delay", "signum"),
    [(0.05, signal.SIGTERM), (0.3, signal.SIGTERM), (0.8, signal.SIGTERM), (0.3, signal.SIGINT),
     (0.5, signal.SIGHUP)],
)  # fmt: skip
def test_a_stop_signal_during_start_up_detaches_and_exits_with_its_code(
    terminal, spin, delay, signum
):
    # GIVEN attach started with the slowest sampler to set up (ptrace stops every thread)
    reason = sampler_available("ptrace")
    if reason is not None:
        pytest.skip(f"ptrace unavailable: {reason}")
    terminal.start(["attach", str(spin.pid), "--sampler", "ptrace"], {"PYTHONFAULTHANDLER": "1"})
    # WHEN the signal arrives at some moment of its start-up
    pid = terminal.command_pid(wait=5.0)
    time.sleep(delay)
    os.kill(pid, signum)
    # THEN it is gone soon, with the code for a stop asked for once the session ran (0, or
    # 129 for a hang-up), or 128 + the signal before it ran
    gone_within(pid, 5.0)
    ran = 129 if signum == signal.SIGHUP else 0
    status = terminal.exit_status()
    assert status in (ran, 128 + signum), terminal.screen()
    assert spin.poll() is None and running_untraced(spin.pid)


def test_record_progress_fits_an_80_column_terminal_and_sighup_keeps_the_capture(
    terminal, spin, tmp_path
):
    # A long output path: the full line would be far wider than the terminal.
    capture = tmp_path / ("a-rather-long-directory-name-for-captures" * 2) / "spin.json.gz"
    capture.parent.mkdir()
    terminal.start(["record", str(spin.pid), "-o", str(capture)], {}, width=80)
    terminal.wait_for("recording pid", "samples")
    time.sleep(1.6)  # the line rewritten a few times
    lines = [line for line in terminal.screen().splitlines() if line.strip()]
    assert len(lines) == 1 and len(lines[0]) < 80, lines
    os.kill(terminal.command_pid(), signal.SIGHUP)
    assert terminal.exit_status() == 129
    assert_complete(capture)
    assert spin.poll() is None and running_untraced(spin.pid)


def test_top_says_it_samples_and_how_to_stop_then_prints_the_table(terminal, spin):
    terminal.start(["top", str(spin.pid), "--duration", "3"], {}, width=80)
    screen = terminal.wait_for("sampling pid", "samples", "(Ctrl-C to stop)")
    assert "SELF%" not in screen
    terminal.wait_for("SELF%", "hot_alpha")
    assert terminal.exit_status() == 0
    # the progress line was wiped before the table: no "sampling pid" left above it
    assert "sampling pid" not in terminal.screen()


def test_top_of_a_command_says_once_what_it_samples(terminal, built):
    terminal.start(["top", "--", str(built("spin")), "2"], {}, width=80)
    terminal.wait_for("livesym: sampling pid", "until it exits")
    terminal.wait_for("SELF%", "hot_alpha")
    assert terminal.exit_status() == 0
