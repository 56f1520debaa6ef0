"""Unwinding: from a thread's registers and a copy of its stack to return addresses.

``walk`` steps frame by frame with each object's call-frame information (the FDE
covering the address, decoded by ``livesym.elf.cfi_rules``), with frame pointers
as the fallback where an address has none; ``expr`` evaluates the DWARF
expressions some rules use (PLT stubs, signal frames). Every walk says how it
ended (``records.StackEnd``).
"""
