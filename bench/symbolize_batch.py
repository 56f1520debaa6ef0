"""Batch symbolization, whole process: livesym against llvm-symbolizer.

    livesym symbolize -e FILE --json                                  < addrs
    llvm-symbolizer --obj=FILE --functions=linkage --output-style=JSON < addrs

on the same N addresses (default 100,000, one ``0x...`` per line), drawn
deterministically (random.Random(seed), seed 1):

* ``--mix uniform`` (default): uniform over the bytes of the file's executable
  PT_LOAD segments, [p_vaddr, p_vaddr + p_filesz) -- hits and misses as a
  stripped library gives them;
* ``--mix hits``: a function symbol chosen uniformly from livesym's table,
  then an address uniform inside it -- nearly every address resolves, to
  tens of thousands of distinct names (the demangling path).

Each run starts the tool, feeds the input file on stdin and discards stdout;
the tools run alternately. Before timing, one untimed run of each is checked:
both print N lines, and where llvm-symbolizer names a function, livesym's
``demangled`` should be the same string (agreement is reported, not enforced:
the two demanglers format some templates differently).

    .venv/bin/python bench/symbolize_batch.py [--file F] [--mix hits] [--runs N] [--json]
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import _benchlib as bl

BENCH = "symbolize_batch"
DEFAULT_FILE = "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1"
DEFAULT_COUNT = 100_000
AGREEMENT_BAR = 99.0  # percent; informational


def exec_ranges(path: str) -> list[tuple[int, int]]:
    """[p_vaddr, p_vaddr + p_filesz) of every executable PT_LOAD."""
    from livesym.elf.image import load_image

    return [
        (s.p_vaddr, s.p_vaddr + s.p_filesz)
        for s in load_image(path).segments
        if s.executable and s.p_filesz > 0
    ]


def uniform_addresses(ranges: list[tuple[int, int]], count: int, rng: random.Random) -> list[int]:
    lengths = [end - start for start, end in ranges]
    cumulative = list(itertools.accumulate(lengths))
    total = cumulative[-1]
    out = []
    for _ in range(count):
        r = rng.randrange(total)
        k = bisect.bisect_right(cumulative, r)
        out.append(ranges[k][0] + r - (cumulative[k] - lengths[k]))
    return out


def hit_addresses(
    path: str, ranges: list[tuple[int, int]], count: int, rng: random.Random
) -> list[int]:
    """A symbol uniformly from livesym's table (those inside executable bytes), then an
    address uniformly inside that symbol."""
    from livesym.elf.image import load_image
    from livesym.elf.symtab import load_symbols

    table = load_symbols(load_image(path))
    spans = [
        (table.start(i), table.end(i))
        for i in range(len(table))
        if table.end(i) > table.start(i)
        and any(lo <= table.start(i) and table.end(i) <= hi for lo, hi in ranges)
    ]
    if not spans:
        return []
    return [rng.randrange(*rng.choice(spans)) for _ in range(count)]


def llvm_name(row: dict[str, Any]) -> str:
    """The symbol-table function of one llvm-symbolizer JSON row ('' when none).

    With debug info there is one frame per inlined call, innermost first; the
    last frame is the function the address belongs to.
    """
    frames = row.get("Symbol") or []
    return str(frames[-1].get("FunctionName", "")) if frames else ""


def disagreement_kind(ours: str | None, theirs: str) -> str:
    """no_function: livesym has no function symbol there (llvm-symbolizer also names data
    objects, e.g. 'typeinfo name for X' in a read-only part of an executable segment);
    spacing: the same but for spaces ('> >' against '>>', 'operator<< <' against
    'operator<<<'); other: any other formatting ('{lambda(...)#1}' against 'lambda'(...))."""
    if ours is None:
        return "no_function"
    if ours.replace(" ", "") == theirs.replace(" ", ""):
        return "spacing"
    return "other"


def _pct(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def verify(
    addresses: Sequence[int], ours_cmd: list[str], llvm_cmd: list[str], input_path: str
) -> dict[str, Any]:
    """One untimed run of each: line counts and name agreement."""
    outputs = []
    for argv in (ours_cmd, llvm_cmd):
        with open(input_path, "rb") as stdin:
            proc = subprocess.run(argv, stdin=stdin, capture_output=True)
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            raise bl.BenchError(f"{argv[0]} exited with {proc.returncode}: {err}")
        outputs.append(proc.stdout.decode("utf-8", "replace").splitlines())
    ours_lines, llvm_lines = outputs
    n = len(addresses)
    result: dict[str, Any] = {
        "livesym_lines": len(ours_lines),
        "llvm_lines": len(llvm_lines),
        "lines_ok": len(ours_lines) == n and len(llvm_lines) == n,
    }
    if not result["lines_ok"]:
        return result
    compared = agree = ours_only = 0
    kinds = {"no_function": 0, "spacing": 0, "other": 0}
    examples: dict[str, list[dict[str, str]]] = {k: [] for k in kinds}
    for addr, ours_text, llvm_text in zip(addresses, ours_lines, llvm_lines, strict=True):
        demangled = json.loads(ours_text).get("demangled")
        theirs = llvm_name(json.loads(llvm_text))
        if not theirs:
            ours_only += demangled is not None
            continue
        compared += 1
        if demangled == theirs:
            agree += 1
            continue
        kind = disagreement_kind(demangled, theirs)
        kinds[kind] += 1
        if len(examples[kind]) < 2:
            examples[kind].append(
                {"kind": kind, "address": hex(addr), "livesym": str(demangled), "llvm": theirs}
            )
    # Up to five examples, every kind that occurred represented.
    shown = [e for pair in itertools.zip_longest(*examples.values()) for e in pair if e][:5]
    both = compared - kinds["no_function"]
    result.update(
        {
            "llvm_named": compared,
            "agree": agree,
            "agreement_pct": _pct(agree, compared),
            "resolved_by_livesym_only": ours_only,
            "resolved_by_llvm_only": kinds["no_function"],
            "disagreements_by_kind": kinds,
            "agreement_pct_both_named_ignoring_spaces": _pct(agree + kinds["spacing"], both),
            "disagreements": shown,
        }
    )
    return result


def profile(ours_cmd: list[str], input_path: str, top: int) -> str:
    """livesym's run under cProfile: the top entries by own time."""
    import pstats

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "livesym.prof")
        argv = [sys.executable, "-m", "cProfile", "-o", out, *ours_cmd]
        with open(input_path, "rb") as stdin:
            subprocess.run(argv, stdin=stdin, stdout=subprocess.DEVNULL, check=True)
        import io

        buf = io.StringIO()
        stats = pstats.Stats(out, stream=buf)
        stats.strip_dirs().sort_stats("tottime").print_stats(top)
        return buf.getvalue()


def _pct_text(pct: float | None) -> str:
    return "n/a" if pct is None else f"{pct}%"


def _around_difference(a: str, b: str, width: int = 90) -> tuple[str, str]:
    """Both strings cut to a window that starts a little before their first difference."""
    pairs = enumerate(zip(a, b, strict=False))
    k = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    start = max(0, k - 30)

    def cut(text: str) -> str:
        head = "..." if start else ""
        tail = "..." if len(text) > start + width else ""
        return head + text[start : start + width] + tail

    return cut(a), cut(b)


def main() -> int:
    bl.utf8_stdout()
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument("--file", default=DEFAULT_FILE, help=f"ELF file (default {DEFAULT_FILE})")
    p.add_argument("--count", type=int, default=DEFAULT_COUNT, help="addresses (default 100000)")
    p.add_argument("--mix", choices=("uniform", "hits"), default="uniform")
    p.add_argument("--seed", type=int, default=1, help="random.Random seed (default 1)")
    p.add_argument("--llvm-symbolizer", default=None, help="path (default: from PATH)")
    p.add_argument(
        "--profile",
        type=int,
        metavar="TOP",
        default=0,
        help="also run livesym once under cProfile and print the TOP entries by own time",
    )
    args = p.parse_args()
    path: str = args.file
    if not os.path.isfile(path):
        bl.skip(BENCH, f"{path} not found (give another ELF file with --file)", args.json)
    llvm = args.llvm_symbolizer or shutil.which("llvm-symbolizer")
    if llvm is None or not os.path.isfile(llvm):
        bl.skip(BENCH, "llvm-symbolizer not found (the reference; apt install llvm)", args.json)
    script = bl.livesym_script()
    if script is None:
        bl.skip(BENCH, f"no livesym script beside {sys.executable}", args.json)

    rng = random.Random(args.seed)
    ranges = exec_ranges(path)
    if not ranges:
        bl.skip(BENCH, f"{path} has no executable PT_LOAD segment", args.json)
    if args.mix == "uniform":
        addresses = uniform_addresses(ranges, args.count, rng)
    else:
        addresses = hit_addresses(path, ranges, args.count, rng)
        if not addresses:
            bl.skip(BENCH, f"{path} has no function symbols for --mix hits", args.json)

    ours_cmd = [str(script), "symbolize", "-e", path, "--json"]
    llvm_cmd = [llvm, f"--obj={path}", "--functions=linkage", "--output-style=JSON"]
    fd, input_path = tempfile.mkstemp(prefix="livesym-bench-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{a:#x}\n" for a in addresses))
        check = verify(addresses, ours_cmd, llvm_cmd, input_path)
        timings = bl.interleaved(
            [
                ("livesym", bl.command(ours_cmd, input_path)),
                ("llvm-symbolizer", bl.command(llvm_cmd, input_path)),
            ],
            runs=args.runs,
            warmup=args.warmup,
        )
        prof = profile(ours_cmd, input_path, args.profile) if args.profile else None
    finally:
        os.unlink(input_path)

    ours, theirs = timings["livesym"], timings["llvm-symbolizer"]
    ratio = ours.median / theirs.median
    base = os.path.basename(path)
    if args.json:
        result: dict[str, Any] = {
            "benchmark": BENCH,
            "file": path,
            "count": len(addresses),
            "mix": args.mix,
            "seed": args.seed,
            "runs": args.runs,
            "warmup": args.warmup,
            "livesym": ours.as_json(),
            "llvm_symbolizer": theirs.as_json(),
            "ratio_livesym_over_llvm": round(ratio, 3),
            "target_ratio_at_most": 1.0,
            "meets_target": ratio <= 1.0,
            "check": check,
        }
        if prof is not None:
            result["profile"] = prof
        print(json.dumps(result))
        return 0

    print(
        f"symbolize {len(addresses)} addrs {base}: livesym {bl.secs(ours.median)}, "
        f"llvm-symbolizer {bl.secs(theirs.median)} → ratio {ratio:.2f} "
        "(livesym/llvm; ≤ 1.0 means as fast or faster)"
    )
    print(
        f"  --mix {args.mix}, median of {args.runs} interleaved runs "
        f"(min: livesym {bl.secs(ours.min)}, llvm-symbolizer {bl.secs(theirs.min)})"
    )
    if not check["lines_ok"]:
        print(
            f"  CHECK FAILED: expected {len(addresses)} lines, livesym printed "
            f"{check['livesym_lines']}, llvm-symbolizer {check['llvm_lines']}"
        )
    else:
        pct = check["agreement_pct"]
        verdict = "" if pct is None else (" (ok)" if pct >= AGREEMENT_BAR else " (below 99%)")
        kinds = check["disagreements_by_kind"]
        print(
            f"  names: llvm-symbolizer named {check['llvm_named']} addresses; livesym's "
            f"demangled equals its FunctionName on {check['agree']} = {_pct_text(pct)}{verdict}"
        )
        print(
            f"    differing: {kinds['no_function']} where livesym has no function symbol, "
            f"{kinds['spacing']} in spaces only, {kinds['other']} in other formatting; "
            f"where both name a function, ignoring spaces: "
            f"{_pct_text(check['agreement_pct_both_named_ignoring_spaces'])}"
        )
        print(f"    resolved by livesym only: {check['resolved_by_livesym_only']}")
        for d in check["disagreements"]:
            if d["livesym"] == "None":
                print(f"    {d['address']} [{d['kind']}]: livesym none, llvm {d['llvm'][:90]!r}")
                continue
            ours_cut, llvm_cut = _around_difference(d["livesym"], d["llvm"])
            print(f"    {d['address']} [{d['kind']}]: livesym {ours_cut!r}")
            print(f"    {' ' * (len(d['address']) + len(d['kind']) + 3)}  llvm    {llvm_cut!r}")
    if prof is not None:
        print(prof)
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
