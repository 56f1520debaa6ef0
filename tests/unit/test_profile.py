"""Aggregation of symbolized samples into profile views, on hand-made stacks with known answers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.addr.kinds import ElfVaddr
from livesym.elf.symtab import SymbolHit
from livesym.profile import FunctionRows, Profile, ProfileView, StackNode, StackSample
from livesym.records import (
    KERNEL_FRAME,
    KIND_KERNEL,
    KIND_PYTHON,
    ROOT_FRAME,
    UNKNOWN_FRAME,
    Frame,
    Reason,
    TimeMode,
    WaitState,
)
from livesym.symbolize.explain import Explanation
from livesym.symbolize.records import frame_record

APP = "/usr/bin/app"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
LIBFOO = "/opt/lib/libfoo.so"

MAIN = Frame("main", "main", APP)
RUN = Frame("_Z3runv", "run()", APP)
WORK = Frame("_Z4workv", "work()", APP)
HASH = Frame("_Z4hashPKc", "hash(char const*)", APP)
MEMCPY = Frame("memcpy", "memcpy", LIBC)
READ = Frame("read", "read", LIBC)


def sample(
    *frames: Frame,
    time: float = 0.0,
    tid: int = 1,
    name: str = "main",
    idle: bool = False,
    weight: int = 1,
) -> StackSample:
    """A sample with ``frames`` given leaf first."""
    return StackSample(time, tid, name, tuple(frames), idle, weight)


def profile_of(*samples: StackSample, window: float = 5.0) -> Profile:
    p = Profile(recent_window=window)
    p.add(samples)
    return p


def counts(view: ProfileView) -> dict[str, tuple[int, int]]:
    """label -> (self, total)."""
    return {r.frame.label: (r.self_samples, r.total_samples) for r in view.functions}


def walk(node: StackNode | None) -> Iterator[StackNode]:
    todo = [node] if node is not None else []
    while todo:
        n = todo.pop()
        yield n
        todo.extend(n.children)


def tree_paths(view: ProfileView) -> dict[tuple[str, ...], tuple[int, int]]:
    """Every node of the tree as its root-to-node labels -> (total, self)."""
    out: dict[tuple[str, ...], tuple[int, int]] = {}
    todo: list[tuple[tuple[str, ...], StackNode]] = (
        [((), view.tree)] if view.tree is not None else []
    )
    while todo:
        path, node = todo.pop()
        out[path] = (node.total_samples, node.self_samples)
        todo.extend(((*path, c.frame.label), c) for c in node.children)
    return out


# --- frames and labels ---


def test_label_is_the_demangled_name_or_the_raw_symbol() -> None:
    assert RUN.label == "run()"
    assert Frame("_Z3runv", None, APP).label == "_Z3runv"


def test_unresolved_label_names_the_reason_and_the_module_file() -> None:
    assert Frame(None, None, LIBFOO, Reason.NO_SYMBOLS).label == "[no symbols] libfoo.so"
    assert Frame(None, None, None, Reason.UNMAPPED).label == "[unmapped address]"
    assert Frame(None, None, "[vdso]", Reason.SPECIAL).label == "[special mapping] [vdso]"
    assert Frame(None, None, LIBFOO).label == "[unresolved] libfoo.so"


@pytest.mark.parametrize("reason", list(Reason))
def test_every_reason_is_labelled_in_words_not_its_code(reason: Reason) -> None:
    label = Frame(None, None, LIBFOO, reason).label
    if reason is Reason.UNNAMED_FUNCTION:  # without its start it is still a phrase
        assert label == "[unnamed function] libfoo.so"
        return
    words = label.removeprefix("[").removesuffix("] libfoo.so")
    assert words and words == words.strip() and "_" not in words


def test_kernel_unknown_and_root_frames_have_bracketed_labels() -> None:
    assert KERNEL_FRAME.label == "[kernel]"
    assert KERNEL_FRAME.kind == KIND_KERNEL
    assert UNKNOWN_FRAME.label == "[unknown]"
    assert ROOT_FRAME.label == "[all]"
    assert Frame("schedule", "schedule", "[kernel]", kind=KIND_KERNEL).label == "schedule"


def test_equal_frames_built_separately_are_one_key() -> None:
    a = Frame("f", "f", APP, kind=KIND_PYTHON)
    b = Frame("f", "f", APP, kind=KIND_PYTHON)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Frame("f", "f", APP)  # another kind is another frame


def _unresolved_explanation(vma: int, path: str | None, reason: Reason) -> Explanation:
    return Explanation("vma", vma, path, vma=vma, elf_vaddr=vma - 0x7F00_0000, reason=reason)


def _frame(e: Explanation) -> Frame:
    """The frame the engine and replay make of an explanation: through its capture record."""
    return frame_record(0, 1, e, None).frame()


def test_unresolved_addresses_of_one_module_and_reason_are_one_frame() -> None:
    a = _frame(_unresolved_explanation(0x7F00_1A2B, LIBFOO, Reason.NO_SYMBOLS))
    b = _frame(_unresolved_explanation(0x7F00_9999, LIBFOO, Reason.NO_SYMBOLS))
    other_reason = _frame(_unresolved_explanation(0x7F00_1A2B, LIBFOO, Reason.UNKNOWN_ADDRESS))
    other_module = _frame(
        _unresolved_explanation(0x7F00_1A2B, "/opt/lib/libbar.so", Reason.NO_SYMBOLS)
    )
    assert a == b
    assert a.label == "[no symbols] libfoo.so"
    assert len({a, other_reason, other_module}) == 3


def test_resolved_explanation_gives_names_module_and_symbol_vaddr() -> None:
    hit = SymbolHit("_Z3runv", "run()", ElfVaddr(0x1140), 0x40, 0x40, 0x12, "symtab")
    e = Explanation("vma", 0x5555_5555_5152, APP, elf_vaddr=0x1152, symbol=hit)
    frame = _frame(e)
    assert frame == Frame("_Z3runv", "run()", APP, vaddr=0x1140)
    assert frame.label == "run()" and frame.resolved


def test_same_named_functions_at_different_addresses_stay_apart() -> None:
    a = Frame("helper", "helper", APP, vaddr=0x1000)
    b = Frame("helper", "helper", APP, vaddr=0x2000)
    view = profile_of(sample(a), sample(b), sample(b)).view()
    assert [(r.frame, r.self_samples) for r in view.functions] == [(b, 2), (a, 1)]


# --- self, total, percentages ---


def test_self_counts_the_leaf_and_total_counts_every_frame_of_a_three_deep_stack() -> None:
    view = profile_of(
        sample(WORK, RUN, MAIN),
        sample(WORK, RUN, MAIN),
        sample(RUN, MAIN),
        sample(MEMCPY, WORK, RUN, MAIN),
    ).view()
    assert view.samples == 4
    assert counts(view) == {
        "work()": (2, 3),
        "run()": (1, 4),
        "memcpy": (1, 1),
        "main": (0, 4),
    }


def test_recursion_counts_once_in_total_per_sample() -> None:
    view = profile_of(
        sample(WORK, RUN, WORK, RUN, MAIN),
        sample(RUN, RUN, RUN, MAIN),
    ).view()
    assert counts(view) == {"work()": (1, 1), "run()": (1, 2), "main": (0, 2)}


def test_percentages_are_of_the_samples_in_the_view() -> None:
    p = profile_of(
        sample(WORK, MAIN),
        sample(WORK, MAIN),
        sample(RUN, MAIN),
        sample(MEMCPY, MAIN, tid=2),
    )
    rows = {r.frame: r for r in p.view().functions}
    assert rows[WORK].self_pct == pytest.approx(50.0)
    assert rows[MAIN].self_pct == 0.0
    assert rows[MAIN].total_pct == pytest.approx(100.0)
    assert rows[MEMCPY].total_pct == pytest.approx(25.0)
    # Filtered to thread 1: three samples.
    rows = {r.frame: r for r in p.view(thread=1).functions}
    assert rows[WORK].self_pct == pytest.approx(200 / 3)
    assert rows[RUN].total_pct == pytest.approx(100 / 3)


def test_weight_counts_a_sample_that_many_times() -> None:
    view = profile_of(sample(WORK, MAIN, weight=3), sample(RUN, MAIN)).view()
    assert view.samples == 4
    assert counts(view) == {"work()": (3, 3), "run()": (1, 1), "main": (0, 4)}


def test_weight_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="weight"):
        sample(WORK, weight=0)


# --- unresolved, kernel and empty stacks ---


def test_unresolved_frames_aggregate_per_reason_and_module_and_are_shown() -> None:
    no_syms = Frame(None, None, LIBFOO, Reason.NO_SYMBOLS)
    unmapped = Frame(None, None, None, Reason.UNMAPPED)
    view = profile_of(
        sample(no_syms, MAIN),
        sample(Frame(None, None, LIBFOO, Reason.NO_SYMBOLS), RUN, MAIN),
        sample(unmapped, MAIN),
    ).view()
    assert counts(view) == {
        "[no symbols] libfoo.so": (2, 2),
        "main": (0, 3),
        "[unmapped address]": (1, 1),
        "run()": (0, 1),
    }


def test_kernel_frames_and_empty_stacks_are_counted_not_dropped() -> None:
    view = profile_of(
        sample(KERNEL_FRAME, READ, MAIN),
        sample(),
        sample(),
        sample(WORK, MAIN),
    ).view()
    assert view.samples == 4
    assert counts(view) == {
        "[unknown]": (2, 2),
        "[kernel]": (1, 1),
        "work()": (1, 1),
        "main": (0, 2),
        "read": (0, 1),
    }
    assert {m.label: m.self_samples for m in view.modules} == {
        "[no module]": 2,
        "[kernel]": 1,
        "app": 1,
    }


# --- threads and modules ---


def test_thread_rows_have_the_latest_name_samples_and_top_function() -> None:
    view = profile_of(
        sample(WORK, MAIN, tid=10, name="main"),
        sample(MEMCPY, RUN, tid=11, name="worker"),
        sample(MEMCPY, RUN, tid=11, name="worker"),
        sample(RUN, tid=11, name="worker-1"),
    ).view()
    assert [(t.tid, t.name, t.samples, t.top_function) for t in view.threads] == [
        (11, "worker-1", 3, MEMCPY),
        (10, "main", 1, WORK),
    ]
    assert [t.pct for t in view.threads] == pytest.approx([75.0, 25.0])


def test_module_rows_count_samples_by_the_leaf_frame_module() -> None:
    view = profile_of(
        sample(MEMCPY, WORK, MAIN),
        sample(READ, MAIN),
        sample(READ, MAIN),
        sample(WORK, MAIN),
    ).view()
    assert [(m.module, m.label, m.self_samples, m.pct) for m in view.modules] == [
        (LIBC, "libc.so.6", 3, 75.0),
        (APP, "app", 1, 25.0),
    ]


# --- filters ---


def test_thread_filter_keeps_only_that_threads_samples() -> None:
    p = profile_of(
        sample(WORK, MAIN, tid=1),
        sample(RUN, MAIN, tid=2, name="other"),
        sample(RUN, MAIN, tid=2, name="other"),
    )
    view = p.view(thread=2)
    assert view.samples == 2
    assert counts(view) == {"run()": (2, 2), "main": (0, 2)}
    assert [(t.tid, t.name, t.samples) for t in view.threads] == [(2, "other", 2)]
    assert p.view(thread=99).samples == 0


def test_module_filter_keeps_samples_whose_leaf_frame_is_in_the_module() -> None:
    p = profile_of(
        sample(MEMCPY, WORK, MAIN),
        sample(READ, MAIN),
        sample(WORK, MAIN),  # in libc? no: its leaf is in the app
        sample(KERNEL_FRAME, READ, MAIN),  # read is on the stack, but not the leaf
    )
    view = p.view(module=LIBC)
    assert view.samples == 2
    assert counts(view) == {"memcpy": (1, 1), "read": (1, 1), "main": (0, 2), "work()": (0, 1)}
    assert p.view(module="[kernel]").samples == 1


def test_filters_combine() -> None:
    p = profile_of(
        sample(READ, MAIN, tid=1, time=1.0),
        sample(READ, MAIN, tid=2, time=1.0),
        sample(READ, MAIN, tid=2, time=9.0),
        sample(WORK, MAIN, tid=2, time=9.0),
    )
    view = p.view(recent=True, now=10.0, thread=2, module=LIBC)
    assert view.samples == 1
    assert counts(view) == {"read": (1, 1), "main": (0, 1)}


def test_recent_view_excludes_samples_older_than_the_window() -> None:
    p = profile_of(
        sample(WORK, MAIN, time=100.0),
        sample(RUN, MAIN, time=104.0),
        sample(MEMCPY, MAIN, time=106.0),
        window=5.0,
    )
    # now defaults to the newest sample: 106 - 5 = 101.
    assert counts(p.view(recent=True)) == {"run()": (1, 1), "memcpy": (1, 1), "main": (0, 2)}
    # Samples exactly at the edge of the window are in it.
    assert counts(p.view(recent=True, now=109.0)) == {
        "run()": (1, 1),
        "memcpy": (1, 1),
        "main": (0, 2),
    }
    assert counts(p.view(recent=True, now=110.0)) == {"memcpy": (1, 1), "main": (0, 1)}
    assert p.view(recent=True, now=200.0).samples == 0
    # The cumulative view still has everything.
    assert p.view().samples == 3


def test_recent_window_moves_with_new_samples_and_cumulative_counts_remain() -> None:
    p = Profile(recent_window=2.0)
    for t in range(10):
        p.add([sample(WORK, MAIN, time=float(t))])
    assert p.view(recent=True).samples == 3  # 7, 8, 9
    assert p.view().samples == 10


def test_recent_view_of_an_empty_profile_is_empty() -> None:
    view = Profile().view(recent=True)
    assert view.samples == 0
    assert view.functions == () and view.modules == () and view.threads == ()
    assert view.tree is None


# --- idle ---


def test_idle_samples_are_excluded_by_default_and_included_on_request() -> None:
    p = profile_of(
        sample(WORK, MAIN, time=1.0),
        sample(KERNEL_FRAME, READ, MAIN, time=1.0, tid=2, name="io", idle=True),
        sample(KERNEL_FRAME, READ, MAIN, time=1.0, tid=2, name="io", idle=True),
    )
    for view in (p.view(), p.view(recent=True), p.view(module="[kernel]")):
        assert "[kernel]" not in counts(view)
        assert [t.tid for t in view.threads] == ([1] if view.samples else [])
    for view in (
        p.view(mode=TimeMode.WALL),
        p.view(mode=TimeMode.WALL, recent=True),
        p.view(mode=TimeMode.WALL, thread=2),
    ):
        assert counts(view)["[kernel]"] == (2, 2)
        assert counts(view)["read"] == (0, 2)
        assert view.threads[0].tid == 2 and view.threads[0].samples == 2
    assert p.view(mode=TimeMode.WALL).samples == 3
    assert p.view(mode=TimeMode.WALL).tree is not None
    off = p.view(mode=TimeMode.OFF_CPU)
    assert off.samples == 2 and "work" not in counts(off)
    assert [t.tid for t in off.threads] == [2]


def test_each_thread_s_split_by_state_counts_every_sample_s_weight_whatever_the_mode() -> None:
    sleeping, runnable = WaitState.SLEEPING.flags(), WaitState.RUNNABLE.flags()
    p = profile_of(
        sample(WORK, MAIN, time=1.0, weight=3),
        StackSample(1.0, 1, "main", (KERNEL_FRAME, READ, MAIN), True, 5, 0, "", sleeping),
        StackSample(1.0, 1, "main", (WORK, MAIN), True, 2, 0, "", runnable),
    )
    for mode in TimeMode:
        (row,) = p.view(mode=mode).threads
        # on CPU, off it for a reason not known, waiting for a CPU, sleeping, disk
        assert row.split == (3, 0, 2, 5, 0)
    assert p.view().samples == 3 and p.view(mode=TimeMode.OFF_CPU).samples == 7


# --- reset and snapshot isolation ---


def test_reset_forgets_every_sample() -> None:
    p = profile_of(sample(WORK, MAIN, time=1.0))
    p.reset()
    for view in (p.view(), p.view(recent=True), p.view(mode=TimeMode.WALL)):
        assert view.samples == 0 and view.functions == () and view.tree is None
    p.add([sample(RUN, MAIN, time=2.0)])
    assert counts(p.view()) == {"run()": (1, 1), "main": (0, 1)}


def test_views_do_not_change_when_samples_are_added_or_the_profile_reset() -> None:
    p = profile_of(sample(WORK, RUN, MAIN), sample(RUN, MAIN))
    views = [p.view(), p.view(recent=True), p.view(thread=1)]
    p.add([sample(WORK, RUN, MAIN), sample(MEMCPY, WORK, RUN, MAIN), sample(READ)])
    p.add([sample(Frame(f"f{i}", None, APP), RUN, MAIN) for i in range(50)])
    for view in views:
        # The tree and the callers are first worked out only now, after the adds.
        assert tree_paths(view) == {
            (): (2, 0),
            ("main",): (2, 0),
            ("main", "run()"): (2, 1),
            ("main", "run()", "work()"): (1, 1),
        }
        assert view.callees(RUN) == ((WORK, 1),)
        assert view.callers(RUN) == ((MAIN, 2),)
        assert view.callers(READ) == ()
        assert counts(view) == {"run()": (1, 2), "work()": (1, 1), "main": (0, 2)}
    p.reset()
    assert tree_paths(views[0])[("main", "run()")] == (2, 1)
    assert views[0].callees(RUN) == ((WORK, 1),)


# --- callers, callees, tree ---


def test_callers_and_callees_count_each_neighbour_once_per_sample() -> None:
    view = profile_of(
        sample(MEMCPY, WORK, RUN, MAIN),
        sample(HASH, WORK, RUN, MAIN),
        sample(WORK, HASH, WORK, MAIN),  # work() recursing through hash()
        sample(WORK, MAIN),
    ).view()
    assert view.callers(WORK) == ((MAIN, 2), (RUN, 2), (HASH, 1))
    assert view.callees(WORK) == ((HASH, 2), (MEMCPY, 1))
    assert view.callers(MAIN) == ()
    assert view.callees(MEMCPY) == ()
    assert view.callers(Frame("nowhere", None, APP)) == ()


def test_direct_recursion_makes_a_function_its_own_caller_and_callee() -> None:
    view = profile_of(sample(RUN, RUN, RUN, MAIN)).view()
    assert view.callers(RUN) == ((MAIN, 1), (RUN, 1))
    assert view.callees(RUN) == ((RUN, 1),)


def test_tree_merges_common_prefixes_from_the_outermost_frame() -> None:
    view = profile_of(
        sample(WORK, RUN, MAIN),
        sample(WORK, RUN, MAIN),
        sample(MEMCPY, RUN, MAIN),
        sample(RUN, MAIN),
        sample(READ, tid=2),
    ).view()
    assert view.tree is not None and view.tree.frame == ROOT_FRAME
    assert tree_paths(view) == {
        (): (5, 0),
        ("main",): (4, 0),
        ("main", "run()"): (4, 1),
        ("main", "run()", "work()"): (2, 2),
        ("main", "run()", "memcpy"): (1, 1),
        ("read",): (1, 1),
    }
    main = view.tree.children[0]
    assert [c.frame for c in main.children[0].children] == [WORK, MEMCPY]


def test_tree_counts_add_up() -> None:
    view = profile_of(
        sample(WORK, RUN, MAIN),
        sample(RUN, RUN, MAIN, weight=2),
        sample(),
        sample(KERNEL_FRAME, READ, MAIN, tid=2),
    ).view()
    assert view.tree is not None
    assert view.tree.total_samples == view.samples == 5
    nodes = list(walk(view.tree))
    assert sum(n.self_samples for n in nodes) == view.samples
    for n in nodes:
        assert n.total_samples == n.self_samples + sum(c.total_samples for c in n.children)


def test_a_very_deep_stack_builds_without_recursion() -> None:
    deep = tuple(Frame(f"f{i % 7}", None, APP) for i in range(3000))
    view = profile_of(StackSample(0.0, 1, "t", deep)).view()
    assert len(list(walk(view.tree))) == 3001
    assert counts(view)["f0"] == (1, 1)


# --- ordering ---


def test_ties_are_broken_by_label_whatever_the_arrival_order() -> None:
    b = Frame("b", "b", "/lib/libb.so")
    a = Frame("a", "a", "/lib/liba.so")
    c = Frame("c", "c", "/lib/libc.so")
    stacks = [sample(c, MAIN, tid=3, name="x"), sample(a, MAIN, tid=1, name="x")]
    stacks += [sample(b, MAIN, tid=2, name="x")]
    forward = profile_of(*stacks).view()
    backward = profile_of(*reversed(stacks)).view()
    for view in (forward, backward):
        assert [r.frame.label for r in view.functions] == ["a", "b", "c", "main"]
        assert [m.label for m in view.modules] == ["liba.so", "libb.so", "libc.so"]
        assert [t.tid for t in view.threads] == [1, 2, 3]
        assert view.callees(MAIN) == ((a, 1), (b, 1), (c, 1))
        assert view.tree is not None
        assert [n.frame for n in view.tree.children[0].children] == [a, b, c]


def test_top_function_of_a_thread_ties_by_label_whatever_the_arrival_order() -> None:
    for first, second in ((WORK, RUN), (RUN, WORK)):
        view = profile_of(sample(first), sample(second)).view()
        assert view.threads[0].top_function == RUN


def test_equal_counts_order_by_total_then_label() -> None:
    view = profile_of(sample(WORK, HASH), sample(HASH, RUN), sample(MAIN)).view()
    assert [r.frame.label for r in view.functions] == [
        "hash(char const*)",
        "main",
        "work()",
        "run()",
    ]


# --- properties: against a naive model of the same rules ---

_POOL = [
    MAIN,
    RUN,
    WORK,
    MEMCPY,
    KERNEL_FRAME,
    Frame(None, None, LIBFOO, Reason.NO_SYMBOLS),
    Frame(None, None, None, Reason.UNMAPPED),
    Frame("f", "f", "/app/mod.py", kind=KIND_PYTHON),
]
_MODULES = [None, APP, LIBC, LIBFOO, "[kernel]", "/nowhere"]

stacks_st = st.lists(st.sampled_from(_POOL), max_size=6).map(tuple)
samples_st = st.lists(
    st.builds(
        StackSample,
        time=st.floats(0, 20, allow_nan=False),
        tid=st.integers(1, 3),
        thread_name=st.sampled_from(["a", "b"]),
        frames=stacks_st,
        idle=st.booleans(),
        weight=st.integers(1, 3),
    ),
    max_size=40,
)


def _batches(samples: Sequence[StackSample], cuts: Sequence[int]) -> list[list[StackSample]]:
    edges = sorted({0, len(samples), *(c % (len(samples) + 1) for c in cuts)})
    return [list(samples[i:j]) for i, j in pairwise(edges)]


def _naive(
    samples: Sequence[StackSample],
    *,
    cutoff: float | None,
    thread: int | None,
    module: str | None,
    mode: TimeMode,
) -> tuple[int, Counter[Frame], Counter[Frame], Counter[int], list[tuple[Frame, ...]], list[int]]:
    chosen = [
        s
        for s in samples
        if mode.takes(s.idle)
        and (thread is None or s.tid == thread)
        and (cutoff is None or s.time >= cutoff)
        and (module is None or (s.frames or (UNKNOWN_FRAME,))[0].module == module)
    ]
    own: Counter[Frame] = Counter()
    total: Counter[Frame] = Counter()
    per_thread: Counter[int] = Counter()
    for s in chosen:
        frames = s.frames or (UNKNOWN_FRAME,)
        own[frames[0]] += s.weight
        for f in set(frames):
            total[f] += s.weight
        per_thread[s.tid] += s.weight
    stacks = [s.frames or (UNKNOWN_FRAME,) for s in chosen]
    return sum(own.values()), own, total, per_thread, stacks, [s.weight for s in chosen]


@settings(max_examples=200, deadline=None)
@given(samples=samples_st, cuts=st.lists(st.integers(0, 100), max_size=4))
def test_random_stacks_self_sums_to_samples_and_total_lies_between_self_and_samples(
    samples: list[StackSample], cuts: list[int]
) -> None:
    p = Profile()
    for batch in _batches(samples, cuts):
        p.add(batch)
    view = p.view()
    assert sum(r.self_samples for r in view.functions) == view.samples
    for r in view.functions:
        assert r.self_samples <= r.total_samples <= view.samples
        assert 0.0 <= r.self_pct <= r.total_pct <= 100.0 + 1e-9
    assert sum(m.self_samples for m in view.modules) == view.samples
    assert sum(t.samples for t in view.threads) == view.samples
    if view.tree is not None:
        assert view.tree.total_samples == view.samples
        assert sum(n.self_samples for n in walk(view.tree)) == view.samples


@settings(max_examples=100, deadline=None)
@given(samples=samples_st, cuts=st.lists(st.integers(0, 100), max_size=4))
def test_views_taken_between_batches_count_every_sample_so_far_once(
    samples: list[StackSample], cuts: list[int]
) -> None:
    p = Profile()
    seen: list[StackSample] = []
    for batch in _batches(samples, cuts):
        p.add(batch)
        seen += batch
        for mode in TimeMode:
            n, own, total, *_ = _naive(seen, cutoff=None, thread=None, module=None, mode=mode)
            view = p.view(mode=mode)
            assert view.samples == n
            assert {r.frame: (r.self_samples, r.total_samples) for r in view.functions} == {
                f: (own[f], t) for f, t in total.items()
            }


@settings(max_examples=300, deadline=None)
@given(
    samples=samples_st,
    cuts=st.lists(st.integers(0, 100), max_size=4),
    recent=st.booleans(),
    now=st.none() | st.floats(0, 30, allow_nan=False),
    thread=st.none() | st.integers(1, 3),
    module=st.none() | st.sampled_from(_MODULES[1:]),
    mode=st.sampled_from(TimeMode),
)
def test_every_view_matches_a_naive_count_of_the_selected_samples(
    samples: list[StackSample],
    cuts: list[int],
    recent: bool,
    now: float | None,
    thread: int | None,
    module: str | None,
    mode: TimeMode,
) -> None:
    window = 4.0
    p = Profile(recent_window=window)
    for batch in _batches(samples, cuts):
        p.add(batch)
    latest = max((s.time for s in samples), default=None)
    if recent and now is not None and latest is not None:
        now = max(now, latest)  # records before the newest sample's window are gone
    view = p.view(recent=recent, now=now, thread=thread, module=module, mode=mode)
    at = now if now is not None else latest
    cutoff = at - window if recent and at is not None else None
    n, own, total, per_thread, stacks, weights = _naive(
        samples, cutoff=cutoff, thread=thread, module=module, mode=mode
    )
    assert view.samples == n
    assert {r.frame: (r.self_samples, r.total_samples) for r in view.functions} == {
        f: (own[f], t) for f, t in total.items()
    }
    assert {t.tid: t.samples for t in view.threads} == dict(per_thread)
    names = {s.tid: s.thread_name for s in samples}
    assert all(t.name == names[t.tid] for t in view.threads)
    # Callers and callees of every function, counted once per sample.
    for f in total:
        callers: Counter[Frame] = Counter()
        callees: Counter[Frame] = Counter()
        for frames, w in zip(stacks, weights, strict=True):
            idx = [i for i, g in enumerate(frames) if g == f]
            for g in {frames[i + 1] for i in idx if i + 1 < len(frames)}:
                callers[g] += w
            for g in {frames[i - 1] for i in idx if i > 0}:
                callees[g] += w
        assert dict(view.callers(f)) == dict(callers)
        assert dict(view.callees(f)) == dict(callees)
    # The tree holds each stack once per sample.
    paths: Counter[tuple[str, ...]] = Counter()
    for frames, w in zip(stacks, weights, strict=True):
        paths[tuple(g.label for g in reversed(frames))] += w
    ends = {path: s for path, (_, s) in tree_paths(view).items() if s}
    assert ends == dict(paths)
    # Rows are sorted as documented.
    keys = [(-r.self_samples, -r.total_samples, r.frame.order) for r in view.functions]
    assert keys == sorted(keys)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=120),
    st.integers(0, 130),
    st.permutations(range(120)),
)
def test_the_first_rows_picked_are_the_first_rows_of_the_whole_order(
    counts: list[tuple[int, int]], n: int, names: list[int]
) -> None:
    # Few distinct counts, so most functions tie on both and frame order decides, as it
    # does at the cut a table makes in tens of thousands of functions.
    frames = [Frame(f"f{names[i]:03}", None, APP) for i in range(len(counts))]
    counted = [(-own, -(own + more), fid) for fid, (own, more) in enumerate(counts)]
    expected = sorted(counted, key=lambda k: (k[0], k[1], frames[k[2]].order))
    rows = FunctionRows(list(counted), frames, 1.0)
    picked = rows[:n]  # before anything is ordered: picked, not sorted
    assert [(r.frame, -r.self_samples, -r.total_samples) for r in picked] == [
        (frames[fid], own, total) for own, total, fid in expected[:n]
    ]
    if n < len(counts):
        assert rows[n].frame is frames[expected[n][2]]
    assert len(rows) == len(counts)
    assert [r.frame for r in rows] == [frames[k[2]] for k in expected]
    assert rows[:n] == picked and rows == tuple(rows) and rows != ()
    # By total, and either order reversed, as the functions pane sorts them.
    for by_total in (False, True):
        for reverse in (False, True):
            fresh = FunctionRows(list(counted), frames, 1.0)

            def key(k: tuple[int, int, int], by_total: bool = by_total) -> tuple[object, ...]:
                counts = (k[1], k[0]) if by_total else (k[0], k[1])
                return (*counts, frames[k[2]].order)

            want = sorted(counted, key=key, reverse=reverse)[:n]
            got = fresh.top(n, by_total=by_total, reverse=reverse)
            assert [r.frame for r in got] == [frames[k[2]] for k in want]


def test_row_of_finds_a_function_by_an_equal_frame_without_ordering_the_rows() -> None:
    frames = [Frame(f"f{i}", None, APP, vaddr=i) for i in range(50)]
    counted = [(-(i % 7), -(i % 7) - 1, i) for i in range(50)]
    rows = FunctionRows(list(counted), frames, 0.5)
    found = rows.row_of(Frame("f33", None, APP, vaddr=33))  # equal, not the same object
    assert found is not None and found.frame is frames[33]
    assert (found.self_samples, found.total_samples, found.self_pct) == (33 % 7, 33 % 7 + 1, 2.5)
    assert rows.row_of(Frame("f33", None, APP, vaddr=34)) is None  # another address
    assert rows.row_of(Frame("nowhere", None, APP)) is None
    assert rows._ordered is None and rows._rows is None


def test_processes_are_counted_and_a_process_filter_selects_its_threads():
    p = Profile()
    p.add([
        StackSample(0.0, 11, "a", (WORK, MAIN), pid=10, process_name="server", weight=3),
        StackSample(0.0, 12, "b", (READ, MAIN), pid=10, process_name="server"),
        StackSample(0.0, 21, "c", (HASH, RUN, MAIN), pid=20, process_name="worker", weight=6),
        # a later sample cannot move a thread to another process
        StackSample(0.0, 11, "a", (WORK, MAIN), pid=99, process_name="other"),
    ])  # fmt: skip
    view = p.view()
    assert [(r.pid, r.name, r.samples) for r in view.processes] == [
        (20, "worker", 6), (10, "server", 5)
    ]  # fmt: skip
    assert abs(sum(r.pct for r in view.processes) - 100.0) < 1e-9
    server = p.view(process=10)
    assert server.samples == 5 and {r.tid for r in server.threads} == {11, 12}
    assert counts(server)["work()"] == (4, 4) and "hash(char const*)" not in counts(server)
    both = p.view(process=20, thread=11)
    assert both.samples == 0
