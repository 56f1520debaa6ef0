"""Go's function table (livesym.elf.gopclntab) read from real Go programs built here,
held to the references: nm's names and addresses from the unstripped build's symbol
table, and the Go compiler's own .debug_frame for the stack-pointer table. Damaged
tables fail with ElfFormatError, never anything else."""

from __future__ import annotations

import random
import re
import subprocess

import pytest

from livesym.elf.cfi import CallFrames
from livesym.elf.cfi_rules import Row, ThreadRoot
from livesym.elf.gopclntab import parse_go_table, read_go_table, stack_edge
from livesym.elf.image import load_image
from livesym.errors import ElfFormatError
from livesym.symbolize.objects import ObjectCache


def _nm(path) -> set[tuple[str, int]]:
    """(name, address) of each function symbol; a function and its ABI wrapper share a
    name in Go's table (".abi0" marks the assembly one in the symbol table)."""
    out = subprocess.run(["nm", "--defined-only", str(path)], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    found: set[tuple[str, int]] = set()
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in "Tt":
            name = parts[2].removesuffix(".abi0")
            # Go's own table writes an array type's length as "[...]"
            found.add((re.sub(r"\[\d+\]", "[...]", name), int(parts[0], 16)))
    return found


def test_names_and_entries_are_the_symbol_table_s(go_programs):
    # GIVEN the stripped build's table and nm's reading of the unstripped build
    table = read_go_table(load_image(str(go_programs.stripped)), [])
    assert table is not None and table.version in ("1.18", "1.20", "1.16", "1.2")
    reference = _nm(go_programs.full)
    # THEN every function it names is where the symbol table puts it
    named = {(table.name_of(n).decode(), start) for start, n, _ in table.functions}
    assert len(named) > 1000
    assert named - reference == set()
    names = {n for n, _ in named}
    assert {"main.sortWork", "main.hashWork", "runtime.goexit"} <= names


def test_stack_pointer_table_agrees_with_the_compiler_s_cfi(go_programs):
    # GIVEN the unstripped build: Go writes .debug_frame from the same information
    image = load_image(str(go_programs.full))
    frames = CallFrames(image, None)
    table = read_go_table(image, [])
    assert table is not None
    compared = disagree = 0
    for start, _name, end in table.functions[::3]:
        for vaddr in range(start, min(end, start + 400)):
            cfi = frames.rules_at(vaddr)
            ours = table.rules_at(vaddr, image.e_machine)
            if not isinstance(cfi, Row) or ours is None:
                continue
            compared += 1
            if (cfi.cfa.register, cfi.cfa.offset) != (ours.cfa.register, ours.cfa.offset):
                disagree += 1
    # THEN the canonical frame address is the same everywhere both speak
    assert compared > 20_000
    assert disagree == 0


def test_roots_and_switches_are_edges_of_the_stack(go_programs):
    obj = ObjectCache().load(str(go_programs.stripped))
    table = read_go_table(load_image(str(go_programs.stripped)), [])
    assert table is not None
    at = {table.name_of(n).decode(): start for start, n, _ in table.functions}
    assert obj.rules_at(at["runtime.goexit"]) == ThreadRoot("runtime.goexit")
    assert obj.rules_at(at["runtime.systemstack"]) == ThreadRoot("runtime.systemstack", True)
    # and an ordinary function gets rules from the stack-pointer table (no CFI here)
    assert isinstance(obj.rules_at(at["main.sortWork"] + 30), Row)
    assert stack_edge("runtime.goexit.abi0") == ThreadRoot("runtime.goexit.abi0")
    assert stack_edge("main.main") is None


@pytest.mark.parametrize("seed", range(4))
def test_damaged_tables_fail_as_elf_format_errors(go_programs, seed):
    image = load_image(str(go_programs.stripped))
    sec = image.section(".gopclntab")
    assert sec is not None
    data = image.read(sec.sh_offset, sec.sh_size)
    rng = random.Random(seed)
    for _ in range(40):
        damaged = bytearray(data[: rng.randrange(0, len(data))] if rng.random() < 0.5 else data)
        for _ in range(rng.randrange(1, 64)):
            # flips in the header and the function table, where offsets and counts live
            damaged[rng.randrange(0, min(len(damaged), 4096) or 1) if damaged else 0 :][:1] = b""
            if damaged:
                damaged[rng.randrange(0, len(damaged))] = rng.randrange(256)
        try:
            table = parse_go_table(bytes(damaged), True)
        except ElfFormatError:
            continue
        for _ in range(200):
            table.rules_at(rng.randrange(0x400000, 0x500000), "EM_X86_64")
