"""The call tree as ``top --tree`` and ``report --tree`` print it: indented text, hottest
first, or JSON (``--json``), top-down or ``--inverted``.

Paths whose share of the samples is under ``--min-share`` percent are left out, and
said to be: each node that lost children has a line (a ``left_out`` object in JSON)
with how many and how many samples they held. Nothing is dropped silently.
"""

from __future__ import annotations

import os

from livesym.profile import ProfileView, StackNode
from livesym.records import Frame

MAX_INDENT = 40  # levels indented; deeper ones say their depth instead


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
    root ("[all]") above the outermost frames (or, inverted, above the leaves)."""
    root = root_of(view, inverted)
    floor = _floor(view, min_share)
    return {
        "samples": view.samples,
        "inverted": inverted,
        "min_share": min_share,
        "tree": None if root is None else _node_json(root, floor),
    }


def _node_json(node: StackNode, floor: float) -> dict[str, object]:
    frame = node.frame
    kept, dropped, samples = _kept(node, floor)
    out: dict[str, object] = {
        "function": frame.label,
        "symbol": frame.symbol,
        "module": frame.module,
        "kind": frame.kind,
        "self": node.self_samples,
        "total": node.total_samples,
        "children": [_node_json(c, floor) for c in kept],
    }
    if dropped:
        out["left_out"] = {"nodes": dropped, "samples": samples}
    return out
