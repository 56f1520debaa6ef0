"""The Linux perf_event ABI in ctypes: structures, constants, the syscall and record parsing.

Everything here mirrors ``include/uapi/linux/perf_event.h``; nothing here knows
about livesym's samplers. Layouts are checked against the kernel's offsets in
``tests/unit/test_perf_abi.py``. Records are parsed in native byte order (the
ring buffer is written by the running kernel, so it is always native).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import functools
import os
import platform
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from livesym.frozen import maker

# --- struct perf_event_attr -------------------------------------------------

PERF_ATTR_SIZE_VER0 = 64  # first published struct
PERF_ATTR_SIZE_VER1 = 72  # + config2
PERF_ATTR_SIZE_VER2 = 80  # + branch_sample_type
PERF_ATTR_SIZE_VER3 = 96  # + sample_regs_user, sample_stack_user
PERF_ATTR_SIZE_VER4 = 104  # + sample_regs_intr
PERF_ATTR_SIZE_VER5 = 112  # + aux_watermark
PERF_ATTR_SIZE_VER6 = 120  # + aux_sample_size
PERF_ATTR_SIZE_VER7 = 128  # + sig_data
PERF_ATTR_SIZE_VER8 = 136  # + config3 (Linux 6.3)


class AttrFlag(IntFlag):
    """The bits of the u64 bitfield word at offset 40 of perf_event_attr.

    The kernel declares them as C bitfields of one u64; on every Linux ABI the
    first-declared field is bit 0 of that word in native byte order, which is
    what an integer stored with the native "Q" format gives.
    """

    DISABLED = 1 << 0  # off by default; enable with PERF_EVENT_IOC_ENABLE
    INHERIT = 1 << 1  # children inherit it
    PINNED = 1 << 2
    EXCLUSIVE = 1 << 3
    EXCLUDE_USER = 1 << 4
    EXCLUDE_KERNEL = 1 << 5
    EXCLUDE_HV = 1 << 6
    EXCLUDE_IDLE = 1 << 7
    MMAP = 1 << 8  # PERF_RECORD_MMAP for executable mappings
    COMM = 1 << 9
    FREQ = 1 << 10  # sample_freq, not sample_period
    INHERIT_STAT = 1 << 11
    ENABLE_ON_EXEC = 1 << 12
    TASK = 1 << 13  # PERF_RECORD_FORK / PERF_RECORD_EXIT
    WATERMARK = 1 << 14  # wake up on wakeup_watermark bytes, not wakeup_events
    PRECISE_IP_0 = 1 << 15  # precise_ip is a 2-bit field: use precise_ip()
    PRECISE_IP_1 = 1 << 16
    MMAP_DATA = 1 << 17
    SAMPLE_ID_ALL = 1 << 18
    EXCLUDE_HOST = 1 << 19
    EXCLUDE_GUEST = 1 << 20
    EXCLUDE_CALLCHAIN_KERNEL = 1 << 21
    EXCLUDE_CALLCHAIN_USER = 1 << 22
    MMAP2 = 1 << 23  # PERF_RECORD_MMAP2 (with device, inode, prot) instead of MMAP
    COMM_EXEC = 1 << 24
    USE_CLOCKID = 1 << 25  # time fields use attr.clockid
    CONTEXT_SWITCH = 1 << 26
    WRITE_BACKWARD = 1 << 27
    NAMESPACES = 1 << 28
    KSYMBOL = 1 << 29
    BPF_EVENT = 1 << 30
    AUX_OUTPUT = 1 << 31
    CGROUP = 1 << 32
    TEXT_POKE = 1 << 33
    BUILD_ID = 1 << 34
    INHERIT_THREAD = 1 << 35
    REMOVE_ON_EXEC = 1 << 36
    SIGTRAP = 1 << 37
    # Bits 38..63 are __reserved_1 and must be zero.


PRECISE_IP_SHIFT = 15
PRECISE_IP_MASK = 3 << PRECISE_IP_SHIFT


def precise_ip(level: int) -> int:
    """The flags bits for precise_ip = ``level`` (0..3; skid constraint of hardware events)."""
    if not 0 <= level <= 3:
        raise ValueError(f"precise_ip must be 0..3, not {level}")
    return level << PRECISE_IP_SHIFT


# PERF_FORMAT_*: what a read (and PERF_SAMPLE_READ) returns. The parser knows one
# layout, READ_FORMAT's: the value, then the time the event was enabled and the time
# it ran (for a thread's event: the thread's time on a CPU), three u64s.
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
READ_FORMAT = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
READ_SIZE = 24


class _PeriodOrFreq(ctypes.Union):
    _fields_ = (("sample_period", ctypes.c_uint64), ("sample_freq", ctypes.c_uint64))


class _WakeupUnion(ctypes.Union):
    _fields_ = (("wakeup_events", ctypes.c_uint32), ("wakeup_watermark", ctypes.c_uint32))


class _Config1Union(ctypes.Union):
    _fields_ = (
        ("bp_addr", ctypes.c_uint64),
        ("kprobe_func", ctypes.c_uint64),
        ("uprobe_path", ctypes.c_uint64),
        ("config1", ctypes.c_uint64),
    )


class _Config2Union(ctypes.Union):
    _fields_ = (
        ("bp_len", ctypes.c_uint64),
        ("kprobe_addr", ctypes.c_uint64),
        ("probe_offset", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
    )


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to PERF_ATTR_SIZE_VER8 (136 bytes).

    ``flags`` is the bitfield word (build it from ``AttrFlag``); the kernel's
    anonymous unions are reachable by any of their member names.
    """

    _anonymous_ = ("_u_period", "_u_wakeup", "_u_config1", "_u_config2")
    _fields_ = (
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("_u_period", _PeriodOrFreq),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("_u_wakeup", _WakeupUnion),
        ("bp_type", ctypes.c_uint32),
        ("_u_config1", _Config1Union),
        ("_u_config2", _Config2Union),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("_reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        ("aux_action", ctypes.c_uint32),  # __reserved_3 before Linux 6.13
        ("sig_data", ctypes.c_uint64),
        ("config3", ctypes.c_uint64),
    )


# --- struct perf_event_mmap_page ---------------------------------------------


class PerfEventMmapPage(ctypes.Structure):
    """The first page of an event's mmap: a header, then (at 1024) the ring positions.

    Used for its layout (offsets of data_head/data_tail/...), never overlaid on
    the live mapping: the ring protocol reads those words one at a time.
    """

    _fields_ = (
        ("version", ctypes.c_uint32),
        ("compat_version", ctypes.c_uint32),
        ("lock", ctypes.c_uint32),
        ("index", ctypes.c_uint32),
        ("offset", ctypes.c_int64),
        ("time_enabled", ctypes.c_uint64),
        ("time_running", ctypes.c_uint64),
        ("capabilities", ctypes.c_uint64),
        ("pmc_width", ctypes.c_uint16),
        ("time_shift", ctypes.c_uint16),
        ("time_mult", ctypes.c_uint32),
        ("time_offset", ctypes.c_uint64),
        ("time_zero", ctypes.c_uint64),
        ("size", ctypes.c_uint32),
        ("_reserved_1", ctypes.c_uint32),
        ("time_cycles", ctypes.c_uint64),
        ("time_mask", ctypes.c_uint64),
        ("_reserved", ctypes.c_uint8 * (116 * 8)),
        ("data_head", ctypes.c_uint64),  # written by the kernel
        ("data_tail", ctypes.c_uint64),  # written by us: what we have consumed
        ("data_offset", ctypes.c_uint64),  # where the data area starts (Linux 4.1+)
        ("data_size", ctypes.c_uint64),
        ("aux_head", ctypes.c_uint64),
        ("aux_tail", ctypes.c_uint64),
        ("aux_offset", ctypes.c_uint64),
        ("aux_size", ctypes.c_uint64),
    )


DATA_HEAD_OFFSET: int = PerfEventMmapPage.data_head.offset
DATA_TAIL_OFFSET: int = PerfEventMmapPage.data_tail.offset
DATA_OFFSET_OFFSET: int = PerfEventMmapPage.data_offset.offset
DATA_SIZE_OFFSET: int = PerfEventMmapPage.data_size.offset


class PerfEventHeader(ctypes.Structure):
    """struct perf_event_header: every record in the ring starts with one."""

    _fields_ = (("type", ctypes.c_uint32), ("misc", ctypes.c_uint16), ("size", ctypes.c_uint16))


HEADER_SIZE = ctypes.sizeof(PerfEventHeader)

# --- constants -------------------------------------------------------------------


class PerfType(IntEnum):
    HARDWARE = 0
    SOFTWARE = 1
    TRACEPOINT = 2
    HW_CACHE = 3
    RAW = 4
    BREAKPOINT = 5


PERF_TYPE_HARDWARE = PerfType.HARDWARE
PERF_TYPE_SOFTWARE = PerfType.SOFTWARE


class PerfSwId(IntEnum):
    CPU_CLOCK = 0
    TASK_CLOCK = 1
    PAGE_FAULTS = 2
    CONTEXT_SWITCHES = 3
    CPU_MIGRATIONS = 4
    PAGE_FAULTS_MIN = 5
    PAGE_FAULTS_MAJ = 6
    ALIGNMENT_FAULTS = 7
    EMULATION_FAULTS = 8
    DUMMY = 9
    BPF_OUTPUT = 10
    CGROUP_SWITCHES = 11


PERF_COUNT_SW_CPU_CLOCK = PerfSwId.CPU_CLOCK
PERF_COUNT_SW_TASK_CLOCK = PerfSwId.TASK_CLOCK
PERF_COUNT_SW_CONTEXT_SWITCHES = PerfSwId.CONTEXT_SWITCHES


# PERF_SAMPLE_REGS_ABI_*: which registers a sample's REGS_USER holds.
REGS_ABI_NONE = 0  # none (a kernel thread)
REGS_ABI_32 = 1
REGS_ABI_64 = 2


class SampleType(IntFlag):
    """PERF_SAMPLE_*: what a PERF_RECORD_SAMPLE carries, in this order."""

    IP = 1 << 0
    TID = 1 << 1
    TIME = 1 << 2
    ADDR = 1 << 3
    READ = 1 << 4
    CALLCHAIN = 1 << 5
    ID = 1 << 6
    CPU = 1 << 7
    PERIOD = 1 << 8
    STREAM_ID = 1 << 9
    RAW = 1 << 10
    BRANCH_STACK = 1 << 11
    REGS_USER = 1 << 12
    STACK_USER = 1 << 13
    WEIGHT = 1 << 14
    DATA_SRC = 1 << 15
    IDENTIFIER = 1 << 16
    TRANSACTION = 1 << 17
    REGS_INTR = 1 << 18
    PHYS_ADDR = 1 << 19
    AUX = 1 << 20
    CGROUP = 1 << 21
    DATA_PAGE_SIZE = 1 << 22
    CODE_PAGE_SIZE = 1 << 23
    WEIGHT_STRUCT = 1 << 24


PERF_SAMPLE_IP = SampleType.IP
PERF_SAMPLE_TID = SampleType.TID
PERF_SAMPLE_TIME = SampleType.TIME
PERF_SAMPLE_ADDR = SampleType.ADDR
PERF_SAMPLE_READ = SampleType.READ
PERF_SAMPLE_CALLCHAIN = SampleType.CALLCHAIN
PERF_SAMPLE_ID = SampleType.ID
PERF_SAMPLE_CPU = SampleType.CPU
PERF_SAMPLE_PERIOD = SampleType.PERIOD
PERF_SAMPLE_STREAM_ID = SampleType.STREAM_ID
PERF_SAMPLE_IDENTIFIER = SampleType.IDENTIFIER


class RecordType(IntEnum):
    """PERF_RECORD_*: the ``type`` of a perf_event_header."""

    MMAP = 1
    LOST = 2
    COMM = 3
    EXIT = 4
    THROTTLE = 5
    UNTHROTTLE = 6
    FORK = 7
    READ = 8
    SAMPLE = 9
    MMAP2 = 10
    AUX = 11
    ITRACE_START = 12
    LOST_SAMPLES = 13
    SWITCH = 14
    SWITCH_CPU_WIDE = 15
    NAMESPACES = 16
    KSYMBOL = 17
    BPF_EVENT = 18
    CGROUP = 19
    TEXT_POKE = 20
    AUX_OUTPUT_HW_ID = 21


PERF_RECORD_MMAP = RecordType.MMAP
PERF_RECORD_LOST = RecordType.LOST
PERF_RECORD_COMM = RecordType.COMM
PERF_RECORD_EXIT = RecordType.EXIT
PERF_RECORD_THROTTLE = RecordType.THROTTLE
PERF_RECORD_UNTHROTTLE = RecordType.UNTHROTTLE
PERF_RECORD_FORK = RecordType.FORK
PERF_RECORD_SAMPLE = RecordType.SAMPLE
PERF_RECORD_MMAP2 = RecordType.MMAP2
PERF_RECORD_LOST_SAMPLES = RecordType.LOST_SAMPLES

PERF_RECORD_MISC_CPUMODE_MASK = 7
PERF_RECORD_MISC_KERNEL = 1
PERF_RECORD_MISC_USER = 2
PERF_RECORD_MISC_MMAP_DATA = 1 << 13
PERF_RECORD_MISC_MMAP_BUILD_ID = 1 << 14

# Callchain entries at or above PERF_CONTEXT_MAX are not addresses but markers
# saying which context the following entries belong to.
_U64 = 1 << 64
PERF_CONTEXT_HV = _U64 - 32
PERF_CONTEXT_KERNEL = _U64 - 128
PERF_CONTEXT_USER = _U64 - 512
PERF_CONTEXT_GUEST = _U64 - 2048
PERF_CONTEXT_GUEST_KERNEL = _U64 - 2176
PERF_CONTEXT_GUEST_USER = _U64 - 2560
PERF_CONTEXT_MAX = _U64 - 4095

# perf_event_open(2) flags argument.
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

PERF_IOC_FLAG_GROUP = 1 << 0

# Not in perf_event.h but needed beside it: the clock for attr.clockid.
CLOCK_MONOTONIC = 1

# --- the syscall -------------------------------------------------------------------

# __NR_perf_event_open by machine (uname -m), for the native (pointer-sized) ABI.
# Checked against arch/*/include/uapi/asm/unistd*.h and asm-generic/unistd.h.
_SYSCALL_64: dict[str, int] = {
    "x86_64": 298,
    "amd64": 298,
    "aarch64": 241,  # asm-generic table
    "arm64": 241,
    "riscv64": 241,
    "loongarch64": 241,
    "s390x": 331,
    "ppc64": 319,
    "ppc64le": 319,
}
_SYSCALL_32: dict[str, int] = {
    "i386": 336,
    "i486": 336,
    "i586": 336,
    "i686": 336,
    "x86_64": 336,  # 32-bit Python on a 64-bit kernel uses the i386 table
    "amd64": 336,
    "armv6l": 364,
    "armv7l": 364,
    "armv8l": 364,
    "aarch64": 364,  # 32-bit Python (compat) on arm64
    "arm64": 364,
    "riscv32": 241,
    "ppc": 319,
    "ppc64": 319,
}


@dataclass(frozen=True, slots=True)
class UserRegsLayout:
    """Which user registers to ask perf for on one machine, and how the values it
    sends (in the mask's bit order) map to DWARF numbering."""

    machine: str  # ELF's name: "EM_X86_64"
    mask: int  # attr.sample_regs_user
    dwarf_order: tuple[int, ...]  # DWARF register i is value dwarf_order[i]
    pc: int  # the value that is the instruction pointer
    sp: int  # the DWARF number of the stack pointer

    @property
    def count(self) -> int:
        return self.mask.bit_count()


# x86-64 (arch/x86/include/uapi/asm/perf_regs.h): AX 0, BX 1, CX 2, DX 3, SI 4, DI 5,
# BP 6, SP 7, IP 8, R8..R15 16..23; asked for in that bit order, so the values are
# AX BX CX DX SI DI BP SP IP R8..R15. DWARF: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip.
_X86_64 = UserRegsLayout(
    "EM_X86_64",
    sum(1 << b for b in (*range(9), *range(16, 24))),
    (0, 3, 2, 1, 4, 5, 6, 7, *range(9, 17), 8),
    pc=8,
    sp=7,
)
# arm64: x0..x30 0..30, sp 31, pc 32: the same as DWARF's (pc kept at 32).
_ARM64 = UserRegsLayout("EM_AARCH64", (1 << 33) - 1, tuple(range(33)), pc=32, sp=31)
_LAYOUTS = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _ARM64, "arm64": _ARM64}


def user_regs_layout(machine: str | None = None) -> UserRegsLayout | None:
    """The layout for ``machine`` (default: this one), None where livesym cannot unwind."""
    return _LAYOUTS.get((machine if machine is not None else platform.machine()).lower())


class UnsupportedMachine(OSError):
    """No known perf_event_open syscall number for this machine."""


def syscall_number(machine: str | None = None, pointer_bits: int | None = None) -> int:
    """__NR_perf_event_open for ``machine`` (default: this one) and pointer width."""
    machine = (machine if machine is not None else platform.machine()).lower()
    bits = pointer_bits if pointer_bits is not None else struct.calcsize("P") * 8
    table = _SYSCALL_64 if bits == 64 else _SYSCALL_32
    number = table.get(machine)
    if number is None:
        raise UnsupportedMachine(
            errno.ENOSYS,
            f"perf_event_open: no syscall number known for machine {machine!r} "
            f"({bits}-bit); use --sampler ptrace",
        )
    return number


_libc: ctypes.CDLL | None = None


def _syscall() -> ctypes._NamedFuncPointer:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fn = _libc.syscall
    fn.restype = ctypes.c_long
    return fn


def perf_event_open(attr: PerfEventAttr, pid: int, cpu: int, group_fd: int, flags: int) -> int:
    """perf_event_open(2): return the new fd, or raise OSError with the call's errno."""
    number = syscall_number()
    ctypes.set_errno(0)
    fd = int(
        _syscall()(
            ctypes.c_long(number),
            ctypes.byref(attr),
            ctypes.c_int(pid),
            ctypes.c_int(cpu),
            ctypes.c_int(group_fd),
            ctypes.c_ulong(flags),
        )
    )
    if fd < 0:
        err = ctypes.get_errno() or errno.EIO
        raise OSError(err, f"perf_event_open(pid={pid}, cpu={cpu}): {os.strerror(err)}")
    return fd


def _ioc_none(machine: str | None = None) -> int:
    # _IO() puts _IOC_NONE in the direction bits: 0 on most machines, but 1 << 29
    # on powerpc, mips and sparc (asm/ioctl.h of those architectures).
    machine = (machine if machine is not None else platform.machine()).lower()
    if machine.startswith(("ppc", "powerpc", "mips", "sparc")):
        return 1 << 29
    return 0


def _io(kind: str, nr: int, machine: str | None = None) -> int:
    return _ioc_none(machine) | (ord(kind) << 8) | nr


def ioctl_request(name: str, machine: str | None = None) -> int:
    """The ioctl request number of PERF_EVENT_IOC_<name> for the _IO() requests."""
    nr = {"ENABLE": 0, "DISABLE": 1, "REFRESH": 2, "RESET": 3, "SET_OUTPUT": 5}[name]
    return _io("$", nr, machine)


PERF_EVENT_IOC_ENABLE = ioctl_request("ENABLE")
PERF_EVENT_IOC_DISABLE = ioctl_request("DISABLE")
PERF_EVENT_IOC_RESET = ioctl_request("RESET")


def ioctl_enable(fd: int) -> None:
    fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)


def ioctl_disable(fd: int) -> None:
    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)


def ioctl_period(fd: int, period: int, machine: str | None = None) -> None:
    """PERF_EVENT_IOC_PERIOD: the event's sample period from its next overflow on
    (_IOW('$', 4, u64): the new period is passed by pointer)."""
    value = ctypes.c_uint64(period)
    fcntl.ioctl(fd, _iow_u64(4, machine), value)


def _iow_u64(nr: int, machine: str | None = None) -> int:
    # _IOW('$', nr, __u64): the write direction bit at 30 (asm-generic: two direction
    # bits above 14 size bits), or at 31 on powerpc, mips and sparc (three above 13);
    # the size, 8, from bit 16.
    machine = (machine if machine is not None else platform.machine()).lower()
    write = 1 << 31 if machine.startswith(("ppc", "powerpc", "mips", "sparc")) else 1 << 30
    return write | (8 << 16) | (ord("$") << 8) | nr


# --- the ring buffer -----------------------------------------------------------------


def ring_span(
    buf: bytes | bytearray | memoryview, data_offset: int, data_size: int, tail: int, head: int
) -> bytes | memoryview:
    """The bytes [tail, head) of a ring of ``data_size`` bytes at ``buf[data_offset:]``:
    a view of them where they are contiguous (no copy: samples of deep stacks are 64 KiB
    each, and copying a drain's worth out took 17 us a sample, most of it page faults in
    the fresh allocation), else a copy.

    ``tail`` and ``head`` are the free-running u64 positions of the mmap page;
    a span that wraps past the end of the data area comes back contiguous, so a
    record split by the wrap parses like any other. Raises ValueError when the
    span is impossible (head behind tail, or more than the ring holds: the
    positions are corrupt, and no byte of it can be trusted).
    """
    if data_size <= 0 or data_offset < 0 or data_offset + data_size > len(buf):
        raise ValueError(f"ring of {data_size} bytes at {data_offset} is outside the mapping")
    length = (head - tail) % _U64  # u64 positions: modular, like the kernel's
    if length > data_size:
        raise ValueError(f"ring positions tail={tail} head={head} exceed {data_size} bytes")
    if length == 0:
        return b""
    start = tail % data_size
    first = min(length, data_size - start)
    begin = data_offset + start
    if first == length:
        return memoryview(buf)[begin : begin + first]
    rest = length - first
    return bytes(buf[begin : begin + first]) + bytes(buf[data_offset : data_offset + rest])


# --- records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SampleRecord:
    """PERF_RECORD_SAMPLE; fields not in the sample_type are None (callchain: empty)."""

    ip: int | None
    pid: int | None
    tid: int | None
    time: int | None  # ns on the event's clock
    callchain: tuple[int, ...]
    misc: int = 0
    # PERF_SAMPLE_REGS_USER: the ABI (REGS_ABI_*) and the registers of the attr's mask,
    # in bit order; PERF_SAMPLE_STACK_USER: the bytes copied from the stack pointer up
    # and how many were asked for (fewer came: the copy reached the stack's end).
    regs_abi: int = 0
    regs: tuple[int, ...] = ()
    stack: bytes = b""
    stack_asked: int = 0
    # PERF_SAMPLE_READ (READ_FORMAT): the event's (value, time enabled, time running)
    # in ns when the sample was taken; None where not taken.
    read: tuple[int, int, int] | None = None


# Hundreds of records a second are made here: in one call each (livesym.frozen).
_SAMPLE_RECORD = maker(SampleRecord, *(f.name for f in dataclasses.fields(SampleRecord)))


@dataclass(frozen=True, slots=True)
class LostRecord:
    """PERF_RECORD_LOST: ``lost`` records did not fit in the ring buffer."""

    id: int
    lost: int


@dataclass(frozen=True, slots=True)
class LostSamplesRecord:
    """PERF_RECORD_LOST_SAMPLES: samples the PMU dropped before they reached the ring."""

    lost: int


@dataclass(frozen=True, slots=True)
class MmapRecord:
    """PERF_RECORD_MMAP: an executable mapping appeared."""

    pid: int
    tid: int
    addr: int
    len: int
    pgoff: int
    filename: str
    time: int | None = None  # ns on the event's clock, with sample_id_all


@dataclass(frozen=True, slots=True)
class Mmap2Record:
    """PERF_RECORD_MMAP2: a mapping appeared, with the file's identity and protection."""

    pid: int
    tid: int
    addr: int
    len: int
    pgoff: int
    maj: int
    min: int
    ino: int
    ino_generation: int
    prot: int
    flags: int
    filename: str
    build_id: bytes | None = None  # when misc has PERF_RECORD_MISC_MMAP_BUILD_ID
    time: int | None = None  # ns on the event's clock, with sample_id_all


@dataclass(frozen=True, slots=True)
class ThrottleRecord:
    """PERF_RECORD_THROTTLE / UNTHROTTLE: the kernel paused or resumed sampling."""

    throttled: bool
    time: int
    id: int
    stream_id: int


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """PERF_RECORD_FORK / PERF_RECORD_EXIT."""

    exited: bool
    pid: int
    ppid: int
    tid: int
    ptid: int
    time: int


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record of a type not parsed here, or whose body is shorter than its fields."""

    type: int
    misc: int
    size: int
    problem: str = ""


@dataclass(frozen=True, slots=True)
class TruncatedRecord:
    """Parsing stopped here: a header claims a size below 8 or past the buffer's end."""

    offset: int
    size: int
    remaining: int


Record = (
    SampleRecord
    | LostRecord
    | LostSamplesRecord
    | MmapRecord
    | Mmap2Record
    | ThrottleRecord
    | TaskRecord
    | UnknownRecord
    | TruncatedRecord
)

_HEADER = struct.Struct("=IHH")
_PID = struct.Struct("=I")
_Q = struct.Struct("=Q")
_QQ = struct.Struct("=QQ")
_QQQ = struct.Struct("=QQQ")
_II = struct.Struct("=II")
_IIQQQ = struct.Struct("=IIQQQ")
_TASK = struct.Struct("=IIIIQ")
_MMAP2_IDS = struct.Struct("=IIQQ")

# Fields of a sample before the callchain, in record order: (bit, size in bytes).
_BEFORE_CALLCHAIN = (
    (SampleType.IDENTIFIER, 8),
    (SampleType.IP, 8),
    (SampleType.TID, 8),
    (SampleType.TIME, 8),
    (SampleType.ADDR, 8),
    (SampleType.ID, 8),
    (SampleType.STREAM_ID, 8),
    (SampleType.CPU, 8),
    (SampleType.PERIOD, 8),
    (SampleType.READ, READ_SIZE),  # in READ_FORMAT's layout, the one parsed
)


# The sample_id trailer of non-sample records (attr.sample_id_all), in record order.
_SAMPLE_ID = (
    (SampleType.TID, 8),
    (SampleType.TIME, 8),
    (SampleType.ID, 8),
    (SampleType.STREAM_ID, 8),
    (SampleType.CPU, 8),
    (SampleType.IDENTIFIER, 8),
)


def _trailer_time(body: memoryview, sample_type: int) -> int | None:
    """TIME from the sample_id trailer at the end of a non-sample record."""
    where = _trailer_layout(sample_type)
    if where is None:
        return None
    pos = len(body) - where
    if pos < 0:
        raise _Short
    return int(_Q.unpack_from(body, pos)[0])


@functools.lru_cache(maxsize=16)
def _trailer_layout(sample_type: int) -> int | None:
    """How far from a record's end its trailer's TIME is; None where it has none (worked
    out once: each IntFlag test cost a microsecond, eight of them a mapping record)."""
    if not sample_type & SampleType.TIME:
        return None
    size = sum(width for bit, width in _SAMPLE_ID if sample_type & bit)
    before = 8 if sample_type & SampleType.TID else 0
    return size - before


_MAPPING_TYPES = frozenset({int(RecordType.MMAP), int(RecordType.MMAP2)})


class _Short(Exception):
    """A record body ends before the fields its type promises."""


def parse_records(
    buf: bytes | bytearray | memoryview,
    sample_type: int,
    sample_id_all: bool = False,
    regs_count: int = 0,
    pid: int | None = None,
) -> Iterator[Record]:
    """Parse the records in ``buf`` (whole records, as copied out of a ring buffer).

    ``sample_type`` is the attr's, needed to lay out PERF_RECORD_SAMPLE, and
    with ``sample_id_all`` (the attr's flag) the trailer of the other records,
    from which mmap records take their time.
    Never raises on bad data: a record whose body is too short for its fields
    comes back as UnknownRecord (its size is trusted to skip it); a header with
    size < 8 or reaching past the end ends parsing with a TruncatedRecord.
    PERF_SAMPLE_READ is read in READ_FORMAT's layout, the only one livesym asks for
    (its layout depends on read_format, which this parser is not given); RAW and
    BRANCH_STACK are refused (ValueError), which
    would come between the callchain and the user registers. ``regs_count`` is the
    number of bits set in the attr's sample_regs_user. With ``pid`` (and TID in
    ``sample_type``), samples of other processes are skipped unparsed (an event per CPU
    samples every process that runs there), and so are their mappings.
    """
    if sample_type & (SampleType.RAW | SampleType.BRANCH_STACK):
        raise ValueError("RAW and BRANCH_STACK samples are not supported by this parser")
    # Where a sample's pid is (its TID field's first half), counted from the header.
    tid_at = sample_layout(sample_type).tid
    pid_at = HEADER_SIZE + tid_at if pid is not None and tid_at >= 0 else None
    view = memoryview(buf).cast("B")
    end = len(view)
    offset = 0
    while offset < end:
        if end - offset < HEADER_SIZE:
            yield TruncatedRecord(offset, 0, end - offset)
            return
        rtype, misc, size = _HEADER.unpack_from(view, offset)
        if size < HEADER_SIZE or offset + size > end:
            yield TruncatedRecord(offset, size, end - offset)
            return
        if (
            pid_at is not None
            and rtype == PERF_RECORD_SAMPLE
            and size >= pid_at + 4
            and _PID.unpack_from(view, offset + pid_at)[0] != pid
        ):
            offset += size
            continue
        if (
            pid is not None
            and rtype in _MAPPING_TYPES
            and size >= HEADER_SIZE + 4
            and _PID.unpack_from(view, offset + HEADER_SIZE)[0] != pid
        ):
            # Another process's mapping (its pid first in the body): on a busy box, an
            # event per CPU sees hundreds a second (CI: 874 in 20 s), each parsed, its
            # time read from the trailer and dropped by the session.
            offset += size
            continue
        body = view[offset + HEADER_SIZE : offset + size]
        try:
            yield _parse_one(rtype, misc, body, sample_type, sample_id_all, regs_count)
        except (_Short, struct.error):
            yield UnknownRecord(rtype, misc, size, "body shorter than its fields")
        offset += size


def record_at(view: memoryview, offset: int) -> memoryview:
    """The record at ``offset`` of ``view`` (bytes, as ``parse_records`` takes them), as
    long as its header says, or to the end where that is past it."""
    size = _HEADER.unpack_from(view, offset)[2] if len(view) - offset >= HEADER_SIZE else 0
    return view[offset : offset + size] if size >= HEADER_SIZE else view[offset:]


def _parse_one(
    rtype: int,
    misc: int,
    body: memoryview,
    sample_type: int,
    sample_id_all: bool,
    regs_count: int = 0,
) -> Record:
    if rtype in (RecordType.MMAP, RecordType.MMAP2) and sample_id_all:
        record = _parse_one(rtype, misc, body, sample_type, False)
        if isinstance(record, MmapRecord | Mmap2Record):
            return dataclasses.replace(record, time=_trailer_time(body, sample_type))
        return record
    if rtype == RecordType.SAMPLE:
        return _parse_sample(body, misc, sample_type, regs_count)
    if rtype == RecordType.LOST:
        record_id, lost = _QQ.unpack_from(body, 0)
        return LostRecord(record_id, lost)
    if rtype == RecordType.LOST_SAMPLES:
        return LostSamplesRecord(_Q.unpack_from(body, 0)[0])
    if rtype == RecordType.MMAP2:
        return _parse_mmap2(body, misc)
    if rtype == RecordType.MMAP:
        pid, tid, addr, length, pgoff = _IIQQQ.unpack_from(body, 0)
        return MmapRecord(pid, tid, addr, length, pgoff, _cstring(body, _IIQQQ.size))
    if rtype in (RecordType.THROTTLE, RecordType.UNTHROTTLE):
        time, record_id, stream_id = _QQQ.unpack_from(body, 0)
        return ThrottleRecord(rtype == RecordType.THROTTLE, time, record_id, stream_id)
    if rtype in (RecordType.FORK, RecordType.EXIT):
        pid, ppid, tid, ptid, time = _TASK.unpack_from(body, 0)
        return TaskRecord(rtype == RecordType.EXIT, pid, ppid, tid, ptid, time)
    return UnknownRecord(rtype, misc, len(body) + HEADER_SIZE)


@dataclass(frozen=True, slots=True)
class SampleLayout:
    """Where a sample's fields are for one sample_type, worked out once: a sample is
    parsed hundreds of times a second, and each IntFlag test cost a microsecond or two
    (14 of them a sample were a fifth of its parse)."""

    ip: int  # offsets of the fields before the callchain; -1 where not taken
    tid: int
    time: int
    read: int
    fixed: int  # bytes before the callchain
    callchain: bool
    regs: bool
    stack: bool


@functools.lru_cache(maxsize=16)
def sample_layout(sample_type: int) -> SampleLayout:
    at = {}
    pos = 0
    for bit, width in _BEFORE_CALLCHAIN:
        if sample_type & bit:
            at[int(bit)] = pos
            pos += width
    return SampleLayout(
        at.get(int(SampleType.IP), -1), at.get(int(SampleType.TID), -1),
        at.get(int(SampleType.TIME), -1), at.get(int(SampleType.READ), -1), pos,
        bool(sample_type & SampleType.CALLCHAIN),
        bool(sample_type & SampleType.REGS_USER), bool(sample_type & SampleType.STACK_USER),
    )  # fmt: skip


def _parse_sample(
    body: memoryview, misc: int, sample_type: int, regs_count: int = 0
) -> SampleRecord:
    layout = sample_layout(sample_type)
    pos = layout.fixed
    if pos > len(body):
        raise _Short
    ip = _Q.unpack_from(body, layout.ip)[0] if layout.ip >= 0 else None
    pid, tid = _II.unpack_from(body, layout.tid) if layout.tid >= 0 else (None, None)
    time = _Q.unpack_from(body, layout.time)[0] if layout.time >= 0 else None
    read = _QQQ.unpack_from(body, layout.read) if layout.read >= 0 else None
    callchain: tuple[int, ...] = ()
    if layout.callchain:
        nr = _Q.unpack_from(body, pos)[0]
        pos += 8
        # Checked before unpacking so a hostile nr cannot make us allocate.
        if nr > (len(body) - pos) // 8:
            raise _Short
        callchain = struct.unpack_from(f"={nr}Q", body, pos)
        pos += 8 * nr
    if not (layout.regs or layout.stack):
        return _SAMPLE_RECORD(ip, pid, tid, time, callchain, misc, 0, (), b"", 0, read)
    regs_abi, regs, stack, asked = _parse_user(body, pos, layout, regs_count)
    return _SAMPLE_RECORD(ip, pid, tid, time, callchain, misc, regs_abi, regs, stack, asked,
                          read)  # fmt: skip


def _parse_user(
    body: memoryview, pos: int, layout: SampleLayout, regs_count: int
) -> tuple[int, tuple[int, ...], bytes, int]:
    """The user registers (their ABI and values) and the stack copy (its bytes and how
    many were asked for) that follow the callchain."""
    regs_abi, regs = 0, ()
    if layout.regs:
        regs_abi = _Q.unpack_from(body, pos)[0]
        pos += 8
        if regs_abi != REGS_ABI_NONE:
            if regs_count > (len(body) - pos) // 8:
                raise _Short
            regs = struct.unpack_from(f"={regs_count}Q", body, pos)
            pos += 8 * regs_count
    stack, asked = b"", 0
    if layout.stack:
        asked = _Q.unpack_from(body, pos)[0]
        pos += 8
        if asked:
            # Checked before slicing: a hostile size cannot reach past the record.
            if asked > len(body) - pos - 8:
                raise _Short
            dyn = _Q.unpack_from(body, pos + asked)[0]
            stack = bytes(body[pos : pos + min(dyn, asked)])
    return regs_abi, regs, stack, asked


def _parse_mmap2(body: memoryview, misc: int) -> Mmap2Record:
    pid, tid, addr, length, pgoff = _IIQQQ.unpack_from(body, 0)
    pos = _IIQQQ.size
    build_id = None
    if misc & PERF_RECORD_MISC_MMAP_BUILD_ID:
        # union { maj, min, ino, ino_generation } with { u8 size, u8, u16, u8 id[20] }
        id_size = min(body[pos], 20) if pos < len(body) else 0
        build_id = bytes(body[pos + 4 : pos + 4 + id_size])
        maj = minor = ino = ino_gen = 0
    else:
        maj, minor, ino, ino_gen = _MMAP2_IDS.unpack_from(body, pos)
    pos += _MMAP2_IDS.size
    prot, flags = _II.unpack_from(body, pos)
    pos += _II.size
    name = _cstring(body, pos)
    return Mmap2Record(
        pid, tid, addr, length, pgoff, maj, minor, ino, ino_gen, prot, flags, name, build_id
    )


def _cstring(body: memoryview, pos: int) -> str:
    # The name is NUL-terminated and padded to 8 bytes; a name without NUL
    # (hostile data) ends at the record's end.
    raw = bytes(body[pos:])
    nul = raw.find(b"\0")
    return (raw if nul < 0 else raw[:nul]).decode("utf-8", "surrogateescape")


def kernel_frames(callchain: tuple[int, ...]) -> list[int]:
    """The kernel addresses of a callchain, leaf first: those after a
    PERF_CONTEXT_KERNEL marker, until the next marker."""
    return _context_frames(callchain, PERF_CONTEXT_KERNEL, before_any_marker=False)


def user_frames(callchain: tuple[int, ...]) -> list[int]:
    """The user-space addresses of a callchain, leaf first, without the markers.

    The kernel puts a PERF_CONTEXT_* marker before each context's entries
    (kernel, then user); entries before any marker are taken as user ones.
    """
    return _context_frames(callchain, PERF_CONTEXT_USER, before_any_marker=True)


def _context_frames(
    callchain: tuple[int, ...], context: int, *, before_any_marker: bool
) -> list[int]:
    frames: list[int] = []
    inside = before_any_marker
    for entry in callchain:
        if entry >= PERF_CONTEXT_MAX:
            inside = entry == context
        elif inside:
            frames.append(entry)
    return frames
