"""Command-line parsing and dispatch; the commands live in livesym.commands.

Nothing heavy is imported here: ``livesym --help`` and the short commands
start fast, and each command imports what it uses when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

from livesym import __version__, interrupts, priority
from livesym.commands.text import TEXT_ROWS
from livesym.errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_USAGE, LivesymError
from livesym.export.registry import FORMATS as EXPORT_FORMATS
from livesym.interrupts import Interrupted
from livesym.sampling.registry import DEFAULT_MAX_PROCESSES
from livesym.sampling.registry import NAMES as SAMPLER_NAMES

MODES = ("cpu", "wall", "off-cpu")  # records.TimeMode's values (not imported: --help is fast)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, like every other failure."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"livesym: {message}; see '{self.prog} --help'\n")


def _target(text: str) -> int | str:
    """A PID, or a process name (pidof's: livesym.target.select)."""
    if text.isdigit():
        return _pid(text)
    if not text or "/" in text or len(text) > 255 or not text.isprintable():
        raise argparse.ArgumentTypeError(f"not a process id or name: {text!r}")
    return text


def _target_argument(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument(
        "target",
        type=_target,
        nargs="?",
        metavar="PID|NAME",
        help=f"the process to {verb}: its PID, or its name (every process of that name, as "
        "pidof finds them); or none, and '-- CMD ARGS' to start CMD and profile it from its "
        "first instruction",
    )
    p.add_argument(
        "--children",
        action="store_true",
        help="also sample the target's descendants, forked or exec'd, those started later "
        "too (found within half a second)",
    )
    p.add_argument(
        "--max-processes",
        type=_positive(int, "a positive count"),
        default=DEFAULT_MAX_PROCESSES,
        metavar="N",
        help=f"sample at most N processes at once (default {DEFAULT_MAX_PROCESSES}); "
        "those found meanwhile are left out, and that is said",
    )


def _pid(text: str) -> int:
    try:
        pid = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return pid


def _positive(kind: type[int] | type[float], what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}")
        return value

    return parse


def _size(text: str) -> int:
    """``4G``, ``512M``, ``800K`` (or GiB, MiB, KiB) or a number of bytes."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in units else ""
    try:
        number = float(t[: len(t) - len(unit)])
    except ValueError:
        number = 0.0
    if not 0 < number * units[unit] <= 1 << 50:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"not a size such as 4G or 512M: {text!r}")
    return int(number * units[unit])


_seconds = _positive(float, "a positive number of seconds")
DEFAULT_FETCH_WAIT = 30.0
DEFAULT_MIN_SHARE = 1.0  # percent of the samples: keeps a --tree screenful readable


def _within(high: float, what: str) -> Callable[[str], float]:
    """A parser of numbers from 0 to ``high`` (``what`` names them in the error)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 <= value <= high:  # NaN fails this too
            raise argparse.ArgumentTypeError(f"not {what} from 0 to {high:g}: {text!r}")
        return value

    return parse


_share = _within(100, "a percentage")
_wait_seconds = _within(3600, "a number of seconds")
_seconds_from_start = _within(10 * 365 * 86400, "a number of seconds")


_hertz = _positive(int, "a positive rate in Hz")
_count = _positive(int, "a positive count")
_stack_bytes = _positive(int, "a positive number of bytes")


def _sampling_options(
    p: argparse.ArgumentParser,
    duration: float | None,
    *,
    with_duration: bool = True,
    until: str = "default: until Ctrl-C or the target exits",
) -> None:
    if with_duration:
        p.add_argument(
            "--duration", type=_seconds, default=duration, metavar="S", help=f"seconds ({until})"
        )
    p.add_argument(
        "--rate",
        type=_hertz,
        default=None,
        metavar="HZ",
        help="samples per second (default 99 with perf, 49 with ptrace, which stops threads)",
    )
    p.add_argument(
        "--sampler",
        choices=("auto", *SAMPLER_NAMES),
        default="auto",
        metavar="|".join(("auto", *SAMPLER_NAMES)),
        help="how to sample (default auto: the best one permitted)",
    )
    _mode_options(
        p,
        "which time to sample and show: cpu (on-CPU, default), wall (on- and "
        "off-CPU), off-cpu (where threads wait, weighed by how long)",
    )
    p.add_argument(
        "--stack-size",
        type=_stack_bytes,
        default=None,
        metavar="BYTES",
        help="bytes of each sampled thread's stack copied to unwind from, fixed (by "
        "default perf copies 16384 and raises a thread whose stack goes deeper to 65528, "
        "the most; ptrace copies 65536); deeper stacks end early, and say so",
    )
    p.add_argument(
        "--nonblocking",
        action="store_true",
        help="py-spy: never stop the target to read it (no slowdown; Python frames only, "
        "no native frames under them)",
    )
    p.add_argument(
        "--no-kernel",
        dest="kernel",
        action="store_false",
        help="leave the kernel's part of the stacks out (perf samples it where permitted: "
        "root, CAP_PERFMON or kernel.perf_event_paranoid <= 1)",
    )
    p.add_argument(
        "--no-priority",
        dest="priority",
        action="store_false",
        help="leave livesym's own priority alone (by default, where permitted, it runs at "
        "nice -20 while it samples, so that a box whose cores are all taken still runs it)",
    )
    _debug_dir_option(p)


DEFAULT_REFRESH = 1.0  # seconds between the dashboard's updates (perf top: 2, top: 3)
MIN_REFRESH = 0.05  # faster than a terminal shows, and each update costs a snapshot


def _refresh_seconds(text: str) -> float:
    value = _within(3600, "a number of seconds")(text)
    if value < MIN_REFRESH:
        raise argparse.ArgumentTypeError(f"not a refresh of {MIN_REFRESH:g} s or more: {text!r}")
    return value


def _refresh_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--refresh",
        type=_refresh_seconds,
        default=DEFAULT_REFRESH,
        metavar="S",
        help=f"seconds between the dashboard's updates (default {DEFAULT_REFRESH:g}; "
        "longer for a slow link: each update sends only what changed)",
    )


def _mode_options(p: argparse.ArgumentParser, help_text: str) -> None:
    """--mode, and --idle, its older name for --mode wall."""
    p.add_argument("--mode", choices=MODES, default=None, metavar="|".join(MODES), help=help_text)
    p.add_argument("--idle", dest="mode", action="store_const", const="wall",
                   help="the same as --mode wall")  # fmt: skip


def _debug_dir_option(p: argparse.ArgumentParser) -> None:
    """Where separate debug files are looked for first (docs/symbol-sources.md)."""
    p.add_argument(
        "--debug-dir",
        action="append",
        metavar="DIR",
        help="look for debug files here (.build-id/xx/rest.debug, debuglink names) before "
        "/usr/lib/debug; repeatable",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="ask no debuginfod server (those DEBUGINFOD_URLS names) for debug files",
    )


def _fetch_wait_option(p: argparse.ArgumentParser) -> None:
    """How long a headless command waits for debug files still on their way."""
    p.add_argument(
        "--debuginfod-wait",
        type=_wait_seconds,
        default=DEFAULT_FETCH_WAIT,
        metavar="S",
        help="at the end, wait up to S seconds for debug files still being fetched from "
        f"debuginfod, then go on with the names there are (default {DEFAULT_FETCH_WAIT:g}; "
        "0: do not wait)",
    )


def _output_options(p: argparse.ArgumentParser, *, process: bool = True) -> None:
    """The table or the call tree, as text or JSON (docs/cli.md); ``--process`` where
    the command reads one session."""
    p.add_argument(
        "--limit",
        type=_count,
        default=None,
        metavar="N",
        help=f"functions to print (default: {TEXT_ROWS} in the text table, every one with --json)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument(
        "--tree", action="store_true", help="the call tree, hottest paths first, not the table"
    )
    p.add_argument(
        "--inverted",
        action="store_true",
        help="with --tree: bottom-up, from where time was spent to its callers",
    )
    p.add_argument(
        "--min-share",
        type=_share,
        default=DEFAULT_MIN_SHARE,
        metavar="PCT",
        help=f"with --tree: leave out paths under PCT %% of the samples (default "
        f"{DEFAULT_MIN_SHARE:g}; 0 keeps all)",
    )
    if not process:
        return
    p.add_argument(
        "--process",
        type=_pid,
        metavar="PID",
        help="only that process's samples (of a session of several processes)",
    )


def _range_options(p: argparse.ArgumentParser) -> None:
    """A time range of a capture (docs/cli.md: time ranges)."""
    p.add_argument(
        "--from",
        dest="range_from",
        type=_seconds_from_start,
        default=None,
        metavar="SECONDS",
        help="only what was recorded from SECONDS after the capture's start (default 0)",
    )
    p.add_argument(
        "--to",
        dest="range_to",
        type=_seconds_from_start,
        default=None,
        metavar="SECONDS",
        help="only what was recorded up to SECONDS after the capture's start (default: its end)",
    )


def _recorder_options(p: argparse.ArgumentParser) -> None:
    """record's options for staying on: push, rotation, a flight recorder."""
    p.add_argument(
        "--push", metavar="URL",
        help="also send each interval's profile to a Pyroscope-compatible server at URL "
        "(its /ingest, as pprof)",
    )  # fmt: skip
    p.add_argument(
        "--push-name", metavar="APP", help="the application's name there (default: the target's)"
    )
    p.add_argument(
        "--push-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label of every profile sent (repeat for more)",
    )
    p.add_argument(
        "--push-interval",
        type=_seconds,
        default=10.0,
        metavar="S",  # (push.py)
        help="seconds each profile sent covers (default 10)",
    )
    p.add_argument(
        "--max-size", type=_size, metavar="SIZE",
        help="begin a new FILE when it reaches SIZE (e.g. 100M); the full one is renamed "
        "with the time it ended",
    )  # fmt: skip
    p.add_argument(
        "--keep",
        type=_count,
        metavar="N",
        help="with --max-size: keep the last N full files (default: all)",
    )
    p.add_argument(
        "--keep-last", type=_seconds, metavar="S",
        help="a flight recorder: keep only the last S seconds, and write them to FILE on "
        "SIGUSR1 (recording goes on) and at the end",
    )  # fmt: skip
    p.add_argument(
        "--trigger", metavar="cpu>PCT",
        help="with --keep-last: also write the last seconds, to a file of their own beside "
        "FILE, when the target's CPU is above PCT (percent of one CPU) for a second",
    )  # fmt: skip


def _capture_options(p: argparse.ArgumentParser) -> None:
    """Reading a capture, which may come from anyone (docs/capture-format.md)."""
    p.add_argument(
        "--max-capture-memory",
        type=_size,
        default=None,
        metavar="SIZE",
        help="refuse a capture whose reading would take more memory than this "
        "(default 4G; a million samples take about 1G)",
    )


def _symbol_options(p: argparse.ArgumentParser) -> None:
    """Re-symbolization from files found by build-id (docs/sharing.md)."""
    _capture_options(p)
    p.add_argument(
        "--debug-dir",
        action="append",
        metavar="DIR",
        help="debug files by build-id (.build-id/xx/rest.debug) or any ELF files; repeatable",
    )
    p.add_argument(
        "--binaries",
        action="append",
        metavar="DIR",
        help="binaries to take symbols from when their build-id matches; repeatable",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="ask no debuginfod server (those DEBUGINFOD_URLS names) for files",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="livesym",
        description="Live CPU profiler for Linux processes that shows every address "
        "conversion behind each function name.",
    )
    parser.add_argument("--version", action="version", version=f"livesym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser(
        "symbolize",
        help="addresses in an ELF file or a process -> function names",
        description="Symbolize addresses given as arguments, or one per line on stdin. "
        "With -e they are ELF virtual addresses (or file offsets with --offset); "
        "with -p they are run-time addresses of a live process.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-e", "--exe", metavar="FILE", help="ELF file the addresses belong to")
    where.add_argument("-p", "--pid", type=_pid, help="process the addresses were taken in")
    p.add_argument("--offset", action="store_true", help="with -e: inputs are file offsets")
    p.add_argument("--json", action="store_true", help="one JSON object per input (JSON Lines)")
    p.add_argument(
        "--lines", action="store_true", help="also the source file and line (DWARF .debug_line)"
    )
    _debug_dir_option(p)
    p.add_argument("addresses", nargs="*", metavar="ADDR", help="hex with 0x, or decimal")

    p = sub.add_parser(
        "maps",
        help="a process's mappings with object, base address, build-id and checks",
        description="List every mapping of PID with its object, base address (and how it "
        "was derived), ELF type, build-id, symbol source and any base/alignment problem.",
    )
    p.add_argument("pid", type=_pid, metavar="PID")
    p.add_argument("--json", action="store_true", help="one JSON object per mapping")
    _debug_dir_option(p)

    p = sub.add_parser(
        "addr",
        help="the full conversion chain for run-time addresses of a process",
        description="For each run-time address: mapping, PT_LOAD segment, base address "
        "with its formula, ELF vaddr, ELF file offset, and symbol.",
    )
    p.add_argument("pid", type=_pid, metavar="PID")
    p.add_argument("addresses", nargs="+", metavar="ADDR", help="hex with 0x, or decimal")
    p.add_argument("--json", action="store_true", help="one JSON object per address")
    _debug_dir_option(p)

    p = sub.add_parser(
        "record",
        help="sample a process into a capture file (no dashboard)",
        description="Sample PID and write a capture FILE (gzip when it ends in .gz), kept "
        "readable while recording. Ctrl-C or SIGTERM stops and keeps everything.",
    )
    _target_argument(p, "record")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="capture to write")
    _sampling_options(p, duration=None)
    _fetch_wait_option(p)
    _recorder_options(p)

    p = sub.add_parser(
        "report",
        help="the hot-function table of a capture file",
        description="Print the hot functions of a capture, as 'livesym top' prints them.",
    )
    p.add_argument("file", metavar="FILE", help="a capture written by record")
    _mode_options(
        p,
        "which time to report: cpu, wall or off-cpu (default: the mode the "
        "capture was recorded in)",
    )
    _output_options(p)
    _range_options(p)
    _symbol_options(p)

    p = sub.add_parser(
        "scrub",
        help="a copy of a capture without its address-space layout, to share",
        description="Rewrite every run-time address of a capture into a new, consistent "
        "address space (ELF vaddrs, offsets and symbols are kept, so it reports the same). "
        "See docs/sharing.md.",
    )
    p.add_argument("file", metavar="IN", help="a capture")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="scrubbed capture")
    p.add_argument(
        "--drop-host",
        action="store_true",
        help="also drop the hostname, user, arguments and environment-like strings",
    )
    p.add_argument("--basenames", action="store_true", help="reduce every path to its file name")
    _capture_options(p)

    p = sub.add_parser(
        "export",
        help="a capture as collapsed stacks, speedscope or pprof",
        description="Write a capture's samples in a format other tools read: collapsed "
        "(flamegraph.pl, inferno), speedscope (speedscope.app), pprof (go tool pprof, "
        "Pyroscope, Parca). See docs/sharing.md.",
    )
    p.add_argument("file", metavar="IN", help="a capture")
    p.add_argument(
        "--format",
        required=True,
        choices=EXPORT_FORMATS,
        metavar="|".join(EXPORT_FORMATS),
        help="output format",
    )
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="file to write (- stdout)")
    _mode_options(
        p,
        "which time to export: cpu, wall or off-cpu (default: the mode the "
        "capture was recorded in)",
    )
    p.add_argument(
        "--pid",
        action="store_true",
        help="collapsed: start each stack with its process, NAME-PID (pprof labels samples "
        "with pid, speedscope names each thread's process)",
    )
    _range_options(p)
    _symbol_options(p)

    p = sub.add_parser(
        "diff",
        help="what changed between two captures, or two time ranges of them",
        description="Compare NEW against BASE function by function (matched by module and "
        "name, never by address, so captures from different runs and hosts compare): each "
        "function's self and total share on both sides, largest change first, '*' where the "
        "change is larger than sampling noise explains. See docs/cli.md (diff).",
    )
    p.add_argument("base", metavar="BASE", help="a capture, or CAPTURE@FROM-TO (seconds)")
    p.add_argument("new", metavar="NEW", help="a capture, or CAPTURE@FROM-TO (seconds)")
    _mode_options(p, "which time to compare: cpu, wall or off-cpu (default: BASE's mode)")
    _output_options(p, process=False)
    p.add_argument(
        "--svg",
        metavar="OUT",
        help="also write the differential flame graph (sized by NEW, red grew, blue shrank) "
        "to OUT, a self-contained SVG for a browser",
    )
    _symbol_options(p)

    p = sub.add_parser(
        "top",
        help="sample a process for a while and print its hot functions",
        description="Sample PID for --duration seconds, then print the functions where it "
        "spent its CPU time (self and total). Ctrl-C stops early and still prints.",
    )
    _target_argument(p, "sample")
    _sampling_options(p, duration=None, until="default 5; with -- CMD: until it exits")
    _output_options(p)
    _fetch_wait_option(p)

    p = sub.add_parser(
        "attach",
        help="the live dashboard on a running process",
        description="Sample PID and show where it spends its CPU on a live dashboard: hot "
        "functions, threads, modules, mappings, and the conversion chain behind each name. "
        "q, Ctrl+C or SIGTERM stop sampling (the sampler detaches) and quit. Keys: press ? "
        "in the dashboard, or see docs/dashboard.md.",
    )
    _target_argument(p, "watch")
    _sampling_options(p, duration=None, with_duration=False)
    p.add_argument("--record", metavar="FILE", help="also record a capture to FILE")
    _refresh_option(p)

    p = sub.add_parser(
        "replay",
        help="the dashboard of a capture file",
        description="Replay a capture on the dashboard, with the numbers the live session had.",
    )
    p.add_argument("file", metavar="FILE", help="a capture written by record, attach or w")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument(
        "--speed",
        type=_positive(float, "a positive speed"),
        default=1.0,
        metavar="X",
        help="times real time (default 1: as it was recorded)",
    )
    pace.add_argument("--instant", action="store_true", help="the whole capture at once")
    _mode_options(
        p,
        "which time to show first: cpu, wall or off-cpu (default: the mode "
        "the capture was recorded in; 'o' switches)",
    )
    _range_options(p)
    _symbol_options(p)
    _refresh_option(p)

    p = sub.add_parser(
        "demo",
        help="build, start and profile the bundled sample target",
        description="Build the bundled multi-threaded sample target with the machine's C "
        "compiler, start it, and open the dashboard on it. With --text (or without a "
        "terminal), profile it for --seconds and print its mappings, its hot functions and "
        "the conversion chain of the hottest instruction in each.",
    )
    p.add_argument("--keep", action="store_true", help="leave the target running at the end")
    p.add_argument("--text", action="store_true", help="print a report instead of the dashboard")
    p.add_argument(
        "--seconds",
        type=_seconds,
        default=3.0,
        metavar="S",
        help="with --text: how long to profile (default 3)",
    )
    _refresh_option(p)
    return parser


# command name -> module under livesym.commands with run(args) -> int
COMMANDS = {
    "symbolize": "symbolize",
    "maps": "maps",
    "addr": "addr",
    "top": "top",
    "record": "record",
    "report": "report",
    "scrub": "scrub",
    "export": "export",
    "diff": "diff",
    "demo": "demo",
    "attach": "attach",
    "replay": "replay",
}


LAUNCHERS = ("top", "record", "attach")  # commands that take '-- CMD ARGS'


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """livesym's own arguments, and the command after ``--`` for a command that launches
    one (None when there is no ``--``)."""
    argv = list(argv)
    if argv and argv[0] in LAUNCHERS and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    return argv, None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    own, launch = split_command(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(own)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command in LAUNCHERS:
        args.launch = launch
        if (args.target is None) == (launch is None):
            parser.error(
                f"{args.command} takes a PID or NAME, or '-- CMD ARGS' to start a command "
                "(one of the two)"
            )
    interrupts.install()
    if getattr(args, "offline", False):
        os.environ["DEBUGINFOD_URLS"] = ""  # what asks no server, for every reader of it
    try:
        if getattr(args, "priority", None) is not None:  # a command that samples
            # Raised first: on a saturated box the imports alone took minutes.
            priority.raise_all(args.priority)
        with interrupts.held():  # what it imports loads C extensions (orjson, psutil)
            module = importlib.import_module(f"livesym.commands.{COMMANDS[args.command]}")
        code: int = module.run(args)
        sys.stdout.flush()
        return code
    except LivesymError as e:
        from livesym.printable import printable  # a path in it is data: one line, inert

        _say(f"livesym: {printable(str(e))}")
        return e.exit_code
    except KeyboardInterrupt as e:
        return _interrupted(e)
    except BrokenPipeError:
        # Output cut short by the reader (`| head`): not an error of ours.
        _silence(sys.stdout)
        return 0
    except Exception as e:
        # A stop signal raised inside code that turned it into another exception (Python
        # wraps what a class's __set_name__ raises, as Textual's import does; a library's
        # clean-up fails on what the interrupt left half made) still ends as that signal.
        stop = _stop_behind(e)
        if stop is not None:
            return _interrupted(stop)
        if not isinstance(e, OSError) or e.errno != errno.EIO:
            raise
        # The terminal went away under a command writing to it (its SIGHUP may be
        # ignored): everything it did was kept; there is nobody left to tell.
        _silence(sys.stdout, sys.stderr)
        return EXIT_HANGUP


def _interrupted(e: KeyboardInterrupt) -> int:
    _say(f"livesym: interrupted{f' ({e})' if isinstance(e, Interrupted) else ''}")
    return e.exit_code if isinstance(e, Interrupted) else EXIT_INTERRUPTED


def _stop_behind(e: BaseException) -> KeyboardInterrupt | None:
    """The interrupt this exception was raised from or while handling, if any."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen and len(seen) < 64:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _say(line: str) -> None:
    """One line on stderr, if anything is still there to read it."""
    try:
        print(line, file=sys.stderr)
    except OSError:
        _silence(sys.stderr)


def _silence(*streams: TextIO) -> None:
    """Send what is still to be written to these streams to /dev/null (the interpreter
    flushes them at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in streams:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
