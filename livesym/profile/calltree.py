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

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from livesym.records import ROOT_FRAME, Frame, FrameOrder

DOWN = -1  # from callers to callees: a top-down tree, a function's callees
UP = 1  # from callees to callers: the inverted tree, a function's callers

# (stack id, samples, position of the node's frame in the stack's leaf-first frames)
Through = tuple[tuple[int, int, int], ...]
Neighbours = tuple[tuple[Frame, int], ...]


class StackNode:
    """A node of a call tree: one frame reached by one path from the tree's root.

    ``total_samples`` passed through this node; ``self_samples`` of them were executing
    its frame (it was their leaf). ``children`` are worked out on first access, sorted
    by total, descending, then by frame; ``hottest`` makes only the first few. ``depth``
    counts the frames between the root and this node. Nodes compare by identity, and
    are plain slotted objects: an inverted tree's first level has one per function.
    """

    __slots__ = (
        "_children", "_has_children", "_hottest", "_stacks", "_through", "depth", "frame",
        "self_samples", "step", "total_samples",
    )  # fmt: skip

    def __init__(
        self,
        frame: Frame,
        total_samples: int,
        self_samples: int,
        stacks: Stacks,
        through: Through | None,  # None: every stack, from outside it
        depth: int = 0,
        step: int = DOWN,  # which way the children go along the stacks
    ) -> None:
        self.frame = frame
        self.total_samples = total_samples
        self.self_samples = self_samples
        self._stacks = stacks
        self._through = through
        self.depth = depth
        self.step = step
        self._children: tuple[StackNode, ...] | None = None
        self._hottest: tuple[tuple[StackNode, ...], int, int] | None = None
        self._has_children: bool | None = None

    def __repr__(self) -> str:
        return (
            f"StackNode({self.frame.label!r}, total={self.total_samples}, self={self.self_samples})"
        )

    @property
    def children(self) -> tuple[StackNode, ...]:
        if self._children is None:
            self._children = self._stacks.children(self)
        return self._children

    def hottest(self, k: int) -> tuple[tuple[StackNode, ...], int, int]:
        """The ``k`` first children, and how many others there are with how many samples
        (the others are not made: an inverted tree's root has a child per function).
        What is made is kept: asking again for as many or fewer costs nothing."""
        if self._children is not None:
            rest = self._children[k:]
            return self._children[:k], len(rest), sum(c.total_samples for c in rest)
        if self._hottest is None or (self._hottest[1] and len(self._hottest[0]) < k):
            self._hottest = self._stacks.hottest(self, k)
        made, more, samples = self._hottest
        dropped = made[k:]
        return made[:k], more + len(dropped), samples + sum(c.total_samples for c in dropped)

    def child(self, frame: Frame) -> StackNode | None:
        """The child of ``frame``, made alone (a path followed down, as a zoom does)."""
        if self._children is not None:
            return next((c for c in self._children if c.frame == frame), None)
        return self._stacks.child(self, frame)

    def children_of(self, frames: Iterable[Frame]) -> dict[Frame, StackNode]:
        """The children of ``frames`` that this node has, made in one pass over its stacks
        (a path followed down another tree, block by block, as a differential graph does)."""
        if self._children is not None:
            wanted = set(frames)
            return {c.frame: c for c in self._children if c.frame in wanted}
        return self._stacks.children_of(self, frames)

    def samples_holding(self, wanted: frozenset[int]) -> int:
        """Of this node's samples, those with a frame id in ``wanted`` at or past it (a
        search's share: each sample once, however many matches it holds)."""
        return self._stacks.samples_holding(self, wanted)

    @property
    def has_children(self) -> bool:
        """Whether any stack goes on past this node (cheaper than ``children``)."""
        if self._has_children is None:
            if self._children is not None:
                self._has_children = bool(self._children)
            elif self.step == DOWN and self._through is not None:
                self._has_children = self.total_samples > self.self_samples
            else:
                self._has_children = self._stacks.goes_on(self)
        return self._has_children


class _Branch(NamedTuple):
    """A child node being made: its samples, those ending there, the stacks through it."""

    total: int
    ends: int
    through: list[tuple[int, int, int]]


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
        branches = self._branches(node)
        nodes = [self._node(fid, b, node) for fid, b in branches.items()]
        nodes.sort(key=_node_order)
        return tuple(nodes)

    def hottest(self, node: StackNode, k: int) -> tuple[tuple[StackNode, ...], int, int]:
        """The ``k`` hottest children of ``node`` and how many others (and their samples).

        Nodes are made for the ``k`` chosen only: an inverted tree's root has a child per
        function with self time, tens of thousands, and making and sorting a node for each
        cost four times a pass over the stacks. At a whole tree's root (the widest
        fan-out) the first of two passes only adds up each child's samples and the second
        gathers the chosen ones' stacks (56 against 123 ms for the inverted root of a
        million samples, bench/calltree.py); below it, where children are few, one pass
        gathers every child's stacks (the flame graph's layout: 84 against 107 ms)."""
        frames = self.frames
        if node._through is not None:
            branches = self._branches(node)
            first = heapq.nsmallest(
                k, branches.items(), key=lambda p: (-p[1].total, frames[p[0]].order)
            )
            shown = tuple(self._node(fid, b, node) for fid, b in first)
            rest = sum(b.total for b in branches.values()) - sum(n.total_samples for n in shown)
            return shown, len(branches) - len(shown), rest
        totals: dict[int, int] = {}
        get = totals.get
        for _, c, _, fid in self._steps(node):
            totals[fid] = get(fid, 0) + c
        chosen_fids = heapq.nsmallest(k, totals, key=lambda f: (-totals[f], frames[f].order))
        chosen: dict[int, list[tuple[int, int, int]]] = {fid: [] for fid in chosen_fids}
        ends = dict.fromkeys(chosen_fids, 0)
        for sid, c, index, fid in self._steps(node):
            group = chosen.get(fid)
            if group is not None:
                group.append((sid, c, index))
                if index == 0:
                    ends[fid] += c
        made = tuple(
            self._node(f, _Branch(totals[f], ends[f], chosen[f]), node) for f in chosen_fids
        )
        rest = sum(totals.values()) - sum(n.total_samples for n in made)
        return made, len(totals) - len(made), rest

    def _node(self, fid: int, b: _Branch, parent: StackNode) -> StackNode:
        return StackNode(self.frames[fid], b.total, b.ends, self, tuple(b.through),
                         parent.depth + 1, parent.step)  # fmt: skip

    def _steps(self, node: StackNode) -> Iterator[tuple[int, int, int, int]]:
        """One step along each stack through ``node`` that goes on past it: (stack id,
        samples, the next frame's position, its frame id). (The hot loop of every tree;
        as a generator it costs what the loop written out in place does: 9.7 against 9.4
        ms over the inverted root of the million-sample capture.)"""
        stack_fids, step = self.stack_fids, node.step
        for sid, c, pos in self._through(node):
            fids = stack_fids[sid]
            index = pos + step
            if 0 <= index < len(fids):
                yield sid, c, index, fids[index]

    def _branches(self, node: StackNode) -> dict[int, _Branch]:
        """The samples going on from ``node`` to each frame, and the stacks that do."""
        groups: dict[int, list[tuple[int, int, int]]] = {}
        ends: dict[int, int] = {}
        get = groups.get
        for sid, c, index, fid in self._steps(node):
            group = get(fid)
            if group is None:
                groups[fid] = [(sid, c, index)]
            else:
                group.append((sid, c, index))
            if index == 0:
                ends[fid] = ends.get(fid, 0) + c
        count = itemgetter(1)
        return {fid: _Branch(sum(map(count, g)), ends.get(fid, 0), g) for fid, g in groups.items()}

    def child(self, node: StackNode, frame: Frame) -> StackNode | None:
        return self.children_of(node, (frame,)).get(frame)

    def children_of(self, node: StackNode, frames: Iterable[Frame]) -> dict[Frame, StackNode]:
        ids = {fid: f for f in frames if (fid := self.frame_ids.get(f)) is not None}
        groups: dict[int, list[tuple[int, int, int]]] = {}
        for sid, c, index, fid in self._steps(node):
            if fid in ids:
                groups.setdefault(fid, []).append((sid, c, index))
        out = {}
        for fid, g in groups.items():
            total, ends = sum(c for _, c, _ in g), sum(c for _, c, i in g if i == 0)
            out[ids[fid]] = StackNode(ids[fid], total, ends, self, tuple(g), node.depth + 1,
                                      node.step)  # fmt: skip
        return out

    def samples_holding(self, node: StackNode, wanted: frozenset[int]) -> int:
        stack_fids, found = self.stack_fids, 0
        if node._through is None:  # the whole tree: anywhere on the stack
            return sum(c for sid, c in self.items() if not wanted.isdisjoint(stack_fids[sid]))
        for sid, c, pos in node._through:
            fids = stack_fids[sid]
            part = fids[: pos + 1] if node.step == DOWN else fids[pos:]
            if not wanted.isdisjoint(part):
                found += c
        return found

    def goes_on(self, node: StackNode) -> bool:
        return next(self._steps(node), None) is not None

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
