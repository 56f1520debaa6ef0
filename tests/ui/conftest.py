"""Fixtures of the dashboard tests: captures recorded from real sample targets."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from livesym.capture.reader import read_capture
from livesym.engine import Engine
from livesym.ui.app import DashboardApp
from tests.support.procs import running


@pytest.fixture(autouse=True)
def _collector_sees_each_test_s_objects_again() -> Iterator[None]:
    """The dashboard and the capture reader freeze what exists (``gc.freeze``: right for
    a process of one session); this one runs hundreds, so what a test froze is handed
    back to the collector after it."""
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def spin_capture(built: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two seconds of the spin target, recorded by ``livesym record`` (perf where permitted)."""
    out = tmp_path_factory.mktemp("captures") / "spin.json"
    with running(built("spin")) as proc:
        # 499 Hz: enough samples for every hot function (199 Hz aliases with spin's slices).
        done = subprocess.run(
            [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(out),
             "--duration", "2", "--rate", "499"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def replay_app(tmp_path: Path) -> Callable[..., DashboardApp]:
    """A dashboard replaying a capture at once; ``w`` writes into the test's directory."""

    def make(path: Path, **kwargs: object) -> DashboardApp:
        engine = Engine.for_capture(read_capture(path), speed=None)
        return DashboardApp(engine, pid=engine.info.pid, directory=tmp_path, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def family_capture(built: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``record --children`` of a shell running two programs at once (spin and crunch):
    a capture of three processes, two of them busy with functions of their own."""
    out = tmp_path_factory.mktemp("captures") / "family.json"
    script = f"{built('spin')} 2 >/dev/null & {built('crunch')} 1 1500 0 >/dev/null & wait"
    done = subprocess.run(
        [sys.executable, "-m", "livesym", "record", "--children", "-o", str(out),
         "--rate", "499", "--", "sh", "-c", script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out
