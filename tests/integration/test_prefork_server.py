"""A real pre-fork server: gunicorn (a test dependency, from PyPI) with four sync workers
serving a CPU-bound WSGI app (sample_targets/wsgiburn.py) on 127.0.0.1, driven by a
bounded number of requests. livesym follows the master's children: every worker shows
with the app's Python frames, and a worker killed during the session and the one
gunicorn starts in its place both appear."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

gunicorn = pytest.importorskip(
    "gunicorn", reason="gunicorn is a test dependency: pip install -e '.[test]'"
)

TARGETS = Path(__file__).parent.parent.parent / "sample_targets"
WORKERS = 4
MAX_REQUESTS = 2000  # the driver stops there, or when the test is done
CLIENTS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def workers(master: int) -> set[int]:
    try:
        return {c.pid for c in psutil.Process(master).children()}
    except psutil.Error:
        return set()


@pytest.fixture
def server() -> Iterator[tuple[int, int]]:
    """gunicorn's master pid and port, once its workers answer."""
    port = free_port()
    master = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", str(WORKERS), "-b", f"127.0.0.1:{port}",
         "--chdir", str(TARGETS), "--log-level", "warning", "wsgiburn:app"],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    assert r.status == 200
                if len(workers(master.pid)) == WORKERS:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or master.poll() is not None:
                pytest.fail("gunicorn did not come up with its workers within 30 s")
            time.sleep(0.2)
        yield master.pid, port
    finally:
        master.terminate()
        try:
            master.wait(10)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()


class Driver:
    """CLIENTS threads sending requests one after another, MAX_REQUESTS in all at most."""

    def __init__(self, port: int) -> None:
        self._url = f"http://127.0.0.1:{port}/"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.sent = 0
        self.answered_by: set[int] = set()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(CLIENTS)]

    def __enter__(self) -> Driver:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if self.sent >= MAX_REQUESTS:
                    return
                self.sent += 1
            try:
                with urllib.request.urlopen(self._url, timeout=5) as r:
                    pid = int(r.read().split()[1])
                with self._lock:
                    self.answered_by.add(pid)
            except (OSError, ValueError, IndexError, http.client.HTTPException):
                # a worker killed under a request (mid-answer: IncompleteRead): the next
                # one goes on
                time.sleep(0.05)


def livesym(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livesym", *args], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def _python_read(pid: int, reader: int) -> bool:
    """Whether ``pid``'s Python frames are being read: by livesym itself (CPython 3.11:
    ``reader`` holds its /proc/PID/mem open), or by a py-spy."""
    mem = f"/proc/{pid}/mem"
    try:
        fds = os.listdir(f"/proc/{reader}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            if os.readlink(f"/proc/{reader}/fd/{fd}") == mem:
                return True
        except OSError:
            continue
    found = subprocess.run(["pgrep", "-f", f"py-spy record --pid {pid} "], capture_output=True)
    return bool(found.stdout.strip())


def test_every_worker_shows_the_apps_python_frames_a_respawned_one_too(server, tmp_path):
    master, port = server
    first = workers(master)
    capture = tmp_path / "server.json"
    with Driver(port) as driver:
        recording = subprocess.Popen(
            [sys.executable, "-m", "livesym", "record", str(master), "--children",
             "--duration", "8", "-o", str(capture)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        # The victim killed once it has been sampled a while (on a busy machine livesym's
        # start-up alone may take the seconds a fixed wait gives it)
        victim = min(first)
        deadline = time.monotonic() + 30
        while not _python_read(victim, recording.pid):
            assert time.monotonic() < deadline and recording.poll() is None, "never sampled"
            time.sleep(0.1)
        time.sleep(2)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while len(workers(master) - first) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        respawned = workers(master) - first
        assert respawned, "gunicorn did not start a worker in place of the killed one"
        _, err = recording.communicate(timeout=60)
        assert recording.returncode == 0, err
    assert driver.sent <= MAX_REQUESTS
    report = livesym("report", str(capture), "--json")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    listed = {p["pid"]: p["samples"] for p in doc["processes"]}
    assert master in listed
    for pid in first | respawned:
        assert listed.get(pid, 0) > 0, (pid, doc["processes"])
        own = livesym("report", str(capture), "--json", "--process", str(pid), "--limit", "50")
        assert own.returncode == 0, own.stderr
        functions = json.loads(own.stdout)["functions"]
        app = [f for f in functions if f["kind"] == "python" and f["symbol"] == "burn_cpu"]
        assert app and app[0]["module"].endswith("wsgiburn.py"), (pid, functions[:5])
        # The worker spent most of its samples in the app's request
        assert app[0]["total_pct"] >= 30, (pid, functions[:5])


def test_top_by_the_masters_pid_lists_every_worker(server):
    master, port = server
    with Driver(port):
        done = livesym("top", str(master), "--children", "--duration", "3", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    listed = {p["pid"] for p in doc["processes"]}
    assert listed >= {master, *workers(master)}
    assert all("gunicorn" in p["command"] for p in doc["processes"])
