"""Call trees on a big profile: what the Tree pane and the flame graph compute, in-process.

The synthetic capture of bench/bigcapture.py (a million samples, 50,000 functions) is
replayed once; then, on a fresh tree each run:
- the Tree pane's first view (its hottest path opened, its rows made), top-down and
  inverted (the inverted root has a child per function with self time);
- the flame graph's layout at 120x38;
against the reference of the same run: every child of the inverted root made and sorted
(``StackNode.children``), which is what the pane did before ``StackNode.hottest``.

    .venv/bin/python bench/calltree.py [--samples 1000000] [--functions 50000] [--runs N]
"""

from __future__ import annotations

import json

import _benchlib as bl

BENCH = "calltree"


def main() -> int:
    p = bl.parser("Call trees on a big profile: the Tree pane's first view, the flame graph.")
    bl.big_options(p)
    args = p.parse_args()
    try:
        import bigcapture

        from livesym.engine import replay_snapshot
        from livesym.profile import DOWN, UP
        from livesym.ui.calltree import hottest_path, visible
        from livesym.ui.flame import layout
    except ImportError as e:
        bl.skip(BENCH, f"livesym is not importable: {e}", args.json)
    view = replay_snapshot(bigcapture.read_back(args.samples, args.functions)).view
    stacks = view._stacks

    def pane(step: int) -> None:
        root = stacks.tree(step)
        assert root is not None
        visible(root, hottest_path(root))

    def flame() -> None:
        root = stacks.tree(DOWN)
        assert root is not None
        layout(root, 120, 38)

    def every_child() -> None:
        root = stacks.tree(UP)
        assert root is not None
        _ = root.children

    timings = bl.interleaved(
        [("tree pane, top-down", lambda: pane(DOWN)), ("tree pane, inverted", lambda: pane(UP)),
         ("flame graph 120x38", flame), ("reference: every inverted child", every_child)],
        args.runs, args.warmup,
    )  # fmt: skip
    reference = timings["reference: every inverted child"].median
    inverted = timings["tree pane, inverted"].median
    result = {
        "benchmark": BENCH,
        "samples": args.samples,
        "stacks": len(stacks.stack_fids),
        "timings": {name: t.as_json() for name, t in timings.items()},
        "inverted_vs_reference": round(inverted / reference, 3),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{args.samples} samples, {result['stacks']} distinct stacks (median of {args.runs}):"
        )
        for name, t in timings.items():
            print(f"  {name}: {bl.msecs(t.median)}")
        print(f"  the inverted tree's first view takes {result['inverted_vs_reference']} of the "
              "time of making every child of its root")  # fmt: skip
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
