"""Demangling on real g++ and rustc output, checked against binutils' c++filt."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from livesym.elf.image import load_image
from livesym.elf.symtab import load_symbols

CXX_SOURCE = r"""
#include <map>
#include <string>
#include <vector>
namespace ns {
template <typename T> struct Box { T v; __attribute__((noinline)) T get() const { return v; } };
}
__attribute__((noinline)) int f(std::vector<std::string> const& v, std::map<int, double>* m) {
    return (int)v.size() + (int)m->size();
}
int main() {
    std::vector<std::string> v{"a"}; std::map<int, double> m; ns::Box<long> b{3};
    return f(v, &m) + (int)b.get();
}
"""

RUST_SOURCE = r"""
#[inline(never)] pub fn plain_function(x: u64) -> u64 { x.wrapping_mul(31) }
pub struct Counter { n: u64 }
impl Counter { #[inline(never)] pub fn bump(&mut self) -> u64 { self.n += 1; self.n } }
#[inline(never)] fn generic<T: Copy + Into<u64>>(x: T) -> u64 { x.into() }
fn main() {
    let mut c = Counter { n: 0 };
    let n = std::hint::black_box(std::env::args().count() as u64);
    println!("{} {} {}", plain_function(n), c.bump(), generic(n as u8));
}
"""


def cxxfilt(names: list[str]) -> list[str]:
    out = subprocess.run(
        ["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def compile_or_skip(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"{cmd[0]} could not build the test program: {result.stderr.strip()[:200]}")


@pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("c++filt") is None, reason="needs g++ and c++filt"
)
def test_cxx_names_match_cxxfilt_exactly(tmp_path: Path):
    src = tmp_path / "t.cpp"
    src.write_text(CXX_SOURCE)
    exe = tmp_path / "t"
    compile_or_skip(["g++", "-O1", "-o", str(exe), str(src)])
    st = load_symbols(load_image(exe))
    entries = [e for e in st.entries() if e.name.startswith("_Z")]
    assert len(entries) >= 3
    ours = [st.demangled(st.index_of(e.vaddr)) for e in entries]
    assert ours == cxxfilt([e.name for e in entries])
    assert "ns::Box<long>::get() const" in ours


def strip_rust_hashes(name: str) -> str:
    """c++filt keeps crate disambiguators and legacy hashes; rustc-demangle's {:#} form drops
    them. Removing them leaves the same text."""
    name = re.sub(r"\[[0-9a-f]+\]", "", name)
    return re.sub(r"::h[0-9a-f]{16}$", "", name)


@pytest.mark.skipif(
    shutil.which("rustc") is None or shutil.which("c++filt") is None,
    reason="needs rustc and c++filt",
)
@pytest.mark.parametrize("mangling", ["v0", "legacy"])
def test_rust_names_match_cxxfilt_without_hashes(tmp_path: Path, mangling: str):
    src = tmp_path / "m.rs"
    src.write_text(RUST_SOURCE)
    exe = tmp_path / "m"
    # rustc's default is the legacy scheme; v0 is asked for explicitly.
    flags = ["-Csymbol-mangling-version=v0"] if mangling == "v0" else []
    compile_or_skip(["rustc", "-O", *flags, "-o", str(exe), str(src)])
    st = load_symbols(load_image(exe))
    prefix = "_R" if mangling == "v0" else "_ZN"
    own = [
        e
        for e in st.entries()
        if e.name.startswith(prefix) and ("plain_function" in e.name or "bump" in e.name)
    ]
    assert len(own) >= 2, [e.name for e in st.entries() if "plain" in e.name]
    ours = [st.demangled(st.index_of(e.vaddr)) for e in own]
    assert ours == [strip_rust_hashes(n) for n in cxxfilt([e.name for e in own])]
    assert any(name.endswith("Counter>::bump") or name.endswith("Counter::bump") for name in ours)
    # Every Rust symbol in the binary demangles: none is left raw.
    rust = [e for e in st.entries() if e.name.startswith("_R")] if mangling == "v0" else []
    raw = [e.name for e in rust if st.demangled(st.index_of(e.vaddr)) == e.name]
    assert raw == []
