"""A process's threads and their scheduler states, read from /proc often and cheaply.

The ptrace sampler needs, every tick, the threads that are on a CPU (state
``R``): it stops only those, which is what makes it measure what perf's
cpu-clock measures. ``/proc/<pid>/task/<tid>/stat`` says so, but generating
it costs the kernel ~15 µs, i.e. ~5 ms per tick for 300 threads (25 % of a
CPU at 49 Hz). ``schedstat`` (run time, wait time, times scheduled) costs
~3 µs and changes whenever the thread gets onto a CPU, so a thread whose
schedstat has not changed since the last look and that was not running then
has not run since: its state is taken as unchanged and ``stat`` is read only
for the others. Descriptors stay open (reading at offset 0 regenerates the
text) up to a cap, so a busy tick is one pread per thread, not
open+read+close, and a reused tid can never be mistaken for the old thread.
"""

from __future__ import annotations

import errno
import os
import resource
from typing import NamedTuple

# Never hold more than this many /proc descriptors (two per thread at most):
# the rest of livesym opens ELF files, and the default soft limit is 1024.
MAX_CACHED_FDS = 512

# States of a thread that can be stopped and sampled (the rest: stopped 't'/'T',
# zombie 'Z', dead 'X'/'x', parked 'P', and so on).
SAMPLEABLE = frozenset("RSDI")


def _fd_cap() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CACHED_FDS
    return max(0, min(MAX_CACHED_FDS, soft // 4))


def list_tids(pid: int) -> set[int] | None:
    """The tids in /proc/<pid>/task, or None when the process is gone."""
    try:
        return {int(name) for name in os.listdir(f"/proc/{pid}/task") if name.isdigit()}
    except OSError:
        return None


def _state_byte(stat: bytes) -> bytes:
    # The comm field may contain ") " itself: the state follows the last ')'.
    return stat[stat.rfind(b")") + 2 :][:1]


# Indexes into stat_fields: state ppid pgrp session tty_nr tpgid flags minflt cminflt
# majflt cmajflt utime stime (proc(5)), in clock ticks.
UTIME, STIME = 11, 12
PROCESSOR = 36  # the CPU the task last ran on, or whose run queue it waits on (field 39)


def stat_fields(stat: bytes) -> list[bytes]:
    """The fields of a /proc/.../stat line after the command name, from its state on
    (the name may hold ") " itself: the fields follow the last ')')."""
    return stat[stat.rfind(b")") + 2 :].split()


def state_of(stat: bytes) -> str:
    """The state letter in a /proc/.../stat line."""
    return _state_byte(stat).decode("ascii", "replace")


def task_state(pid: int, tid: int) -> bytes | None:
    """The state letter of /proc/<pid>/task/<tid>/stat, or None if the task is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            return _state_byte(f.read())
    except OSError:
        return None


GONE = (b"Z", b"X", None)  # task_state of a task that no longer runs


def live_threads(pid: int) -> set[int] | None:
    """The target's running (non-zombie) threads; None when the process is gone.

    A process that has exited but not yet been reaped keeps /proc/<pid> with
    its leader as a zombie: that counts as gone once no other thread is
    left (a leader that called pthread_exit is a zombie too, while its
    threads still run).
    """
    tids = list_tids(pid)
    if tids is not None and pid in tids and task_state(pid, pid) in GONE:
        tids.discard(pid)
    return tids


def syscall_of(pid: int, tid: int) -> int | None:
    """The system call a stopped or blocked thread is in, from /proc/.../syscall.

    The file holds the number and arguments (``"202 0x... ..."``), ``"-1 SP PC"``
    for a thread stopped outside any call, or ``"running"``; None for the last
    two and when the thread is gone or the file unreadable.
    """
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as f:
            first = f.read(64).split(maxsplit=1)[:1]
    except OSError:
        return None
    if not first or not first[0].isdigit():
        return None  # "-1": not in a call; "running": cannot tell
    return int(first[0])


STARTTIME = 19  # stat_fields' index of starttime: clock ticks after boot


def switch_rate(pid: int, tid: int) -> float | None:
    """Context switches a second of thread ``tid`` over its life so far (voluntary and
    not, /proc/.../status, over its age from /proc/.../stat and /proc/uptime); None
    where they cannot be read."""
    status = f"/proc/{pid}/task/{tid}/status"
    names = (b"voluntary_ctxt_switches", b"nonvoluntary_ctxt_switches")
    switches = [_status_field(status, name) for name in names]
    age = task_age(f"/proc/{pid}/task/{tid}/stat")
    if None in switches or age is None or age <= 0:
        return None
    return sum(n for n in switches if n is not None) / max(age, 0.01)


def task_age(stat: str = "/proc/self/stat") -> float | None:
    """Seconds since the task of the /proc ``stat`` file started (its starttime against
    /proc/uptime: both since boot, to a clock tick); None where they cannot be read."""
    try:
        with open(stat, "rb") as f:
            fields = stat_fields(f.read(4096))
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read(64).split()[0])
        return uptime - int(fields[STARTTIME]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _status_field(path: str, name: bytes) -> int | None:
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(name + b":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def tracer_pid(pid: int, tid: int | None = None) -> int | None:
    """The process tracing ``pid`` (or its thread ``tid``): 0 if none, None if unknown.

    /proc's TracerPid is the tracing *thread*; the process it belongs to (its
    Tgid, what ps shows) is what a user can act on.
    """
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    tracer = _status_field(path, b"TracerPid")
    if not tracer:
        return tracer
    return _status_field(f"/proc/{tracer}/status", b"Tgid") or tracer


class SchedStat(NamedTuple):
    """/proc/<pid>/task/<tid>/schedstat (kernel/sched/stats.h, sched_info)."""

    run_ns: int  # time on a CPU (updated at switches and scheduler ticks only)
    wait_ns: int  # time spent runnable but waiting for a CPU (added when it gets one)
    switches: int  # times switched onto a CPU


class ThreadStates:
    """Scheduler states of one process's threads, for reading every tick."""

    def __init__(self, pid: int, proc: str = "/proc") -> None:
        self.pid = pid
        self._task = f"{proc}/{pid}/task"
        self._fds: dict[tuple[int, str], int] = {}
        self._cap = _fd_cap()
        self._schedstat: dict[int, bytes] = {}
        self._state: dict[int, str] = {}
        self._cpu: dict[int, int] = {}
        self.stat_reads = 0  # how many stat files were generated (for the cost figures)

    def _read(self, tid: int, name: str, size: int = 1024) -> bytes | None:
        """The contents of task/<tid>/<name>; None when the thread is gone."""
        key = (tid, name)
        fd = self._fds.get(key)
        try:
            if fd is not None:
                return os.pread(fd, size, 0)
            path = f"{self._task}/{tid}/{name}"
            if len(self._fds) < self._cap:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                self._fds[key] = fd
                return os.pread(fd, size, 0)
            with open(path, "rb") as f:
                return f.read(size)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ESRCH):
                self.forget(tid)
                return None
            raise

    def state(self, tid: int) -> str | None:
        """The state letter of ``tid`` now (``R`` running...), or None if it is gone."""
        last = self._state.get(tid)
        sched = self._read(tid, "schedstat")
        if sched is None:
            return None
        changed = sched != self._schedstat.get(tid) or sched.startswith(b"0 0 0")
        self._schedstat[tid] = sched
        if last is not None and last != "R" and not changed:
            return last  # not on a CPU since the last look: still in the same state
        stat = self._read(tid, "stat")
        if stat is None:
            return None
        self.stat_reads += 1
        state = self._state[tid] = state_of(stat)
        fields = stat_fields(stat)
        if len(fields) > PROCESSOR and fields[PROCESSOR].isdigit():
            self._cpu[tid] = int(fields[PROCESSOR])
        return state

    def cpu(self, tid: int) -> int | None:
        """The CPU ``tid`` was on (or queued for) when ``state`` last read its stat line."""
        return self._cpu.get(tid)

    def current_state(self, tid: int) -> bytes | None:
        """The state letter of ``tid`` read now, whatever its schedstat; None if gone."""
        stat = self._read(tid, "stat")
        if stat is None:
            return None
        self.stat_reads += 1
        return _state_byte(stat)

    def preemptions(self, tid: int) -> int | None:
        """How many times ``tid`` was switched out while runnable (its status's
        ``nonvoluntary_ctxt_switches``); None if it is gone or the file says none."""
        status = self._read(tid, "status", 4096)
        if status is None:
            return None
        at = status.find(b"nonvoluntary_ctxt_switches:")
        if at < 0:
            return None
        field = status[at + 27 : at + 27 + 32].split()
        return int(field[0]) if field and field[0].isdigit() else None

    def schedstat(self, tid: int) -> SchedStat | None:
        """``tid``'s scheduler counters now; None if it is gone or the kernel keeps none.

        Reading them also refreshes what ``state`` compares against.
        """
        sched = self._read(tid, "schedstat")
        if sched is None:
            return None
        self._schedstat[tid] = sched
        fields = sched.split()
        if len(fields) < 3 or sched.startswith(b"0 0 0"):
            return None
        return SchedStat(int(fields[0]), int(fields[1]), int(fields[2]))

    def system_ticks(self, tid: int) -> int | None:
        """``tid``'s system time (the kernel's time for it) in clock ticks, from its stat
        line; None if it is gone or the line is not one."""
        stat = self._read(tid, "stat")
        if stat is None:
            return None
        self.stat_reads += 1
        fields = stat_fields(stat)
        if len(fields) <= STIME or not fields[STIME].isdigit():
            return None
        return int(fields[STIME])

    def forget(self, tid: int) -> None:
        """Drop what is cached for ``tid`` (it exited), closing its descriptors."""
        self._schedstat.pop(tid, None)
        self._state.pop(tid, None)
        self._cpu.pop(tid, None)
        for name in ("stat", "schedstat", "status"):
            fd = self._fds.pop((tid, name), None)
            if fd is not None:
                os.close(fd)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._schedstat.clear()
        self._state.clear()
        self._cpu.clear()
