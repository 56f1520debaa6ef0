"""The call tree as ``top --tree`` and ``report --tree`` print it: indented text, hottest
first, or JSON (``--json``), top-down or ``--inverted``.

Paths whose share of the samples is under ``--min-share`` percent are left out, and
said to be: each node that lost children has a line (a ``left_out`` object in JSON)
with how many and how many samples they held. Nothing is dropped silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from livesym.profile import ProfileView, StackNode
from livesym.records import Frame

MAX_INDENT = 40  # levels indented; deeper ones say their depth instead
N = TypeVar("N")


def _kept(node: StackNode, floor: float) -> tuple[list[StackNode], int, int]:
    """The children at or above ``floor`` samples, and how many (and how many samples)
    were left out."""
    kept = [c for c in node.children if c.total_samples >= floor]
    dropped = node.children[len(kept) :]  # children are sorted by total, descending
    return kept, len(dropped), sum(c.total_samples for c in dropped)


def _floor(view: ProfileView, min_share: float) -> float:
    return view.samples * min_share / 100.0


def root_of(view: ProfileView, inverted: bool) -> StackNode | None:
    return view.inverted_tree if inverted else view.tree


def tree_lines(view: ProfileView, inverted: bool, min_share: float) -> list[str]:
    """The tree as text lines (not yet made printable): a title, a header, a node a line."""
    direction = (
        "inverted: where time was spent, then who called it"
        if inverted
        else "top-down: callers above their callees"
    )
    lines = [
        f"call tree, {direction}; paths under {min_share:g} % left out (--min-share)",
        f"{'TOTAL%':>6} {'SELF%':>6} {'TOTAL':>7} {'SELF':>7}  FUNCTION  (MODULE)",
    ]
    root = root_of(view, inverted)
    if root is None:
        return [*lines, "  (no samples: the target was idle, or exited at once)"]
    scale = 100.0 / view.samples
    floor = _floor(view, min_share)
    todo: list[StackNode | tuple[int, int, int]] = [root]
    while todo:
        item = todo.pop()
        if isinstance(item, tuple):
            depth, count, samples = item
            lines.append(f"{'':29}{_indent(depth)}… {count} more under {min_share:g} % "
                         f"({samples * scale:.1f} % together)")  # fmt: skip
            continue
        node = item
        lines.append(
            f"{node.total_samples * scale:6.1f} {node.self_samples * scale:6.1f} "
            f"{node.total_samples:7d} {node.self_samples:7d}  {_indent(node.depth)}"
            f"{_label(node.frame)}"
        )
        kept, dropped, samples = _kept(node, floor)
        if dropped:
            todo.append((node.depth + 1, dropped, samples))
        todo.extend(reversed(kept))
    return lines


def _indent(depth: int) -> str:
    if depth <= MAX_INDENT:
        return "  " * depth
    return "  " * MAX_INDENT + f"[{depth}] "


def _label(frame: Frame) -> str:
    if frame.module is None:
        return frame.label
    return f"{frame.label}  ({os.path.basename(frame.module) or frame.module})"


def tree_json(view: ProfileView, inverted: bool, min_share: float) -> dict[str, object]:
    """``{"samples": N, "inverted": bool, "min_share": pct, "tree": node}``: one synthetic
    root ("[all]") above the outermost frames (or, inverted, above the leaves). The tree
    comes as JSON text already (``RawTree``): ``dumps`` puts it in place."""
    root = root_of(view, inverted)
    floor = _floor(view, min_share)
    return {
        "samples": view.samples,
        "inverted": inverted,
        "min_share": min_share,
        "tree": None if root is None else RawTree(_tree_text(root, floor)),
    }


class RawTree(str):
    """A tree's JSON text, nested as deep as the stacks are (thousands of levels in a
    deep recursion): made without recursion, where ``json.dumps`` would recurse per level
    and stop at Python's recursion limit."""


def dumps(doc: dict[str, object]) -> str:
    """``json.dumps(doc)`` with each ``RawTree`` value put in as the text it is."""
    raw = {key: value for key, value in doc.items() if isinstance(value, RawTree)}
    text = json.dumps({key: value for key, value in doc.items() if key not in raw})
    for key, value in raw.items():
        text = f"{text[:-1]}{', ' if len(text) > 2 else ''}{json.dumps(key)}: {value}}}"
    return text


def _tree_text(root: StackNode, floor: float) -> str:
    """The tree as JSON text, each node ``{"function", "symbol", "module", "kind",
    "self", "total", "children": [...]}`` and, where children were left out,
    ``"left_out": {"nodes", "samples"}``."""

    def describe(node: StackNode) -> Described[StackNode]:
        frame = node.frame
        kept, dropped, samples = _kept(node, floor)
        fields: dict[str, object] = {
            "function": frame.label, "symbol": frame.symbol, "module": frame.module,
            "kind": frame.kind, "self": node.self_samples, "total": node.total_samples,
        }  # fmt: skip
        return fields, kept, {"nodes": dropped, "samples": samples} if dropped else None

    return nested_text(root, describe)


# A node's JSON fields, its children, and what was left out of them (None: nothing).
Described = tuple[dict[str, object], Sequence[N], dict[str, object] | None]


def nested_text(root: N, describe: Callable[[N], Described[N]]) -> str:
    """A tree as JSON text, each node its ``describe``d fields, then ``"children"`` and,
    where some were left out, ``"left_out"``: made in a loop, where ``json.dumps`` would
    recurse per level (a deep recursion's tree is thousands of levels deep)."""
    out: list[str] = []
    todo: list[tuple[str, N | None]] = [("", root)]
    while todo:
        text, node = todo.pop()
        if node is None:
            out.append(text)
            continue
        fields, children, left_out = describe(node)
        head = json.dumps(fields)
        out.append(f'{head[:-1]}, "children": [')
        todo.append(
            ("]}" if left_out is None else f'], "left_out": {json.dumps(left_out)}}}', None)
        )
        for i in range(len(children) - 1, -1, -1):
            todo.append(("", children[i]))
            if i:
                todo.append((", ", None))
    return "".join(out)
