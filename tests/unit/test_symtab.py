"""Function symbol tables on synthetic ELF files of every class, byte order and machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.elf.image import SectionHeader, load_image
from livesym.elf.symtab import TABLE_BITS, _build, load_symbols
from livesym.errors import ElfFormatError, NotElfError
from tests.support.elfbuild import (
    EM_386,
    EM_AARCH64,
    EM_ARM,
    EM_RISCV,
    EM_S390,
    EM_X86_64,
    ET_DYN,
    ET_EXEC,
    SHN_ABS,
    SHN_UNDEF,
    STB_GLOBAL,
    STB_LOCAL,
    STB_WEAK,
    STT_GNU_IFUNC,
    STT_OBJECT,
    Sec,
    Spec,
    Sym,
    build,
)

LAYOUTS = [
    (32, True, EM_386),
    (32, True, EM_RISCV),
    (32, False, EM_ARM),
    (64, True, EM_X86_64),
    (64, True, EM_AARCH64),
    (64, True, EM_RISCV),
    (64, False, EM_S390),
]


def write(tmp_path: Path, spec: Spec, name: str = "t.elf") -> Path:
    path = tmp_path / name
    path.write_bytes(build(spec).data)
    return path


def table(tmp_path: Path, spec: Spec):
    return load_symbols(load_image(write(tmp_path, spec)))


@pytest.mark.parametrize(("elf_class", "little", "machine"), LAYOUTS)
def test_sized_symbols_cover_exactly_their_range(tmp_path, elf_class, little, machine):
    spec = Spec(
        elf_class=elf_class,
        little_endian=little,
        machine=machine,
        sections=(Sec(".text", 0x10000, 0x400),),
        symtab=(Sym("alpha", 0x10000, 0x40), Sym("beta", 0x10080, 0x20, bind=STB_LOCAL)),
    )
    st = table(tmp_path, spec)
    assert st.sources == ("symtab",)
    hit = st.lookup(0x10000)
    assert hit is not None and (hit.name, hit.offset, hit.size) == ("alpha", 0, 0x40)
    assert st.lookup(0x1003F).name == "alpha"
    assert st.lookup(0x10040) is None  # the gap after a sized symbol is nobody's
    assert st.lookup(0x10090).name == "beta"
    assert st.lookup(0x100A0) is None


def test_bare_metal_riscv32_size_zero_start_covers_up_to_next_symbol(tmp_path):
    # The seed's RISC-V image: _start at 0x80000000 with size 0, main, _trm_init; .text 0x38.
    spec = Spec(
        elf_class=32,
        machine=EM_RISCV,
        e_type=ET_EXEC,
        entry=0x80000000,
        sections=(Sec(".text", 0x80000000, 0x38),),
        symtab=(
            Sym("_trm_init", 0x80000018, 32),
            Sym("_start", 0x80000000, 0),
            Sym("main", 0x80000010, 8),
        ),
    )
    image = load_image(write(tmp_path, spec))
    assert image.e_type == "ET_EXEC" and image.e_machine == "EM_RISCV" and image.elf_class == 32
    st = load_symbols(image)
    assert st.lookup(0x80000000).name == "_start"
    hit = st.lookup(0x8000000C)
    assert hit.name == "_start" and hit.size == 0x10 and hit.declared_size == 0
    assert st.lookup(0x80000014).name == "main"
    assert st.lookup(0x80000037).name == "_trm_init"
    assert st.lookup(0x80000038) is None


def test_size_zero_symbol_stops_at_its_section_end(tmp_path):
    spec = Spec(
        sections=(Sec(".text", 0x1000, 0x100), Sec(".other", 0x3000, 0x100)),
        symtab=(Sym("last_in_text", 0x10F0, 0), Sym("far", 0x3000, 0x10, section=".other")),
    )
    st = table(tmp_path, spec)
    assert st.lookup(0x10FF).name == "last_in_text"
    assert st.lookup(0x1100) is None


def test_arm_thumb_bit_is_cleared(tmp_path):
    spec = Spec(
        elf_class=32,
        machine=EM_ARM,
        sections=(Sec(".text", 0x8000, 0x100),),
        symtab=(Sym("thumb_fn", 0x8011, 0x10), Sym("arm_fn", 0x8040, 0x10)),
    )
    st = table(tmp_path, spec)
    hit = st.lookup(0x8010)
    assert hit.name == "thumb_fn" and hit.vaddr == 0x8010
    assert st.lookup(0x8040).name == "arm_fn"


def test_only_defined_nonzero_function_symbols_count(tmp_path):
    spec = Spec(
        sections=(Sec(".text", 0x1000, 0x100),),
        symtab=(
            Sym("undefined", 0x1000, 0x10, section=SHN_UNDEF),
            Sym("zero", 0, 0x10),
            Sym("data", 0x1020, 0x10, type=STT_OBJECT),
            Sym("ifunc", 0x1040, 0x10, type=STT_GNU_IFUNC),
            Sym("absolute", 0x1060, 0x10, section=SHN_ABS),
        ),
    )
    st = table(tmp_path, spec)
    names = sorted(e.name for e in st.entries())
    assert names == ["absolute", "ifunc"]


def test_aliases_resolve_deterministically(tmp_path):
    syms = (
        Sym("__libc_malloc", 0x1000, 0x40, bind=STB_GLOBAL),
        Sym("malloc", 0x1000, 0x40, bind=STB_GLOBAL),
        Sym("weak_malloc", 0x1000, 0x40, bind=STB_WEAK),
        Sym("local_malloc", 0x1000, 0x40, bind=STB_LOCAL),
    )
    first = table(tmp_path, Spec(symtab=syms))
    # Same symbols in the opposite order in the file: same answer.
    second = load_symbols(load_image(write(tmp_path, Spec(symtab=syms[::-1]), "r.elf")))
    for symbols in (first, second):
        assert symbols.lookup(0x1010).name == "malloc"
        assert symbols.aliases(symbols.index_of(0x1010)) == (
            "malloc",
            "__libc_malloc",
            "weak_malloc",
            "local_malloc",
        )


def test_alias_with_larger_size_still_covers_its_tail(tmp_path):
    spec = Spec(
        symtab=(Sym("short_global", 0x1000, 0x10), Sym("long_local", 0x1000, 0x40, bind=STB_LOCAL))
    )
    st = table(tmp_path, spec)
    assert st.lookup(0x1008).name == "short_global"
    assert st.lookup(0x1030).name == "long_local"


def test_nested_symbols_fall_back_to_the_enclosing_one(tmp_path):
    spec = Spec(
        sections=(Sec(".text", 0x1000, 0x400),),
        symtab=(
            Sym("outer", 0x1000, 0x300),
            Sym("inner1", 0x1010, 0x10),
            Sym("inner2", 0x1100, 0x10),
            Sym("after", 0x1300, 0x10),
        ),
    )
    st = table(tmp_path, spec)
    assert st.lookup(0x1015).name == "inner1"
    assert st.lookup(0x1050).name == "outer"
    assert st.lookup(0x1200).name == "outer"
    assert st.lookup(0x1305).name == "after"
    assert st.lookup(0x1310) is None


def test_dynsym_and_symtab_merge_without_duplicates(tmp_path):
    spec = Spec(
        sections=(Sec(".text", 0x1000, 0x100),),
        symtab=(Sym("exported", 0x1000, 0x10), Sym("local_only", 0x1020, 0x10, bind=STB_LOCAL)),
        dynsym=(Sym("exported", 0x1000, 0x10),),
    )
    st = table(tmp_path, spec)
    assert st.sources == ("symtab", "dynsym")
    assert len(st) == 2
    assert st.aliases(st.index_of(0x1000)) == ("exported",)


def test_names_are_lazy_and_demangled_on_demand(tmp_path):
    spec = Spec(
        symtab=(
            Sym("_ZNSt6vectorIiSaIiEE9push_backERKi", 0x1000, 0x10),
            Sym("_RNvCskwGfYPst2Cb_3foo16example_function", 0x1010, 0x10),
            Sym("_ZN3std2io4Read11read_to_end17hb85a0f6802e14499E", 0x1020, 0x10),
        )
    )
    st = table(tmp_path, spec)
    assert st._names == {}
    hit = st.lookup(0x1004)
    assert hit.name == "_ZNSt6vectorIiSaIiEE9push_backERKi"
    assert hit.demangled == "std::vector<int, std::allocator<int> >::push_back(int const&)"
    assert st.lookup(0x1010).demangled == "foo::example_function"
    assert st.lookup(0x1020).demangled == "std::io::Read::read_to_end"


def test_markup_and_odd_bytes_in_names_are_kept_as_data(tmp_path):
    spec = Spec(symtab=(Sym(b"[bold]x[/bold]", 0x1000, 0x10), Sym(b"bad\xff\xfeutf8", 0x1010, 8)))
    st = table(tmp_path, spec)
    assert st.lookup(0x1000).name == "[bold]x[/bold]"
    assert st.lookup(0x1010).name == "bad\\xff\\xfeutf8"


def test_build_id_is_read_in_either_byte_order(tmp_path):
    for little in (True, False):
        spec = Spec(
            little_endian=little,
            machine=EM_S390 if not little else EM_X86_64,
            build_id=bytes(range(20)),
        )
        image = load_image(write(tmp_path, spec, f"b{little}.elf"))
        assert image.build_id_hex == bytes(range(20)).hex()


def test_build_id_found_through_pt_note_without_section_headers(tmp_path):
    spec = Spec(build_id=b"\xab" * 16, section_headers=False, symtab=(Sym("f", 0x1000, 4),))
    image = load_image(write(tmp_path, spec))
    assert image.sections == ()
    assert image.build_id == b"\xab" * 16
    assert len(load_symbols(image)) == 0


def test_not_elf_and_empty_files_are_clear_errors(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "text").write_bytes(b"hello world\n")
    with pytest.raises(NotElfError, match="empty file"):
        load_image(tmp_path / "empty")
    with pytest.raises(NotElfError, match="no ELF magic"):
        load_image(tmp_path / "text")


def test_truncated_header_is_a_format_error(tmp_path):
    data = build(Spec()).data
    (tmp_path / "trunc").write_bytes(data[:30])
    with pytest.raises(ElfFormatError):
        load_image(tmp_path / "trunc")


def test_et_dyn_and_exec_types_come_from_the_header(tmp_path):
    assert load_image(write(tmp_path, Spec(e_type=ET_DYN), "d")).e_type == "ET_DYN"
    assert load_image(write(tmp_path, Spec(e_type=ET_EXEC), "e")).e_type == "ET_EXEC"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    intervals=st.lists(
        st.tuples(st.integers(1, 400), st.integers(0, 120)), min_size=1, max_size=40
    ),
)
def test_lookup_equals_brute_force_on_nested_and_overlapping_symbols(intervals):
    # Ranges, possibly nested, overlapping or repeated; names unique per (start, size).
    raw = [
        (start, size, n << TABLE_BITS, STB_GLOBAL, 1) for n, (start, size) in enumerate(intervals)
    ]
    strtab = b"\0".join(f"f{n}".encode() for n in range(len(intervals))) + b"\0"
    # name ref n<<TABLE_BITS must point at "f{n}": rebuild refs as offsets into strtab.
    offsets, pos = [], 0
    for n in range(len(intervals)):
        offsets.append(pos)
        pos += len(f"f{n}") + 1
    raw = [(s, z, offsets[n] << TABLE_BITS, b, x) for n, (s, z, _r, b, x) in enumerate(raw)]
    sec = SectionHeader(1, ".text", 1, 6, 0, 0x1000, 1000, 0, 0, 16, 0)
    sections = (SectionHeader(0, "", 0, 0, 0, 0, 0, 0, 0, 0, 0), sec)
    table = _build(raw, [strtab, b""], [sections], ("symtab",), [])
    spans = []
    for i in range(len(table)):
        spans.append((table.start(i), table.end(i)))
    for probe in range(600):  # every address: a skipped enclosing entry shows somewhere
        covering = [(s, e) for s, e in spans if s <= probe < e]
        got = table.index_of(probe)
        if not covering:
            assert got is None
        else:
            # The innermost: the latest start, and among equal starts the shortest.
            want = max(covering, key=lambda se: (se[0], -se[1]))
            assert got is not None and (table.start(got), table.end(got)) == want


def test_arm_thumb_bit_is_cleared_whatever_the_class(tmp_path):
    # EM_ARM is a 32-bit machine, but the rule belongs to the machine, not the class.
    spec = Spec(
        elf_class=64,
        machine=EM_ARM,
        sections=(Sec(".text", 0x8000, 0x100),),
        symtab=(Sym("thumb_fn", 0x8011, 0x10),),
    )
    assert table(tmp_path, spec).lookup(0x8010).name == "thumb_fn"
