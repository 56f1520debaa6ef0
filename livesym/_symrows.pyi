"""Types of livesym/_symrows.c (the C rows of ``symbolize -e --json``)."""

from array import array
from collections.abc import Callable, Mapping

def rows(
    lines: list[str],
    k: int,
    out: list[str],
    lo: int,
    hi: int,
    delta: int,
    starts: array[int],
    ends: array[int],
    reach: array[int],
    fragments: dict[int, str],
    fragment: Callable[[int], str],
    fde_starts: array[int] | None,
    fde_base: int,
    spans: dict[int, tuple[int, int, int]],
    span_of: Callable[[int], tuple[int, int, int]],
    fde_source: str,
    unnamed_reason: str,
    head: str,
    mid: str,
    nothing: str,
    names: tuple[list[int], list[bytes], Mapping[int, object], int, int, int, int] | None,
    /,
) -> int: ...
