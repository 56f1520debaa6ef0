"""The header's CPU, RSS and threads come from a running process only: one that has
exited (a zombie, not yet reaped by its parent) is not read as 0 B resident."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from livesym.target.stats import StatsPoller


def test_a_process_is_read_while_it_runs_and_not_once_it_exited(built):
    proc = subprocess.Popen([str(built("spin")), "1"], stdout=subprocess.DEVNULL)
    try:
        poller = StatsPoller(proc.pid)
        assert poller.poll(0.0) is None  # the first read starts the CPU interval
        time.sleep(0.3)
        running = poller.poll(0.3)
        assert running is not None and running.rss > 0 and running.threads == 4
        # WHEN it exits, unreaped (a zombie: no memory, one thread left in /proc)
        deadline = time.monotonic() + 10
        while "Z" not in Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1][:3]:
            assert time.monotonic() < deadline, "spin did not exit"
            time.sleep(0.05)
        # THEN it is not read as a process with nothing resident
        assert poller.poll(5.0) is None
    finally:
        proc.kill()
        proc.wait()
