"""Parsing py-spy's ``record --format raw`` output into frames (pure; no py-spy needed).

py-spy writes one line per distinct stack, root first, frames joined by ``;``,
then a space and how many samples had that stack (the "collapsed" format of
flamegraph.pl)::

    thread (18517): pyhot;Thread.run (/usr/lib/python3.11/threading.py:982);\
py_hot_a (/srv/pyload.py:53) 4

Each frame is ``name (file:line)``, ``name (file)`` when the line is 0, or a
bare ``name`` when there is no file (py-spy's flamegraph.rs). What a frame is
must be inferred from that text, since the raw format carries no frame kinds:

* ``thread (TID): NAME`` (``--threads``) and ``process PID:"CMDLINE"``
  (``--subprocesses``) are pseudo-frames at the root, not code.
* ``0x7f3a... (MODULE)`` is a native frame py-spy could not symbolize: the raw
  run-time address (kept, so livesym resolves it from the maps and ELF
  symbols) and the shared object it falls in (``?`` when py-spy had none).
* A file ending in ``.py`` (or ``.pyw``/``.pyx``/``.pxd``/``.pxi``, or
  ``<frozen ...>``/``<string>``-style names) is a Python frame.
* Anything else with a file is a symbolized native frame: ``name (MODULE)``
  without a line, or ``name (SOURCE.c:LINE)`` when py-spy had debug info (the
  module is then unknown).

py-spy's own messages go to the same stream when it writes the data to
``/dev/stdout`` (``py-spy> Sampling process ...``, ``... Samples: N Errors: E``);
they are recognised and summarised, not counted as garbage. Any other line
that does not parse is counted and skipped: nothing here raises on bad input.

The raw format has **no idle marker**: with ``--idle`` py-spy writes idle
threads' stacks exactly like running ones (only ``py-spy dump`` says
``(idle)``). ``looks_idle`` infers it from the leaf: a blocking libc call
(``clock_nanosleep``, ``pthread_cond_timedwait``, ``epoll_wait``, ...), the
libpython functions py-spy keeps for that purpose (``time_sleep``,
``PyGILState_Ensure``), or py-spy's own Python-level heuristic
(``threading`` waits, ``selectors`` selects). Without ``--native`` only the
last applies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = [
    "PROCESS_FRAME",
    "THREAD_FRAME",
    "Frame",
    "NativeFrame",
    "ParsedStack",
    "PyFrame",
    "RawParser",
    "RawSummary",
    "frame_of",
    "looks_idle",
    "parse_frame",
    "parse_raw",
    "parse_stack_line",
    "python_leaf_if_stopped_in_syscall",
    "reads_data",
]


@dataclass(frozen=True, slots=True)
class PyFrame:
    """A Python function: qualified name, source file (as py-spy printed it), line."""

    function: str
    file: str
    line: int | None  # None when py-spy printed no line (--nolineno, or line 0)


@dataclass(frozen=True, slots=True)
class NativeFrame:
    """A native frame, as far as py-spy got with it.

    ``address`` is set when py-spy could not name the frame (``name`` is then
    None): the run-time address, for livesym to resolve. ``module`` is the
    shared object py-spy reported (a path with ``--full-filenames``, else a
    file name), ``file``/``line`` the source position when py-spy had debug info
    (py-spy then prints the source instead of the module).
    """

    name: str | None
    address: int | None
    module: str | None
    file: str | None = None
    line: int | None = None


Frame = PyFrame | NativeFrame


@dataclass(frozen=True, slots=True)
class ParsedStack:
    """One line of raw output: ``count`` samples of one thread with the same stack."""

    tid: int | None  # OS thread id (``--threads``); None without it or when py-spy had none
    thread_name: str | None  # the threading module's name
    frames: tuple[Frame, ...]  # leaf first
    count: int
    idle: bool  # looks_idle(frames): the raw format has no idle flag of its own
    pid: int | None = None  # the process frame's pid (``--subprocesses``), else None
    thread_ident: int | None = None  # pthread id, when py-spy printed that instead of a tid


@dataclass
class RawSummary:
    """What a parse saw besides stacks: py-spy's messages, its counts, garbage."""

    stacks: int = 0  # lines parsed as stacks
    samples: int = 0  # sum of their counts
    garbage: int = 0  # lines that were neither stacks nor known messages (skipped)
    garbage_examples: list[str] = field(default_factory=list)  # the first few, shortened
    messages: list[str] = field(default_factory=list)  # py-spy's own lines, prefix stripped
    reported_samples: int | None = None  # "Samples: N" from py-spy's last line
    reported_errors: int | None = None  # "Errors: E": sampling attempts that failed
    attached: bool = False  # "Sampling process ..." seen: py-spy attached and started
    target_exited: bool = False  # "Stopped sampling because process exited"
    interrupted: bool = False  # "Stopped sampling because Control-C pressed"
    late: bool = False  # "... behind in sampling": py-spy could not keep the rate


_MAX_GARBAGE_EXAMPLES = 5
_LEDE = "py-spy> "

_COUNT = re.compile(r"^(?P<stack>.*\S) (?P<count>[0-9]+)$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
_LINE_SUFFIX = re.compile(r"^(?P<file>.*):(?P<line>[0-9]+)$")
THREAD_FRAME = _THREAD = re.compile(
    r"^thread \((?P<id>[0-9]+|0[xX][0-9a-fA-F]+)\)(?:: (?P<name>.*))?$"
)
PROCESS_FRAME = _PROCESS = re.compile(r'^process (?P<pid>[0-9]+):"(?P<cmdline>.*)"$')
_SUMMARY = re.compile(r"Samples: (?P<samples>[0-9]+) Errors: (?P<errors>[0-9]+)")
_PY_SUFFIXES = (".py", ".pyw", ".pyx", ".pxd", ".pxi")

# Message starts, with or without the "py-spy> " lede (py-spy drops it on a tty).
_MESSAGES = (
    "Sampling process ",
    "Stopped sampling because",
    "Wrote raw flamegraph data",
    "Wrote flamegraph data",
    "Wrote speedscope file",
    "Wrote chrome trace",
    "You can use the flamegraph.pl script",
)

# Leaf functions that mean "this thread is waiting, not running" (glibc names,
# public and internal spellings, plus what py-spy keeps from libpython).
_BLOCKING_NATIVE = frozenset(
    {
        "accept",
        "accept4",
        "__libc_accept",
        "clock_nanosleep",
        "__clock_nanosleep",
        "__clock_nanosleep_time64",
        "nanosleep",
        "__nanosleep",
        "usleep",
        "sleep",
        "pause",
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "pthread_cond_clockwait",
        "__pthread_cond_wait",
        "__pthread_cond_timedwait",
        "___pthread_cond_timedwait",
        "___pthread_cond_timedwait64",
        "__pthread_cond_timedwait64",
        "__pthread_cond_wait_common",
        "__futex_abstimed_wait_common",
        "__futex_abstimed_wait_common64",
        "__futex_abstimed_wait_cancelable64",
        "futex_wait",
        "__lll_lock_wait",
        "__lll_lock_wait_private",
        "pthread_join",
        "__pthread_clockjoin_ex",
        "sem_wait",
        "sem_timedwait",
        "sem_clockwait",
        "__new_sem_wait_slow64",
        "do_futex_wait",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "poll",
        "__poll",
        "ppoll",
        "__ppoll",
        "select",
        "__select",
        "pselect",
        "pselect6",
        "read",
        "__read",
        "__libc_read",
        "recv",
        "recvfrom",
        "recvmsg",
        "__libc_recv",
        "__libc_recvfrom",
        "wait",
        "wait3",
        "wait4",
        "waitpid",
        "__waitpid",
        "waitid",
        "sigwait",
        "sigwaitinfo",
        "sigtimedwait",
        "__sigtimedwait",
        "sigsuspend",
        "msgrcv",
        "semop",
        "semtimedop",
        "flock",
        "lockf",
        "connect",
        "__libc_connect",
        "time_sleep",
        # libpython's lock waits (threading.Lock.acquire, Thread.join): the futex below
        # them is a libc internal py-spy leaves unnamed
        "PyThread_acquire_lock_timed",
        "PyThread_acquire_lock",
        "PyCOND_TIMEDWAIT",
        "PyGILState_Ensure",
        "_PyGILState_Ensure",
        "take_gil",
    }
)

# Of those, the calls that return at once when data is there: a thread found in one may
# have been on a CPU all along (os.read of a file in the page cache, a busy socket).
_READS_DATA = frozenset(
    {"read", "__read", "__libc_read", "recv", "recvfrom", "recvmsg", "__libc_recv",
     "__libc_recvfrom"}
)  # fmt: skip

# py-spy's Python-level idle heuristic (python_spy.rs), by method name and file.
_BLOCKING_PYTHON: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wait", ("threading.py",)),
    ("_wait_for_tstate_lock", ("threading.py",)),  # Thread.join
    ("select", ("selectors.py",)),
    ("poll", ("asyncore.py", "zmq", "gevent", "tornado")),
)


def _split_frame(text: str) -> tuple[str, str | None]:
    """``name (file)`` -> (name, file); the file is the last balanced ``(...)``."""
    if not text.endswith(")"):
        return text, None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                if i >= 1 and text[i - 1] == " ":
                    return text[: i - 1], text[i + 1 : -1]
                break
    # Unbalanced parentheses (in a file name): fall back to the last " (".
    cut = text.rfind(" (")
    if cut < 0:
        return text, None
    return text[:cut], text[cut + 2 : -1]


def _is_python_file(file: str) -> bool:
    return file.endswith(_PY_SUFFIXES) or (file.startswith("<") and file.endswith(">"))


def parse_frame(text: str) -> Frame:
    """One frame's text (as between ``;``) -> a PyFrame or a NativeFrame."""
    name, where = _split_frame(text)
    if where is None:
        return frame_of(name, "", None)
    line: int | None = None
    file = where
    m = _LINE_SUFFIX.match(where)
    if m:
        file, line = m["file"], int(m["line"])
    return frame_of(name, file, line)


def frame_of(name: str, file: str, line: int | None) -> Frame:
    """A frame py-spy printed as name, file and line (0 or None: no line) -> a PyFrame
    or a NativeFrame."""
    if not file:
        # No file at all: a code object with an empty co_filename (native frames
        # always carry their module, or "?").
        return PyFrame(function=name, file="", line=None)
    line = line or None
    if _ADDRESS.match(name):
        module = None if file in ("?", "") else file
        return NativeFrame(name=None, address=int(name, 16), module=module)
    if _is_python_file(file):
        return PyFrame(function=name, file=file, line=line)
    if line is None:
        return NativeFrame(name=name, address=None, module=None if file == "?" else file)
    return NativeFrame(name=name, address=None, module=None, file=file, line=line)


def _join_quoted(parts: list[str]) -> list[str]:
    """Re-join a ``process N:"cmd"`` frame that had ``;`` inside its quoted command line."""
    if not parts or not parts[0].startswith("process "):
        return parts
    out: list[str] = []
    i = 0
    while i < len(parts) and parts[i].startswith("process "):
        piece = parts[i]
        i += 1
        while piece.count('"') % 2 == 1 and i < len(parts):
            piece += ";" + parts[i]
            i += 1
        out.append(piece)
    out.extend(parts[i:])
    return out


def looks_idle(frames: Iterable[Frame]) -> bool:
    """Whether a stack (leaf first) is a thread waiting rather than running.

    Looks at the leaf-most frame that has a name (py-spy leaves some libc
    internals as bare addresses): a blocking native call, or one of py-spy's
    Python-level waits.
    """
    for frame in frames:
        if isinstance(frame, NativeFrame):
            if frame.name is None:
                continue
            return frame.name in _BLOCKING_NATIVE
        method = frame.function.rsplit(".", 1)[-1]
        for name, files in _BLOCKING_PYTHON:
            if method == name and any(f in frame.file for f in files):
                return True
        return False
    return False


def reads_data(frames: Iterable[Frame]) -> bool:
    """Whether a stack's leaf-most named native frame is a read or a receive (blocked,
    or busy with data that is there: only the thread's CPU time tells which)."""
    for frame in frames:
        if isinstance(frame, NativeFrame):
            if frame.name is None:
                continue
            return frame.name in _READS_DATA
        return False
    return False


def _in_vdso(frame: NativeFrame) -> bool:
    module = frame.module or ""
    return module.rsplit("/", 1)[-1] in ("[vdso]", "linux-vdso.so.1")


def python_leaf_if_stopped_in_syscall(
    frames: tuple[Frame, ...], after_syscall: Callable[[int], bool] | None = None
) -> tuple[Frame, ...]:
    """The stack without its native leaf frames when py-spy stopped it in the vDSO,
    or (``after_syscall`` says so of the leaf's address) at a system call's exit.

    py-spy stops the thread (PTRACE_ATTACH) to read it, and a running
    thread takes that stop at its next kernel entry: the IPI that should
    interrupt it is slow (0.1-0.4 ms on a VM), so a thread that calls
    clock_gettime every few µs (a CPU-time clock is a syscall from the vDSO)
    is found at that call's exit nearly every time, and its native leaf says
    ``__vdso_clock_gettime`` where perf sees the interpreter's own functions.
    The Python frames are still right (the call is made from the line that
    was running), so such a stack is cut back to its innermost Python frame.
    The same happens at any other system call made often (the futex wake of a
    GIL hand-over): a leaf right after a ``syscall`` instruction is a stop taken
    at the call's exit, not user code the tick found running. A stack with no
    Python frame is left as it is.
    """
    if not frames or not isinstance(frames[0], NativeFrame):
        return frames
    leaf = frames[0]
    at_exit = after_syscall is not None and leaf.address is not None and after_syscall(leaf.address)
    if not at_exit and not _in_vdso(leaf):
        return frames
    for i, frame in enumerate(frames):
        if isinstance(frame, PyFrame):
            return frames[i:]
    return frames


def parse_stack_line(line: str) -> ParsedStack | None:
    """One data line -> ParsedStack, or None if it is not one (never raises)."""
    m = _COUNT.match(line.rstrip("\r\n"))
    if m is None:
        return None
    count = int(m["count"])
    if count <= 0:
        return None
    parts = _join_quoted(m["stack"].split(";"))
    tid: int | None = None
    ident: int | None = None
    thread_name: str | None = None
    pid: int | None = None
    i = 0
    while i < len(parts):  # pseudo-frames at the root: process(es), then the thread
        proc = _PROCESS.match(parts[i])
        if proc is not None:
            pid = int(proc["pid"])  # the innermost process frame is the sampled one
            i += 1
            continue
        thread = _THREAD.match(parts[i])
        if thread is not None:
            ident_text = thread["id"]
            if ident_text[:2].lower() == "0x":
                ident = int(ident_text, 16)
            else:
                tid = int(ident_text)
            thread_name = thread["name"]
            i += 1
        break
    frames_root_first = [parse_frame(p) for p in parts[i:] if p]
    if not frames_root_first and tid is None and ident is None:
        return None
    frames = tuple(reversed(frames_root_first))
    return ParsedStack(
        tid=tid,
        thread_name=thread_name,
        frames=frames,
        count=count,
        idle=looks_idle(frames),
        pid=pid,
        thread_ident=ident,
    )


class RawParser:
    """Incremental parser: ``feed`` lines as they arrive; ``summary`` says what else came."""

    def __init__(self) -> None:
        self.summary = RawSummary()

    def feed(self, line: str) -> ParsedStack | None:
        """Parse one line: a ParsedStack, or None for a message, blank or garbage line."""
        text = line.rstrip("\r\n")
        if not text.strip():
            return None
        if self._message(text):
            return None
        stack = parse_stack_line(text)
        if stack is None:
            self._garbage(text)
            return None
        self.summary.stacks += 1
        self.summary.samples += stack.count
        return stack

    def _message(self, text: str) -> bool:
        body = text.removeprefix(_LEDE).strip()
        known = text.startswith(_LEDE) or body.startswith(_MESSAGES) or "behind in sampling" in body
        if not known:
            return False
        s = self.summary
        s.messages.append(body)
        if body.startswith("Sampling process "):
            s.attached = True
        elif body.startswith("Stopped sampling because"):
            if "process exited" in body or "process ended" in body:
                s.target_exited = True
            elif "Control-C" in body:
                s.interrupted = True
        elif "behind in sampling" in body:
            s.late = True
        summary = _SUMMARY.search(body)
        if summary is not None:
            s.reported_samples = int(summary["samples"])
            s.reported_errors = int(summary["errors"])
        return True

    def _garbage(self, text: str) -> None:
        s = self.summary
        s.garbage += 1
        if len(s.garbage_examples) < _MAX_GARBAGE_EXAMPLES:
            s.garbage_examples.append(text if len(text) <= 120 else text[:117] + "...")


def parse_raw(text: str) -> tuple[list[ParsedStack], RawSummary]:
    """A whole raw output (py-spy's stdout or a ``--format raw`` file) at once."""
    parser = RawParser()
    stacks = [s for s in map(parser.feed, text.splitlines()) if s is not None]
    return stacks, parser.summary
