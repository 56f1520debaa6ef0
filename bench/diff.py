"""Diffs of big profiles: what ``livesym diff`` computes once both captures are counted.

Two synthetic captures of bench/bigcapture.py (a million samples and 50,000 functions
each, drawn with other seeds: most of their names differ, the worst case for matching)
are replayed once; then, each run:
- ``diff_views`` of the two (every function of either matched, both shares tested);
- ``diff_views`` of one against itself (every function matched);
- the dashboard's: a view against a pinned baseline, the baseline's functions matched
  once and the view's profile's frame ids named once (the frames of a live session's
  profile only grow: each new view has its keys but for new functions);
- the diff tree at 1 % (``diff --tree``), and the differential SVG (``diff --svg``: the
  tree of every path wide enough to draw, laid out and written);
against the reference of the same run: reading every function row of both views
(``FunctionRows.unordered``: the least a diff can do).

    .venv/bin/python bench/diff.py [--samples 1000000] [--functions 50000] [--runs N]

The issue's bar: a diff within the dashboard's key budget, 100 ms.
"""

from __future__ import annotations

import json

import _benchlib as bl

BENCH = "diff"


def main() -> int:
    p = bl.parser("Diffs of big profiles: functions matched and tested, trees laid over.")
    bl.big_options(p)
    args = p.parse_args()
    try:
        import bigcapture

        from livesym.engine import replay_snapshot
        from livesym.export.svg import MIN_PX, WIDTH, diff_bars, render
        from livesym.profile.diff import KeySpace, diff_views
        from livesym.profile.difftree import diff_tree
    except ImportError as e:
        bl.skip(BENCH, f"livesym is not importable: {e}", args.json)
    views = [replay_snapshot(bigcapture.read_back(args.samples, args.functions, seed)).view
             for seed in (1, 2)]  # fmt: skip
    base, new = views

    def rows() -> None:
        for view in views:
            for _ in view.functions.unordered():
                pass

    def svg() -> None:
        floor = 100.0 * MIN_PX / WIDTH  # (what diff --svg builds: what is wide enough)
        root = diff_tree(base.tree, new.tree, base.samples, new.samples, floor)
        assert root is not None
        render(diff_bars(root, base.samples, new.samples), "t", "s")

    space = KeySpace()
    pinned = space.side(base)

    def live() -> None:
        diff_views(base, new, space=space, base_side=pinned).top(50)

    timings = bl.interleaved(
        [("diff of two captures, its first 50 rows", lambda: diff_views(base, new).top(50)),
         ("a view against a pinned baseline (the dashboard's), its first 50 rows", live),
         ("diff of one against itself, its first 50 rows",
          lambda: diff_views(base, base).top(50)),
         ("diff tree at 1 %", lambda: diff_tree(base.tree, new.tree, base.samples,
                                                new.samples, 1.0)),
         ("differential SVG (paths wide enough to draw)", svg),
         ("reference: every function row of both", rows)],
        args.runs, args.warmup,
    )  # fmt: skip
    reference = timings["reference: every function row of both"].median
    result = {
        "benchmark": BENCH,
        "samples": args.samples,
        "functions": [len(base.functions), len(new.functions)],
        "timings": {name: t.as_json() for name, t in timings.items()},
        "diff_vs_reference": round(
            timings["diff of two captures, its first 50 rows"].median / reference, 3
        ),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.samples} samples a side, {result['functions']} functions "
              f"(median of {args.runs}):")  # fmt: skip
        for name, t in timings.items():
            print(f"  {name}: {bl.msecs(t.median)}")
        print(f"  a diff takes {result['diff_vs_reference']}x the time of reading every "
              "function row of both")  # fmt: skip
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
