"""Frozen dataclasses made in one call (livesym.frozen, livesym/_frozen.c): the same
objects their __init__ makes, still frozen, no reference lost or leaked; classes it
would make wrongly refused when the maker is made."""

from __future__ import annotations

import dataclasses
import gc
import sys

import pytest

from livesym import frozen
from livesym.records import UserRegisters
from livesym.sampling.base import Sample, ThreadState
from livesym.sampling.perf_abi import SampleRecord

pytestmark = pytest.mark.skipif(
    frozen._frozen is None, reason="livesym._frozen was not built (no compiler or headers)"
)


def test_a_sample_made_is_the_one_its_init_makes_and_stays_frozen():
    make = frozen.maker(Sample, "time", "pid", "tid", "ips", "state", "user_stack", "in_kernel")
    regs_free = make(1.5, 10, 11, (0x401000,), ThreadState.RUNNABLE, b"\0" * 16, True)
    expected = Sample(time=1.5, pid=10, tid=11, ips=(0x401000,), state=ThreadState.RUNNABLE,
                      user_stack=b"\0" * 16, in_kernel=True)  # fmt: skip
    assert regs_free == expected
    assert hash(regs_free) == hash(expected)
    assert repr(regs_free) == repr(expected)
    assert type(regs_free) is Sample
    assert gc.is_tracked(regs_free) == gc.is_tracked(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        regs_free.tid = 12  # type: ignore[misc]
    assert dataclasses.replace(regs_free, tid=12).tid == 12


@pytest.mark.parametrize(
    ("cls", "names", "values"),
    [
        (SampleRecord, tuple(f.name for f in dataclasses.fields(SampleRecord)),
         (1, 2, 3, 4, (5, 6), 7, 2, (8, 9), b"ab", 16, None)),
        (UserRegisters, ("machine", "values"), ("EM_X86_64", (1, None, 3))),
        (UserRegisters, ("values", "machine"), ((1, None, 3), "EM_X86_64")),
    ],
)  # fmt: skip
def test_every_field_given_in_any_order_makes_what_init_makes(cls, names, values):
    made = frozen.maker(cls, *names)(*values)
    assert made == cls(**dict(zip(names, values, strict=True)))


def test_no_reference_is_lost_or_leaked():
    make = frozen.maker(UserRegisters, "machine", "values")
    values = (1 << 70, 2)
    before = sys.getrefcount(values)
    made = [make("m", values) for _ in range(10_000)]
    assert sys.getrefcount(values) == before + 10_000
    del made
    assert sys.getrefcount(values) == before


def test_a_call_with_other_values_is_refused():
    make = frozen.maker(UserRegisters, "machine", "values")
    with pytest.raises(TypeError):
        make("EM_X86_64")
    with pytest.raises(TypeError):
        make("EM_X86_64", (), ())
    with pytest.raises(TypeError):
        make("EM_X86_64", values=())


@dataclasses.dataclass(frozen=True)
class _NoSlots:
    a: int


@dataclasses.dataclass(slots=True)
class _Loose:
    a: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    a: int

    def __post_init__(self) -> None:
        assert self.a > 0


@dataclasses.dataclass(frozen=True, slots=True)
class _Factory:
    a: int
    b: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class _Required:
    a: int
    b: int


def test_classes_a_maker_would_make_wrongly_are_refused_when_it_is_made():
    for cls in (_NoSlots, _Loose, _Checked, int):
        with pytest.raises(TypeError):
            frozen.maker(cls, "a")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        frozen.maker(_Factory, "a")  # one list for every instance
    with pytest.raises(TypeError):
        frozen.maker(_Required, "a")  # b has no default
    with pytest.raises(TypeError):
        frozen.maker(_Required, "a", "a")
    with pytest.raises(TypeError):
        frozen.maker(_Required, "a", "c")
    assert frozen.maker(_Factory, "a", "b")(1, [2]) == _Factory(1, [2])


def test_the_c_maker_refuses_slots_that_are_not_the_fields():
    from livesym import _frozen

    with pytest.raises(TypeError):
        _frozen.Maker(_Required, ("a",), {})  # b would be left unset
    with pytest.raises(TypeError):
        _frozen.Maker(_Required, ("a", "b"), {"a": 1})  # three for two
    with pytest.raises(TypeError):
        _frozen.Maker(_Required, ("a",), {"a": 1})  # b unset, a twice
    with pytest.raises(TypeError):
        _frozen.Maker(_Required, ("a", "__init__"), {})
    with pytest.raises(TypeError):
        _frozen.Maker(_NoSlots, ("a",), {})
