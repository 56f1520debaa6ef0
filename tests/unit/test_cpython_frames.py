"""livesym's own reading of CPython 3.11 frames (livesym.target.cpython) and the check
of a read against its sample (livesym.frames.python_splice.checked).

The offsets are held to CPython's own headers (python3.11-dev's Include/internal,
compiled here with offsetof); the line table reader to the interpreter's own
``co_lines`` over real code objects; the check's cases are stated one by one."""

from __future__ import annotations

import dis
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from livesym.frames.python_splice import InstructionPointer, checked
from livesym.records import PYTHON_MOVED, StackCopy, python_frame_record
from livesym.sampling.base import PythonCheck
from livesym.target.cpython import PY311, _line

HEADERS = Path("/usr/include/python3.11")
FIELDS = {
    "runtime_interpreters_head": "_PyRuntimeState, interpreters.head",
    "interp_threads_head": "PyInterpreterState, threads.head",
    "tstate_next": "PyThreadState, next",
    "tstate_cframe": "PyThreadState, cframe",
    "tstate_native_thread_id": "PyThreadState, native_thread_id",
    "cframe_current_frame": "_PyCFrame, current_frame",
    "cframe_previous": "_PyCFrame, previous",
    "frame_code": "_PyInterpreterFrame, f_code",
    "frame_previous": "_PyInterpreterFrame, previous",
    "frame_prev_instr": "_PyInterpreterFrame, prev_instr",
    "frame_is_entry": "_PyInterpreterFrame, is_entry",
    "code_size": "PyVarObject, ob_size",
    "code_firstlineno": "PyCodeObject, co_firstlineno",
    "code_filename": "PyCodeObject, co_filename",
    "code_name": "PyCodeObject, co_name",
    "code_qualname": "PyCodeObject, co_qualname",
    "code_linetable": "PyCodeObject, co_linetable",
    "code_bytecode": "PyCodeObject, co_code_adaptive",
}


@pytest.mark.skipif(
    not (HEADERS / "internal" / "pycore_frame.h").exists() or shutil.which("cc") is None,
    reason="needs python3.11-dev's internal headers and a C compiler",
)
def test_the_offsets_are_cpython_3_11_s_own(tmp_path):
    source = tmp_path / "offsets.c"
    lines = "\n".join(f'    printf("{k} %zu\\n", offsetof({v}));' for k, v in FIELDS.items())
    source.write_text(
        "#define Py_BUILD_CORE 1\n#include <Python.h>\n#include <stddef.h>\n#include <stdio.h>\n"
        '#include "internal/pycore_runtime.h"\n#include "internal/pycore_interp.h"\n'
        '#include "internal/pycore_frame.h"\n'
        f"int main(void) {{\n{lines}\n    return 0;\n}}\n"
    )
    exe = tmp_path / "offsets"
    subprocess.run(["cc", f"-I{HEADERS}", str(source), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    theirs = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
    ours = {k: getattr(PY311, k) for k in FIELDS}
    assert ours == theirs
    # the reads cover the fields they unpack
    assert PY311.frame_size > PY311.frame_is_entry and PY311.code_header >= PY311.code_linetable + 8


SAMPLE = textwrap.dedent(
    """
    def spread(n):
        total = 0
        for i in range(n):
            if i % 3:
                total += i
            else:
                total -= (
                    i * 2
                )
        return [x for x in range(total % 7)]

    class Deep:
        def method(self, a, b=2):
            try:
                return a / b
            except ZeroDivisionError:
                return None
    """
)


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the 3.11 line table format")
def test_lines_are_those_the_interpreter_gives_every_instruction():
    namespace: dict[str, object] = {}
    exec(compile(SAMPLE, "sample.py", "exec"), namespace)
    codes = [namespace["spread"].__code__, namespace["Deep"].method.__code__]  # type: ignore[attr-defined]
    codes += [c for c in codes[0].co_consts if hasattr(c, "co_lines")]
    compared = 0
    for code in codes:
        for start, end, line in code.co_lines():
            for offset in range(start, end, 2):
                assert _line(code.co_linetable, code.co_firstlineno, offset) == line, (
                    code.co_name,
                    offset,
                    dis.Bytecode(code).dis(),
                )
                compared += 1
    assert compared > 100


def _check(codes: tuple[tuple[int, int], ...]) -> PythonCheck:
    named = {0x5000: python_frame_record("inner", "x.py", 3)}
    return PythonCheck(0x100, 0x200, codes, lambda a: named.get(a & ~0xFF))


READ = (
    python_frame_record("leaf", "x.py", 1),
    python_frame_record("mid", "x.py", 2),
    python_frame_record("root", "x.py", 9),
)
CODES = ((0x1000, 0x1100), (0x2000, 0x2100), (0x3000, 0x3100))
R15 = 15


def test_the_read_is_kept_where_the_loop_ran_its_leaf():
    loops = (((3, 0x9999), (R15, 0x1010)),)
    assert checked(READ, _check(CODES), loops, InstructionPointer()) == READ


def test_a_function_further_up_the_read_keeps_the_frames_from_it_up():
    # the leaf was called after the sample: the sample ran mid
    loops = (((R15, 0x2040),),)
    assert checked(READ, _check(CODES), loops, InstructionPointer()) == READ[1:]


def test_an_inner_loop_that_returned_before_the_read_adds_its_function():
    # the sample's inner loop ran "inner" (named from the code read before), under the
    # outer loop's leaf, which is the read's leaf
    loops = (((R15, 0x5010),), ((R15, 0x1020),))
    got = checked(READ, _check(CODES), loops, InstructionPointer())
    assert [f.symbol for f in got] == ["inner", "leaf", "mid", "root"]


@pytest.mark.parametrize(
    "loops",
    [
        (),  # no loop frame reached
        (((R15, 0x7777),),),  # a function the read does not hold
        (((R15, 0x5010),), ((R15, 0x7777),)),  # nor its next loop's
    ],
)
def test_otherwise_the_python_frames_are_marked_moved(loops):
    assert checked(READ, _check(CODES), loops, InstructionPointer()) == (PYTHON_MOVED,)


def test_a_function_twice_in_the_read_is_no_answer():
    codes = ((0x1000, 0x1100), (0x2000, 0x2100), (0x2000, 0x2100))
    loops = (((R15, 0x2040),),)
    assert checked(READ, _check(codes), loops, InstructionPointer()) == (PYTHON_MOVED,)


def test_a_register_right_at_most_samples_of_a_site_is_not_taken_for_the_place():
    # pyenv's r14: the instruction pointer at three samples in four; the slot at all
    place = InstructionPointer()
    data = bytearray(0x100)
    data[0x8:0x10] = (0x1010).to_bytes(8, "little")
    stack = StackCopy(0x7000, bytes(data))
    site = (16, 0x52E60C)
    for k in range(8):
        regs = ((7, 0x7000), (14, 0x1020 if k % 4 else 0x9), site)
        place.learn(regs, stack, (0x1000, 0x1100))
    assert place.places(((7, 0x7000), site)) == {("slot", 0x8)}


def test_the_instruction_register_is_learnt_for_its_call_site_and_then_alone_counts():
    place = InstructionPointer()
    site = (16, 0x52E60C)
    for _ in range(20):  # at this call site r15 points into the leaf, r3 once did too
        place.learn(((3, 0x9), (R15, 0x1010), site), None, (0x1000, 0x1100))
    place.learn(((3, 0x1010), (R15, 0x1010), site), None, (0x1000, 0x1100))
    assert place.places(((R15, 0), site)) == {("register", R15)}
    # a value left in another register no longer answers there
    loops = (((3, 0x1010), (R15, 0x9999), site),)
    assert checked(READ, _check(CODES), loops, place) == (PYTHON_MOVED,)
    # at a call site not seen yet, the callee-saved registers do
    loops = (((3, 0x1010), (R15, 0x9999), (16, 0x52EE24)),)
    assert checked(READ, _check(CODES), loops, place) == READ


def test_a_slot_of_the_loop_s_c_frame_is_learnt_where_no_register_holds_it():
    # pyenv's build keeps the instruction pointer in its C frame, 0x28 above sp
    place = InstructionPointer()
    data = bytearray(0x100)
    sp = 0x7000

    def stack(value: int) -> StackCopy:
        data[0x28:0x30] = value.to_bytes(8, "little")
        return StackCopy(sp, bytes(data))

    site = (16, 0x52E60C)
    for _ in range(4):
        place.learn(((7, sp), (R15, 0x4), site), stack(0x1010), (0x1000, 0x1100))
    assert place.places(((7, sp), site)) == {("slot", 0x28)}
    loops = (((7, sp), (R15, 0x4), site),)
    assert checked(READ, _check(CODES), loops, place, stack(0x2044)) == READ[1:]


def test_a_later_call_in_the_frame_the_sample_ran_gives_way_to_the_sample_s_function():
    # read from the frame the sample ran (anchored, over its one loop): "inner" ran
    # there then; the same caller called "leaf" into that frame since
    check = PythonCheck(0x100, 0x200, CODES, _check(CODES).code_at, anchored=True, loops=1)
    loops = (((R15, 0x5010),),)
    got = checked(READ, check, loops, InstructionPointer())
    assert [f.symbol for f in got] == ["inner", "mid", "root"]
    # not anchored, the same finding is no answer (the caller is not known)
    assert checked(READ, _check(CODES), loops, InstructionPointer()) == (PYTHON_MOVED,)


def test_an_anchored_read_of_an_outer_loop_keeps_its_leaf_under_the_returned_one():
    # the sample's inner loop (running "inner") was gone by the read, which began at
    # the frame the outer loop ran then: "leaf", which called into the inner loop
    check = PythonCheck(0x100, 0x200, CODES, _check(CODES).code_at, anchored=True, loops=1)
    loops = (((R15, 0x5010),), ((R15, 0x1020),))
    got = checked(READ, check, loops, InstructionPointer())
    assert [f.symbol for f in got] == ["inner", "leaf", "mid", "root"]
    # the outer loop's function further up an anchored read is no answer
    loops = (((R15, 0x5010),), ((R15, 0x2020),))
    assert checked(READ, check, loops, InstructionPointer()) == (PYTHON_MOVED,)


def test_a_libpython_is_looked_for_in_the_executable_s_needed_entries_and_junk_is_no(tmp_path):
    from livesym.target.cpython import _needs_libpython

    # GIVEN this interpreter's executable, a truncated copy of it and bytes that are no ELF
    exe = Path(sys.executable).resolve()
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    cut, junk = tmp_path / "python3.11", tmp_path / "junk"
    cut.write_bytes(exe.read_bytes()[:300])
    junk.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    # THEN a libpython3.11 is needed where readelf lists one, and the rest need none
    assert _needs_libpython(str(exe)) == ("libpython3.11" in needed), needed
    assert not _needs_libpython(str(cut)) and not _needs_libpython(str(junk))
