"""The shared vocabulary of livesym as plain frozen data: frames, the records a
capture stores, and what the OS said about the target.

Samplers, the engine, the profile, captures, exports and the dashboard all speak
these types, so they live at the bottom of the package and import nothing of
livesym's: a record type here never drags the ELF reader or a sampler in with it
(DESIGN.md, "records"). What builds records from the symbolizer's explanations is
in ``livesym.symbolize.records``; the capture's format and its JSON are in
``livesym.capture``.

``Frame`` is the profile's unit of aggregation (a function, or why there is none);
``FrameRecord`` is an explanation record as a capture stores it: everything a
detail pane shows for one (maps generation, address), so replay needs no binaries.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Final, Literal

from livesym.addr.kinds import Base, ElfOffset, ElfVaddr, Vma


class Reason(Enum):
    """Why a thing was not found: one code per cause. The value is what JSON and the
    UI show (docs/address-model.md lists them)."""

    UNMAPPED = "unmapped"
    ANONYMOUS = "anonymous_mapping"
    SPECIAL = "special_mapping"
    FILE_UNAVAILABLE = "file_unavailable"
    NOT_ELF = "not_elf"
    NO_SEGMENT = "no_load_segment"
    ZERO_FILL = "zero_fill"  # in a PT_LOAD's zero-filled tail: no file offset
    NO_SYMBOLS = "no_symbols"
    UNKNOWN_ADDRESS = "no_symbol_covers_address"
    # No symbol names the function, but its FDE gives its bounds: one row per function.
    UNNAMED_FUNCTION = "unnamed_function"
    NO_CFI = "no_cfi"  # no call-frame information covers the address
    # Debug files and target memory: candidates refused, reads that failed.
    OTHER_BUILD = "other_build"  # a debug file of another build, or none to check against
    UNREADABLE = "unreadable"  # a file or the target's memory could not be read
    # Kernel time no sampler could see into: sized from the threads' system time.
    ESTIMATED = "estimated"
    # A ptrace stop that came at a system call's exit, in user time: the user code
    # below the call was running, where exactly is not known.
    AT_CALL_EXIT = "at_call_exit"
    # Mixed stacks: the interpreter's frames of a perf sample whose moment no py-spy
    # window saw (between windows, py-spy failing): its Python functions are not known.
    PYTHON_UNREAD = "python_unread"
    # Mixed stacks read by livesym: the thread's Python stack when it was read (a
    # fraction of a millisecond after the sample) was not the one the sample ran.
    PYTHON_MOVED = "python_moved"
    # Off-CPU time of a thread already waiting when the session began: its stack is
    # seen only when it next leaves a CPU.
    WAITING_BEFORE = "waiting_before_session"
    # Off-CPU time of a thread that was preempted: ready to run, waiting for a CPU.
    WAITING_FOR_CPU = "waiting_for_cpu"
    # Off-CPU time of a thread found asleep whose stack could not be read from /proc
    # (not in a system call: a page fault's wait; or it woke between the reads).
    WAIT_NOT_READ = "wait_not_read"


# What people read: the code's cause in words. JSON and captures keep the codes.
_WORDS: Final[dict[Reason, str]] = {
    Reason.UNMAPPED: "unmapped address",
    Reason.ANONYMOUS: "anonymous memory",
    Reason.SPECIAL: "special mapping",
    Reason.FILE_UNAVAILABLE: "file unavailable",
    Reason.NOT_ELF: "not an ELF file",
    Reason.NO_SEGMENT: "outside its loaded segments",
    Reason.ZERO_FILL: "zero-filled memory",
    Reason.NO_SYMBOLS: "no symbols",
    Reason.UNKNOWN_ADDRESS: "no symbol here",
    Reason.UNNAMED_FUNCTION: "unnamed function",
    Reason.NO_CFI: "no call-frame information",
    Reason.OTHER_BUILD: "debug file of another build",
    Reason.UNREADABLE: "unreadable",
    Reason.ESTIMATED: "estimated from system time",
    Reason.AT_CALL_EXIT: "stopped at a system call's exit",
    Reason.PYTHON_UNREAD: "Python frames not read",
    Reason.PYTHON_MOVED: "Python stack changed before it was read",
    Reason.WAITING_BEFORE: "waiting since before the session",
    Reason.WAITING_FOR_CPU: "waiting for a CPU",
    Reason.WAIT_NOT_READ: "waiting, where not read",
}


def reason_text(reason: Reason | None, default: str = "unresolved") -> str:
    """A reason's code, as JSON and captures keep it; ``default`` where none was given."""
    return reason.value if reason is not None else default


def reason_words(reason: Reason | None, default: str = "unresolved") -> str:
    """A reason as people read it (labels, the details pane, text output)."""
    return _WORDS[reason] if reason is not None else default


@dataclass(frozen=True, slots=True)
class Unresolved:
    """What was asked for was not found: the code of the cause and, for people, the
    particulars (``no PT_LOAD covers file offset 0x2000 of this mapping``). Every
    lookup that can fail returns its result or one of these, never a bare string."""

    reason: Reason
    detail: str

    def __str__(self) -> str:
        return self.detail


# What kind of code a frame is: native (an address in an object, or a native function
# a sampler named), python (a sampler's Python frame), kernel, unknown (a sample with
# no frames at all), root (only the synthetic root of the stack tree), truncated (the
# outermost frame of a stack whose unwinding stopped early: its symbol says why).
FrameKind = Literal["native", "python", "kernel", "unknown", "root", "truncated"]
KIND_NATIVE: Final = "native"
KIND_PYTHON: Final = "python"
KIND_KERNEL: Final = "kernel"
KIND_UNKNOWN: Final = "unknown"
KIND_ROOT: Final = "root"

# What a session's timeline marks at a moment: the maps changed, a process was first seen.
MARK_MAPS: Final = "maps"
MARK_PROCESS: Final = "process"
MARK_LOST: Final = "lost"
MARK_EXITED: Final = "exited"  # a process of several ended
KIND_TRUNCATED: Final = "truncated"


class KernelSeen(Enum):
    """How a session sees the kernel's time."""

    SAMPLED = "sampled"  # the kernel's frames, sampled (perf in kernel mode)
    FROM_SYSCALLS = "from system calls"  # the call a thread was in (ptrace)
    ESTIMATED = "estimated from system time"  # samples of the estimated kernel frame
    LEFT_OUT = "left out"  # on purpose (--no-kernel)
    NOT_SAMPLED = "not sampled"  # this sampler cannot, or was refused
    PER_SAMPLER = "per sampler"  # processes under samplers that see it differently


@dataclass(frozen=True)
class KernelMode:
    """A session's kernel mode: how it sees kernel time (``seen``), and the words that
    say so with why or how (``text``: the header's, the report's, the capture's)."""

    seen: KernelSeen
    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def sampled(self) -> bool:
        return self.seen is KernelSeen.SAMPLED

    @classmethod
    def of(cls, seen: KernelSeen, why: str = "") -> KernelMode:
        """``seen``'s words, and ``why`` after them in parentheses."""
        return cls(seen, f"{seen.value} ({why})" if why else seen.value)

    @classmethod
    def not_sampled(cls, why: str) -> KernelMode:
        return cls(KernelSeen.NOT_SAMPLED, f"{KernelSeen.NOT_SAMPLED.value}: {why}")

    @classmethod
    def parse(cls, text: str) -> KernelMode:
        """A capture's words (any text: an unknown one is kept, seen as not sampled)."""
        for seen in KernelSeen:
            if text == seen.value or text.startswith((f"{seen.value} ", f"{seen.value}:")):
                return cls(seen, text)
        if "; " in text:  # "perf: sampled; ptrace: from system calls (...)"
            return cls(KernelSeen.PER_SAMPLER, text)
        return cls(KernelSeen.NOT_SAMPLED, text)


KERNEL_SAMPLED: Final = KernelMode(KernelSeen.SAMPLED, KernelSeen.SAMPLED.value)
KERNEL_BY_NONE: Final = KernelMode(KernelSeen.NOT_SAMPLED, "not sampled by this sampler")
KERNEL_UNSAID: Final = KernelMode(KernelSeen.NOT_SAMPLED, "")  # nothing known of it


# How frames sort when counts tie: label, then the fields that make frames differ.
FrameOrder = tuple[str, str, str, str, str, int]


def _basename(path: str) -> str:
    return path.rpartition("/")[2] or path


@dataclass(frozen=True, slots=True)
class Frame:
    """One symbolized stack frame: the unit of aggregation ("function").

    ``symbol``/``demangled`` are None when unresolved, and ``reason`` then says
    why (a ``Reason`` value such as ``"no_symbols"``).
    ``module`` is the path of the object (a pseudo-path such as ``[vdso]`` or
    ``[kernel]`` where there is no file), None when there is none at all.
    ``vaddr`` is the symbol's ELF vaddr when known: it keeps two same-named
    static functions of one module apart. Unresolved frames carry no address,
    so all of one module's unresolved frames with one reason are one frame.

    Frames are hashed on every ``Profile.add``, so the hash (and the sort key)
    are computed once, at construction.
    """

    symbol: str | None
    demangled: str | None
    module: str | None
    reason: Reason | None = None
    kind: FrameKind = KIND_NATIVE
    vaddr: ElfVaddr | None = None
    _hash: int = field(init=False, repr=False, compare=False)
    _order: FrameOrder = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (self.symbol, self.demangled, self.module, self.reason, self.kind, self.vaddr)
        object.__setattr__(self, "_hash", hash(fields))
        order = (
            self._make_label(),
            self.module or "",
            self.kind,
            self.reason.value if self.reason else "",
            self.symbol or "",
            -1 if self.vaddr is None else self.vaddr,
        )
        object.__setattr__(self, "_order", order)

    def __hash__(self) -> int:
        return self._hash

    def _make_label(self) -> str:
        if self.kind == KIND_TRUNCATED:
            return f"[stack ends early: {self.symbol}]"
        name = self.demangled or self.symbol
        if name:
            return name
        if self.kind == KIND_ROOT:
            return "[all]"
        if self.reason is None and self.kind in (KIND_KERNEL, KIND_UNKNOWN):
            return f"[{self.kind}]"
        if self.reason is Reason.ESTIMATED:
            return f"{self.module or '[kernel]'} ({reason_words(self.reason)})"
        if self.reason is Reason.UNNAMED_FUNCTION and self.vaddr is not None:
            return f"{_basename(self.module or '?')} @ {self.vaddr:#x}"
        reason = reason_words(self.reason)
        return f"[{reason}] {_basename(self.module)}" if self.module else f"[{reason}]"

    @property
    def label(self) -> str:
        """What tables show: the demangled name, or ``[reason] module`` when unresolved."""
        return self._order[0]

    @property
    def order(self) -> FrameOrder:
        """The tie-break key: label first, then every field that tells frames apart."""
        return self._order

    @property
    def resolved(self) -> bool:
        return bool(self.symbol or self.demangled) and self.kind != KIND_TRUNCATED


UNKNOWN_FRAME = Frame(None, None, None, kind=KIND_UNKNOWN)
"""Stands for a sample that came with no frames at all."""
KERNEL_FRAME = Frame(None, None, "[kernel]", kind=KIND_KERNEL)
"""Kernel code without a symbol."""
ROOT_FRAME = Frame(None, None, None, kind=KIND_ROOT)
"""The frame of the stack tree's synthetic root, above every outermost frame."""


@dataclass(frozen=True, slots=True)
class FrameRecord:
    """One distinct frame of a session, with everything its detail pane shows.

    A native frame is one run-time address (``vma``) in one maps generation.
    A frame a sampler named itself carries its name instead: a Python function
    (``kind`` "python", ``symbol`` the function, ``module`` the source file,
    ``line``), or a native function py-spy named without an address (``vma``
    0, ``reason`` None, ``symbol`` set, no mapping).
    """

    id: int
    generation: int
    vma: Vma
    module: str | None
    object: int | None
    mapping: tuple[int, int, str, int] | None  # start, end, perms, pgoff
    base: Base | None
    segment: int | None
    elf_vaddr: ElfVaddr | None
    elf_offset: ElfOffset | None
    symbol: str | None
    demangled: str | None
    symbol_vaddr: ElfVaddr | None
    symbol_size: int | None
    symbol_offset: int | None
    reason: Reason | None
    detail: str
    steps: tuple[str, ...]
    problems: tuple[str, ...]
    kind: FrameKind = KIND_NATIVE
    line: int | None = None  # Python frames: py-spy's line; native: DWARF's, with source_file
    source_file: str | None = None  # native frames: the source file DWARF names

    @property
    def key(self) -> tuple[Hashable, ...]:
        """What makes two records the same frame, whatever their ids."""
        if self.kind == KIND_PYTHON:
            return (KIND_PYTHON, self.symbol, self.module, self.line)
        if self.kind == KIND_TRUNCATED:
            return (KIND_TRUNCATED, self.symbol)
        if self.kind == KIND_KERNEL:
            return (KIND_KERNEL, self.vma, self.symbol)  # a system call's frame has no address
        if self.kind == KIND_UNKNOWN:
            return (KIND_UNKNOWN, self.reason)  # a stand-in for an unknown place
        if self.named:
            return ("named", self.symbol, self.module, self.line)
        return ("address", self.generation, self.vma)

    @property
    def named(self) -> bool:
        """A native function the sampler named without an address to explain."""
        return self.kind == KIND_NATIVE and self.mapping is None and self.symbol is not None

    def known_line(self) -> tuple[str, int] | None:
        """The source file and line the record itself carries: a Python frame's, or
        the DWARF line a capture stored with a native frame."""
        if self.kind == KIND_PYTHON:
            return (self.module, self.line) if self.module and self.line else None
        if self.source_file is not None and self.line is not None:
            return (self.source_file, self.line)
        return None

    def frame(self) -> Frame:
        """The profile's unit of aggregation: the function, or why there is none."""
        if self.kind == KIND_TRUNCATED:
            return Frame(symbol=self.symbol, demangled=None, module=None, kind=KIND_TRUNCATED)
        if self.kind == KIND_PYTHON:
            # A Python function is its name and file; lines are its hot spots.
            return Frame(
                symbol=self.symbol, demangled=self.demangled, module=self.module, kind=KIND_PYTHON
            )
        if self.kind == KIND_KERNEL:
            # A kernel function is its symbol; unnamed kernel code is one frame.
            return Frame(
                symbol=self.symbol,
                demangled=self.demangled,
                module=self.module,
                reason=self.reason,
                kind=KIND_KERNEL,
                vaddr=self.symbol_vaddr,
            )
        if self.symbol is not None:
            return Frame(
                symbol=self.symbol,
                demangled=self.demangled,
                module=self.module,
                vaddr=self.symbol_vaddr,
            )
        # An unnamed function is one frame per function (its FDE's start), other
        # unresolved addresses one per module and reason.
        vaddr = self.symbol_vaddr if self.reason is Reason.UNNAMED_FUNCTION else None
        return Frame(
            symbol=None, demangled=None, module=self.module, reason=self.reason, vaddr=vaddr,
            kind=KIND_UNKNOWN if self.kind == KIND_UNKNOWN else KIND_NATIVE,
        )  # fmt: skip


def python_frame_record(function: str, file: str | None, line: int | None) -> FrameRecord:
    """A Python frame as a sampler reports it (the engine assigns the id)."""
    where = f"{file}:{line}" if file and line else (file or "?")
    return FrameRecord(
        id=-1, generation=0, vma=Vma(0), module=file, object=None, mapping=None, base=None,
        segment=None, elf_vaddr=None, elf_offset=None, symbol=function, demangled=None,
        symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=None,
        detail=f"Python function {function} at {where}, named by the sampler",
        steps=(), problems=(), kind=KIND_PYTHON, line=line,
    )  # fmt: skip


def marker_record(reason: Reason, detail: str) -> FrameRecord:
    """A frame that stands where no function is known, and says why (``reason``)."""
    return FrameRecord(
        id=-1, generation=0, vma=Vma(0), module=None, object=None, mapping=None, base=None,
        segment=None, elf_vaddr=None, elf_offset=None, symbol=None, demangled=None,
        symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=reason,
        detail=detail, steps=(), problems=(), kind=KIND_UNKNOWN,
    )  # fmt: skip


# Where a mixed stack's Python frames go when py-spy did not see them.
PYTHON_UNREAD: Final = marker_record(
    Reason.PYTHON_UNREAD,
    "the interpreter ran Python code here, but no py-spy window saw this thread at this "
    "moment (between windows, or py-spy failed): which functions is not known",
)
# Where a mixed stack's Python frames go when the stack livesym read was not the one
# the sample ran (livesym.frames.python_splice.checked).
PYTHON_MOVED: Final = marker_record(
    Reason.PYTHON_MOVED,
    "the interpreter ran Python code here, but the thread's Python stack had changed when "
    "livesym read it, a fraction of a millisecond after the sample (a function returned or "
    "was called meanwhile): which functions is not known",
)
# The stack of off-CPU time a thread spent waiting from before the session began to its
# first return to a CPU: what it waited in was never seen (livesym.sampling.off_cpu).
WAITING_BEFORE: Final = marker_record(
    Reason.WAITING_BEFORE,
    "the thread was already off the CPU when the session began, and came back before it "
    "left again: the stack it waited with was never seen",
)
# The stack of off-CPU time of a thread a read of /proc found asleep, whose wait /proc
# did not show (livesym.sampling.off_cpu_poll).
NOT_READ: Final = marker_record(
    Reason.WAIT_NOT_READ,
    "the thread was asleep outside a system call (a page fault's wait, a stop), and the "
    "kernel's stack, which would say where, may be read by root only: where it waited was "
    "not read",
)
# The leaf of off-CPU time a thread spent preempted: runnable, waiting for a CPU (the box
# is busier than its cores), not waiting for an event.
WAITING_FOR_CPU: Final = marker_record(
    Reason.WAITING_FOR_CPU,
    "the scheduler took the CPU from the thread while it could run (preempted: other "
    "threads were ready too); the frames below are where it was",
)


def truncated_frame_record(end: StackEnd, detail: str) -> FrameRecord:
    """The outermost frame of a stack whose unwinding stopped early, saying why: so a
    truncated stack is shown and counted as such, never passed off as whole."""
    return FrameRecord(
        id=-1, generation=0, vma=Vma(0), module=None, object=None, mapping=None, base=None,
        segment=None, elf_vaddr=None, elf_offset=None, symbol=end.value, demangled=None,
        symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=None,
        detail=f"the stack was unwound this far, then: {detail or end.value}",
        steps=(), problems=(), kind=KIND_TRUNCATED,
    )  # fmt: skip


def named_frame_record(name: str, module: str | None, line: int | None) -> FrameRecord:
    """A native function the sampler named without an address (py-spy's own symbols)."""
    return FrameRecord(
        id=-1, generation=0, vma=Vma(0), module=module, object=None, mapping=None, base=None,
        segment=None, elf_vaddr=None, elf_offset=None, symbol=name, demangled=None,
        symbol_vaddr=None, symbol_size=None, symbol_offset=None, reason=None,
        detail=f"native function {name} named by the sampler (no address to explain)",
        steps=(), problems=(), line=line,
    )  # fmt: skip


@dataclass(frozen=True)
class ObjectRecord:
    id: int
    path: str
    build_id: str | None
    e_type: str
    elf_class: int
    machine: str
    segments: tuple[dict[str, object], ...]
    symbol_source: str | None = None  # "symtab", "dynsym", "symtab+dynsym", "none"


@dataclass(frozen=True, slots=True)
class MappingRecord:
    """One line of the maps with what livesym worked out about it (a ``maps`` row)."""

    start: int
    end: int
    perms: str
    pgoff: int
    dev: str
    inode: int
    path: str
    deleted: bool
    object: int | None = None  # ObjectRecord id
    base: int | None = None
    base_formula: str | None = None
    e_type: str | None = None  # also "not ELF" for mapped data files
    build_id: str | None = None
    symbol_source: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[int, int, str, int, str]:
        """The same mapping across generations."""
        return (self.start, self.end, self.perms, self.pgoff, self.path)


@dataclass(frozen=True)
class GenerationRecord:
    """One numbered maps generation: when it was read and its mappings."""

    number: int  # unique in the session, over all its processes
    time: float  # seconds on the session's clock (the same clock as samples)
    mappings: tuple[MappingRecord, ...]
    pid: int = 0  # the process whose maps these are (0: the session's one target)


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """One process of a session: several when a session follows children or profiles
    every process of a name. ``parent`` is its parent's pid as first seen (0: unknown);
    ``started`` when the session first saw it, on the session's clock; ``ended`` when it
    exited, where the session saw it exit (None: it did not, or the session was one
    process, which ends with it)."""

    pid: int
    name: str  # argv[0]'s basename, else comm
    argv: tuple[str, ...]
    parent: int = 0
    started: float = 0.0
    ended: float | None = None

    @property
    def command_line(self) -> str:
        return " ".join(self.argv) if self.argv else self.name

    def moved(self, by: float) -> ProcessRecord:
        """The record with its moments ``by`` seconds later (onto another clock's zero)."""
        ended = None if self.ended is None else self.ended + by
        return replace(self, started=self.started + by, ended=ended)


@dataclass(frozen=True, slots=True)
class ProcessStat:
    """The target as the OS saw it at one moment (psutil)."""

    time: float  # seconds on the session's clock
    cpu_pct: float  # of one core: 250 means two and a half cores busy
    rss: int  # bytes
    threads: int


IDLE_FLAG = 1  # bit 0 of a sample's flags: the thread was off the CPU (not running)
# Bits 1-2 of an off-CPU sample's flags: why it was off the CPU (``WaitState``).
WAIT_SHIFT = 1
WAIT_MASK = 0b110


class TimeMode(Enum):
    """Which time a view counts: on-CPU samples (``cpu``), off-CPU intervals
    (``off-cpu``), or both (``wall``). One stream of samples holds both kinds; a
    session that did not collect off-CPU time has none to show."""

    CPU = "cpu"
    WALL = "wall"
    OFF_CPU = "off-cpu"

    def takes(self, off_cpu: bool) -> bool:
        """Whether a sample on (False) or off (True) the CPU counts in this view."""
        if self is TimeMode.WALL:
            return True
        return off_cpu is (self is TimeMode.OFF_CPU)

    @property
    def collects_off_cpu(self) -> bool:
        return self is not TimeMode.CPU

    @classmethod
    def parse(cls, text: object) -> TimeMode:
        """The mode a capture or the command line says; ValueError for any other word."""
        for mode in cls:
            if mode.value == text:
                return mode
        raise ValueError(f"unknown time mode {text!r} (cpu, wall or off-cpu)")


class WaitState(Enum):
    """Why a thread was off the CPU, as its sample's flags say (bits 1-2)."""

    UNKNOWN = 0  # off the CPU, the sampler could not tell why
    RUNNABLE = 1  # ready to run, waiting for a CPU (preempted: the box is busy)
    SLEEPING = 2  # waiting for an event: a timer, a lock, a pipe, a socket
    DISK = 3  # uninterruptible: waiting for I/O (io_schedule)

    @property
    def label(self) -> str:
        return _WAIT_LABELS[self]

    def flags(self) -> int:
        """The sample flags of an off-CPU sample in this state."""
        return IDLE_FLAG | (self.value << WAIT_SHIFT)

    @classmethod
    def of_flags(cls, flags: int) -> WaitState | None:
        """The state an off-CPU sample's flags say; None for an on-CPU sample."""
        if not flags & IDLE_FLAG:
            return None
        return cls((flags & WAIT_MASK) >> WAIT_SHIFT)


_WAIT_LABELS = {
    WaitState.UNKNOWN: "off-CPU",
    WaitState.RUNNABLE: "waiting for a CPU",
    WaitState.SLEEPING: "sleeping",
    WaitState.DISK: "disk",
}
SAMPLE_FLAGS = IDLE_FLAG | WAIT_MASK  # every bit a sample's flags may have


class StackEnd(Enum):
    """How an unwound stack ended: at the thread's root, or where and why it stopped.
    Every stack says one (issue 14); a truncated stack is marked, never passed off as
    whole."""

    ROOT = "root"  # _start, clone3/start_thread: the whole stack
    STACK_COPY = "stack copy too small"  # the sampler copied fewer bytes than it needed
    UNREADABLE = "unreadable memory"
    NO_CFI = "no call-frame information"  # and no frame pointer to fall back on
    # A runtime moved to another stack here (Go's runtime.systemstack): the callers are
    # on the stack it left, which a copy of this one does not hold.
    SWITCHED = "switched stacks"
    LOOP = "loop"  # a frame repeated: the unwinder stopped rather than spin
    DEPTH = "depth limit"
    SAMPLER = "named by the sampler"  # py-spy's frames, a capture's: not unwound here


@dataclass(frozen=True, slots=True)
class StackCopy:
    """A sample's copy of a thread's stack: its bytes from address ``start`` (the stack
    pointer then) up. ``complete``: the copy reaches the end of the stack mapping, so a
    read past it is past the stack, not past what was copied."""

    start: int
    data: bytes
    complete: bool = False

    def word(self, address: int) -> int | None:
        """The 64-bit little-endian word at ``address``; None outside the copy."""
        offset = address - self.start
        if not 0 <= offset <= len(self.data) - 8:
            return None
        return int.from_bytes(self.data[offset : offset + 8], "little")


@dataclass(frozen=True, slots=True)
class UserRegisters:
    """A thread's user-mode registers at a sample, in DWARF numbering for ``machine``
    (e.g. "EM_X86_64": 0..16 are rax..r15 and the return address): what an unwinder
    starts from (perf's PERF_SAMPLE_REGS_USER, ptrace's GETREGS)."""

    machine: str
    values: tuple[int | None, ...]  # None: the sampler did not take that register


@dataclass(frozen=True)
class Capture:
    """A whole capture, read back; samples are (seconds since start, tid, stack, flags,
    weight): a weight in sampling periods (an off-CPU interval's length; 1 on the CPU)."""

    target: dict[str, object]
    host: dict[str, object]
    sampler: dict[str, object]
    session: dict[str, object]
    maps: tuple[GenerationRecord, ...]
    objects: tuple[ObjectRecord, ...]
    frames: tuple[FrameRecord, ...]
    stacks: tuple[tuple[int, ...], ...]
    threads: dict[int, str]
    samples: tuple[tuple[float, int, int, int, int], ...] = field(repr=False)
    process: tuple[ProcessStat, ...] = ()
    # Version 4: the session's processes and each thread's process (older captures: one
    # process, the target, and every thread its own).
    processes: tuple[ProcessRecord, ...] = ()
    thread_pids: dict[int, int] = field(default_factory=dict)

    @property
    def rate_hz(self) -> int:
        """The session's sampling rate (a period is 1/rate s); 0 where the capture does
        not say it as a positive whole number."""
        rate = self.sampler.get("rate_hz")
        return rate if isinstance(rate, int) and not isinstance(rate, bool) and rate > 0 else 0

    @property
    def seconds(self) -> float:
        """How long the session ran (its end less its start); 0 where it does not say."""
        start, end = self.session.get("start"), self.session.get("end")
        if not isinstance(start, int | float) or not isinstance(end, int | float):
            return 0.0
        if isinstance(start, bool) or isinstance(end, bool):
            return 0.0  # (a bool is an int to isinstance)
        length = float(end) - float(start)
        return length if math.isfinite(length) and length > 0 else 0.0
