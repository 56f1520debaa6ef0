"""A large synthetic capture for the replay benchmarks: size is the point, not realism.

    .venv/bin/python bench/bigcapture.py OUT.json.gz [--samples 1000000] [--functions 50000]

The capture has ``functions`` distinct functions in 40 modules (a tenth of
them C++ names several hundred characters long), one to three sampled
addresses each, 120,000 distinct stacks 4-24 frames deep built on a call tree,
and ``samples`` samples over 8 threads and 60 seconds, drawn with a Zipf-like
skew so a few functions are hot and most are cold, as in real profiles. It is
written by livesym's own capture writer, so it is a valid v1 capture that
``livesym report`` and ``livesym replay`` read like any other.
"""

from __future__ import annotations

import argparse
import bisect
import random
import sys
import tempfile
from itertools import accumulate
from pathlib import Path

from livesym.capture.writer import document, write_capture
from livesym.records import Capture, FrameRecord, GenerationRecord, MappingRecord, ObjectRecord

MODULES = 40
STACKS = 120_000
THREADS = 8
SECONDS = 60.0
BASE = 0x7F00_0000_0000
MODULE_SPAN = 0x100_0000


def _name(rng: random.Random, i: int) -> tuple[str, str]:
    """(raw, demangled) names; every tenth a long C++ template instance."""
    if i % 10:
        raw = f"fn_{i}_{rng.choice(('parse', 'hash', 'walk', 'emit', 'scan'))}"
        return raw, raw
    args = ", ".join(f"std::vector<ns{i % 7}::T{j}<int, long>>" for j in range(12))
    demangled = f"ns{i % 7}::Worker<{args}>::run_{i}(unsigned long)"
    return f"_ZN{len(demangled)}Worker{i}E", demangled


def build(samples: int, functions: int, seed: int = 1) -> dict[str, object]:
    rng = random.Random(seed)
    objects = [
        ObjectRecord(m, f"/usr/lib/bench/lib{m}.so", f"{m:040x}", "ET_DYN", 64, "EM_X86_64",
                     ({"index": 2, "p_offset": "0x1000", "p_vaddr": "0x1000",
                       "p_filesz": "0xff0000", "p_memsz": "0xff0000", "p_align": "0x1000",
                       "flags": "R E"},), "symtab+dynsym")
        for m in range(MODULES)
    ]  # fmt: skip
    mappings = tuple(
        MappingRecord(BASE + m * MODULE_SPAN + 0x1000, BASE + (m + 1) * MODULE_SPAN, "r-xp",
                      0x1000, "fd:01", 1000 + m, objects[m].path, False, m,
                      BASE + m * MODULE_SPAN, "base = …", "ET_DYN", objects[m].build_id,
                      "symtab+dynsym")
        for m in range(MODULES)
    )  # fmt: skip
    frames: list[FrameRecord] = []
    by_function: list[list[int]] = []
    for f in range(functions):
        module = f % MODULES
        raw, demangled = _name(rng, f)
        vaddr = 0x1000 + (f // MODULES) * 0x200
        ids = []
        for k in range(rng.choice((1, 1, 2, 3))):
            offset = 0x10 * (k + 1)
            vma = BASE + module * MODULE_SPAN + vaddr + offset
            m = mappings[module]
            ids.append(len(frames))
            frames.append(
                FrameRecord(
                    len(frames), 1, vma, objects[module].path, module,
                    (m.start, m.end, m.perms, m.pgoff), m.base, 2, vaddr + offset,
                    vaddr + offset, raw, demangled, vaddr, 0x200, offset, None, "",
                    ("base = …", "elf_vaddr = …", "elf_offset = …"), (),
                )
            )  # fmt: skip
        by_function.append(ids)
    # Stacks: paths down a random call tree, so callers and callees repeat.
    parent = [rng.randrange(max(i, 1)) if i else 0 for i in range(functions)]
    stacks = []
    for _ in range(STACKS):
        leaf = int(functions * rng.random() ** 3)  # low ids are the hot ones
        path = [leaf]
        while len(path) < rng.randint(4, 24) and path[-1] != 0:
            path.append(parent[path[-1]])
        stacks.append(tuple(rng.choice(by_function[fn]) for fn in path))
    weights = list(accumulate(1.0 / (i + 1) for i in range(STACKS)))
    total = weights[-1]
    rows = []
    for i in range(samples):
        stack = bisect.bisect_left(weights, rng.random() * total)
        rows.append((SECONDS * i / samples, 1000 + rng.randrange(THREADS), stack, 0))
    return document(
        created="2026-11-21T00:00:00Z", version="bench",
        target={"pid": 4242, "exe": "/usr/bin/bench", "cmdline": ["bench", "--big"],
                "user": "bench"},
        host={"hostname": "bench", "kernel": "6.1", "machine": "x86_64", "page_size": 4096,
              "cpus": 2},
        sampler={"name": "perf", "rate_hz": 999, "idle": False},
        session={"start": 100.0, "end": 100.0 + SECONDS, "end_reason": "stopped",
                 "samples": samples, "lost": 0, "errors": []},
        maps=[GenerationRecord(1, 0.0, mappings)], objects=objects, frames=frames,
        stacks=stacks, threads={1000 + t: f"worker-{t}" for t in range(THREADS)},
        samples=rows, process=[], processes=[], thread_pids={},
    )  # fmt: skip


def read_back(samples: int, functions: int, seed: int = 1) -> Capture:
    """A capture built, written by livesym's writer and read back by its reader, as a
    user's file would be (the file is gone afterwards)."""
    from livesym.capture.reader import read_capture

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json.gz"
        write_capture(path, build(samples, functions, seed))
        return read_capture(path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("output", type=Path)
    p.add_argument("--samples", type=int, default=1_000_000)
    p.add_argument("--functions", type=int, default=50_000)
    args = p.parse_args()
    write_capture(args.output, build(args.samples, args.functions))
    print(f"wrote {args.output} ({args.output.stat().st_size >> 20} MiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
