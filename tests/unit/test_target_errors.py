"""What TargetProcess says when the kernel refuses: the message names the remedy."""

from __future__ import annotations

import builtins
import os

import pytest

from livesym.errors import EXIT_TARGET, TargetError
from livesym.target.permissions import denied_remedy
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
        f"cannot read the maps of {os.getpid()}: permission denied; {denied_remedy(os.getpid())}"
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


@pytest.mark.parametrize(
    ("euid", "caps", "userns", "label", "scope", "words"),
    [
        (1000, 0, False, None, None, "run as the process's user"),
        (1000, 0, False, None, 1, "ptrace_scope=1"),
        (0, 0, False, None, None, "without CAP_SYS_PTRACE"),
        (0, 1 << 19, True, None, None, "user namespace"),
        (0, 1 << 19, False, "docker-default (enforce)", None, "docker-default (enforce)"),
        (0, 1 << 19, False, None, 3, "ptrace_scope=3"),
        (0, 1 << 19, False, None, None, "even root is refused"),
    ],
)
def test_a_refusal_gets_the_remedy_that_fits_who_runs_livesym(
    monkeypatch, euid, caps, userns, label, scope, words
):
    from livesym.target import permissions

    monkeypatch.setattr(permissions.os, "geteuid", lambda: euid)
    monkeypatch.setattr(permissions, "effective_caps", lambda: caps)
    monkeypatch.setattr(permissions, "in_user_namespace", lambda: userns)
    monkeypatch.setattr(permissions, "security_label", lambda: label)
    monkeypatch.setattr(permissions, "ptrace_scope", lambda: scope)
    remedy = permissions.denied_remedy(1, attach=True)
    assert words in remedy
    assert ("or as root" in remedy) == (euid != 0 and not scope)


def test_the_machines_own_namespace_and_capabilities_are_read(tmp_path):
    from livesym.target import permissions

    uid_map = tmp_path / "uid_map"
    uid_map.write_text("         0          0 4294967295\n")
    assert not permissions.in_user_namespace(str(uid_map))
    uid_map.write_text("         0     100000      65536\n")
    assert permissions.in_user_namespace(str(uid_map))
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t0000000000080000\n")
    assert permissions.has_cap(permissions.CAP_SYS_PTRACE, permissions.effective_caps(str(status)))


def test_stop_share_counts_tracing_stops_only(tmp_path):
    from livesym.target.stop_share import MIN_PROBES, StopShare

    task = tmp_path / "42" / "task"
    states = {"42": "t", "43": "S", "44": "T", "45": "R"}  # T: job control, not a tracer
    for tid, state in states.items():
        (task / tid).mkdir(parents=True)
        (task / tid / "stat").write_text(f"{tid} (a (b) c) {state} 1 2 3\n")
    share = StopShare(42, proc=str(tmp_path))
    for _ in range(MIN_PROBES // 4):
        share.probe()
    assert share.share == 0.25 and not share.too_high()  # not enough looks yet
    for _ in range(MIN_PROBES):
        share.probe()
    assert share.too_high()
    (task / "42" / "stat").write_text("42 (x) S 1\n")
    calm = StopShare(42, proc=str(tmp_path))
    for _ in range(MIN_PROBES):
        calm.probe()
    assert calm.share == 0.0 and not calm.too_high()


def test_stop_share_counted_by_the_sampler_is_held_time_against_time_run(tmp_path):
    from livesym.target.stop_share import MIN_SECONDS, StopShare

    stat = tmp_path / "42" / "stat"
    stat.parent.mkdir()
    ticks = os.sysconf("SC_CLK_TCK")

    def ran(user: int, system: int) -> None:  # fields 14 and 15: utime, stime (ticks)
        stat.write_text(f"42 (a (b) c) R 1 2 3 4 5 6 7 8 9 10 {user} {system} 0 0\n")

    held = [5.0]  # what the sampler had held before the session looked
    ran(ticks * 10, ticks)
    share = StopShare(42, lambda: held[0], proc=str(tmp_path))
    assert share.measured
    (tmp_path / "42" / "task").mkdir()  # (no thread found stopped: probes are not used)
    ran(ticks * 10 + ticks, ticks * 2)  # 2 s run since
    held[0] += 0.5
    share.probe()
    assert (share.ran, share.held) == (pytest.approx(2.0), pytest.approx(0.5))
    assert share.share == pytest.approx(0.2) and share.too_high()
    assert "ptrace sampler kept the target's threads stopped 20% of" in share.warning("ptrace")
    ran(ticks * 10 + ticks * 10, ticks * 2)
    share.probe()
    assert share.share == pytest.approx(0.5 / 11.5) and not share.too_high()
    # too little seen yet to say: a third of 1.5 s
    held[0] = 0.0
    early = StopShare(42, lambda: held[0], proc=str(tmp_path))
    ran(ticks * 21, ticks * 2)
    held[0] = 0.5
    early.probe()
    assert early.share == pytest.approx(1 / 3) and MIN_SECONDS > 1.5
    assert not early.too_high()
    # a sampler that keeps no count leaves it to the probes
    assert not StopShare(42, lambda: None, proc=str(tmp_path)).measured
    # the process gone: nothing measured, nothing said
    gone = StopShare(42, lambda: 1.0, proc=str(tmp_path))
    stat.unlink()
    gone.probe()
    assert gone.share == 0.0 and not gone.too_high()
