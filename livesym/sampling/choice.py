"""Which sampler a session takes: the one asked for by name, or ``auto``'s choice.

``auto`` takes mixed stacks (perf and py-spy) or py-spy alone for a Python program,
else perf where perf_event_open is permitted, else ptrace; where it does not take its
first choice it says why, as a note the command prints (a sampler never writes to the
terminal: a dashboard may own it).
"""

from __future__ import annotations

from dataclasses import dataclass

from livesym.errors import TargetError
from livesym.records import TimeMode
from livesym.sampling.base import Sampler
from livesym.sampling.registry import sampler_class
from livesym.target.cpython_files import runs_cpython


@dataclass(frozen=True)
class Choice:
    """The sampler made, and why ``auto`` did not take its first choice (or None)."""

    sampler: Sampler
    note: str | None = None


def choose_sampler(
    name: str,
    pid: int,
    rate: int | None,
    mode: TimeMode,
    stack_size: int | None = None,
    *,
    kernel: bool = True,
    nonblocking: bool = False,
) -> Choice:
    """The sampler ``name`` (or ``auto``'s) for ``pid``, at its own default rate unless
    ``rate`` is given, its rate checked now (not once a dashboard is up). ``mode``: the
    time the session shows first; off-CPU time is collected for wall and off-cpu."""
    note = None
    idle = mode.collects_off_cpu
    if name == "auto":
        name, note = _auto(pid, py_spy_alone=nonblocking)
    cls = sampler_class(name)
    if name in ("pyspy", "mixed"):  # the others say why when they start, with the target
        reason = cls.available()
        if reason is not None:
            raise TargetError(f"cannot attach to {pid}: {reason}")
    if name == "pyspy":
        from livesym.sampling.pyspy import PySpySampler

        sampler: Sampler = PySpySampler(pid, rate or PySpySampler.default_rate_hz, idle=idle,
                                        nonblocking=nonblocking)  # fmt: skip
    else:
        sampler = cls(pid, rate or cls.default_rate_hz, idle=idle)
    sampler.set_mode(mode)
    sampler.check_rate()
    if stack_size is not None:
        sampler.set_stack_size(stack_size)
    sampler.set_kernel(kernel)
    return Choice(sampler, note)


def _auto(pid: int, py_spy_alone: bool = False) -> tuple[str, str | None]:
    """Python programs: mixed stacks (perf and livesym's or py-spy's Python frames, no
    stop of the target; off-CPU time too) where perf is permitted, else py-spy alone (as
    with --nonblocking, py-spy's option); native ones: perf, else ptrace
    (perf's off-CPU time, where it may not see the kernel's switches, is read from /proc
    without stopping the target: ``off_cpu_poll``)."""
    from livesym.sampling.pyspy import PySpySampler

    notes = []
    perf_reason = sampler_class("perf").available()
    if runs_cpython(pid):
        pyspy_reason = PySpySampler.available()
        if pyspy_reason is None:
            if perf_reason is None and not py_spy_alone:
                return "mixed", None
            if perf_reason is not None and not py_spy_alone:
                why = f"sampling with pyspy, which stops the target for each sample: {perf_reason}"
                return "pyspy", why
            return "pyspy", None
        notes.append(f"{pid} runs Python, but {pyspy_reason}")
    if perf_reason is None:
        name = "perf"
    else:
        ptrace_reason = sampler_class("ptrace").available()
        if ptrace_reason is not None:
            raise TargetError(
                f"cannot sample {pid}: no sampler is permitted (perf: {perf_reason}; "
                f"ptrace: {ptrace_reason})"
            )
        notes.append(perf_reason)
        name = "ptrace"
    return name, f"sampling with {name}: {'; '.join(notes)}" if notes else None
