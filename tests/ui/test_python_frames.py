"""Python frames (py-spy) on the dashboard: a Python function's details are its hottest
lines, which must lie inside that function in the target's source."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import livesym.sample_targets as sample_targets
from livesym.sampling.pyspy import PySpySampler
from livesym.ui.details import DetailsScreen
from livesym.ui.table import SyncTable
from tests.support.procs import running
from tests.ui.screen import key_of, replay_done, rows, screen_text

PYLOAD = Path(sample_targets.__file__).resolve().parent / "pyload.py"


def line_range(path: Path, function: str) -> range:
    """The source lines of ``function`` as Python parses the file."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            assert node.end_lineno is not None
            return range(node.lineno, node.end_lineno + 1)
    raise AssertionError(f"no {function} in {path}")


@pytest.fixture(scope="module")
def pyload_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = PySpySampler.available()
    if reason is not None:
        pytest.skip(f"py-spy sampling unavailable: {reason}")
    out = tmp_path_factory.mktemp("captures") / "pyload.json"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with running(Path(sys.executable), str(PYLOAD), env=env) as proc:
        done = subprocess.run(
            [sys.executable, "-m", "livesym", "record", str(proc.pid), "-o", str(out),
             "--sampler", "pyspy", "--duration", "2"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


async def test_a_python_function_shows_its_hottest_lines_in_its_source(pyload_capture, replay_app):
    app = replay_app(pyload_capture)
    async with app.run_test(size=(100, 40)) as pilot:
        await replay_done(pilot)
        table = app.dashboard.table_of("functions")
        table.select_key(key_of(table, "function", "py_hot_a"))
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailsScreen)
        assert "Hottest lines" in screen_text(app)
        hot = rows(screen.query_one("#details-hot", SyncTable), "where", "symbol", "samples")
        assert hot
        inside = line_range(PYLOAD, "py_hot_a")
        for where, source, _ in hot:
            line = int(where.removeprefix("line "))
            assert line in inside, f"line {line} is not in py_hot_a ({inside})"
            assert source == f"{PYLOAD}:{line}"
        text = " ".join(screen_text(app).split())
        assert f"function py_hot_a source {PYLOAD}:{hot[0][0].removeprefix('line ')}" in text
