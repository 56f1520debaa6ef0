"""profile.diff and profile.difftree: functions matched across runs and hosts, changes in
points, and the significance test's calibration (its false alarms on one workload
against itself, its power on a real move), on profiles built from drawn samples."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.profile import Profile, ProfileView, StackSample
from livesym.profile.diff import (
    ALPHA,
    diff_views,
    holm,
    match_key,
    module_key,
    two_proportion_p,
)
from livesym.profile.difftree import diff_tree
from livesym.records import Frame, Reason

MAIN = Frame("main", "main", "/usr/bin/app")


def _view(counts: dict[Frame, int], module_path: str = "/usr/bin/app") -> ProfileView:
    """A profile of ``counts[f]`` samples ending in ``f``, each under ``main``."""
    main = Frame("main", "main", module_path)
    profile = Profile()
    profile.add(
        StackSample(time=float(i), tid=1, thread_name="app", frames=(frame, main))
        for frame, n in counts.items()
        for i in range(n)
    )
    return profile.view()


def _fn(name: str, module: str = "/usr/bin/app") -> Frame:
    return Frame(name, name, module)


def test_two_proportions_match_the_textbook_values():
    # 60/100 against 40/100: z = 0.2 / sqrt(0.25 * 0.02) = 2.828, p = 0.00468
    p = two_proportion_p(60, 100, 40, 100)
    assert p is not None and abs(p - 0.004678) < 1e-5
    assert two_proportion_p(50, 100, 50, 100) == pytest.approx(1.0)
    # too few expected samples either way: no test
    assert two_proportion_p(1, 100, 3, 100) is None
    assert two_proportion_p(99, 100, 100, 100) is None
    assert two_proportion_p(0, 0, 5, 10) is None


def test_holm_steps_down_and_stops_at_the_first_kept():
    # m = 4: 0.0001 <= 0.05/4, 0.001 <= 0.05/3, 0.03 > 0.05/2: stop there, and 0.04
    # (under 0.05/1) stays kept with it
    assert holm([0.04, 0.001, 0.03, 0.0001], 0.05) == [False, True, False, True]
    assert holm([], 0.05) == []


def test_functions_match_by_file_name_and_symbol_not_by_path_or_address():
    here = Frame("f", "f", "/usr/lib/x86_64-linux-gnu/libz.so.1", vaddr=0x1000)
    there = Frame("f", "f", "/lib/x86_64-linux-gnu/libz.so.1", vaddr=0x2000)
    assert match_key(here) == match_key(there)
    # unnamed code by its function's start; a JIT's map by what it is, not its pid
    a = Frame(None, None, "/opt/x/libq.so", reason=Reason.UNNAMED_FUNCTION, vaddr=0x4D0)
    b = Frame(None, None, "/srv/libq.so", reason=Reason.UNNAMED_FUNCTION, vaddr=0x4D0)
    c = Frame(None, None, "/srv/libq.so", reason=Reason.UNNAMED_FUNCTION, vaddr=0x4E0)
    assert match_key(a) == match_key(b) != match_key(c)
    assert module_key("/tmp/perf-123.map", "jit") == module_key("/tmp/perf-99.map", "jit")
    # a Python file from its package down, whatever environment holds it
    one = module_key("/home/a/venv/lib/python3.11/site-packages/app/views.py", "python")
    two = module_key("/srv/env/lib/python3.12/site-packages/app/views.py", "python")
    assert one == two == "app/views.py"


def test_a_workload_against_itself_flags_nothing_and_a_real_move_is_flagged():
    # GIVEN 300 pairs of profiles drawn from one workload of 12 functions (600 samples)
    rng = random.Random(1234)
    shares = [0.3, 0.2, 0.1, 0.1, 0.08, 0.06, 0.05, 0.04, 0.03, 0.02, 0.01, 0.01]
    frames = [_fn(f"f{i}") for i in range(len(shares))]

    def drawn() -> ProfileView:
        counts = dict.fromkeys(frames, 0)
        for f in rng.choices(frames, weights=shares, k=600):
            counts[f] += 1
        return _view({f: n for f, n in counts.items() if n})

    flagged = sum(bool(diff_views(drawn(), drawn()).significant) for _ in range(300))
    # THEN about ALPHA of the diffs flag anything (Holm bounds it; 0.3 expected at most)
    assert flagged <= 2, flagged
    # AND a function moving 20 -> 30 % with 500 samples a side is flagged, the other
    # function with it, and nothing else
    base = _view({frames[0]: 100, frames[1]: 400})
    new = _view({frames[0]: 150, frames[1]: 350})
    diff = diff_views(base, new)
    moved = {f.frame.symbol: f for f in diff.functions}
    assert moved["f0"].significant and moved["f1"].significant
    assert moved["f0"].delta_self_pp == pytest.approx(10.0)
    assert not moved["main"].significant  # 100 % on both sides
    assert diff.functions[0].frame.symbol in ("f0", "f1")  # largest change first


def test_a_function_on_one_side_only_is_compared_to_nothing():
    base = _view({_fn("old"): 400, _fn("kept"): 400})
    new = _view({_fn("new"): 400, _fn("kept"): 400})
    by_name = {f.frame.symbol: f for f in diff_views(base, new).functions}
    assert by_name["old"].new_self_pct == 0 and by_name["old"].delta_self_pp == -50
    assert by_name["new"].base_total_pct == 0 and by_name["new"].significant
    assert not by_name["kept"].significant


def test_frames_meeting_on_one_key_are_summed_within_their_side():
    # two static functions of one name (vaddrs apart) in one build; one in the other
    base = _view({Frame("helper", "helper", "/bin/a", vaddr=0x10): 100,
                  Frame("helper", "helper", "/bin/a", vaddr=0x90): 100,
                  _fn("rest", "/bin/a"): 200}, "/bin/a")  # fmt: skip
    new = _view({Frame("helper", "helper", "/usr/bin/a", vaddr=0x20): 200,
                 _fn("rest", "/usr/bin/a"): 200}, "/usr/bin/a")  # fmt: skip
    by_name = {f.frame.symbol: f for f in diff_views(base, new).functions}
    assert by_name["helper"].base_self_pct == 50 and by_name["helper"].new_self_pct == 50
    assert by_name["helper"].p_value == pytest.approx(1.0)


def test_the_diff_tree_lays_paths_over_each_other_and_says_what_it_left_out():
    a, b, tiny = _fn("a"), _fn("b"), _fn("tiny")
    base = _view({a: 300, b: 100, tiny: 1})
    new = _view({a: 100, b: 300})
    root = diff_tree(base.tree, new.tree, base.samples, new.samples, 1.0)
    assert root is not None and root.base_total == 401 and root.new_total == 400
    (main,) = root.children
    assert main.frame.symbol == "main"
    got = {c.frame.symbol: (c.base_total, c.new_total) for c in main.children}
    assert got == {"a": (300, 100), "b": (100, 300)}
    assert main.left_out == (1, 1, 0)  # tiny: under 1 % on both sides
    assert diff_tree(None, None, 0, 0, 1.0) is None


def test_a_deep_recursion_s_diff_tree_is_made_without_recursion():
    depth = 5000
    frames = tuple(Frame(f"r{i}", f"r{i}", "/bin/deep") for i in range(depth))
    profile = Profile()
    profile.add([StackSample(time=0.0, tid=1, thread_name="t", frames=frames)] * 3)
    view = profile.view()
    root = diff_tree(view.tree, view.tree, view.samples, view.samples, 0.0)
    node, levels = root, 0
    while node is not None and node.children:
        node, levels = node.children[0], levels + 1
    assert levels == depth and math.isclose(node.new_total, 3)


def _reference(base: ProfileView, new: ProfileView) -> list[tuple[object, ...]]:
    """The diff written out key by key, as its definition reads (the docstring's): each
    key's counts merged within a side, both shares tested where testable, Holm over every
    test; rows largest change first, ties by key."""
    n1, n2 = base.samples, new.samples

    def merged(view: ProfileView, samples: int) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for frame, own, total in view.functions.counts():
            had = out.setdefault(match_key(frame), [0, 0])
            had[0] += own
            had[1] = min(samples, had[1] + total)
        return out

    left, right = merged(base, n1), merged(new, n2)
    rows, tests = [], []
    for key in left.keys() | right.keys():
        (bs, bt), (ns, nt) = left.get(key, [0, 0]), right.get(key, [0, 0])
        k1, k2 = (100.0 / n1 if n1 else 0.0), (100.0 / n2 if n2 else 0.0)
        change = max(abs(ns * k2 - bs * k1), abs(nt * k2 - bt * k1))
        pairs = [(bt, nt)] if (bs, ns) == (bt, nt) else [(bs, ns), (bt, nt)]
        for x1, x2 in pairs:
            if (p := two_proportion_p(x1, n1, x2, n2)) is not None:
                tests.append((p, key))
        rows.append((change, key, bs, bt, ns, nt))
    rejected = {key for (_, key), yes in zip(tests, holm([p for p, _ in tests], ALPHA),
                                              strict=True) if yes}  # fmt: skip
    rows.sort(key=lambda r: (-r[0], r[1]))
    return [(*r, r[1] in rejected) for r in rows]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3), st.integers(0, 60)), max_size=30),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3), st.integers(0, 60)), max_size=30),
    st.integers(0, 40),
)
def test_the_diff_by_array_is_the_diff_by_its_definition(base_rows, new_rows, top):
    """Functions drawn from a few names in a few modules, each a leaf and a caller (self
    and total differ), keys meeting within a side and within a stack (one name in one
    file name, from two directories), with counts from none to many."""

    def fn(name: int, place: int) -> Frame:
        return Frame(f"f{name % 8}", f"f{name % 8}", f"/lib{place % 2}/m{place // 2}.so",
                     vaddr=0x100 * place)  # fmt: skip

    def view(rows: list[tuple[int, int, int]]) -> ProfileView:
        profile = Profile()
        for name, place, n in rows:
            stack = (fn(name, place), fn(name + 1, place), fn(name, place + 1), MAIN)
            profile.add(StackSample(0.0, 1, "t", stack) for _ in range(n))
        return profile.view()

    base, new = view(base_rows), view(new_rows)
    diff = diff_views(base, new)
    want = _reference(base, new)
    got = [(f.change, match_key(f.frame), f.base.self_samples, f.base.total_samples,
            f.new.self_samples, f.new.total_samples, f.significant)
           for f in diff.functions]  # fmt: skip
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[0] == pytest.approx(w[0]) and g[1:] == w[1:], (g, w)
    # ... its first rows are its whole listing's, and each one is found by its frame
    assert diff.top(top) == list(diff.functions[:top])
    for row in diff.functions:
        assert diff.of(row.frame) == row
    assert len(diff.significant) == sum(w[-1] for w in want)


def test_a_pinned_baseline_s_diffs_as_its_session_grows_are_those_made_afresh():
    """The dashboard's live diff: the baseline prepared once, each new view of the same
    profile (new functions among them, and new frames of a key the baseline has) laid
    against it by the frame ids' keys kept from before."""
    from livesym.profile.diff import KeySpace

    profile = Profile()

    def add(frames: list[Frame], n: int) -> None:
        profile.add(StackSample(0.0, 1, "t", (f, MAIN)) for f in frames for _ in range(n))

    add([_fn("a"), _fn("b")], 300)
    base = profile.view()
    space = KeySpace()
    pinned = space.side(base)
    for step in range(4):
        add([_fn(f"new{step}"), Frame("a", "a", "/usr/local/bin/app", vaddr=step)], 100 + step)
        add([_fn("b")], 50)
        view = profile.view()
        live = diff_views(base, view, space=space, base_side=pinned)
        fresh = diff_views(base, view)
        assert live.functions == fresh.functions, step
        assert live.tests == fresh.tests and len(live.significant) == len(fresh.significant)
    assert {f.frame.symbol for f in live.significant} >= {"new3", "b"}
