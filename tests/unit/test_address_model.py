"""The address model on numbers: the seed's worked examples, base derivation and checks.

Seed: ../shared/seeds/000_aafc9bc2afc16c6b.txt. Its example 1 prints
ELF_offset = 0xbd6500 - 0xbd5fd4 + 0xbd4fd4 = 0xbd5000; the arithmetic is
0xbd5500 (0xbd4fd4 + 0x52c). The tests pin the correct number.
"""

from __future__ import annotations

from livesym.addr.convert import (
    ET_DYN,
    ET_EXEC,
    BaseDerivation,
    check_object_bases,
    derive_base,
    elf_offset_to_vaddr,
    elf_vaddr_to_offset,
    elf_vaddr_to_vma,
    vma_to_elf_vaddr,
)
from livesym.addr.kinds import Base, ElfOffset, ElfVaddr, Vma
from livesym.addr.maps import parse_maps_line
from livesym.addr.segments import PF_R, PF_W, PF_X, LoadSegment
from livesym.records import Reason, Unresolved

PAGE = 0x1000


def seg(
    index: int,
    off: int,
    vaddr: int,
    filesz: int,
    memsz: int | None = None,
    flags: int = PF_R | PF_X,
    align: int = 0x1000,
) -> LoadSegment:
    return LoadSegment(index, off, vaddr, filesz, filesz if memsz is None else memsz, align, flags)


def mapping(start: int, end: int, pgoff: int, perms: str = "r-xp", path: str = "/bin/x"):
    return parse_maps_line(f"{start:x}-{end:x} {perms} {pgoff:08x} fd:01 42 {path}")


def derived(result: BaseDerivation | Unresolved) -> BaseDerivation:
    assert isinstance(result, BaseDerivation), result
    return result


# --- the seed's example 1: a PIE whose executable segment has an unaligned p_offset ---

SEED1 = seg(3, 0xBD4FD4, 0xBD5FD4, 0x2F41D78)


def test_seed_pie_example_base_address():
    m = mapping(0x55A1C0BD5000, 0x55A1C3F17000, 0xBD4000)
    d = derived(derive_base(m, [SEED1], ET_DYN, PAGE))
    assert d.base == 0x55A1C0000000
    assert d.segment is SEED1
    assert d.problems == ()
    assert d.step.substituted == "0x55a1c0bd5000 - (0xbd4000 - 0xbd4fd4 + 0xbd5fd4)"


def test_seed_pie_example_vaddr_and_file_offset():
    vaddr, step = vma_to_elf_vaddr(Vma(0x55A1C0BD6500), Base(0x55A1C0000000))
    assert vaddr == 0xBD6500
    assert step.text() == "elf_vaddr = vma - base = 0x55a1c0bd6500 - 0x55a1c0000000 = 0xbd6500"
    converted = elf_vaddr_to_offset(vaddr, [SEED1])
    assert not isinstance(converted, Unresolved)
    offset, used, step = converted
    assert used is SEED1
    # The seed prints 0xbd5000 here; 0xbd6500 - 0xbd5fd4 + 0xbd4fd4 is 0xbd5500.
    assert offset == 0xBD5500
    assert step.substituted == "0xbd6500 - 0xbd5fd4 + 0xbd4fd4"


def test_seed_pie_example_round_trips_offset_to_vma():
    converted = elf_offset_to_vaddr(ElfOffset(0xBD5500), [SEED1])
    assert not isinstance(converted, Unresolved)
    vaddr, _seg, _step = converted
    vma, _ = elf_vaddr_to_vma(vaddr, Base(0x55A1C0000000))
    assert vma == 0x55A1C0BD6500


# --- the seed's example 2: a static binary at its link address ---

SEED2 = seg(1, 0x1000, 0x401000, 0x2000)


def test_seed_static_example_base_is_zero_from_et_exec():
    m = mapping(0x401000, 0x403000, 0x1000)
    d = derived(derive_base(m, [SEED2], ET_EXEC, PAGE))
    assert d.base == 0
    assert "ET_EXEC" in d.step.formula
    assert d.problems == ()


def test_seed_static_example_offset():
    converted = elf_vaddr_to_offset(ElfVaddr(0x401500), [SEED2])
    assert not isinstance(converted, Unresolved)
    assert converted[0] == 0x1500


def test_et_exec_mapped_elsewhere_is_flagged_not_hidden():
    m = mapping(0x801000, 0x803000, 0x1000)
    d = derived(derive_base(m, [SEED2], ET_EXEC, PAGE))
    assert d.base == 0
    assert any("away from its link address" in p for p in d.problems)


def test_et_exec_at_high_address_is_not_mistaken_for_a_shared_library():
    # A bare-metal RISC-V image at 0x80000000: base 0 because the header says ET_EXEC,
    # not because of how large the address is (the seed 004 heuristic would fail here).
    text = seg(1, 0x1000, 0x80000000, 0x39)
    d = derived(derive_base(mapping(0x80000000, 0x80001000, 0x1000), [text], ET_EXEC, PAGE))
    assert d.base == 0 and d.problems == ()


# --- base derivation details ---


def test_base_address_of_second_exec_segment_with_unaligned_offset():
    # The BOLT-like layout: a second R-X PT_LOAD at vaddr 0x801234, p_offset 0x3234.
    first = seg(2, 0x1000, 0x1000, 0x500)
    hot = seg(4, 0x3234, 0x801234, 0x40)
    base = 0x7F0000000000
    m1 = mapping(base + 0x1000, base + 0x2000, 0x1000)
    m2 = mapping(base + 0x801000, base + 0x802000, 0x3000)
    d1 = derived(derive_base(m1, [first, hot], ET_DYN, PAGE))
    d2 = derived(derive_base(m2, [first, hot], ET_DYN, PAGE))
    assert d1.base == d2.base == base
    assert d2.segment is hot and d2.problems == ()
    assert check_object_bases([d1, d2]).agree


def test_incongruent_segment_is_reported_with_both_forms():
    # p_vaddr % page != p_offset % page: the kernel would map it shifted; the two
    # base formulas then disagree and the record says so.
    odd = seg(2, 0x1010, 0x2000, 0x100)
    d = derived(derive_base(mapping(0x7F0000002000, 0x7F0000003000, 0x1000), [odd], ET_DYN, PAGE))
    assert any("p_vaddr % p_align" in p for p in d.problems)
    assert any("disagrees with the page-aligned form" in p for p in d.problems)


def test_disagreeing_executable_mappings_are_flagged():
    text = seg(2, 0x1000, 0x1000, 0x5000)
    a = derived(derive_base(mapping(0x10000000, 0x10001000, 0x1000), [text], ET_DYN, PAGE))
    b = derived(derive_base(mapping(0x20002000, 0x20003000, 0x2000), [text], ET_DYN, PAGE))
    check = check_object_bases([a, b])
    assert not check.agree
    assert "disagree on the base" in check.problems[0]
    assert check.bases == (0x0FFFF000, 0x20000000)


def test_segment_for_mapping_prefers_matching_permissions_on_a_shared_page():
    # Old layout without -z separate-code: text ends and data starts in one file page.
    text = seg(0, 0x0, 0x0, 0x1E10, flags=PF_R | PF_X)
    data = seg(1, 0x1E10, 0x2E10, 0x200, memsz=0x400, flags=PF_R | PF_W)
    rw = mapping(0x7F0000002000, 0x7F0000003000, 0x1000, perms="rw-p")
    rx = mapping(0x7F0000000000, 0x7F0000002000, 0x0)
    d = derived(derive_base(rw, [text, data], ET_DYN, PAGE))
    assert d.segment is data
    assert derived(derive_base(rx, [text, data], ET_DYN, PAGE)).segment is text
    assert d.base == 0x7F0000000000  # 0x7f0000002000 - (0x1000 - 0x1e10 + 0x2e10)


def test_mapping_beyond_every_segment_has_no_base_and_says_why():
    result = derive_base(mapping(0x1000, 0x2000, 0x9000), [SEED2], ET_DYN, PAGE)
    assert isinstance(result, Unresolved) and result.reason is Reason.NO_SEGMENT
    assert "no PT_LOAD covers file offset 0x9000" in result.detail


def test_vaddr_in_bss_has_no_file_offset():
    data = seg(1, 0x2000, 0x3000, 0x100, memsz=0x1000, flags=PF_R | PF_W)
    result = elf_vaddr_to_offset(ElfVaddr(0x3800), [data])
    assert isinstance(result, Unresolved) and result.reason is Reason.ZERO_FILL
    assert "zero-filled tail" in result.detail


def test_offset_on_a_shared_file_page_prefers_the_executable_segment():
    text = seg(0, 0x0, 0x0, 0x1E10, flags=PF_R | PF_X)
    data = seg(1, 0x1E00, 0x2E00, 0x200, flags=PF_R | PF_W)
    converted = elf_offset_to_vaddr(ElfOffset(0x1E08), [data, text])
    assert not isinstance(converted, Unresolved)
    assert converted[1] is text and converted[0] == 0x1E08


def test_relro_page_of_the_data_segment_is_told_apart_by_the_objects_base():
    # gcc 12 PIE: PT_LOAD[2] R at offset 0x2000, PT_LOAD[3] RW at 0x2d70 -> vaddr 0x3d70.
    # After RELRO's mprotect the data segment's first page shows as r--p from pgoff
    # 0x2000 -- the same file page PT_LOAD[2] maps. Only the object's base decides.
    rodata = seg(2, 0x2000, 0x2000, 0x338, flags=PF_R)
    data = seg(3, 0x2D70, 0x3D70, 0x340, memsz=0x388, flags=PF_R | PF_W)
    base = 0x55943C512000
    relro = mapping(base + 0x3000, base + 0x4000, 0x2000, perms="r--p")
    alone = derived(derive_base(relro, [rodata, data], ET_DYN, PAGE))
    assert alone.segment is rodata  # by permissions alone: the wrong segment
    d = derived(derive_base(relro, [rodata, data], ET_DYN, PAGE, expected=base))
    assert d.segment is data and d.base == base and d.problems == ()


def test_mapping_that_fits_no_candidate_of_the_objects_base_is_flagged():
    text = seg(1, 0x1000, 0x1000, 0x800)
    d = derived(derive_base(mapping(0x9000, 0xA000, 0x1000), [text], ET_DYN, PAGE, expected=0x4000))
    assert d.base == 0x8000
    assert any("this load of the object has base 0x4000" in p for p in d.problems)
