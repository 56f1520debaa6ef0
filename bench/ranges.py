"""Views of a time range of a big profile: what the dashboard's timeline asks for.

The synthetic capture of bench/bigcapture.py (a million samples over 60 s, 50,000
functions, 120,000 stacks) is replayed once; then, each run, the engine's view of:
- the 10 seconds from 20 s (``snapshot(between=(20, 30))``),
- the whole capture as a range (``between=(0, 60)``: every sample counted again),
- the 10 seconds with a thread filter;
against the reference of the same run: the view of the whole session without a range
(the counters kept as samples came), and the replay itself (once, with the cost of
keeping every sample's moment for ranges, ``Profile.log_rows``, timed apart).

    .venv/bin/python bench/ranges.py [--samples 1000000] [--functions 50000] [--runs N]

The issue's bar: a range change within the dashboard's key budget, 100 ms.
"""

from __future__ import annotations

import json
import time

import _benchlib as bl

BENCH = "ranges"


def main() -> int:
    p = bl.parser("Views of a time range of a big profile.")
    bl.big_options(p)
    args = p.parse_args()
    try:
        import bigcapture

        from livesym.engine import Engine
        from livesym.profile import Profile
    except ImportError as e:
        bl.skip(BENCH, f"livesym is not importable: {e}", args.json)
    capture = bigcapture.read_back(args.samples, args.functions)
    logging = [0.0]
    original = Profile.log_rows

    def timed_log_rows(self: Profile, *a: object, **k: object) -> None:
        t0 = time.perf_counter()
        original(self, *a, **k)  # type: ignore[arg-type]
        logging[0] += time.perf_counter() - t0

    Profile.log_rows = timed_log_rows  # type: ignore[method-assign]
    engine = Engine.for_capture(capture)
    t0 = time.perf_counter()
    engine.replay_all()
    replay = time.perf_counter() - t0
    Profile.log_rows = original  # type: ignore[method-assign]
    thread = engine.snapshot().view.threads[0].tid
    seconds = capture.seconds

    def fresh(**kw: object) -> None:
        engine.counted._views.clear()  # (a view asked again is kept: count it each run)
        engine.snapshot(**kw)  # type: ignore[arg-type]

    timings = bl.interleaved(
        [("10 s range", lambda: fresh(between=(20.0, 30.0))),
         ("the whole capture as a range", lambda: fresh(between=(0.0, seconds + 1))),
         ("10 s range of one thread", lambda: fresh(between=(20.0, 30.0), thread=thread)),
         ("reference: the whole session, no range", lambda: fresh())],
        args.runs, args.warmup,
    )  # fmt: skip
    result = {
        "benchmark": BENCH,
        "samples": args.samples,
        "replay_s": round(replay, 3),
        "of_which_logging_moments_s": round(logging[0], 3),
        "timings": {name: t.as_json() for name, t in timings.items()},
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.samples} samples over {seconds:.0f} s (median of {args.runs}):")
        for name, t in timings.items():
            print(f"  {name}: {bl.msecs(t.median)}")
        print(f"  the replay took {replay:.2f} s, {logging[0]:.2f} s of it keeping each "
              "sample's moment")  # fmt: skip
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
