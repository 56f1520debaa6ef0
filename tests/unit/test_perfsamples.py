"""A perf ring's common samples made in C (livesym._perfsamples) are the samples the
Python parser makes of the same bytes, whatever else the ring holds: other records,
other processes' samples, full copies, bodies cut short, bad headers, random bytes."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.sampling import perf_abi as abi
from livesym.sampling import perf_records
from livesym.sampling.base import SamplerStats
from livesym.sampling.perf_event import SAMPLE_TYPE
from livesym.sampling.perf_records import REGS, Records

pytestmark = pytest.mark.skipif(
    perf_records._perfsamples is None or REGS is None,
    reason="livesym._perfsamples was not built (no compiler or Python headers) or this "
    "machine's registers are not known",
)

PID = os.getpid()  # (a full copy's check reads this process's stack extents)
OTHER = PID + 1
U64 = st.integers(0, 2**64 - 1)
CHAIN_ENTRY = st.one_of(U64, st.sampled_from([abi.PERF_CONTEXT_KERNEL, abi.PERF_CONTEXT_USER,
                                             abi.PERF_CONTEXT_HV]))  # fmt: skip


def record(rtype: int, body: bytes) -> bytes:
    return struct.pack("=IHH", rtype, 0, 8 + len(body)) + body


@st.composite
def samples(draw: st.DrawFn) -> bytes:
    assert REGS is not None
    pid = draw(st.sampled_from([PID, PID, PID, OTHER]))
    chain = draw(st.lists(CHAIN_ENTRY, max_size=12))
    body = struct.pack("=QIIQ", draw(U64), pid, draw(st.integers(0, 2**32 - 1)), draw(U64))
    body += struct.pack(f"=Q{len(chain)}Q", len(chain), *chain)
    regs_abi = draw(st.sampled_from([abi.REGS_ABI_64] * 6 + [0, 1]))
    body += struct.pack("=Q", regs_abi)
    if regs_abi:
        body += struct.pack(f"={REGS.count}Q", *draw(st.lists(U64, min_size=REGS.count,
                                                               max_size=REGS.count)))  # fmt: skip
    asked = draw(st.sampled_from([0, 8, 64, 256]))
    body += struct.pack("=Q", asked)
    if asked:
        body += draw(st.binary(min_size=asked, max_size=asked))
        body += struct.pack("=Q", draw(st.integers(0, asked + 16)))  # full where >= asked
    cut = draw(st.one_of(st.none(), st.integers(0, len(body))))
    return record(abi.PERF_RECORD_SAMPLE, body if cut is None else body[:cut])


def mmap2(pid: int) -> bytes:
    body = struct.pack("=IIQQQIIQQII", pid, pid, 0x7F0000, 0x2000, 0x1000, 8, 1, 1234, 0, 5, 2)
    return record(abi.PERF_RECORD_MMAP2, body + b"/lib/x\0\0" + struct.pack("=IIQ", pid, pid, 9))


OTHERS = st.sampled_from([
    mmap2(PID), mmap2(OTHER), record(abi.PERF_RECORD_LOST, struct.pack("=QQ", 1, 3)),
    record(99, b"\0" * 16), record(abi.PERF_RECORD_SAMPLE, b""),
])  # fmt: skip


@st.composite
def rings(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.one_of(samples(), OTHERS), max_size=12))
    tail = draw(st.one_of(st.just(b""), st.binary(max_size=12)))
    return b"".join(parts) + tail


def records(pid: int, kernel: bool) -> Records:
    return Records(pid, lambda: True, SamplerStats(), lambda: kernel, lambda: True, None)


def seen(r: Records) -> tuple[object, ...]:
    return (r.pending, r.stats.lost, r.stats.errors, r.maps_dirty, r.mappings, r.deeper,
            r.throttled, r.fork_seen)  # fmt: skip


def both(data: bytes, pid: int | None, kernel: bool, raisable: bool) -> tuple[Records, Records]:
    """``data`` read through the C path and through the Python parser alone."""
    assert REGS is not None
    quick, parsed = records(PID, kernel), records(PID, kernel)
    quick.handle_ring(3, raisable, data, SAMPLE_TYPE, REGS.count, pid)
    parsed.handle(3, raisable, abi.parse_records(data, SAMPLE_TYPE, True, REGS.count, pid))
    return quick, parsed


@settings(max_examples=400, deadline=None)
@given(rings(), st.sampled_from([PID, None]), st.booleans(), st.booleans())
def test_a_ring_read_in_c_gives_what_the_python_parser_gives(data, pid, kernel, raisable):
    quick, parsed = both(data, pid, kernel, raisable)
    assert seen(quick) == seen(parsed)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([PID, None]))
def test_random_bytes_read_in_c_give_what_the_python_parser_gives(data, pid):
    quick, parsed = both(data, pid, True, True)
    assert seen(quick) == seen(parsed)


def test_the_common_sample_is_made_in_c_and_the_rest_left_to_python():
    assert REGS is not None
    regs = struct.pack(f"={REGS.count}Q", *range(100, 100 + REGS.count))
    chain = (abi.PERF_CONTEXT_KERNEL, 0xFFFF1, 0xFFFF2, abi.PERF_CONTEXT_USER, 0x401000)
    body = struct.pack("=QIIQ", 0x401000, PID, PID + 5, 2_500_000_000)
    body += struct.pack("=Q5Q", 5, *chain) + struct.pack("=Q", abi.REGS_ABI_64) + regs
    body += struct.pack("=Q", 16) + b"s" * 16 + struct.pack("=Q", 8)
    data = record(abi.PERF_RECORD_SAMPLE, body) + mmap2(PID)
    layout = perf_records._quick_layout(SAMPLE_TYPE, REGS.count)
    assert layout is not None
    items, end = perf_records._perfsamples.samples(
        data, *layout, REGS.count, REGS.dwarf_order, REGS.pc, PID, True, True,
        perf_records._USER_REGISTERS, REGS.machine, perf_records._SAMPLE,
        perf_records.ThreadState.RUNNING,
    )  # fmt: skip
    made, left = items
    assert end == len(data) and left == len(data) - len(mmap2(PID))
    assert (made.time, made.pid, made.tid) == (2.5, PID, PID + 5)
    assert made.ips == (100 + REGS.pc,) and made.kernel_ips == (0xFFFF1, 0xFFFF2)
    assert made.user_stack == b"s" * 8 and made.user_stack_complete
    assert made.user_regs.values == tuple(100 + i for i in REGS.dwarf_order)


def test_a_full_copy_inside_the_stack_is_left_to_python_which_raises_the_copy():
    """A full copy that ended inside the main thread's stack: perf_records marks the
    thread deeper (its copies may grow) whichever path read the ring."""
    assert REGS is not None
    with open("/proc/self/maps") as maps:
        top = next(int(line.split("-")[1].split()[0], 16) for line in maps
                   if line.rstrip().endswith("[stack]"))  # fmt: skip
    regs = [0] * REGS.count
    regs[REGS.dwarf_order[REGS.sp]] = top - 65536
    body = struct.pack("=QIIQ", 0x401000, PID, PID, 1) + struct.pack("=Q", 0)
    body += struct.pack("=Q", abi.REGS_ABI_64) + struct.pack(f"={REGS.count}Q", *regs)
    body += struct.pack("=Q", 64) + b"\0" * 64 + struct.pack("=Q", 64)
    quick, parsed = both(record(abi.PERF_RECORD_SAMPLE, body), PID, False, True)
    assert quick.deeper == parsed.deeper == {PID}
    assert seen(quick) == seen(parsed)
