"""The perf_event ABI module: layouts against the kernel's, and record parsing on built buffers.

Expected offsets are those of include/uapi/linux/perf_event.h (checked with
offsetof() against the installed header, which stops at PERF_ATTR_SIZE_VER7;
config3 at 128 is Linux 6.3's VER8). No test here calls the kernel.
"""

from __future__ import annotations

import ctypes
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.sampling import perf_abi as abi
from livesym.sampling.perf_abi import (
    AttrFlag,
    LostRecord,
    LostSamplesRecord,
    Mmap2Record,
    MmapRecord,
    PerfEventAttr,
    PerfEventMmapPage,
    SampleRecord,
    SampleType,
    TaskRecord,
    ThrottleRecord,
    TruncatedRecord,
    UnknownRecord,
    parse_records,
    ring_span,
    user_frames,
)

STD = SampleType.IP | SampleType.TID | SampleType.TIME | SampleType.CALLCHAIN

# --- layouts -------------------------------------------------------------------------


def test_attr_size_is_ver8() -> None:
    assert ctypes.sizeof(PerfEventAttr) == abi.PERF_ATTR_SIZE_VER8 == 136


@pytest.mark.parametrize(
    ("field", "offset"),
    [
        ("type", 0),
        ("size", 4),
        ("config", 8),
        ("sample_period", 16),
        ("sample_freq", 16),
        ("sample_type", 24),
        ("read_format", 32),
        ("flags", 40),
        ("wakeup_events", 48),
        ("wakeup_watermark", 48),
        ("bp_type", 52),
        ("bp_addr", 56),
        ("config1", 56),
        ("bp_len", 64),
        ("config2", 64),
        ("branch_sample_type", 72),
        ("sample_regs_user", 80),
        ("sample_stack_user", 88),
        ("clockid", 92),
        ("sample_regs_intr", 96),
        ("aux_watermark", 104),
        ("sample_max_stack", 108),
        ("aux_sample_size", 112),
        ("aux_action", 116),
        ("sig_data", 120),
        ("config3", 128),
    ],
)
def test_attr_field_offsets(field: str, offset: int) -> None:
    attr = PerfEventAttr()
    setattr(attr, field, 1)
    raw = bytes(attr)
    assert raw.index(1) == offset, field  # little- or big-endian: the first nonzero byte
    assert sum(raw) == 1


def test_attr_versions_end_at_fields() -> None:
    # Each PERF_ATTR_SIZE_VERn ends right after the field it added.
    ends = {
        abi.PERF_ATTR_SIZE_VER0: "bp_type",  # VER0 ends with config1 (bp_addr), 56 + 8
        abi.PERF_ATTR_SIZE_VER1: "bp_len",
        abi.PERF_ATTR_SIZE_VER2: "branch_sample_type",
        abi.PERF_ATTR_SIZE_VER3: "clockid",
        abi.PERF_ATTR_SIZE_VER4: "sample_regs_intr",
        abi.PERF_ATTR_SIZE_VER5: "sample_max_stack",
        abi.PERF_ATTR_SIZE_VER6: "aux_action",
        abi.PERF_ATTR_SIZE_VER7: "sig_data",
        abi.PERF_ATTR_SIZE_VER8: "config3",
    }
    for size, field in ends.items():
        if field == "bp_type":
            assert size == abi.PerfEventAttr._u_config1.offset + 8
            continue
        attr = PerfEventAttr()
        setattr(attr, field, 0xFF)
        raw = bytes(attr)
        last = max(i for i, b in enumerate(raw) if b)
        assert last < size, (size, field)
        assert size - last <= 8, (size, field)


@pytest.mark.parametrize(
    ("flag", "bit"),
    [
        (AttrFlag.DISABLED, 0),
        (AttrFlag.INHERIT, 1),
        (AttrFlag.EXCLUDE_KERNEL, 5),
        (AttrFlag.EXCLUDE_HV, 6),
        (AttrFlag.MMAP, 8),
        (AttrFlag.COMM, 9),
        (AttrFlag.FREQ, 10),
        (AttrFlag.ENABLE_ON_EXEC, 12),
        (AttrFlag.TASK, 13),
        (AttrFlag.WATERMARK, 14),
        (AttrFlag.SAMPLE_ID_ALL, 18),
        (AttrFlag.EXCLUDE_CALLCHAIN_KERNEL, 21),
        (AttrFlag.MMAP2, 23),
        (AttrFlag.USE_CLOCKID, 25),
        (AttrFlag.BUILD_ID, 34),
        (AttrFlag.REMOVE_ON_EXEC, 36),
        (AttrFlag.SIGTRAP, 37),
    ],
)
def test_flag_bits(flag: AttrFlag, bit: int) -> None:
    assert flag == 1 << bit
    attr = PerfEventAttr()
    attr.flags = flag
    assert struct.unpack_from("=Q", bytes(attr), 40)[0] == 1 << bit


def test_flag_bits_are_distinct_and_below_reserved() -> None:
    values = [f.value for f in AttrFlag]
    assert len(set(values)) == len(values) == 38
    assert max(values) == 1 << 37
    assert abi.precise_ip(2) == AttrFlag.PRECISE_IP_1
    assert abi.precise_ip(3) == abi.PRECISE_IP_MASK
    with pytest.raises(ValueError):
        abi.precise_ip(4)


def test_mmap_page_layout() -> None:
    assert ctypes.sizeof(PerfEventMmapPage) == 1088
    assert abi.DATA_HEAD_OFFSET == 1024
    assert abi.DATA_TAIL_OFFSET == 1032
    assert abi.DATA_OFFSET_OFFSET == 1040
    assert abi.DATA_SIZE_OFFSET == 1048
    assert PerfEventMmapPage.pmc_width.offset == 48
    assert PerfEventMmapPage.time_cycles.offset == 80
    assert PerfEventMmapPage.aux_size.offset == 1080


def test_header_and_constants() -> None:
    assert ctypes.sizeof(abi.PerfEventHeader) == abi.HEADER_SIZE == 8
    assert abi.PerfEventHeader.size.offset == 6
    assert abi.PERF_CONTEXT_USER == 2**64 - 512
    assert abi.PERF_CONTEXT_KERNEL == 2**64 - 128
    assert abi.PERF_CONTEXT_MAX == 2**64 - 4095
    assert abi.PERF_RECORD_SAMPLE == 9
    assert abi.PERF_RECORD_MMAP2 == 10
    assert abi.PERF_SAMPLE_CALLCHAIN == 32
    assert abi.PERF_TYPE_SOFTWARE == 1
    assert abi.PERF_COUNT_SW_CPU_CLOCK == 0


@pytest.mark.parametrize(
    ("machine", "bits", "number"),
    [
        ("x86_64", 64, 298),
        ("x86_64", 32, 336),  # 32-bit Python on a 64-bit kernel
        ("i686", 32, 336),
        ("aarch64", 64, 241),
        ("aarch64", 32, 364),
        ("armv7l", 32, 364),
        ("riscv64", 64, 241),
        ("s390x", 64, 331),
        ("ppc64le", 64, 319),
        ("ppc64", 64, 319),
    ],
)
def test_syscall_numbers(machine: str, bits: int, number: int) -> None:
    assert abi.syscall_number(machine, bits) == number


def test_unknown_machine_is_one_clear_line() -> None:
    with pytest.raises(abi.UnsupportedMachine) as info:
        abi.syscall_number("vax", 32)
    message = str(info.value.strerror)
    assert "'vax'" in message and "--sampler ptrace" in message and "\n" not in message


def test_ioctl_numbers() -> None:
    assert abi.ioctl_request("ENABLE", "x86_64") == 0x2400
    assert abi.ioctl_request("DISABLE", "aarch64") == 0x2401
    assert abi.ioctl_request("SET_OUTPUT", "x86_64") == 0x2405
    assert abi.ioctl_request("ENABLE", "ppc64le") == 0x20002400  # _IOC_NONE is 1 there


# --- record builders -----------------------------------------------------------------


def record(rtype: int, body: bytes, misc: int = 0, size: int | None = None) -> bytes:
    return struct.pack("=IHH", rtype, misc, size if size is not None else 8 + len(body)) + body


def sample(
    ip: int, pid: int, tid: int, time: int, chain: tuple[int, ...], sample_type: int = STD
) -> bytes:
    body = b""
    if sample_type & SampleType.IDENTIFIER:
        body += struct.pack("=Q", 77)
    if sample_type & SampleType.IP:
        body += struct.pack("=Q", ip)
    if sample_type & SampleType.TID:
        body += struct.pack("=II", pid, tid)
    if sample_type & SampleType.TIME:
        body += struct.pack("=Q", time)
    if sample_type & SampleType.CPU:
        body += struct.pack("=II", 1, 0)
    if sample_type & SampleType.PERIOD:
        body += struct.pack("=Q", 5_000_000)
    if sample_type & SampleType.READ:
        body += struct.pack("=QQQ", 7, 2_000_000_000, 500_000_000)
    if sample_type & SampleType.CALLCHAIN:
        body += struct.pack(f"=Q{len(chain)}Q", len(chain), *chain)
    return record(abi.PERF_RECORD_SAMPLE, body, misc=abi.PERF_RECORD_MISC_USER)


def mmap2(name: bytes) -> bytes:
    body = struct.pack("=IIQQQIIQQII", 10, 11, 0x7F0000, 0x2000, 0x1000, 8, 1, 1234, 0, 5, 2)
    name += b"\0" * (8 - len(name) % 8)
    return record(abi.PERF_RECORD_MMAP2, body + name)


USER = abi.PERF_CONTEXT_USER
KERNEL = abi.PERF_CONTEXT_KERNEL

# --- parsing ---------------------------------------------------------------------------


def test_sample_with_user_callchain() -> None:
    buf = sample(0x1000, 10, 11, 123_456_789, (USER, 0x1000, 0x2000, 0x3000))
    (rec,) = parse_records(buf, STD)
    assert rec == SampleRecord(
        0x1000, 10, 11, 123_456_789, (USER, 0x1000, 0x2000, 0x3000), abi.PERF_RECORD_MISC_USER
    )
    assert isinstance(rec, SampleRecord)
    assert user_frames(rec.callchain) == [0x1000, 0x2000, 0x3000]


def test_user_frames_drops_kernel_context_and_markers() -> None:
    chain = (KERNEL, 0xFFFFFFFF81000000, 0xFFFFFFFF81000010, USER, 0x400000, 0x400100)
    assert user_frames(chain) == [0x400000, 0x400100]
    assert user_frames((0x1, 0x2)) == [0x1, 0x2]  # no marker at all: taken as user
    assert user_frames((USER,)) == []
    assert user_frames(()) == []


def test_kernel_frames_are_those_after_the_kernel_marker_only() -> None:
    chain = (KERNEL, 0xFFFFFFFF81000000, 0xFFFFFFFF81000010, USER, 0x400000, 0x400100)
    assert abi.kernel_frames(chain) == [0xFFFFFFFF81000000, 0xFFFFFFFF81000010]
    assert abi.kernel_frames((0x1, 0x2)) == []  # no marker: user frames, no kernel ones
    assert abi.kernel_frames((KERNEL,)) == []
    # A kernel-only chain (user callchain excluded) and another context's marker ending it
    hv = abi.PERF_CONTEXT_HV
    assert abi.kernel_frames((KERNEL, 0xFFFFFFFF81000000, hv, 0x5)) == [0xFFFFFFFF81000000]


def test_sample_fields_are_laid_out_by_sample_type() -> None:
    stype = (
        SampleType.IDENTIFIER
        | SampleType.IP
        | SampleType.TID
        | SampleType.TIME
        | SampleType.CPU
        | SampleType.PERIOD
        | SampleType.CALLCHAIN
    )
    (rec,) = parse_records(sample(0xAB, 1, 2, 3, (USER, 0xAB), stype), stype)
    assert isinstance(rec, SampleRecord)
    assert (rec.ip, rec.pid, rec.tid, rec.time, rec.callchain) == (0xAB, 1, 2, 3, (USER, 0xAB))


def test_sample_without_tid_or_callchain() -> None:
    stype = SampleType.IP | SampleType.TIME
    (rec,) = parse_records(sample(0xAB, 0, 0, 9, (), stype), stype)
    assert rec == SampleRecord(0xAB, None, None, 9, (), abi.PERF_RECORD_MISC_USER)


@pytest.mark.parametrize("field", [SampleType.RAW, SampleType.BRANCH_STACK])
def test_fields_whose_layout_the_parser_is_not_given_are_refused(field) -> None:
    # RAW and BRANCH_STACK would come before the user registers and stack.
    with pytest.raises(ValueError, match="not supported"):
        list(parse_records(b"", STD | field))


def test_a_read_value_between_the_period_and_the_callchain_is_parsed() -> None:
    # The off-CPU events' samples carry (value, time enabled, time running), in
    # READ_FORMAT's layout, after the period and before the callchain.
    stype = STD | SampleType.PERIOD | SampleType.READ
    (rec,) = parse_records(sample(0xAB, 1, 2, 3, (USER, 0xAB), stype), stype)
    assert isinstance(rec, SampleRecord)
    assert rec.read == (7, 2_000_000_000, 500_000_000)
    assert rec.callchain == (USER, 0xAB)
    (plain,) = parse_records(sample(0xAB, 1, 2, 3, (), STD), STD)
    assert isinstance(plain, SampleRecord) and plain.read is None


def test_other_record_types() -> None:
    buf = b"".join(
        [
            record(abi.PERF_RECORD_LOST, struct.pack("=QQ", 5, 17)),
            record(abi.PERF_RECORD_LOST_SAMPLES, struct.pack("=Q", 3)),
            mmap2(b"/usr/lib/libc.so.6"),
            record(
                abi.PERF_RECORD_MMAP,
                struct.pack("=IIQQQ", 1, 2, 0x1000, 0x10, 0) + b"/a\0\0\0\0\0\0",
            ),
            record(abi.PERF_RECORD_THROTTLE, struct.pack("=QQQ", 100, 1, 2)),
            record(abi.PERF_RECORD_UNTHROTTLE, struct.pack("=QQQ", 200, 1, 2)),
            record(abi.PERF_RECORD_FORK, struct.pack("=IIIIQ", 10, 1, 12, 10, 300)),
            record(abi.PERF_RECORD_EXIT, struct.pack("=IIIIQ", 10, 1, 12, 12, 400)),
            record(abi.PERF_RECORD_COMM, struct.pack("=II", 10, 12) + b"alpha\0\0\0"),
        ]
    )
    records = list(parse_records(buf, STD))
    assert records[0] == LostRecord(5, 17)
    assert records[1] == LostSamplesRecord(3)
    assert records[2] == Mmap2Record(
        10, 11, 0x7F0000, 0x2000, 0x1000, 8, 1, 1234, 0, 5, 2, "/usr/lib/libc.so.6"
    )
    assert records[3] == MmapRecord(1, 2, 0x1000, 0x10, 0, "/a")
    assert records[4] == ThrottleRecord(True, 100, 1, 2)
    assert records[5] == ThrottleRecord(False, 200, 1, 2)
    assert records[6] == TaskRecord(False, 10, 1, 12, 10, 300)
    assert records[7] == TaskRecord(True, 10, 1, 12, 12, 400)
    assert records[8] == UnknownRecord(abi.PERF_RECORD_COMM, 0, 24)
    assert len(records) == 9


def test_mmap2_with_build_id() -> None:
    body = struct.pack("=IIQQQ", 1, 2, 0x1000, 0x10, 0)
    body += bytes([20, 0, 0, 0]) + bytes(range(20)) + struct.pack("=II", 5, 2) + b"/b\0\0\0\0\0\0"
    (rec,) = parse_records(
        record(abi.PERF_RECORD_MMAP2, body, abi.PERF_RECORD_MISC_MMAP_BUILD_ID), 0
    )
    assert isinstance(rec, Mmap2Record)
    assert rec.build_id == bytes(range(20)) and rec.filename == "/b" and rec.prot == 5


@pytest.mark.parametrize(
    "sample_type", [STD, STD | SampleType.IDENTIFIER | SampleType.CPU, SampleType.TIME]
)
def test_mmap_records_take_their_time_from_the_sample_id_trailer(sample_type: int) -> None:
    trailer = b""
    if sample_type & SampleType.TID:
        trailer += struct.pack("=II", 10, 11)
    trailer += struct.pack("=Q", 123_456_789)  # TIME
    if sample_type & SampleType.CPU:
        trailer += struct.pack("=II", 1, 0)
    if sample_type & SampleType.IDENTIFIER:
        trailer += struct.pack("=Q", 77)
    body = struct.pack("=IIQQQIIQQII", 10, 11, 0x7F0000, 0x2000, 0x1000, 8, 1, 1234, 0, 5, 2)
    name = b"/lib/libchurn_a.so\0"
    name += b"\0" * (-len(name) % 8)
    old = struct.pack("=IIQQQ", 10, 11, 0x7F0000, 0x2000, 0) + name
    stream = record(abi.PERF_RECORD_MMAP2, body + name + trailer) + record(
        abi.PERF_RECORD_MMAP, old + trailer
    )
    new, classic = parse_records(stream, sample_type, sample_id_all=True)
    assert isinstance(new, abi.Mmap2Record) and isinstance(classic, abi.MmapRecord)
    assert new.time == classic.time == 123_456_789
    assert new.filename == classic.filename == "/lib/libchurn_a.so"
    assert (new.addr, new.len, new.ino) == (0x7F0000, 0x2000, 1234)
    # Without sample_id_all the same bytes have no trailer to read.
    assert next(iter(parse_records(stream, sample_type))).time is None  # type: ignore[union-attr]


def test_name_without_nul_ends_at_record_end() -> None:
    body = struct.pack("=IIQQQ", 1, 2, 0x1000, 0x10, 0) + b"/no-nul!"
    (rec,) = parse_records(record(abi.PERF_RECORD_MMAP, body), 0)
    assert isinstance(rec, MmapRecord) and rec.filename == "/no-nul!"


# --- hostile and truncated buffers ---------------------------------------------------------


def test_zero_size_header_stops_parsing() -> None:
    good = sample(1, 2, 3, 4, (USER, 1))
    buf = good + record(abi.PERF_RECORD_SAMPLE, b"", size=0) + good
    records = list(parse_records(buf, STD))
    assert isinstance(records[0], SampleRecord)
    assert records[1] == TruncatedRecord(len(good), 0, len(buf) - len(good))
    assert len(records) == 2


def test_size_below_header_stops_parsing() -> None:
    (rec,) = parse_records(record(abi.PERF_RECORD_LOST, b"", size=7) + b"x" * 16, STD)
    assert rec == TruncatedRecord(0, 7, 24)


def test_size_past_end_stops_parsing() -> None:
    good = sample(1, 2, 3, 4, (USER, 1))
    cut = good + good[:-8]
    records = list(parse_records(cut, STD))
    assert isinstance(records[0], SampleRecord)
    assert records[1] == TruncatedRecord(len(good), len(good), len(good) - 8)


def test_partial_header_at_end() -> None:
    good = sample(1, 2, 3, 4, (USER, 1))
    records = list(parse_records(good + b"\x09\x00\x00", STD))
    assert records[1] == TruncatedRecord(len(good), 0, 3)


def test_body_shorter_than_fields_is_skipped_not_fatal() -> None:
    short = record(abi.PERF_RECORD_SAMPLE, struct.pack("=Q", 0x1000))  # ip only, STD wants more
    lost = record(abi.PERF_RECORD_LOST, b"\x01")  # body of 1 byte: needs 16
    after = record(abi.PERF_RECORD_LOST, struct.pack("=QQ", 1, 2))
    records = list(parse_records(short + lost + after, STD))
    assert [type(r) for r in records] == [UnknownRecord, UnknownRecord, LostRecord]
    assert isinstance(records[0], UnknownRecord) and records[0].problem


def test_hostile_callchain_length() -> None:
    body = struct.pack("=QIIQQ", 1, 2, 3, 4, 2**63) + struct.pack("=Q", USER)
    (rec,) = parse_records(record(abi.PERF_RECORD_SAMPLE, body), STD)
    assert isinstance(rec, UnknownRecord) and rec.type == abi.PERF_RECORD_SAMPLE


def test_empty_buffer() -> None:
    assert list(parse_records(b"", STD)) == []


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512), st.sampled_from([0, STD, STD | SampleType.IDENTIFIER]))
def test_random_bytes_never_raise(data: bytes, stype: int) -> None:
    records = list(parse_records(data, stype))
    assert len(records) <= len(data) // 8 + 1  # every record but a last truncated one takes 8+


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_valid_stream_never_raises(data: st.DataObject) -> None:
    stream = bytearray(
        sample(1, 2, 3, 4, (USER, 1, 2, 3)) + mmap2(b"/lib/x.so") + sample(5, 6, 7, 8, (USER, 5))
    )
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(stream) - 1))
        stream[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(stream)))
    for _rec in parse_records(bytes(stream[:cut]), STD):
        pass


# --- the ring ---------------------------------------------------------------------------------


def make_ring(data_offset: int, size: int, tail: int, payload: bytes) -> bytearray:
    """A mapping whose data area holds ``payload`` written from position ``tail``."""
    buf = bytearray(data_offset + size)
    for i, byte in enumerate(payload):
        buf[data_offset + (tail + i) % size] = byte
    return buf


def test_ring_span_without_wrap_is_a_view_of_the_ring_not_a_copy() -> None:
    buf = make_ring(64, 256, 8, b"abcdef")
    span = ring_span(buf, 64, 256, 8, 14)
    assert span == b"abcdef"
    buf[64 + 8] = ord("z")  # the ring's bytes, not a copy of them
    assert isinstance(span, memoryview) and bytes(span) == b"zbcdef"


def test_ring_span_wraps_into_one_contiguous_span() -> None:
    payload = bytes(range(100))
    tail = 256 * 1000 + 200  # free-running positions: far beyond the ring size
    buf = make_ring(64, 256, tail, payload)
    assert ring_span(buf, 64, 256, tail, tail + 100) == payload


def test_record_split_by_the_wrap_parses() -> None:
    records = sample(0x1000, 1, 2, 3, (USER, 0x1000, 0x2000)) + mmap2(b"/lib/libm.so.6")
    size = 256
    tail = 5 * size - 20  # the first record straddles the end of the data area
    buf = make_ring(4096, size, tail, records)
    copied = ring_span(buf, 4096, size, tail, tail + len(records))
    parsed = list(parse_records(copied, STD))
    assert [type(r) for r in parsed] == [SampleRecord, Mmap2Record]
    assert isinstance(parsed[0], SampleRecord) and parsed[0].callchain == (USER, 0x1000, 0x2000)


def test_ring_span_across_u64_wrap_of_positions() -> None:
    tail = 2**64 - 10
    buf = make_ring(0, 64, tail, bytes(range(30)))
    assert ring_span(buf, 0, 64, tail, 20) == bytes(range(30))


def test_ring_span_full_ring_and_empty() -> None:
    buf = make_ring(0, 64, 32, bytes(range(64)))
    assert ring_span(buf, 0, 64, 32, 96) == bytes(range(64))
    assert ring_span(buf, 0, 64, 32, 32) == b""


@pytest.mark.parametrize(
    ("tail", "head"),
    [(10, 5), (0, 65), (2**64 - 1, 100)],
)
def test_ring_span_rejects_impossible_positions(tail: int, head: int) -> None:
    with pytest.raises(ValueError):
        ring_span(bytearray(64), 0, 64, tail, head)


def test_ring_span_rejects_area_outside_mapping() -> None:
    with pytest.raises(ValueError):
        ring_span(bytearray(100), 64, 64, 0, 8)


# --- user registers and stack (what the engine unwinds from) ----------------------------------

USER_STACK = STD | SampleType.REGS_USER | SampleType.STACK_USER


def user_sample(regs: tuple[int, ...], stack: bytes, asked: int, dyn: int | None = None) -> bytes:
    """A sample record with REGS_USER (ABI 64) and STACK_USER after the callchain."""
    body = struct.pack("=QIIQ", 0x1000, 10, 11, 5)  # ip, pid/tid, time
    body += struct.pack("=QQ", 1, 0x1000)  # a callchain of one
    body += struct.pack(f"=Q{len(regs)}Q", abi.REGS_ABI_64, *regs)
    # A hostile size is written as it is, with only the bytes there are behind it.
    body += struct.pack("=Q", asked) + stack.ljust(asked if asked < 1 << 20 else 0, b"\0")
    if asked:
        body += struct.pack("=Q", len(stack) if dyn is None else dyn)
    return record(abi.PERF_RECORD_SAMPLE, body)


def test_user_registers_and_the_stack_copy_are_read_after_the_callchain() -> None:
    regs = tuple(range(100, 117))
    (rec,) = parse_records(user_sample(regs, b"\x11" * 24, 64), USER_STACK, False, 17)
    assert isinstance(rec, SampleRecord)
    assert rec.callchain == (0x1000,) and rec.regs_abi == abi.REGS_ABI_64
    assert rec.regs == regs
    assert rec.stack == b"\x11" * 24 and rec.stack_asked == 64  # dyn_size: 24 were there


def test_x86_64_registers_come_out_in_dwarf_numbering() -> None:
    layout = abi.user_regs_layout("x86_64")
    assert layout is not None and layout.count == 17 and layout.machine == "EM_X86_64"
    # perf's order: AX BX CX DX SI DI BP SP IP R8..R15
    perf = ("ax", "bx", "cx", "dx", "si", "di", "bp", "sp", "ip", *(f"r{i}" for i in range(8, 16)))
    dwarf = [perf[i] for i in layout.dwarf_order]
    assert dwarf == ["ax", "dx", "cx", "bx", "si", "di", "bp", "sp",
                     *(f"r{i}" for i in range(8, 16)), "ip"]  # fmt: skip


def test_hostile_stack_and_register_sizes_cost_the_record_not_the_reader() -> None:
    regs = tuple(range(17))
    bad = [
        user_sample(regs, b"", 1 << 40),  # a stack larger than the record
        user_sample(regs, b"x" * 16, 16)[:-12],  # cut inside the stack
    ]
    for buf in bad:
        (rec,) = parse_records(buf, USER_STACK, False, 17)
        assert not isinstance(rec, SampleRecord)
    # More registers promised than the record holds
    (rec,) = parse_records(user_sample(regs, b"", 0), USER_STACK, False, 400)
    assert not isinstance(rec, SampleRecord)
    # dyn_size beyond what was asked is clamped to what is there
    (rec,) = parse_records(user_sample(regs, b"y" * 8, 8, dyn=1 << 30), USER_STACK, False, 17)
    assert isinstance(rec, SampleRecord) and rec.stack == b"y" * 8


def test_with_a_pid_other_processes_mappings_are_skipped_and_its_own_kept() -> None:
    # An event per CPU sees every process's mmaps; the session wants its target's.
    def mapping(pid: int, kind: int) -> bytes:
        if kind == abi.PERF_RECORD_MMAP2:
            body = struct.pack("=IIQQQIIQQII", pid, pid, 0x7F0000, 0x2000, 0x1000, 8, 1, 1234,
                               0, 5, 2)  # fmt: skip
        else:
            body = struct.pack("=IIQQQ", pid, pid, 0x7F0000, 0x2000, 0)
        return record(kind, body + b"/lib/x.so\0\0\0\0\0\0\0")

    stream = b"".join(
        mapping(pid, kind)
        for pid in (10, 99, 10)
        for kind in (abi.PERF_RECORD_MMAP2, abi.PERF_RECORD_MMAP)
    )
    mine = list(parse_records(stream, 0, pid=10))
    assert [r.pid for r in mine] == [10, 10, 10, 10]  # type: ignore[union-attr]
    assert [type(r) for r in mine] == [abi.Mmap2Record, MmapRecord] * 2
    assert len(list(parse_records(stream, 0))) == 6  # without a pid: everyone's
