"""Shared helpers for the scripts in bench/ (standard library only).

Every benchmark compares a candidate against a reference measured in the same
run: the candidates run alternately (interleaved, the order reversed every
other round) so that background load on a small, noisy machine hits both
alike. Each figure is the median of ``--runs`` samples, the minimum is shown
beside it, and ratios are computed from medians.

The scripts import this module as a sibling (Python puts a script's own
directory first on sys.path), so ``python bench/<name>.py`` works from any
directory.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

DEFAULT_RUNS = 5
DEFAULT_WARMUP = 1


class BenchError(Exception):
    """A measured command failed; the benchmark cannot give a figure."""


@dataclass
class Timing:
    """The samples (seconds) of one candidate."""

    name: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    def as_json(self) -> dict[str, object]:
        return {
            "median_s": round(self.median, 6),
            "min_s": round(self.min, 6),
            "samples_s": [round(s, 6) for s in self.samples],
        }


def parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark has: --runs, --warmup, --json."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--runs",
        type=_positive,
        default=DEFAULT_RUNS,
        help=f"timed runs per candidate (default {DEFAULT_RUNS})",
    )
    p.add_argument(
        "--warmup",
        type=_non_negative,
        default=DEFAULT_WARMUP,
        help=f"untimed runs per candidate first (default {DEFAULT_WARMUP}; page cache, imports)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p


def big_options(p: argparse.ArgumentParser) -> None:
    """The size of the synthetic capture a benchmark builds (bench/bigcapture.py)."""
    p.add_argument("--samples", type=int, default=1_000_000)
    p.add_argument("--functions", type=int, default=50_000)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def interleaved(
    candidates: Sequence[tuple[str, Callable[[], object]]],
    runs: int,
    warmup: int = DEFAULT_WARMUP,
    progress: bool = False,
) -> dict[str, Timing]:
    """Time each candidate ``runs`` times, alternating between them.

    Round r runs the candidates in order, round r+1 in reverse order (A B, B A,
    A B, ...), so neither always runs first after an idle moment. A garbage
    collection before each sample keeps one candidate's garbage off the
    other's clock.
    """
    for _ in range(warmup):
        for _name, fn in candidates:
            fn()
    timings = {name: Timing(name) for name, _fn in candidates}
    for r in range(runs):
        order = candidates if r % 2 == 0 else list(reversed(candidates))
        for name, fn in order:
            gc.collect()
            t0 = time.perf_counter()
            fn()
            timings[name].samples.append(time.perf_counter() - t0)
        if progress:
            print(f"  run {r + 1}/{runs} done", file=sys.stderr, flush=True)
    return timings


def command(argv: Sequence[str], stdin_path: str | None = None) -> Callable[[], None]:
    """A callable that runs ``argv`` (stdin from a file, stdout to /dev/null)."""

    def run() -> None:
        if stdin_path is None:
            proc = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        else:
            with open(stdin_path, "rb") as stdin:
                proc = subprocess.run(
                    argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            raise BenchError(
                f"{' '.join(argv)} exited with {proc.returncode}: {tail[0] if tail else ''}"
            )

    return run


def skip(benchmark: str, reason: str, as_json: bool) -> NoReturn:
    """Report a benchmark that cannot run here (missing file or tool) and exit 0."""
    if as_json:
        print(json.dumps({"benchmark": benchmark, "skipped": reason}))
    else:
        print(f"SKIP {benchmark}: {reason}")
    sys.exit(0)


def fail(benchmark: str, reason: str, as_json: bool) -> NoReturn:
    """Report a benchmark whose measured command failed and exit 1."""
    if as_json:
        print(json.dumps({"benchmark": benchmark, "error": reason}))
    else:
        print(f"ERROR {benchmark}: {reason}")
    sys.exit(1)


def run_main(benchmark: str, main: Callable[[], int]) -> NoReturn:
    """A benchmark script's entry point: its exit code, or one error line on BenchError."""
    try:
        sys.exit(main())
    except BenchError as e:
        fail(benchmark, str(e), "--json" in sys.argv)


def print_result(result: dict[str, object], as_json: bool) -> None:
    """A benchmark's figures: one JSON line, or a ``key: value`` line each."""
    if as_json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


def secs(value: float) -> str:
    """Seconds with three significant digits: 0.0723 s, 1.93 s, 12.4 s."""
    return f"{value:.3g} s"


def msecs(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def livesym_script() -> Path | None:
    """The ``livesym`` console script installed beside this interpreter, its package
    compiled to bytecode first: pip compiles what it installs, while a source tree run
    with PYTHONDONTWRITEBYTECODE (CI, tests) compiles every module on every start
    (40 ms of ``symbolize``'s start here)."""
    script = Path(sys.executable).parent / "livesym"
    if not script.is_file():
        return None
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("livesym")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)
    return script


def utf8_stdout() -> None:
    """Never die on a non-UTF-8 terminal because of an arrow in a report line."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")


def on_first_cpu() -> None:  # pragma: no cover - runs in a child before its exec
    """A child's ``preexec_fn``: run on the first CPU of the ones permitted, alone."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def on_other_cpus() -> None:  # pragma: no cover - runs in a child before its exec
    """A child's ``preexec_fn``: run on every permitted CPU but the first (``on_first_cpu``
    keeps that for the target), or on all of them where there is one only."""
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, (cpus - {min(cpus)}) or cpus)
