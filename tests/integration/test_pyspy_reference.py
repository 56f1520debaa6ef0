"""livesym's py-spy sampler against ``py-spy record`` run alone on the same workload
(the issue's reference): on a pure-Python loop and on one that spends its time in C
extensions (hashlib, zlib), every function with 5 % of the samples is within 5 points.

A module of its own: no other target runs meanwhile (a busy machine changes how the
runs, one after the other, see the workload). The workload itself drifts, too: the
C-extension loop's hash:compress split moved by 4 points between two reference runs
8 s apart (glibc's malloc adapts its mmap threshold and trims the heap). So the
reference runs before and after livesym's, and livesym is held to their mean. Four
seconds each at 499 Hz (2,000 samples a run): a share's sampling error is then 1.1
points at most, the difference's 1.3, so 5 points are 3.8 of them. At 199 Hz for six
seconds (1,200 samples) 5 points were 2.8 errors, and one CI run in a few hundred
crossed them with no fault on either side: burn_b at 30.3 and 31.0 % in py-spy's runs,
35.7 % in livesym's, where repeated runs of each scatter around 33.4 % with a spread of
1.4 points.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from livesym.sampling.pyspy import PySpySampler, find_py_spy
from tests.support.native_names import RawAddressNamer, defined_functions
from tests.support.procs import running

SECONDS = 4
RATE = 499
RAW = re.compile(r"0x[0-9a-f]+")  # a native frame py-spy could not name

pytestmark = pytest.mark.skipif(
    PySpySampler.available() is not None,
    reason=f"py-spy cannot run here: {PySpySampler.available()}",
)


def _reference_shares(pid: int, seconds: int, rate: int) -> dict[str, float]:
    """Total shares (%) by function (samples whose stack holds it) of ``py-spy record``
    alone (its own idle filter, --native): the reference livesym's py-spy sampler is
    held to. A native frame py-spy leaves as an address is named by other tools
    (tests/support/native_names.py), as livesym would name it."""
    exe = find_py_spy()
    assert exe is not None
    done = subprocess.run(
        [exe, "record", "--pid", str(pid), "--rate", str(rate), "--duration", str(seconds),
         "--format", "raw", "--output", "/dev/stdout", "--native"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stacks: list[tuple[list[str], int]] = []
    for line in done.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit() or line.startswith("py-spy>"):
            continue
        stacks.append(([frame.split(" (", 1)[0] for frame in stack.split(";")], int(n)))
    # Raw addresses: return addresses but for the leaf (the last), named at address - 1
    raw = {(name, k == len(frames) - 1) for frames, _ in stacks for k, name in enumerate(frames)
           if RAW.fullmatch(name)}  # fmt: skip
    looked_up = {(name, leaf): int(name, 16) - (0 if leaf else 1) for name, leaf in raw}
    named = RawAddressNamer(pid).names(sorted(set(looked_up.values())))
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for frames, n in stacks:
        total += n
        names = {
            named[looked_up[name, k == len(frames) - 1]] if RAW.fullmatch(name) else name
            for k, name in enumerate(frames)
        }
        for name in names:
            counts[name] += n
    return {name: 100 * n / total for name, n in counts.items()}


# One thread each, so that no thread waits for the GIL (py-spy's own reference calls
# waiting threads running half the time: its ptrace stops wake them).
PURE_PYTHON = """
import os
def spin(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFF
    return x
def burn_a():
    return spin(20000)
def burn_b():
    return spin(10000)
print("ready", os.getpid(), flush=True)
while True:
    burn_a()
    burn_b()
"""
C_EXTENSION = """
import hashlib, os, zlib
data = bytes(range(256)) * 4096
def hash_it():
    return hashlib.sha256(data).digest()
def pack_it():
    return zlib.compress(data, 6)
print("ready", os.getpid(), flush=True)
while True:
    hash_it()
    pack_it()
"""


# The mixed sampler reads Python's frames itself at each sample: it is held to py-spy
# alone on the same kinds of work (SHA-256, zlib, string work in the interpreter) in
# tests/integration/test_python_at_the_sample.py, phases switching every 5-40 ms.
SAMPLERS = ("pyspy",)


@pytest.mark.parametrize("code", [PURE_PYTHON, C_EXTENSION], ids=["pure-python", "c-extension"])
def test_shares_agree_with_py_spy_alone(cli, code: str) -> None:
    """Every function either names that holds 5 % of the samples on either side is within
    5 points of ``py-spy record --native`` run alone on the same workload (the mean of
    a run just before livesym's and one just after; shares of the samples whose stack
    holds the function), for livesym's py-spy sampler."""
    with running(Path(sys.executable), "-c", code) as proc:
        references = [_reference_shares(proc.pid, SECONDS, RATE)]
        done, system = {}, {}
        for sampler in SAMPLERS:
            before = _cpu_ticks(proc.pid)
            done[sampler] = cli("top", str(proc.pid), "--sampler", sampler, "--duration",
                                str(SECONDS), "--json", "--rate", str(RATE))  # fmt: skip
            (user, sys_), (user0, sys0) = _cpu_ticks(proc.pid), before
            system[sampler] = 100 * (sys_ - sys0) / max(user + sys_ - user0 - sys0, 1)
            references.append(_reference_shares(proc.pid, SECONDS, RATE))
        defined = defined_functions(proc.pid)
    for k, sampler in enumerate(SAMPLERS):
        assert done[sampler].code == 0, done[sampler].err
        ours = {f["symbol"] or f["demangled"]: f["total_pct"]
                for f in json.loads(done[sampler].out)["functions"]}  # fmt: skip
        # py-spy alone shows no kernel time; livesym's estimate of it is held to the
        # process's own system time over its session (the CPU split sizes it so)
        kernel = ours.pop(ESTIMATED, 0.0)
        assert abs(kernel - system[sampler]) <= 5, (kernel, system[sampler], sampler)
        _agree(references[k], references[k + 1], ours, defined, code, sampler)


ESTIMATED = "[kernel] (estimated from system time)"


def _cpu_ticks(pid: int) -> tuple[int, int]:
    """The process's user and system time so far, in clock ticks (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]), int(fields[12])


def _agree(
    before: dict[str, float], after: dict[str, float], ours: dict[str, float],
    defined: set[str], code: str, sampler: str,
) -> None:  # fmt: skip
    reference = {n: (before.get(n, 0) + after.get(n, 0)) / 2 for n in before.keys() | after.keys()}
    # Over every name either side gives, a name one side lacks counting as 0 there: a
    # function livesym fails to name (or names differently) is a difference, not a gap.
    # Two differences are by design, and each is checked to be what it is: py-spy's
    # mixed stacks expand inlined functions from DWARF (zlib_compress_impl in
    # zlib_compress), which livesym's own unwinding names by symbol tables (its caller
    # then holds the time: a name no symbol table defines); and livesym's stacks reach
    # past the root py-spy's native unwinding stops at (__libc_start_main, in every
    # stack of ours).
    inlined = {n for n in set(reference) - set(ours) if n not in defined}
    beyond = {n for n in set(ours) - set(reference) if ours[n] >= 99}
    either = (set(reference) | set(ours)) - inlined - beyond
    big = {n for n in either if max(reference.get(n, 0), ours.get(n, 0)) >= 5}
    wanted = {"burn_a", "burn_b"} if code is PURE_PYTHON else {"hash_it", "pack_it"}
    assert wanted <= big, (sampler, reference, ours)
    far = {n: (round(before.get(n, 0), 1), round(after.get(n, 0), 1), round(ours.get(n, 0), 1))
           for n in big if abs(reference.get(n, 0) - ours.get(n, 0)) > 5}  # fmt: skip
    assert not far, (far, sampler)
