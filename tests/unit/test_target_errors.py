"""What TargetProcess says when the kernel refuses: the message names the remedy."""

from __future__ import annotations

import builtins
import os

import pytest

from livesym.errors import EXIT_TARGET, TargetError
from livesym.target.process import TargetProcess


def test_permission_denied_on_maps_names_the_remedy(monkeypatch):
    # Root reads every maps file, so the kernel's EACCES is injected at open().
    target = TargetProcess(os.getpid())
    real_open = builtins.open

    def refusing_open(path, *args, **kwargs):
        if str(path).endswith("/maps"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing_open)
    with pytest.raises(TargetError) as info:
        target.read_maps()
    assert info.value.exit_code == EXIT_TARGET
    assert str(info.value) == (
        f"cannot read the maps of {os.getpid()}: permission denied; "
        "run as the process's user or as root"
    )


def test_exited_process_between_checks_is_reported_as_exited(tmp_path):
    proc_dir = tmp_path / "4242"
    proc_dir.mkdir()
    target = TargetProcess(4242, proc=str(tmp_path))
    proc_dir.rmdir()
    with pytest.raises(TargetError, match="the process has exited"):
        target.read_maps()


def test_nonpositive_pid_is_no_such_process():
    with pytest.raises(TargetError, match="no such process"):
        TargetProcess(0)
