"""Two call trees laid over each other: each path of either, matched node by node as
``profile.diff`` matches functions (never by address), with its share on both sides.

Built in a loop, not by recursion (a deep recursion's tree is thousands of levels deep),
and only as far down as ``floor`` lets: the children under it on both sides are said
as left out (how many, and their shares), never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from livesym.profile.calltree import StackNode
from livesym.profile.diff import MatchKey, match_key, share_pct
from livesym.records import Frame

MAX_NODES = 100_000  # nodes a diff tree makes; past it every node's children are left out


@dataclass(slots=True, eq=False)
class DiffNode:
    """One path on both sides: samples through it and ending at it, base and new;
    ``left_out`` the children under the floor (how many paths, and their samples on
    either side). Shares are the callers' to work out (the sides' sample counts)."""

    frame: Frame
    depth: int
    base_total: int = 0
    new_total: int = 0
    base_self: int = 0
    new_self: int = 0
    children: list[DiffNode] = field(default_factory=list)
    left_out: tuple[int, int, int] = (0, 0, 0)  # (paths, base samples, new samples)


@dataclass(slots=True)
class _Pending:
    node: DiffNode
    base: list[StackNode]
    new: list[StackNode]


def diff_tree(
    base: StackNode | None,
    new: StackNode | None,
    base_samples: int,
    new_samples: int,
    min_share: float,
) -> DiffNode | None:
    """The trees under ``base`` and ``new`` (their roots) laid over each other; paths
    under ``min_share`` percent on both sides left out."""
    if base is None and new is None:
        return None
    top = new if new is not None else base
    assert top is not None
    root = DiffNode(top.frame, 0)
    _count(root, [base] if base else [], [new] if new else [])
    todo = [_Pending(root, [base] if base else [], [new] if new else [])]
    made = 1
    while todo:
        pending = todo.pop()
        groups = _grouped(pending.base, pending.new)
        kept: list[_Pending] = []
        paths = lost_base = lost_new = 0
        for frame, b, a in groups:
            tb, ta = sum(n.total_samples for n in b), sum(n.total_samples for n in a)
            wide = max(share_pct(tb, base_samples), share_pct(ta, new_samples)) >= min_share
            if not wide or made >= MAX_NODES:
                paths, lost_base, lost_new = paths + 1, lost_base + tb, lost_new + ta
                continue
            child = DiffNode(frame, pending.node.depth + 1)
            _count(child, b, a)
            made += 1
            kept.append(_Pending(child, b, a))
        kept.sort(key=lambda p: (-max(p.node.new_total, p.node.base_total), p.node.frame.order))
        pending.node.children = [p.node for p in kept]
        pending.node.left_out = (paths, lost_base, lost_new)
        todo.extend(reversed(kept))
    return root


def _count(node: DiffNode, base: list[StackNode], new: list[StackNode]) -> None:
    node.base_total = sum(n.total_samples for n in base)
    node.new_total = sum(n.total_samples for n in new)
    node.base_self = sum(n.self_samples for n in base)
    node.new_self = sum(n.self_samples for n in new)


def _grouped(
    base: list[StackNode], new: list[StackNode]
) -> list[tuple[Frame, list[StackNode], list[StackNode]]]:
    """The children of the nodes on either side, grouped by what matches them."""
    groups: dict[MatchKey, tuple[Frame, list[StackNode], list[StackNode]]] = {}
    for is_new, nodes in ((True, new), (False, base)):  # (the new side's frame names it)
        for node in nodes:
            for child in node.children:
                key = match_key(child.frame)
                if key not in groups:
                    groups[key] = (child.frame, [], [])
                _, on_base, on_new = groups[key]
                (on_new if is_new else on_base).append(child)
    return list(groups.values())
