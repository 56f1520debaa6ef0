"""Return addresses recognised by the call that ends before them, against objdump's
disassembly of real libraries: every call objdump decodes is one, and the ends of
other instructions seldom look like one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from livesym.unwind.calls import CALL_BYTES, x86_64_call_ends_at_end

LIBRARIES = [
    Path("/lib/x86_64-linux-gnu/libc.so.6"),
    Path("/lib/x86_64-linux-gnu/libstdc++.so.6"),
]
LINE = re.compile(r"^\s*([0-9a-f]+):\t((?:[0-9a-f]{2} )+)\s*(?:\t(\S+)(.*))?$")


def disassembled(path: Path) -> tuple[dict[int, int], list[tuple[int, int, str, str]]]:
    """objdump -d: every byte by address, and (start, end, mnemonic, operands) of each
    instruction (a long one's bytes continue on lines without a mnemonic)."""
    out = subprocess.run(["objdump", "-d", "-w", str(path)], capture_output=True, text=True,
                         check=True, env={"LC_ALL": "C"}).stdout  # fmt: skip
    code: dict[int, int] = {}
    insns: list[tuple[int, int, str, str]] = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        at, raw, mnemonic, operands = int(m[1], 16), bytes.fromhex(m[2]), m[3], m[4] or ""
        for i, b in enumerate(raw):
            code[at + i] = b
        if mnemonic is None and insns and insns[-1][1] == at:
            start, _, mn, ops = insns[-1]
            insns[-1] = (start, at + len(raw), mn, ops)
        elif mnemonic is not None:
            insns.append((at, at + len(raw), mnemonic, operands))
    return code, insns


def before(code: dict[int, int], end: int) -> bytes | None:
    if all(a in code for a in range(end - CALL_BYTES, end)):
        return bytes(code[a] for a in range(end - CALL_BYTES, end))
    return None


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump is the reference")
@pytest.mark.parametrize("library", LIBRARIES, ids=lambda p: p.name)
def test_every_call_objdump_decodes_ends_where_livesym_says(library: Path):
    if not library.exists():
        pytest.skip(f"{library} is not installed")
    code, insns = disassembled(library)
    calls = others = false_calls = 0
    forms: set[str] = set()
    for _start, end, mnemonic, operands in insns:
        window = before(code, end)
        if window is None:
            continue
        if mnemonic.startswith("call"):
            calls += 1
            forms.add("indirect" if "*" in operands else "direct")
            assert x86_64_call_ends_at_end(window), (hex(end), mnemonic, operands, window.hex())
        else:
            others += 1
            false_calls += x86_64_call_ends_at_end(window)
    assert calls > 1000 and forms == {"direct", "indirect"}
    # Other instructions' ends look like a call's seldom (bytes of a displacement
    # or an immediate that happen to read as one): the check is a filter, not proof.
    print(f"{library.name}: {calls} calls; {false_calls} of {others} other ends look like one")
    assert false_calls / others < 0.03, (false_calls, others)
