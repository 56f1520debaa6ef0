"""/proc/kallsyms read into kernel symbols: the real file against a real address, and
the cases this machine does not show (hidden addresses, hostile lines) from files
written in its format."""

from __future__ import annotations

from pathlib import Path

import pytest

from livesym.records import Reason, Unresolved
from livesym.symbolize import kernel
from livesym.symbolize.kernel import KernelSymbol, KernelSymbols, kernel_frame_record

KALLSYMS = Path("/proc/kallsyms")


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "kallsyms"
    path.write_text(text)
    return str(path)


def test_the_running_kernel_s_symbols_name_its_own_addresses():
    symbols = KernelSymbols()
    symbols.lookup(0)  # read
    if symbols.problem is not None:
        pytest.skip(f"kernel symbols unreadable here: {symbols.problem}")
    # The address /proc/kallsyms gives for a function names that function
    for line in KALLSYMS.read_text().splitlines():
        address, kind, name = line.split()[:3]
        if name == "do_syscall_64" and kind in "tT":
            found = symbols.lookup(int(address, 16) + 4)
            assert isinstance(found, KernelSymbol)
            assert (found.name, found.offset, found.module) == ("do_syscall_64", 4, None)
            assert found.shown_module == "[kernel]" and found.size > 4
            return
    pytest.skip("this kernel has no do_syscall_64")


def test_symbols_read_ahead_name_addresses_after_the_file_is_gone(tmp_path):
    """``read_soon`` reads them without a lookup (as a session with kernel mode sampled
    starts); lookups after it do not read the file again."""
    path = write(tmp_path, "ffffffff81000100 T entry_SYSCALL_64\nffffffff81000200 T next\n")
    symbols = KernelSymbols(path)
    reader = symbols.read_soon()
    reader.join(timeout=30)
    assert not reader.is_alive()
    Path(path).unlink()
    found = symbols.lookup(0xFFFFFFFF81000108)
    assert isinstance(found, KernelSymbol) and (found.name, found.offset) == ("entry_SYSCALL_64", 8)
    assert symbols.problem is None


def test_aliases_modules_and_extents(tmp_path):
    text = (
        "ffffffff81000000 T _text\n"
        "ffffffff81000000 T srso_alias_untrain_ret\n"
        "ffffffff81000000 t __local_alias\n"
        "ffffffff81000100 T entry_SYSCALL_64\n"
        "ffffffff81000200 D some_data\n"  # data: not code
        "ffffffffc0001000 t ext4_read [ext4]\n"
        "ffffffffc0001080 T ext4_write\t[ext4]\n"
    )
    symbols = KernelSymbols(write(tmp_path, text))
    first = symbols.lookup(0xFFFFFFFF81000010)
    assert isinstance(first, KernelSymbol)
    # Of three names at one address: global before local, then fewer leading
    # underscores (the function, not the section marker)
    assert first.name == "srso_alias_untrain_ret" and first.size == 0x100
    # Data symbols are not functions: entry_SYSCALL_64 runs on to the next text symbol
    entry = symbols.lookup(0xFFFFFFFF81000250)
    assert isinstance(entry, KernelSymbol) and entry.name == "entry_SYSCALL_64"
    module = symbols.lookup(0xFFFFFFFFC0001090)
    assert isinstance(module, KernelSymbol)
    assert (module.name, module.module, module.shown_module) == ("ext4_write", "ext4", "[ext4]")
    below = symbols.lookup(0x1000)
    assert isinstance(below, Unresolved) and below.reason is Reason.NO_SYMBOLS


def test_hidden_addresses_say_how_to_lift_the_restriction(tmp_path):
    text = "0000000000000000 T _text\n0000000000000000 T do_syscall_64\n"
    symbols = KernelSymbols(write(tmp_path, text))
    found = symbols.lookup(0xFFFFFFFF81000010)
    assert isinstance(found, Unresolved) and "kptr_restrict" in found.detail
    record = kernel_frame_record(0xFFFFFFFF81000010, found)
    frame = record.frame()
    assert frame.kind == "kernel" and frame.label == "[no symbols] [kernel]"
    assert "kptr_restrict" in record.detail


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\xff garbage\n",
        "zzzz T name\n",
        "ffffffff81000000 TT name\n",
        "ffffffff81000000\n" * 1000,
        "ffffffff81000000 T " + "x" * 100_000 + "\n",
    ],
)
def test_hostile_lines_are_skipped_never_fatal(tmp_path, text):
    symbols = KernelSymbols(write(tmp_path, text))
    found = symbols.lookup(0xFFFFFFFF81000010)
    assert isinstance(found, KernelSymbol | Unresolved)


def test_an_unreadable_file_is_a_reason(tmp_path):
    found = KernelSymbols(str(tmp_path / "missing")).lookup(0xFFFFFFFF81000010)
    assert isinstance(found, Unresolved) and "cannot read" in found.detail


def test_a_kernel_frame_s_details_say_where_its_name_came_from(tmp_path):
    from livesym.ui.chain import chain_lines

    text = "ffffffff81000100 T do_syscall_64\nffffffff81000400 T other\n"
    found = KernelSymbols(write(tmp_path, text)).lookup(0xFFFFFFFF81000104)
    assert isinstance(found, KernelSymbol)
    lines = dict(chain_lines(kernel_frame_record(0xFFFFFFFF81000104, found), None))
    assert lines["address"] == "0xffffffff81000104  (kernel)"
    assert lines["symbol"] == "do_syscall_64+0x4" and lines["module"] == "[kernel]"
    assert "/proc/kallsyms" in lines["note"]
    assert "elf_vaddr" not in lines and "base" not in lines  # no ELF conversion to show


def test_every_line_is_read_across_the_pieces_the_text_is_parsed_in(tmp_path, monkeypatch):
    """kallsyms is parsed in pieces of whole lines (CHUNK bytes or so): no symbol at a
    piece's edge is lost or cut."""
    monkeypatch.setattr(kernel, "CHUNK", 50)
    names = [f"function_{i:03d}" for i in range(300)]
    text = "".join(f"{0xFFFFFFFF81000000 + 16 * i:x} T {name}\n" for i, name in enumerate(names))
    symbols = KernelSymbols(write(tmp_path, text))
    found = [symbols.lookup(0xFFFFFFFF81000000 + 16 * i + 3) for i in range(300)]
    assert [f.name for f in found if isinstance(f, KernelSymbol)] == names


@pytest.mark.parametrize("libc", [True, False], ids=["libc-read", "os-read"])
def test_a_file_is_read_whole_or_to_its_limit_with_or_without_libc(tmp_path, monkeypatch, libc):
    data = bytes(range(256)) * 1000  # more than one read's chunk
    path = tmp_path / "symbols"
    path.write_bytes(data)
    if not libc:  # where libc cannot be called directly: os.read, the same bytes
        monkeypatch.setattr(kernel, "_libc_read", lambda: None)
    assert kernel.read_holding(str(path), 1 << 20) == data
    assert kernel.read_holding(str(path), 70_000) == data[:70_000]  # the limit holds
    with pytest.raises(OSError):
        kernel.read_holding(str(tmp_path / "missing"), 100)
