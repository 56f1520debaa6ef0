"""The stacks of one profile view, and the trees read from them: the top-down call
tree, the inverted (bottom-up) tree, and a function's sandwich (its callers above it,
its callees below it), plus one level of callers and callees.

A tree node is one path of frames from its root. Each node keeps the stacks that pass
through it, with the position of its frame in each (stacks are leaf first), so its
children are one step along each of those stacks: towards the leaf in a top-down tree
(``DOWN``), towards the outermost caller in an inverted one (``UP``). Children are
worked out on first access (a tree of a million nodes costs seconds, and a reader
opens a few) and sorted by samples, then by frame order: siblings of equal weight
keep their order from one view to the next.

Counting: a node's ``total_samples`` passed through its path; ``self_samples`` of
them had its frame as their leaf (were executing it): in a top-down tree where the
path ends, in an inverted one at the first level only (the time spent in each
function; below it are callers). A function recursing is counted once per sample at a
sandwich's root: the callees hang below its outermost call, the callers above its
innermost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from livesym.records import ROOT_FRAME, Frame, FrameOrder

DOWN = -1  # from callers to callees: a top-down tree, a function's callees
UP = 1  # from callees to callers: the inverted tree, a function's callers

# (stack id, samples, position of the node's frame in the stack's leaf-first frames)
Through = tuple[tuple[int, int, int], ...]
Neighbours = tuple[tuple[Frame, int], ...]


@dataclass(frozen=True, eq=False)
class StackNode:
    """A node of a call tree: one frame reached by one path from the tree's root.

    ``total_samples`` passed through this node; ``self_samples`` of them were executing
    its frame (it was their leaf).
    ``children`` are worked out on first access, sorted by total, descending, then
    by frame. ``depth`` counts the frames between the root and this node. Nodes
    compare by identity.
    """

    frame: Frame
    total_samples: int
    self_samples: int
    _stacks: Stacks = field(repr=False)
    _through: Through | None = field(repr=False)  # None: every stack, from outside it
    depth: int = 0
    step: int = DOWN  # which way the children go along the stacks

    @cached_property
    def children(self) -> tuple[StackNode, ...]:
        return self._stacks.children(self)

    @cached_property
    def has_children(self) -> bool:
        """Whether any stack goes on past this node (cheaper than ``children``)."""
        if self.step == DOWN and self._through is not None:
            return self.total_samples > self.self_samples  # the rest goes on below
        return self._stacks.goes_on(self)


class _Branch:
    """A child node being gathered: its samples, those ending there, the stacks through it."""

    __slots__ = ("ends", "through", "total")

    def __init__(self) -> None:
        self.total = 0
        self.ends = 0
        self.through: list[tuple[int, int, int]] = []


def _node_order(node: StackNode) -> tuple[int, FrameOrder]:
    return (-node.total_samples, node.frame.order)


@dataclass(frozen=True, slots=True, eq=False)
class Stacks:
    """Per-stack counts of one view, and the (append-only) tables to read them with.

    ``counts`` is either a list indexed by stack id or a dict of stack id to count.
    """

    counts: list[int] | dict[int, int]
    samples: int
    frames: list[Frame]
    frame_ids: dict[Frame, int]
    stack_fids: list[tuple[int, ...]]
    stacks_with: list[list[int]]

    def items(self) -> Iterator[tuple[int, int]]:
        counts = self.counts
        pairs = counts.items() if isinstance(counts, dict) else enumerate(counts)
        return ((sid, c) for sid, c in pairs if c)

    def count(self, sid: int) -> int:
        counts = self.counts
        if isinstance(counts, dict):
            return counts.get(sid, 0)
        return counts[sid] if sid < len(counts) else 0

    # -- trees ---------------------------------------------------------------------

    def tree(self, step: int = DOWN) -> StackNode | None:
        """The whole tree under a ``ROOT_FRAME`` node: top-down, or inverted (``UP``)."""
        if self.samples == 0:
            return None
        return StackNode(ROOT_FRAME, self.samples, 0, self, None, 0, step)

    def sandwich(self, frame: Frame, step: int) -> StackNode | None:
        """The tree rooted at ``frame`` merged over every stack holding it: its callees
        (``DOWN``, below its outermost call) or its callers (``UP``, above its innermost);
        None where no sample holds it."""
        fid = self.frame_ids.get(frame)
        if fid is None:
            return None
        through: list[tuple[int, int, int]] = []
        total = ends = 0
        for sid in self.stacks_with[fid]:
            c = self.count(sid)
            if not c:
                continue
            fids = self.stack_fids[sid]
            pos = _outermost(fids, fid) if step == DOWN else fids.index(fid)
            through.append((sid, c, pos))
            total += c
            ends += c if pos == 0 else 0
        if not total:
            return None
        return StackNode(frame, total, ends, self, tuple(through), 0, step)

    def children(self, node: StackNode) -> tuple[StackNode, ...]:
        """The children of ``node``: one step along each stack through it."""
        stack_fids, step = self.stack_fids, node.step
        branches: dict[int, _Branch] = {}
        for sid, c, pos in self._through(node):
            fids = stack_fids[sid]
            index = pos + step
            if not 0 <= index < len(fids):
                continue  # the stack ends at this node
            branch = branches.get(fids[index])
            if branch is None:
                branch = branches[fids[index]] = _Branch()
            branch.total += c
            if index == 0:
                branch.ends += c
            branch.through.append((sid, c, index))
        frames, depth = self.frames, node.depth + 1
        nodes = [
            StackNode(frames[fid], b.total, b.ends, self, tuple(b.through), depth, step)
            for fid, b in branches.items()
        ]
        nodes.sort(key=_node_order)
        return tuple(nodes)

    def goes_on(self, node: StackNode) -> bool:
        stack_fids, step = self.stack_fids, node.step
        return any(0 <= pos + step < len(stack_fids[sid]) for sid, _, pos in self._through(node))

    def _through(self, node: StackNode) -> Iterator[tuple[int, int, int]] | Through:
        if node._through is not None:
            return node._through
        # The whole tree's root stands just outside every stack: above its outermost
        # frame (top-down) or below its leaf (inverted).
        stack_fids = self.stack_fids
        if node.step == DOWN:
            return ((sid, c, len(stack_fids[sid])) for sid, c in self.items())
        return ((sid, c, -1) for sid, c in self.items())

    # -- one level -----------------------------------------------------------------

    def neighbours(self, frame: Frame, step: int) -> Neighbours:
        """Callers (``UP``: one frame further from the leaf) or callees (``DOWN``), each
        counted once per sample, most first."""
        fid = self.frame_ids.get(frame)
        if fid is None:
            return ()
        acc: dict[int, int] = {}
        for sid in self.stacks_with[fid]:
            c = self.count(sid)
            if not c:
                continue
            fids = self.stack_fids[sid]
            end = len(fids)
            seen = {fids[i + step] for i, f in enumerate(fids) if f == fid and 0 <= i + step < end}
            for other in seen:
                acc[other] = acc.get(other, 0) + c
        frames = self.frames
        pairs = [(frames[other], c) for other, c in acc.items()]
        pairs.sort(key=lambda p: (-p[1], p[0].order))
        return tuple(pairs)


def _outermost(fids: tuple[int, ...], fid: int) -> int:
    """The position of ``fid``'s outermost occurrence in a leaf-first stack."""
    return len(fids) - 1 - fids[::-1].index(fid)
