"""ChildFollower over a /proc of our own making: each process's parent in its stat line,
with the names that make that line hard to read (spaces and parentheses in comm)."""

from __future__ import annotations

import os
from pathlib import Path

from livesym.target.children import ChildFollower, parent_of


def make_proc(root: Path, parents: dict[int, int], names: dict[int, str] | None = None) -> str:
    for pid, parent in parents.items():
        comm = (names or {}).get(pid, f"p{pid}")
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) S {parent} {pid} {pid} 0 -1\n")
    (root / "self").mkdir()  # not a process: skipped
    return str(root)


def test_descendants_are_found_parents_first_and_each_once(tmp_path: Path) -> None:
    # 10 -> 11 -> 13, 10 -> 12; 20 is not below 10; 14 is below 13 with a name like a stat line
    proc = make_proc(tmp_path, {10: 1, 11: 10, 12: 10, 13: 11, 14: 13, 20: 1},
                     {14: "evil) R 10 (x"})  # fmt: skip
    follower = ChildFollower([10], proc=proc, exclude=())
    found = follower.scan()
    assert sorted(found) == [(11, 10), (12, 10), (13, 11), (14, 13)]
    order = [pid for pid, _ in found]
    assert order.index(11) < order.index(13) < order.index(14)
    assert follower.scan() == []  # nothing new
    assert parent_of(14, proc) == 13


def test_a_process_found_stays_followed_after_its_parent_is_gone(tmp_path: Path) -> None:
    proc = make_proc(tmp_path, {10: 1, 11: 10})
    follower = ChildFollower([10], proc=proc, exclude=())
    assert follower.scan() == [(11, 10)]
    for name in ("stat",):
        (tmp_path / "10" / name).unlink()
    (tmp_path / "10").rmdir()
    (tmp_path / "12").mkdir()  # 11's child, after 10 exited
    (tmp_path / "12" / "stat").write_text("12 (c) R 11 12 12 0 -1\n")
    assert follower.scan() == [(12, 11)]


def test_livesym_itself_and_what_it_started_are_never_followed(tmp_path: Path) -> None:
    me = os.getpid()
    proc = make_proc(tmp_path, {10: 1, me: 10, 99: me, 11: 10})
    assert ChildFollower([10], proc=proc).scan() == [(11, 10)]


def test_unreadable_or_odd_stat_lines_are_skipped(tmp_path: Path) -> None:
    proc = make_proc(tmp_path, {10: 1, 11: 10})
    (tmp_path / "11" / "stat").write_text("11 (x)")  # cut short
    assert ChildFollower([10], proc=proc, exclude=()).scan() == []
    assert parent_of(12345, proc) is None


def test_a_child_still_running_its_parents_program_is_reported_a_scan_later(
    tmp_path: Path,
) -> None:
    # 11 was forked and exec'd another program; 12 still runs its parent's (it may exec)
    proc = make_proc(tmp_path, {10: 1, 11: 10, 12: 10})
    for pid, exe in ((10, "/bin/sh"), (11, "/usr/bin/python3"), (12, "/bin/sh")):
        (tmp_path / str(pid) / "exe").symlink_to(exe)
    follower = ChildFollower([10], proc=proc, exclude=())
    assert follower.scan() == [(11, 10)]
    # ... one scan later it is reported, exec'd or not (a pre-fork server's worker)
    assert follower.scan() == [(12, 10)]
    assert follower.scan() == []
