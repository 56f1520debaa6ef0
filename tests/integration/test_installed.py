"""livesym installed as a user installs it (its wheel, in a fresh environment, not
editable): every package is in the wheel, and the main commands run from the install,
as root and as an unprivileged user (tests/support/installed.py says why)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.installed import SOURCE, Installed, source_packages
from tests.support.procs import running
from tests.support.spin import HOT

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another user")
needs_setpriv = pytest.mark.skipif(SETPRIV is None, reason="setpriv (util-linux) is missing")


def as_user(uid: int | None, argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """``argv`` as ``uid`` (None: as this user), with its output."""
    if uid is not None:
        argv = [SETPRIV or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)  # type: ignore[call-overload, no-any-return]


def readable_spin(built, public: Path) -> Path:  # type: ignore[no-untyped-def]
    """spin, copied where every user may run it."""
    copy = public / "spin"
    shutil.copy2(built("spin"), copy)
    os.chmod(copy, 0o755)
    return copy


def test_the_wheel_holds_every_package_of_the_source_tree_and_its_data(installed: Installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    packed = {
        name.removesuffix("/__init__.py").replace("/", ".")
        for name in names
        if name.endswith("/__init__.py")
    }
    assert packed == source_packages(), sorted(source_packages() ^ packed)
    sources = {p.name for p in (SOURCE / "sample_targets").glob("*.[ch]")}
    assert {f"livesym/sample_targets/{name}" for name in sources} <= names
    assert "livesym/ui/dashboard.tcss" in names


@pytest.mark.parametrize(
    ("name", "probe"),
    [
        (
            "_symrows",
            "from livesym.symbolize import batch_fast; print(batch_fast._symrows is not None)",
        ),
        ("_cfiwalk", "from livesym.unwind import quick; print(quick.available())"),
        ("_frozen", "from livesym import frozen; print(frozen._frozen is not None)"),
        (
            "_perfsamples",
            "from livesym.sampling import perf_records as r; print(r._perfsamples is not None)",
        ),
    ],
)
def test_the_wheel_holds_the_c_parts_and_the_installed_livesym_uses_them(
    installed: Installed, name: str, probe: str
):
    # GIVEN the wheel, built where a compiler and Python's headers are (.ci/run sees to it)
    with zipfile.ZipFile(installed.wheel) as wheel:
        built = [
            n for n in wheel.namelist() if n.startswith(f"livesym/{name}.") and n.endswith(".so")
        ]
    assert built, f"the optional livesym/{name}.c was not built into the wheel"
    # WHEN the installed livesym loads it, THEN the code that has a use for it takes it
    loaded = as_user(None, [str(installed.python), "-c", probe], cwd="/")
    assert loaded.returncode == 0 and loaded.stdout.strip() == "True", loaded


def test_the_installed_livesym_runs_from_its_environment_not_the_clone(installed: Installed):
    where = as_user(None, [str(installed.python), "-c", "import livesym; print(livesym.__file__)"],
                    cwd="/")  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(installed.venv)), where.stdout
    version = as_user(None, [str(installed.livesym), "--version"])
    assert version.returncode == 0 and version.stdout.startswith("livesym "), version


@pytest.mark.parametrize(
    "uid", [None, pytest.param(NOBODY, marks=[needs_root, needs_setpriv])], ids=["root", "nobody"]
)
def test_top_json_runs_from_the_install(installed: Installed, built, public: Path, uid):
    # GIVEN spin, run by the same user as livesym
    spin = readable_spin(built, public)
    start = [SETPRIV or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    with running(Path(start[0]), *start[1:], str(spin)) if uid else running(spin) as proc:
        # WHEN the installed livesym samples it
        done = as_user(uid, [str(installed.livesym), "top", str(proc.pid), "--duration", "2",
                             "--json"], cwd=public)  # fmt: skip
    # THEN its hot functions are named (as nobody, user time only: perf_event_paranoid 2)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert {f["symbol"] for f in doc["functions"]} >= HOT, doc["functions"][:8]
    assert doc["samples"] > 50


@pytest.mark.parametrize(
    "uid", [None, pytest.param(NOBODY, marks=[needs_root, needs_setpriv])], ids=["root", "nobody"]
)
def test_record_then_report_run_from_the_install(installed: Installed, built, public: Path, uid):
    spin = readable_spin(built, public)
    capture = public / "spin.json.gz"
    recorded = as_user(uid, [str(installed.livesym), "record", "-o", str(capture), "--duration",
                             "2", "--", str(spin)], cwd=public)  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    reported = as_user(uid, [str(installed.livesym), "report", str(capture), "--json"], cwd=public)
    assert reported.returncode == 0, reported.stderr
    assert {f["symbol"] for f in json.loads(reported.stdout)["functions"]} >= HOT


@pytest.mark.parametrize(
    "uid", [None, pytest.param(NOBODY, marks=[needs_root, needs_setpriv])], ids=["root", "nobody"]
)
def test_demo_text_runs_from_the_install(installed: Installed, public: Path, uid):
    # nobody's home is /nonexistent: the demo builds its target in a temporary folder
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent" if uid else str(public)}
    done = as_user(uid, [str(installed.livesym), "demo", "--text", "--seconds", "2"],
                   cwd=public, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "$ livesym top" in done.stdout and "hot_alpha" in done.stdout, done.stdout[-2000:]
    if uid:
        assert "cannot be written: building in" in done.stdout
        scratch = done.stdout.split("building in ")[1].split(",")[0]
        assert not Path(scratch).exists(), "the demo left its temporary folder behind"


@needs_root
@needs_setpriv
def test_a_user_sees_where_its_own_program_waits_without_any_privilege(
    installed: Installed, built, public: Path
):
    # GIVEN a thread that computes 10 ms, sleeps 20 ms and waits 10 ms on a futex, run by
    # an unprivileged user (perf_event_paranoid 2: no kernel mode, no switch events)
    waits = public / "waits"
    shutil.copy2(built("waits"), waits)
    os.chmod(waits, 0o755)
    start = [SETPRIV or "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    with running(Path(start[0]), *start[1:], str(waits)) as proc:
        # WHEN the same user asks the installed livesym for its wall time
        done = as_user(NOBODY, [str(installed.livesym), "top", str(proc.pid), "--mode", "wall",
                                "--duration", "4", "--json"], cwd=public)  # fmt: skip
    # THEN perf samples its CPU time and its waits are read from /proc, as the header
    # says: 25 / 50 / 25 within 10 points, each wait named by its system call
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["sampler"] == "perf" and doc["off_cpu"].startswith("/proc"), doc["off_cpu"]
    got: dict[str, float] = {}
    for f in doc["functions"]:
        name = f["symbol"] or f["demangled"]
        got[name] = got.get(name, 0.0) + f["total_pct"]
    for function, built_share in (("cpu_part", 25.0), ("sleep_part", 50.0), ("wait_part", 25.0)):
        assert abs(got.get(function, 0.0) - built_share) <= 10.0, (function, got)
    assert got.get("sys_clock_nanosleep", 0.0) >= 35 and got.get("sys_futex", 0.0) >= 15, got
