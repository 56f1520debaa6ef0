"""Demangling: exact where names are real, bounded where they are crafted."""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from livesym.elf import demangle as d
from tests.support.hostile import substitution_bomb


def test_small_bomb_below_the_threshold_still_demangles():
    name = substitution_bomb(6)
    assert len(re.findall(r"S[0-9A-Z]*_", name)) <= d.SUSPECT_REFS
    assert d.demangle(name).startswith("f(A<A, A>, A<A<A, A>, A<A, A> >")


def test_bomb_comes_back_raw_quickly_with_bounded_memory():
    name = substitution_bomb(26)  # ~870 MB if demangled
    start = time.monotonic()
    assert d.demangle(name) == name
    assert time.monotonic() - start < 2 * d.SANDBOX_DEADLINE + 1


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs c++filt")
def test_heavy_but_real_name_is_demangled_exactly_through_the_sandbox():
    # A real shape: many back-references, modest output (repeated std::pair<...>).
    name = "_Z1gSt4pairIiiE" + "S0_" * 40
    assert len(re.findall(r"S[0-9A-Z]*_", name)) > d.SUSPECT_REFS
    expected = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    assert d.demangle(name) == expected != name


def test_output_longer_than_the_cap_is_dropped_for_the_raw_name(monkeypatch):
    monkeypatch.setattr(d, "MAX_DEMANGLED", 10)
    assert d.demangle("_ZNSt6vectorIiSaIiEE9push_backERKi") == "_ZNSt6vectorIiSaIiEE9push_backERKi"


def test_sandbox_budget_spent_means_raw_names(monkeypatch):
    monkeypatch.setattr(d, "_sandbox_spent", d.SANDBOX_BUDGET)
    name = "_Z1gSt4pairIiiE" + "S0_" * 40
    assert d.demangle(name) == name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("main", "main"),
        ("_Zgarbage", "_Zgarbage"),
        ("_Z1fv.cold", "f() [clone .cold]"),
        ("_ZN3std2io4Read11read_to_end17hb85a0f6802e14499E", "std::io::Read::read_to_end"),
        ("_RNvCskwGfYPst2Cb_3foo16example_function", "foo::example_function"),
        ("_ZN1m4main17h4009bc0cd8b193aaE.llvm.1234", "m::main"),
        # What follows an @ (a PLT stub, a symbol version) is kept as it is, as c++filt does.
        ("_Znwm@plt", "operator new(unsigned long)@plt"),
        ("_Z1fv@@GLIBCXX_3.4", "f()@@GLIBCXX_3.4"),
        ("_RNvCskwGfYPst2Cb_3foo16example_function@plt", "foo::example_function@plt"),
        ("_Zgarbage@plt", "_Zgarbage@plt"),
    ],
)
def test_known_names(name, expected):
    assert d.demangle(name) == expected
