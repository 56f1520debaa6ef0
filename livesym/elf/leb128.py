"""LEB128, the variable-length integers of DWARF (call-frame information, expressions)."""

from __future__ import annotations

from collections.abc import Sequence

MAX_BYTES = 10  # 70 bits: more is no 64-bit value


def decode(data: Sequence[int], at: int, signed: bool) -> tuple[int, int]:
    """(the value at ``at``, where the next field starts); ValueError when it runs past
    the data or is longer than a 64-bit value needs."""
    value = shift = 0
    for i in range(MAX_BYTES):
        if at + i >= len(data):
            raise ValueError(f"LEB128 runs past the end at offset {at:#x}")
        byte = data[at + i]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if signed and byte & 0x40:
                value -= 1 << shift
            return value, at + i + 1
    raise ValueError(f"LEB128 too long at offset {at:#x}")
