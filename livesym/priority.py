"""livesym's own priority while it samples: raised where permitted, so that a box whose
cores are all taken (the box that most needs a profiler) still runs the profiler.

A command that samples a live process (top, record, attach) sets livesym to nice -20
first thing (``livesym.entry``, from the words of its command line, before the rest
of livesym loads), then every thread it has (``raise_all``); threads made later
inherit it from the thread that makes them. It stays so until the process ends.
On two cores taken by a pool of 1,000 busy threads (load ~800) a nice-0 livesym got
0.9 s of CPU in an 8-second session that took 7.5 minutes: its start-up alone
(imports, 0.4 s of CPU) took minutes at a 1/400 share, and its exit half a minute.
At nice -20 a runnable livesym weighs as much as 87 nice-0 threads (88761 against
1024 in the kernel's table) and the session ends on time. perf's ``--realtime``
takes SCHED_FIFO instead; a real-time Python process that found much to do would
starve the target and the box's own daemons, where nice only tilts the share.

What cannot be helped: the Python interpreter's own start (about 15 ms of CPU) runs
at the nice livesym was started with, and on two cores at load 800 that is 15 s of
waiting: there, start it as ``nice -n -20 livesym ...`` (root).

A command livesym starts (``-- CMD``) runs at the nice it had before (``original``),
and so does py-spy (``sampling.pyspy``): it stops the target for each sample, and at
-20 its shares drifted from those of the py-spy it is held to. Permitted for root
(CAP_SYS_NICE) or within RLIMIT_NICE; refused, the session goes on as it is and says
so. ``--no-priority`` leaves it alone.
"""

from __future__ import annotations

import contextlib
import os

RAISED_NICE = -20
SAMPLING_COMMANDS = ("top", "record", "attach")  # those that sample a live process
# While raised: what was done, and from what nice; "early": raise_early's from what.
_now: dict[str, object] = {"said": "", "before": None}


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task") if t.isdigit()][:4096]
    except OSError:
        return [os.getpid()]


def said() -> str:
    """What ``raised`` did, while inside it (for the header); else ""."""
    return str(_now["said"])


def original() -> int | None:
    """The nice livesym had before ``raised`` raised it (a started command gets it
    back); None where it is not raised."""
    before = _now["before"]
    return before if isinstance(before, int) else None


def raise_early(argv: list[str]) -> None:
    """Raise the only thread there is yet, for a command line that samples (its first
    word a SAMPLING_COMMAND, no --no-priority before a ``--``); ``raised`` goes on from
    there. Needs nothing but ``os``: it runs before the rest of livesym loads."""
    own = argv[: argv.index("--")] if "--" in argv else argv
    if not own or own[0] not in SAMPLING_COMMANDS or "--no-priority" in own:
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    if before > RAISED_NICE:
        with contextlib.suppress(OSError):  # refused: ``raised`` finds it so, and says it
            os.setpriority(os.PRIO_PROCESS, 0, RAISED_NICE)
            _now["early"] = before


def raise_all(wanted: bool) -> str:
    """Every thread at nice RAISED_NICE from now on, where ``wanted`` and permitted
    (from the nice it had before ``raise_early``, if that raised it first); says what
    was done, for the header. Not put back: the command ends with the process, and a
    nice-0 process on a box whose cores are all taken took longer to exit (its
    interpreter's clean-up) than to sample."""
    early = _now.pop("early", None)
    before = early if isinstance(early, int) else os.getpriority(os.PRIO_PROCESS, 0)
    if not wanted:
        said = "not raised (--no-priority)"
    elif before <= RAISED_NICE:
        said = f"nice {before} already"  # (started so: ``nice -n -20 livesym``)
    else:
        said = _raise(before)
    _now.update(said=said, before=before if said.startswith("raised") else None)
    return said


def _raise(before: int) -> str:
    try:
        for tid in _threads():
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.setpriority(os.PRIO_PROCESS, tid, RAISED_NICE)
    except PermissionError:
        _restore(before)
        return "not raised: not permitted (run as root, or raise RLIMIT_NICE)"
    return f"raised: nice {RAISED_NICE} (--no-priority: not)"


def _restore(nice: int) -> None:
    """Every thread back at ``nice`` (lowering a priority is always permitted)."""
    for tid in _threads():
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, nice)
