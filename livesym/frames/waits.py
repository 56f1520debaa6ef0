"""Where an off-CPU stack waited, and what kind of wait it was.

A thread leaves a CPU through the scheduler: the kernel's part of every off-CPU stack
starts with the same scheduler functions (``schedule``, ``__schedule``). They say
nothing about the wait, so they are left out, and the stack's leaf is the kernel's wait
function (``do_nanosleep``, ``futex_do_wait``, ``pipe_read``, ``ep_poll``,
``io_schedule``) under the system call that blocked.

What called the scheduler says what kind of wait it was: a preemption (the way back to
user code from an interrupt or a system call, a preemption point in the kernel) is a
thread runnable but waiting for a CPU, whatever the sampler could tell: its leaf is
``WAITING_FOR_CPU``. A sleep is disk I/O when ``io_schedule`` (or its timeout form) is
on the kernel's stack: the task waits in state D for a block device.
"""

from __future__ import annotations

from collections.abc import Sequence

from livesym.records import KIND_KERNEL, WAITING_FOR_CPU, Frame, FrameRecord, Reason
from livesym.sampling.base import ThreadState
from livesym.target.blocked import PREEMPTED

# The scheduler's own functions at the leaf of every off-CPU kernel stack.
SCHEDULER = frozenset({"schedule", "__schedule", "schedule_preempt_disabled"})
# What called the scheduler where the thread was preempted: target.blocked.PREEMPTED.
# The frames of the way back say nothing the thread did; a preemption point's callers
# are the kernel work it was doing.
_RETURN_PATH = ("irqentry_exit", "raw_irqentry_exit", "exit_to_user_mode",
                "syscall_exit_to_user_mode", "asm_sysvec_", "sysvec_", "asm_common_interrupt",
                "common_interrupt", "preempt_schedule", "__cond_resched",
                "_cond_resched")  # fmt: skip
_DISK = ("io_schedule", "io_schedule_timeout")


def without_scheduler(
    kernel: Sequence[FrameRecord], preempted: bool = False
) -> tuple[FrameRecord, ...]:
    """The kernel's frames of an off-CPU stack, leaf first, the scheduler's left out;
    all of them where nothing else is there (a stack is never emptied). A thread
    preempted (``preempted``, or so its frames say: the scheduler called from a
    preemption) loses its way back to user code too, and has ``WAITING_FOR_CPU`` as its
    leaf: what it waited for was a CPU."""
    skip = 0
    while skip < len(kernel) and kernel[skip].symbol in SCHEDULER:
        skip += 1
    if not preempted and skip < len(kernel):
        preempted = _starts(kernel[skip].symbol, PREEMPTED)
    if preempted:
        while skip < len(kernel) and _starts(kernel[skip].symbol, _RETURN_PATH):
            skip += 1
        return (WAITING_FOR_CPU, *kernel[skip:])
    return tuple(kernel[skip:] if skip < len(kernel) else kernel)


def _starts(symbol: str | None, prefixes: tuple[str, ...]) -> bool:
    return symbol is not None and symbol.startswith(prefixes)


def wait_state(state: ThreadState, frames: Sequence[Frame]) -> ThreadState:
    """``state`` as the sampler said it, made RUNNABLE where the stack waits for a CPU
    (``WAITING_FOR_CPU`` at its leaf), DISK where a sleeping thread's kernel stack waits
    in ``io_schedule``."""
    if frames and frames[0].reason is Reason.WAITING_FOR_CPU:
        return ThreadState.RUNNABLE
    if state is not ThreadState.SLEEPING:
        return state
    for frame in frames:
        if frame.kind != KIND_KERNEL:
            break  # the kernel's frames come first
        if frame.symbol in _DISK:
            return ThreadState.DISK
    return state
