"""A thread that outlives the command never keeps livesym's process (``livesym.entry``):
real interpreters, each with a thread that is not a daemon."""

from __future__ import annotations

import os
import subprocess
import sys
import time

LEFT_RUNNING = """
import threading, time
from livesym.entry import leave_past_lingering_threads
threading.Thread(target=time.sleep, args=(600,)).start()  # as Textual's, not a daemon
print("the command's output", end="")  # buffered: a pipe
leave_past_lingering_threads(7, linger=0.3)
print("not reached")
"""

ENDS_IN_TIME = """
import threading, time
from livesym.entry import leave_past_lingering_threads
threading.Thread(target=time.sleep, args=(0.05,)).start()
leave_past_lingering_threads(7, linger=5.0)
print("returned")
"""


def test_a_thread_left_running_is_left_behind_with_the_command_s_code_and_output():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", LEFT_RUNNING], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert time.monotonic() - started < 30  # not the thread's 600 s
    assert (done.returncode, done.stdout, done.stderr) == (7, "the command's output", "")


def test_threads_that_end_in_time_leave_the_exit_to_the_interpreter():
    done = subprocess.run([sys.executable, "-c", ENDS_IN_TIME], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, "returned")


NUMPY_AFTER_THE_COMMAND = """
import os, sys
import livesym.entry
sys.argv = ["livesym", "--version"]
try:
    livesym.entry.main()
except SystemExit:
    pass
import numpy
numpy.bincount(numpy.arange(100))
print(len(os.listdir("/proc/self/task")))
"""


def test_numpy_starts_no_thread_pool_in_livesym_s_process():
    # numpy's OpenBLAS starts a thread a core at import and they spin for nothing
    # (livesym counts with numpy; it multiplies no matrices): livesym asks for none.
    # Without the setting, this machine's process has a thread a core.
    env = {k: v for k, v in os.environ.items() if "NUM_THREADS" not in k}
    done = subprocess.run([sys.executable, "-c", NUMPY_AFTER_THE_COMMAND], capture_output=True,
                          text=True, timeout=60, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1"
