"""attach / replay / demo failures: one line on stderr, a documented exit code, no traceback,
and no dashboard (nor textual) for a command that fails before it needs one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from livesym.errors import EXIT_CAPTURE, EXIT_FILE, EXIT_TARGET, EXIT_USAGE


def gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def one_line_error(result) -> str:
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("livesym: "), result.err
    assert "Traceback" not in result.err
    return lines[0]


def test_attach_to_a_missing_process_is_a_target_error(cli):
    result = cli("attach", str(gone_pid()))
    assert result.code == EXIT_TARGET
    assert "no such process" in one_line_error(result)


def test_symbol_directories_are_checked_before_the_dashboard_opens(cli, spin_capture, tmp_path):
    missing = tmp_path / "nowhere"
    result = cli("replay", str(spin_capture), "--binaries", str(missing))
    assert result.code == EXIT_FILE
    assert f"--binaries {missing}: no such directory" in one_line_error(result)
    result = cli("attach", str(gone_pid()), "--debug-dir", str(missing))
    assert result.code == EXIT_FILE
    assert f"--debug-dir {missing}: no such directory" in one_line_error(result)


def test_replay_of_a_missing_file_is_a_capture_error(cli, tmp_path):
    result = cli("replay", str(tmp_path / "nothing.json"))
    assert result.code == EXIT_CAPTURE
    assert "no such capture file" in one_line_error(result)


def test_replay_of_a_damaged_file_is_a_capture_error(cli, spin_capture, tmp_path):
    damaged = tmp_path / "cut.json"
    damaged.write_bytes(spin_capture.read_bytes()[:500])
    result = cli("replay", str(damaged))
    assert result.code == EXIT_CAPTURE
    assert "truncated" in one_line_error(result)


def test_the_dashboard_needs_a_terminal_and_says_what_to_use_instead(cli, spin_capture):
    result = cli("replay", "--instant", str(spin_capture))  # stdin/stdout are pipes here
    assert result.code == EXIT_USAGE
    assert "livesym report" in one_line_error(result)


@pytest.mark.parametrize(
    "args",
    [
        ("replay", "--speed", "0", "x.json"),
        ("replay", "--speed", "2", "--instant", "x.json"),
        ("attach", "--rate", "-5", "1"),
        ("attach", "--duration", "3", "1"),
    ],
)
def test_bad_arguments_are_usage_errors(cli, args):
    result = cli(*args)
    assert result.code == EXIT_USAGE
    one_line_error(result)


def test_failing_before_the_dashboard_does_not_import_textual(tmp_path):
    probe = (
        "import sys\n"
        "from livesym.cli import main\n"
        f"code = main(['replay', {str(tmp_path / 'none.json')!r}])\n"
        "assert code == 5, code\n"
        "assert 'textual' not in sys.modules, 'textual was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
