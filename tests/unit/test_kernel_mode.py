"""A session's kernel mode: typed where it is made, its words kept by a capture and
read back as the same mode by a replay (livesym.records.KernelMode)."""

from __future__ import annotations

import pytest

from livesym.records import (
    KERNEL_BY_NONE,
    KERNEL_SAMPLED,
    KERNEL_UNSAID,
    KernelMode,
    KernelSeen,
)
from livesym.sampling.pyspy import KERNEL_MODE as PYSPY_MODE

MODES = [
    KERNEL_SAMPLED,
    KERNEL_BY_NONE,
    KernelMode.of(KernelSeen.LEFT_OUT, "--no-kernel"),
    KernelMode.not_sampled("refused (Permission denied)"),
    KernelMode.of(KernelSeen.FROM_SYSCALLS, "ptrace sees which; sized by system time"),
    PYSPY_MODE,
    KernelMode.of(KernelSeen.ESTIMATED, str(KernelMode.not_sampled("not permitted"))),
]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.text)
def test_a_capture_s_words_are_read_back_as_the_same_mode(mode: KernelMode) -> None:
    assert KernelMode.parse(str(mode)) == mode


def test_the_words_are_those_captures_always_had() -> None:
    assert str(KERNEL_SAMPLED) == "sampled" and KERNEL_SAMPLED.sampled
    assert str(MODES[2]) == "left out (--no-kernel)"
    assert str(MODES[3]) == "not sampled: refused (Permission denied)"
    assert str(MODES[6]) == "estimated from system time (not sampled: not permitted)"
    assert not any(m.sampled for m in MODES[1:])


def test_words_livesym_never_wrote_are_kept_and_not_taken_for_sampled() -> None:
    # An older or hand-made capture: its words shown as they are, never as "sampled".
    for text in ("sampledish", "kernel: yes", "", "samp"):
        mode = KernelMode.parse(text)
        assert mode.text == text and not mode.sampled
    assert KernelMode.parse("") == KERNEL_UNSAID
    mixed = KernelMode.parse("perf: sampled; ptrace: from system calls (...)")
    assert mixed.seen is KernelSeen.PER_SAMPLER
