"""Why an address has no symbol: one code per cause, shown in JSON and the UI."""

from __future__ import annotations

from enum import Enum


class Reason(Enum):
    """The value is what JSON and the UI show (docs/address-model.md lists them)."""

    UNMAPPED = "unmapped"
    ANONYMOUS = "anonymous_mapping"
    SPECIAL = "special_mapping"
    FILE_UNAVAILABLE = "file_unavailable"
    NOT_ELF = "not_elf"
    NO_SEGMENT = "no_load_segment"
    NO_SYMBOLS = "no_symbols"
    UNKNOWN_ADDRESS = "no_symbol_covers_address"
