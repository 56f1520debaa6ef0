# livesym/_perfsamples.c's interface; livesym.sampling.perf_records uses it.
from collections.abc import Callable
from typing import Any

def samples(
    buf: bytes | bytearray | memoryview,
    fixed: int,
    tid_at: int,
    time_at: int,
    callchain: bool,
    regs_count: int,
    order: tuple[int, ...],
    pc: int,
    pid: int,
    kernel: bool,
    raisable: bool,
    make_regs: Callable[..., Any],
    machine: object,
    make_sample: Callable[..., Any],
    running: object,
    /,
) -> tuple[list[Any], int]: ...
