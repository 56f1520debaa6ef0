"""What staying on costs: `record` and the dashboard at 99 Hz, against perf in the same run.

On the same target (sample_targets/crunch.c, four busy threads: both cores full), one
after the other, each for ``--seconds`` once ``--settle`` seconds have passed:

- ``livesym record PID -o FILE --rate R`` against ``perf record -g -F R -p PID``: the
  CPU each takes (utime + stime of every thread, from /proc), as a share of one core.
- ``livesym attach PID --rate R`` in a tmux window of ``--size`` (100x30) against
  ``perf top -p PID -F R`` in one of the same size: the CPU each takes, and the bytes
  each writes to its terminal a second (tmux's pipe-pane copies what the program
  writes to its pty: what an SSH link carries).

The ratios are the point: the machine's speed divides out. Issue 31's bars: `record`
at 99 Hz <= 1 % of a core in steady state; `attach` at 100x30 <= 2 % of a core and
<= 2x the bytes a second `perf top` writes.

    .venv/bin/python bench/staying_on.py [--seconds 30] [--settle 10] [--rate 99]
    .venv/bin/python bench/staying_on.py --only attach --refresh 2
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import _benchlib as bl

BENCH = "staying_on"
THREADS = 4


def _ticks(pid: int) -> int:
    """utime + stime of every thread of ``pid`` so far (ended threads' included), in
    clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def _cpu_over(pid: int, seconds: float) -> tuple[float, float]:
    """The share of one core ``pid`` takes over the next ``seconds``, and the seconds
    that passed."""
    before, began = _ticks(pid), time.monotonic()
    time.sleep(seconds)
    used = (_ticks(pid) - before) / os.sysconf("SC_CLK_TCK")
    elapsed = time.monotonic() - began
    return used / elapsed, elapsed


@contextmanager
def _crunch() -> Iterator[int]:
    from livesym.sample_targets import build

    target = subprocess.Popen([str(build("crunch")), str(THREADS), "100000000", "0"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert target.stdout is not None
        if not target.stdout.readline().startswith("ready"):
            raise bl.BenchError("crunch did not start")
        yield target.pid
    finally:
        target.kill()
        target.wait()


def _headless(argv: list[str], settle: float, seconds: float) -> float:
    """CPU share of a command that runs without a terminal, stopped with SIGINT."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(settle)
        share, _ = _cpu_over(proc.pid, seconds)
        if proc.poll() is not None:
            raise bl.BenchError(f"{argv[0]} ended early: {proc.stderr.read()[-300:]!r}")  # type: ignore[union-attr]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return share


class _Window:
    """A detached tmux window of a fixed size on a private server, its output copied."""

    def __init__(self, size: tuple[int, int], scratch: Path) -> None:
        self.socket = f"livesym-bench-{os.getpid()}"
        self.size = size
        self.copy = scratch / "pane.bytes"
        self.rows: dict[int, float] = {}

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args],
                              capture_output=True, text=True, timeout=10)  # fmt: skip
        return done.stdout

    def run(self, argv: list[str], settle: float, seconds: float) -> tuple[float, float]:
        """CPU share and bytes a second written to the terminal, of ``argv`` in it
        (``rows``: those bytes a second by the screen row they were written to)."""
        width, height = self.size
        self.copy.unlink(missing_ok=True)
        command = " ".join(_quoted(a) for a in argv)
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "b",
                  f"env TERM=xterm-256color {command}")  # fmt: skip
        try:
            pid = int(self.tmux("display-message", "-p", "-t", "b", "#{pane_pid}").strip())
            time.sleep(settle)
            self.tmux("pipe-pane", "-o", "-t", "b", f"cat > {_quoted(str(self.copy))}")
            share, elapsed = _cpu_over(pid, seconds)
            self.tmux("pipe-pane", "-t", "b")  # the copy stops
            time.sleep(0.2)
            sent = self.copy.read_bytes() if self.copy.exists() else b""
            self.rows = {row: n / elapsed for row, n in _by_row(sent).items()}
            return share, len(sent) / elapsed
        finally:
            self.tmux("send-keys", "-t", "b", "q")
            time.sleep(1.0)
            self.tmux("kill-server")


_MOVE = re.compile(rb"\x1b\[(\d+);\d+H")  # a cursor move to (row, column), 1-based


def _by_row(sent: bytes) -> dict[int, int]:
    """``sent``'s bytes by the screen row each was written on: the row of the last
    cursor move before it (what comes before the first move: row 0). Where the bytes
    go, for the next cut."""
    rows: dict[int, int] = {}
    row, at = 0, 0
    for move in _MOVE.finditer(sent):
        rows[row] = rows.get(row, 0) + move.start() - at
        row, at = int(move.group(1)), move.start()
    rows[row] = rows.get(row, 0) + len(sent) - at
    return rows


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def main() -> int:
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--settle", type=float, default=10.0)
    p.add_argument("--rate", type=int, default=99)
    p.add_argument("--size", default="100x30")
    p.add_argument("--refresh", type=float, default=None, help="attach --refresh SECONDS")
    p.add_argument("--only", choices=("record", "attach"), default=None)
    p.add_argument("--keep", type=Path, default=None,
                   help="keep what each wrote: KEEP.attach, KEEP.perf")  # fmt: skip
    args = p.parse_args()
    script = bl.livesym_script()
    perf = shutil.which("perf")
    if script is None:
        bl.skip(BENCH, "no livesym script beside this interpreter", args.json)
    if perf is None or shutil.which("tmux") is None:
        bl.skip(BENCH, "perf and tmux are needed (apt-get install linux-perf tmux)", args.json)
    width, height = (int(n) for n in args.size.split("x"))
    rate = str(args.rate)
    result: dict[str, object] = {"benchmark": BENCH, "rate_hz": args.rate, "size": args.size}
    scratch = Path(tempfile.mkdtemp(prefix="livesym-staying-on-"))

    def record(pid: int) -> None:
        ours = _headless([str(script), "record", str(pid), "-o", str(scratch / "cap.json"),
                          "--rate", rate], args.settle, args.seconds)  # fmt: skip
        theirs = _headless([perf, "record", "-q", "-g", "-F", rate, "-p", str(pid), "-o",
                            str(scratch / "perf.data")], args.settle, args.seconds)  # fmt: skip
        result.update(record_cpu=round(ours, 4), perf_record_cpu=round(theirs, 4),
                      record_bytes=(scratch / "cap.json").stat().st_size)  # fmt: skip

    def attach(pid: int) -> None:
        window = _Window((width, height), scratch)
        refresh = ["--refresh", str(args.refresh)] if args.refresh else []
        cpu, sent = window.run([str(script), "attach", str(pid), "--rate", rate, *refresh],
                               args.settle, args.seconds)  # fmt: skip
        if args.keep is not None:
            shutil.copyfile(window.copy, f"{args.keep}.attach")
        busiest = sorted(window.rows.items(), key=lambda kv: -kv[1])[:8]  # (before perf's)
        result["attach_bytes_per_s_by_row"] = {str(r): round(n) for r, n in busiest}
        perf_cpu, perf_sent = window.run([perf, "top", "-p", str(pid), "-F", rate],
                                         args.settle, args.seconds)  # fmt: skip
        if args.keep is not None:
            shutil.copyfile(window.copy, f"{args.keep}.perf")
        result.update(attach_cpu=round(cpu, 4), attach_bytes_per_s=round(sent),
                      perf_top_cpu=round(perf_cpu, 4), perf_top_bytes_per_s=round(perf_sent),
                      attach_bytes_ratio=round(sent / max(perf_sent, 1.0), 2))  # fmt: skip

    with _crunch() as pid:
        if args.only in (None, "record"):
            record(pid)
        if args.only in (None, "attach"):
            attach(pid)
    shutil.rmtree(scratch, ignore_errors=True)
    bl.print_result(result, args.json)
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
    sys.exit(0)
