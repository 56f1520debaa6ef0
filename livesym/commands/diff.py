"""``livesym diff BASE NEW``: what changed between two captures, or two time ranges of
captures (``FILE@FROM-TO``, seconds from its start), function by function, each change
marked where it is larger than sampling noise explains (``profile.diff``).

Both sides are counted in one time (``--mode``; by default the one BASE was recorded
in): a side that did not collect it is refused, never compared as if it had none.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass

from livesym.capture.window import within
from livesym.commands.calltree import MAX_INDENT, Described, RawTree, dumps, nested_text
from livesym.commands.captures import read_with_notes
from livesym.commands.text import TEXT_ROWS
from livesym.engine import EngineSnapshot, replay_snapshot
from livesym.errors import EXIT_OK, UsageError
from livesym.printable import printable
from livesym.profile.diff import (
    MIN_EXPECTED,
    FunctionDiff,
    ProfileDiff,
    diff_views,
    share_pct,
)
from livesym.profile.difftree import DiffNode, diff_tree
from livesym.records import Frame, TimeMode

TEST_NAME = "two-proportion z-test (pooled, two-sided) on sample counts, Holm-corrected"
_SPAN = re.compile(r"(?P<start>[0-9]*\.?[0-9]*)-(?P<end>[0-9]*\.?[0-9]*)")


@dataclass(frozen=True)
class Side:
    """One side of a diff as given: a capture, and the seconds of it to take."""

    given: str
    path: str
    start: float | None = None
    end: float | None = None


def parse_side(given: str) -> Side:
    """``FILE`` or ``FILE@FROM-TO`` (either end may be left out: ``run@30-``); a file
    whose own name holds an ``@`` is taken whole where it exists."""
    if "@" not in given or os.path.exists(given):
        return Side(given, given)
    path, _, span = given.rpartition("@")
    found = _SPAN.fullmatch(span)
    if found is None or not path:
        raise UsageError(
            f"{given}: give a capture, or CAPTURE@FROM-TO in seconds from its start "
            "(run.lsym@0-30, run.lsym@30-)"
        )
    ends = [_seconds(given, found[k]) for k in ("start", "end")]
    return Side(given, path, ends[0], ends[1])


def _seconds(given: str, text: str) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{given}: {text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise UsageError(f"{given}: {text!r} is not a number of seconds")
    return value


def _snapshot(args: argparse.Namespace, side: Side, mode: TimeMode | None) -> EngineSnapshot:
    capture, _notes = read_with_notes(argparse.Namespace(**{**vars(args), "file": side.path}))
    capture = within(capture, side.start, side.end)
    return replay_snapshot(capture, mode=mode)


@dataclass(frozen=True)
class Compared:
    """The two sides as given and as counted."""

    base_side: Side
    new_side: Side
    base: EngineSnapshot
    new: EngineSnapshot


def run(args: argparse.Namespace) -> int:
    base_side, new_side = parse_side(args.base), parse_side(args.new)
    base = _snapshot(args, base_side, TimeMode.parse(args.mode) if args.mode else None)
    new = _snapshot(args, new_side, base.mode)
    both = Compared(base_side, new_side, base, new)
    for side, snap in ((base_side, base), (new_side, new)):
        if snap.mode is not TimeMode.CPU and not snap.off_cpu_collected:
            raise UsageError(
                f"{side.given} holds no off-CPU time to compare as {base.mode.value} "
                "time: compare --mode cpu"
            )
    if args.svg is not None:
        _write_svg(args, both)
    if args.tree:
        text = _tree_output(args, base, new)
    else:
        diff = diff_views(base.view, new.view)
        text = _json(diff, both, args.limit) if args.json else (
            "\n".join(_table(diff, both, args.limit)) + "\n"
        )  # fmt: skip
    sys.stdout.write(text)
    return EXIT_OK


def _write_svg(args: argparse.Namespace, both: Compared) -> None:
    """The differential flame graph of every path wide enough to draw (--min-share is the
    tree's: the graph leaves out what is under MIN_PX on both sides, and says so)."""
    from livesym.commands.export import write_output
    from livesym.export.svg import MIN_PX, WIDTH, diff_bars, render

    base, b, a = both.base, both.base.view, both.new.view
    root = diff_tree(b.tree, a.tree, b.samples, a.samples, 100.0 * MIN_PX / WIDTH)
    if root is None:
        raise UsageError("neither side has samples: there is no flame graph to draw")
    lost = share_pct(max(0, root.base_total - _base_drawn(root)), b.samples)
    title = f"livesym diff: {both.new_side.given} against {both.base_side.given}"
    subtitle = (f"{base.mode.value} time; sized by NEW ({a.samples} samples), coloured by "
                f"the change of each frame's own share from BASE ({b.samples} samples): red "
                f"grew, blue shrank; {lost:.1f} % of BASE is on paths gone in NEW or too narrow "
                "to draw")  # fmt: skip
    write_output(args.svg, render(diff_bars(root, b.samples, a.samples), title, subtitle).encode())


def _base_drawn(root: DiffNode) -> int:
    """BASE's samples on paths NEW has too (a path gone in NEW has no width to draw):
    the self samples of every node NEW also reached."""
    drawn, todo = 0, [root]
    while todo:
        node = todo.pop()
        if node.new_total:
            drawn += node.base_self
            todo.extend(node.children)
    return drawn


# -- the table ---------------------------------------------------------------------------


def _about(side: Side, snap: EngineSnapshot) -> str:
    return f"{printable(side.given)} ({snap.view.samples} samples, {snap.lost} lost, " \
        f"{snap.elapsed:.1f} s)"  # fmt: skip


def _table(diff: ProfileDiff, both: Compared, limit: int | None) -> list[str]:
    base, new = both.base, both.new
    shown = diff.top(TEXT_ROWS if limit is None else limit)
    marked = len(diff.significant)
    lines = [
        f"livesym diff: {_about(both.new_side, new)} against {_about(both.base_side, base)}, "
        f"{base.mode.value} time",
        f"significant (*): {marked} of {len(diff)} functions ({TEST_NAME}, "
        f"family-wise {diff.alpha:g}, {diff.tests} tests; under {MIN_EXPECTED} expected "
        "samples a side: not tested)",
        f"{'self %':>20} {'total %':>21}",
        f"{'BASE':>6} {'NEW':>6} {'CHANGE':>6}  {'BASE':>6} {'NEW':>6} {'CHANGE':>6}"
        "    FUNCTION  (MODULE)",
    ]
    if not len(diff):
        return [*lines, "  (no samples on either side)"]
    lines.extend(_row(f) for f in shown)
    if len(shown) < len(diff):
        lines.append(f"  … {len(diff) - len(shown)} more with smaller changes "
                     "(--limit)")  # fmt: skip
    return lines


def _row(f: FunctionDiff) -> str:
    return (
        f"{f.base_self_pct:6.1f} {f.new_self_pct:6.1f} {f.delta_self_pp:+6.1f}  "
        f"{f.base_total_pct:6.1f} {f.new_total_pct:6.1f} {f.delta_total_pp:+6.1f}  "
        f"{'*' if f.significant else ' '} {printable(_label(f.frame))}"
    )


def _label(frame: Frame) -> str:
    if frame.module is None:
        return frame.label
    return f"{frame.label}  ({os.path.basename(frame.module) or frame.module})"


# -- JSON --------------------------------------------------------------------------------


def _side_json(side: Side, snap: EngineSnapshot) -> dict[str, object]:
    return {
        "file": side.path, "from": side.start, "to": side.end,
        "samples": snap.view.samples, "lost": snap.lost, "duration_s": round(snap.elapsed, 3),
        "sampler": snap.sampler, "rate_hz": snap.rate_hz,
    }  # fmt: skip


def function_json(f: FunctionDiff) -> dict[str, object]:
    frame = f.frame
    return {
        "symbol": frame.symbol,
        "demangled": frame.demangled if frame.resolved else frame.label,
        "module": frame.module,
        "kind": frame.kind,
        "base_self_pct": round(f.base_self_pct, 3),
        "new_self_pct": round(f.new_self_pct, 3),
        "delta_self_pp": round(f.delta_self_pp, 3),
        "base_total_pct": round(f.base_total_pct, 3),
        "new_total_pct": round(f.new_total_pct, 3),
        "delta_total_pp": round(f.delta_total_pp, 3),
        "significant": f.significant,
        "p_value": f.p_value,
        "base_self": f.base.self_samples,
        "new_self": f.new.self_samples,
        "base_total": f.base.total_samples,
        "new_total": f.new.total_samples,
    }


def _json(diff: ProfileDiff, both: Compared, limit: int | None) -> str:
    base = both.base
    shown = diff.functions if limit is None else diff.top(limit)
    return json.dumps({
        "mode": base.mode.value,
        "base": _side_json(both.base_side, base),
        "new": _side_json(both.new_side, both.new),
        "test": {"name": TEST_NAME, "alpha": diff.alpha, "tests": diff.tests,
                 "min_expected": MIN_EXPECTED},
        "significant": len(diff.significant),
        "functions": [function_json(f) for f in shown],
        "functions_left_out": len(diff) - len(shown),  # by --limit
    }) + "\n"  # fmt: skip


# -- the tree ----------------------------------------------------------------------------


def _tree_output(args: argparse.Namespace, base: EngineSnapshot, new: EngineSnapshot) -> str:
    b, a = base.view, new.view
    trees = (b.inverted_tree, a.inverted_tree) if args.inverted else (b.tree, a.tree)
    root = diff_tree(*trees, b.samples, a.samples, args.min_share)
    if args.json:
        return dumps({
            "mode": base.mode.value, "inverted": args.inverted, "min_share": args.min_share,
            "base_samples": b.samples, "new_samples": a.samples,
            "tree": None if root is None else RawTree(_tree_text(root, b.samples, a.samples)),
        }) + "\n"  # fmt: skip
    lines = [
        f"diff call tree ({'inverted' if args.inverted else 'top-down'}), total % of each "
        f"side's samples ({b.samples} base, {a.samples} new); paths under "
        f"{args.min_share:g} % on both sides left out (--min-share)",
        f"{'BASE':>6} {'NEW':>6} {'CHANGE':>6}  FUNCTION  (MODULE)",
    ]
    if root is None:
        return "\n".join([*lines, "  (no samples on either side)"]) + "\n"
    todo: list[DiffNode | str] = [root]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            lines.append(item)
            continue
        tb, ta = share_pct(item.base_total, b.samples), share_pct(item.new_total, a.samples)
        lines.append(f"{tb:6.1f} {ta:6.1f} {ta - tb:+6.1f}  {_indent(item.depth)}"
                     f"{printable(_label(item.frame))}")  # fmt: skip
        paths, lb, la = item.left_out
        if paths:
            todo.append(f"{'':22}{_indent(item.depth + 1)}… {paths} more under "
                        f"{args.min_share:g} % ({share_pct(lb, b.samples):.1f} → "
                        f"{share_pct(la, a.samples):.1f} % together)")  # fmt: skip
        todo.extend(reversed(item.children))
    return "\n".join(lines) + "\n"


def _tree_text(root: DiffNode, base_samples: int, new_samples: int) -> str:
    """The diff tree as JSON text: each node's shares on both sides and their changes."""

    def describe(node: DiffNode) -> Described[DiffNode]:
        frame = node.frame
        tb, ta = share_pct(node.base_total, base_samples), share_pct(node.new_total, new_samples)
        sb, sa = share_pct(node.base_self, base_samples), share_pct(node.new_self, new_samples)
        fields: dict[str, object] = {
            "function": frame.label, "symbol": frame.symbol, "module": frame.module,
            "kind": frame.kind, "base_total_pct": round(tb, 3), "new_total_pct": round(ta, 3),
            "delta_total_pp": round(ta - tb, 3), "base_self_pct": round(sb, 3),
            "new_self_pct": round(sa, 3), "delta_self_pp": round(sa - sb, 3),
        }  # fmt: skip
        paths, lb, la = node.left_out
        left: dict[str, object] | None = None
        if paths:
            left = {"nodes": paths, "base_samples": lb, "new_samples": la}
        return fields, node.children, left

    return nested_text(root, describe)


def _indent(depth: int) -> str:
    if depth <= MAX_INDENT:
        return "  " * depth
    return "  " * MAX_INDENT + f"[{depth}] "
