"""A perf ring's samples read in C (livesym._perfsamples) against the Python parser.

Both read the same ring, ``--samples`` records as an event per CPU writes them for a
busy thread of the session's process: user registers, a ``--copy`` byte stack copy of
which ``--used`` bytes came (the rest of the record is the kernel's padding), and a
callchain of ``--kernel-frames`` kernel frames and one user one. The candidate is
``Records.handle_ring`` (C for the samples); the reference ``Records.handle`` over
``parse_records`` (Python for all), which was the recorder's path until the
twenty-seventh session. They are checked to make the same samples first.

    .venv/bin/python bench/ring_samples.py [--runs N] [--samples 20] [--json]
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import _benchlib as bl

BENCH = "ring_samples"
REPEAT = 200  # rings read in one timed run


def ring(samples: int, copy: int, used: int, kernel_frames: int) -> bytes:
    from livesym.sampling import perf_abi as abi
    from livesym.sampling.perf_records import REGS

    assert REGS is not None
    pid = os.getpid()
    chain = (abi.PERF_CONTEXT_KERNEL, *(0xFFFFFFFF81000000 + 16 * i for i in range(kernel_frames)),
             abi.PERF_CONTEXT_USER, 0x401000)  # fmt: skip
    body = struct.pack("=QIIQ", 0x401000, pid, pid + 1, 123_456_789)
    body += struct.pack(f"=Q{len(chain)}Q", len(chain), *chain)
    body += struct.pack("=Q", abi.REGS_ABI_64) + struct.pack(f"={REGS.count}Q", *range(REGS.count))
    body += struct.pack("=Q", copy) + b"\x5a" * copy + struct.pack("=Q", used)
    return (struct.pack("=IHH", abi.PERF_RECORD_SAMPLE, 0, 8 + len(body)) + body) * samples


def readers(data: bytes) -> tuple[Callable[[], list[object]], Callable[[], list[object]]]:
    """The candidate and the reference: each reads ``data`` REPEAT times into Samples
    and returns the last ring's."""
    from livesym.sampling import perf_abi as abi
    from livesym.sampling.base import SamplerStats
    from livesym.sampling.perf_event import SAMPLE_TYPE
    from livesym.sampling.perf_records import REGS, Records

    assert REGS is not None
    pid = os.getpid()
    records = Records(pid, lambda: True, SamplerStats(), lambda: True, lambda: True, None)

    # Each ring's samples handed on before the next ring is read, as the sampler
    # delivers them each round (kept, 4,000 copies at once would time malloc instead).
    def in_c() -> list[object]:
        for _ in range(REPEAT):
            records.pending = []
            records.handle_ring(-1, True, data, SAMPLE_TYPE, REGS.count, pid)
        return list(records.pending)

    def in_python() -> list[object]:
        for _ in range(REPEAT):
            records.pending = []
            records.handle(-1, True, abi.parse_records(data, SAMPLE_TYPE, True, REGS.count, pid))
        return list(records.pending)

    return in_c, in_python


def main() -> int:
    p = bl.parser(__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=20, help="records a ring holds (20)")
    p.add_argument("--copy", type=int, default=16384, help="bytes of stack asked (16384)")
    p.add_argument("--used", type=int, default=3000, help="bytes of it that came (3000)")
    p.add_argument("--kernel-frames", type=int, default=8, help="kernel frames (8)")
    args = p.parse_args()
    from livesym.sampling import perf_records

    if perf_records._perfsamples is None or perf_records.REGS is None:
        bl.skip(BENCH, "livesym._perfsamples was not built, or the registers are not known",
                args.json)  # fmt: skip
    data = ring(args.samples, args.copy, args.used, args.kernel_frames)
    in_c, in_python = readers(data)
    made = in_c()
    if made != in_python() or len(made) != args.samples:
        bl.fail(BENCH, "the two paths made different samples", args.json)
    timings = bl.interleaved([("c", in_c), ("python", in_python)], args.runs, args.warmup)
    each = REPEAT * args.samples
    c, py = timings["c"], timings["python"]
    bl.print_result(
        {
            "benchmark": BENCH,
            "samples_per_run": each,
            "c_us_per_sample": round(1e6 * c.median / each, 3),
            "python_us_per_sample": round(1e6 * py.median / each, 3),
            "python_over_c": round(py.median / c.median, 2),
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    bl.run_main(BENCH, main)
