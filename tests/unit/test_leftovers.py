"""The suite's own guard: what a test leaves running is found, and only that."""

from __future__ import annotations

import os
import subprocess

from tests.support import leftovers


def test_a_process_started_and_left_is_found_and_one_a_kept_server_starts_is_not():
    # GIVEN a "server" kept from before (a fixture's), and a test that starts a process
    # of its own and has the server start a worker
    me = os.getpid()
    server = subprocess.Popen(["sh", "-c", "read line; sleep 30 & wait"], stdin=subprocess.PIPE)
    try:
        before = leftovers.descendants(me)
        assert server.pid in before
        mine = subprocess.Popen(["sleep", "30"])
        assert server.stdin is not None
        server.stdin.write(b"go\n")
        server.stdin.flush()
        # WHEN the test ends, THEN only its own process is left running; the worker of
        # the kept server is the server's business
        deadline_workers = 0
        while not any(name == "sleep" and parent == server.pid
                      for name, parent in leftovers.descendants(me).values()):  # fmt: skip
            deadline_workers += 1
            assert deadline_workers < 500, "the server never started its worker"
            os.sched_yield()
        left = leftovers.left_running(me, before)
        assert left == {mine.pid: "sleep"}
        leftovers.end(left)
        assert mine.wait(timeout=5) < 0
    finally:
        leftovers.end({pid: name for pid, (name, parent) in leftovers.descendants(me).items()
                       if parent == server.pid})  # fmt: skip
        server.kill()
        server.wait()
