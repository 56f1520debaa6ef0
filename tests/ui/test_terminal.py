"""Smoke tests in a real terminal: the commands run inside tmux, keys and signals arrive
the way a user sends them, and the exit status is what the shell sees."""

from __future__ import annotations

import os
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

    def start(self, args: list[str], env: dict[str, str], redirect: str = "") -> None:
        command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable,
                              "-m", "livesym", *args])  # fmt: skip
        # The shell writes the command's exit status where the test can read it, then
        # keeps the pane (and what the command left on it) until the server is killed.
        script = f"{command} {redirect}; echo $? > {shlex.quote(str(self.status))}; sleep 60"
        self.tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-s", "t", script)

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

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def exit_status(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while not self.status.exists() or not self.status.read_text().strip():
            assert time.monotonic() < deadline, f"still running; screen:\n{self.screen()}"
            time.sleep(0.1)
        return int(self.status.read_text())

    def command_pid(self) -> int:
        """The livesym process (the child of the pane's shell)."""
        shell = self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
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
    recorded = read_capture(capture)
    assert recorded.session["end_reason"] == "stopped"
    assert len(recorded.samples) == recorded.session["samples"] > 0
    assert spin.poll() is None and untraced(spin.pid)


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
