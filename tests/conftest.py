"""Shared fixtures: sample targets built once per session, and a way to run the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from livesym import priority
from livesym.sample_targets import BuildError, TargetUnavailable, build, build_go, compiler
from tests.support import leftovers
from tests.support.installed import Installed, InstallFailed, install
from tests.support.procs import running

# CI provides every tool and permission the tests use (.ci/run installs them and runs as
# root), so there a skip means something CI was meant to provide is missing, or a test
# gave up on what it tests: with LIVESYM_STRICT_SKIPS=1 (.ci/run sets it) a skip fails.
STRICT_SKIPS = os.environ.get("LIVESYM_STRICT_SKIPS") == "1"


_STRICT_FAILED: list[str] = []  # the skips made failures, for the summary


def _fail_a_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if STRICT_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped where CI must run it (LIVESYM_STRICT_SKIPS=1): {reason}"
        _STRICT_FAILED.append(f"{report.nodeid}: {reason}")


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """How many tests skipped (each a failure in strict mode), whole, for .ci/run."""
    if STRICT_SKIPS:
        terminalreporter.write_line(f"strict skips: {len(_STRICT_FAILED)}")
        for line in _STRICT_FAILED:
            terminalreporter.write_line(f"  skipped: {line}")
    if LEFT_RUNNING:
        terminalreporter.write_line(
            f"tests that left processes running (ended): {len(LEFT_RUNNING)}"
        )
        for line in LEFT_RUNNING:
            terminalreporter.write_line(f"  {line}")
    # The files that take the suite's time (setup, call and teardown), for keeping CI's
    # run under its budget: the slowest tests alone do not say which files to look at.
    slowest = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:FILES_SHOWN]
    if slowest:
        terminalreporter.write_line(f"slowest files ({sum(_FILE_SECONDS.values()):.0f} s in all):")
        for path, seconds in slowest:
            terminalreporter.write_line(f"  {seconds:7.1f} s  {path}")


FILES_SHOWN = 15
_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.partition("::")[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport():  # type: ignore[no-untyped-def]
    _fail_a_skip((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report():  # type: ignore[no-untyped-def]
    """A module skipped as a whole (``allow_module_level``) fails too."""
    _fail_a_skip((yield).get_result())


LEFT_RUNNING: list[str] = []

# The tests send Ctrl-C to the commands they run. A suite started in the background of a
# script (`.ci/run &`) inherits SIGINT ignored, and so would every command it starts (an
# ignored signal stays ignored across exec, and livesym keeps a signal its user ignored):
# the tests of Ctrl-C would then test nothing but that. Commands get the default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_process_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """What a test started and left running is ended after it (tests/support/leftovers.py),
    and listed at the end of the run."""
    before = leftovers.descendants(os.getpid())
    yield
    left = leftovers.left_running(os.getpid(), before)
    if left:
        leftovers.end(left)
        names = ", ".join(f"{name} ({pid})" for pid, name in sorted(left.items()))
        LEFT_RUNNING.append(f"{request.node.nodeid}: {names}")


@pytest.fixture(scope="session")
def target_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("targets")


@pytest.fixture(scope="session")
def built(target_dir: Path) -> Callable[[str], Path]:
    """Build a sample target by name (once per session), or skip with the reason."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            if compiler() is None:
                pytest.skip("no C compiler (install gcc) to build the sample targets")
            try:
                cache[name] = build(name, target_dir)
            except TargetUnavailable as e:
                pytest.skip(str(e))
            except BuildError as e:
                pytest.fail(str(e))
        return cache[name]

    return get


PHASE_SECONDS = 3.0


@pytest.fixture(scope="session")
def phases_capture(built: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture of ``phases 3`` from its start: first_phase for 3 s, second_phase for 3
    (time ranges: report, export, diff and the dashboard's timeline)."""
    capture = tmp_path_factory.mktemp("ranges") / "phases.json"
    done = subprocess.run(
        [sys.executable, "-m", "livesym", "record", "-o", str(capture), "--rate", "199", "--",
         str(built("phases")), str(PHASE_SECONDS)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return capture


@dataclass(frozen=True)
class GoPrograms:
    """``gobusy`` built with the machine's Go: as built, and stripped (``-s -w``)."""

    full: Path
    stripped: Path


@pytest.fixture(scope="session")
def go_programs(target_dir: Path) -> GoPrograms:
    """The Go sample target, both ways (built once per session), or skip with the reason."""
    try:
        full = build_go("gobusy", target_dir)
        return GoPrograms(full, build_go("gobusy", target_dir, stripped=True))
    except TargetUnavailable as e:
        pytest.skip(str(e))
    except BuildError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def installed() -> Iterator[Installed]:
    """livesym as a user installs it: its wheel in a fresh, world-readable environment.
    Its dependencies come from the package index, as the development install's did: a
    failure is the test's (a wheel that does not build or install is what it catches)."""
    try:
        found = install()
    except InstallFailed as e:
        pytest.fail(f"cannot install livesym from its wheel: {e}")
    yield found
    shutil.rmtree(found.root, ignore_errors=True)


@pytest.fixture
def public() -> Iterator[Path]:
    """A folder every user can read, run and write in (sticky, as /tmp is): a test's
    tmp_path sits under a 0700 folder that another user cannot enter."""
    folder = Path(tempfile.mkdtemp(prefix="livesym-public-"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def run_target(built: Callable[[str], Path]) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start sample targets for one test; every one is stopped when the test ends."""
    stack: list[object] = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        ctx = running(built(name), *args)
        proc = ctx.__enter__()
        stack.append(ctx)
        return proc

    yield start
    for ctx in reversed(stack):
        ctx.__exit__(None, None, None)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    def json_lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """Run ``python -m livesym ARGS`` as a user would, in a subprocess."""

    def run(
        *args: str, stdin: str | None = None, timeout: float = 60, env: dict[str, str] | None = None
    ) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "livesym", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def xz() -> Iterator[subprocess.Popen[bytes]]:
    """xz -9 compressing an endless stream of text: its time is in stripped liblzma."""
    if shutil.which("xz") is None:
        pytest.skip("xz (xz-utils) is not installed")
    feed = subprocess.Popen(["yes", "livesym profiles the unnamed code of liblzma 0123456789"],
                            stdout=subprocess.PIPE)  # fmt: skip
    proc = subprocess.Popen(["xz", "-9", "-T1", "-c"], stdin=feed.stdout, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while "liblzma" not in Path(f"/proc/{proc.pid}/maps").read_text():
            assert time.monotonic() < deadline, "xz never mapped liblzma"
            time.sleep(0.05)
        yield proc
    finally:
        for p in (proc, feed):
            p.kill()
            p.wait()


@pytest.fixture
def at_attach_priority(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This process's threads at the nice ``livesym attach`` gives its own
    (livesym.priority: every sampling command raises itself, so that a box whose cores
    are all taken still runs it; where not permitted, it goes on as it is, as attach
    does), then back where they were."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    for key in ("said", "before"):
        monkeypatch.setitem(priority._now, key, priority._now.get(key))
    try:
        yield priority.raise_all(True)
    finally:  # threads made meanwhile (an executor's, kept) inherited it: all of them
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.setpriority(os.PRIO_PROCESS, int(tid), before)
