"""Call trees read from a view's stacks: top-down, inverted, and a function's sandwich,
on hand-made stacks with known answers and on random ones against a count made here
the plain way (a walk over every sample)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.profile import Profile, ProfileView, StackNode, StackSample
from livesym.records import ROOT_FRAME, Frame

APP = "/usr/bin/app"
MAIN = Frame("main", "main", APP)
DISPATCH = Frame("dispatch", "dispatch", APP)
PARSE = Frame("parse", "parse", APP)
RENDER = Frame("render", "render", APP)
BLEND = Frame("blend", "blend", APP)
FIB = Frame("fib", "fib", APP)


def view_of(*stacks: tuple[int, tuple[Frame, ...]]) -> ProfileView:
    """A view of ``(count, frames leaf first)`` stacks."""
    p = Profile()
    p.add(StackSample(0.0, 1, "t", frames, weight=n) for n, frames in stacks)
    return p.view()


def paths(node: StackNode | None) -> dict[tuple[str, ...], tuple[int, int]]:
    """Every node under ``node`` as its labels from it -> (total, self)."""
    out: dict[tuple[str, ...], tuple[int, int]] = {}
    todo = [((), node)] if node is not None else []
    while todo:
        path, n = todo.pop()
        out[path] = (n.total_samples, n.self_samples)
        todo.extend(((*path, c.frame.label), c) for c in n.children)
    return out


def walk(node: StackNode | None) -> Iterator[StackNode]:
    todo = [node] if node is not None else []
    while todo:
        n = todo.pop()
        yield n
        todo.extend(n.children)


# main -> dispatch -> {parse -> blend, render -> blend}; blend the hot leaf
KNOWN = (
    (30, (BLEND, PARSE, DISPATCH, MAIN)),
    (10, (PARSE, DISPATCH, MAIN)),
    (45, (BLEND, RENDER, DISPATCH, MAIN)),
    (15, (RENDER, DISPATCH, MAIN)),
)


def test_the_top_down_tree_has_each_path_s_samples():
    got = paths(view_of(*KNOWN).tree)
    assert got[()] == (100, 0)
    assert got[("main", "dispatch")] == (100, 0)
    assert got[("main", "dispatch", "parse")] == (40, 10)
    assert got[("main", "dispatch", "parse", "blend")] == (30, 30)
    assert got[("main", "dispatch", "render", "blend")] == (45, 45)
    # hottest first
    dispatch = view_of(*KNOWN).tree.children[0].children[0]  # type: ignore[union-attr]
    assert [c.frame for c in dispatch.children] == [RENDER, PARSE]


def test_the_inverted_tree_starts_at_the_leaves_and_climbs_to_the_callers():
    got = paths(view_of(*KNOWN).inverted_tree)
    assert got[()] == (100, 0)
    assert got[("blend",)][0] == 75 and got[("render",)][0] == 15 and got[("parse",)][0] == 10
    assert got[("blend", "render")][0] == 45 and got[("blend", "parse")][0] == 30
    # self: the time spent in the function itself, at the first level only
    assert got[("blend",)] == (75, 75) and got[("blend", "render")] == (45, 0)
    assert got[("blend", "render", "dispatch", "main")] == (45, 0)


def test_a_sandwich_has_the_callers_above_and_the_callees_below():
    view = view_of(*KNOWN)
    below = paths(view.callees_tree(DISPATCH))
    assert below[()] == (100, 0)
    assert below[("render", "blend")] == (45, 45) and below[("parse",)] == (40, 10)
    above = paths(view.callers_tree(BLEND))
    assert above[()] == (75, 75)
    assert above[("render", "dispatch", "main")] == (45, 0)
    assert above[("parse", "dispatch")] == (30, 0)
    assert view.callers_tree(Frame("nowhere", "nowhere", APP)) is None


def test_recursion_counts_once_at_a_sandwich_s_root_and_hangs_below_its_outermost_call():
    # fib -> fib -> fib (leaf) ten times, fib alone five
    view = view_of((10, (FIB, FIB, FIB, MAIN)), (5, (FIB, MAIN)))
    row = view.functions.row_of(FIB)
    assert row is not None and row.total_samples == 15
    below = paths(view.callees_tree(FIB))
    assert below[()] == (15, 5) and below[("fib",)] == (10, 0) and below[("fib", "fib")] == (10, 10)
    above = paths(view.callers_tree(FIB))
    assert above[()] == (15, 15) and above[("fib", "fib", "main")] == (10, 0)
    assert above[("main",)] == (5, 0)


def test_an_empty_view_has_no_trees():
    view = Profile().view()
    assert view.tree is None and view.inverted_tree is None and view.callees_tree(MAIN) is None


NAMES = [Frame(n, n, APP) for n in "abcdefg"]
stacks = st.lists(
    st.tuples(st.integers(1, 5), st.lists(st.sampled_from(NAMES), min_size=1, max_size=7)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(stacks)
def test_trees_agree_with_the_flat_table_and_with_a_plain_count(raw):
    view = view_of(*((n, tuple(frames)) for n, frames in raw))
    samples = sum(n for n, _ in raw)
    # A top-down node's total is its self plus its children's totals; an inverted
    # tree's self is at its first level only, the whole of each total there.
    for node in walk(view.tree):
        assert node.total_samples == node.self_samples + sum(c.total_samples for c in node.children)
    for node in walk(view.inverted_tree):
        assert node.self_samples == (node.total_samples if node.depth == 1 else 0)
    for root in (view.tree, view.inverted_tree):
        assert root is not None and root.frame == ROOT_FRAME and root.total_samples == samples
        # each path's total is the samples whose stack runs along it, counted plainly
        step = -1 if root is view.tree else 1
        for path, (total, _) in paths(root).items():
            plain = 0
            for n, frames in raw:
                ordered = [f.label for f in (frames[::-1] if step == -1 else frames)]
                plain += n if tuple(ordered[: len(path)]) == path else 0
            assert total == plain, path
    # A function's sandwich holds its flat TOTAL, recursion once; the inverted roots
    # are the flat SELF counts.
    for row in view.functions:
        for half in (view.callees_tree(row.frame), view.callers_tree(row.frame)):
            assert half is not None and half.total_samples == row.total_samples
    inverted = view.inverted_tree
    assert inverted is not None
    leaves = {c.frame: c.total_samples for c in inverted.children}
    assert leaves == {r.frame: r.self_samples for r in view.functions if r.self_samples}
    assert Counter(leaves).total() == samples


def test_a_node_knows_whether_it_has_children_without_making_them():
    view = view_of(*KNOWN)
    for root in (view.tree, view.inverted_tree, view.callers_tree(BLEND)):
        for node in walk(root):
            assert node.has_children == bool(node.children)


def test_a_path_is_followed_down_child_by_child_and_a_search_counts_each_sample_once():
    view = view_of(*KNOWN)
    assert view.tree is not None
    main = view.tree.child(MAIN)
    dispatch = main.child(DISPATCH) if main is not None else None
    assert dispatch is not None and dispatch.total_samples == 100
    render = dispatch.child(RENDER)
    assert render is not None and (render.total_samples, render.self_samples) == (60, 15)
    assert dispatch.child(BLEND) is None  # blend is never dispatch's callee
    ids = view._stacks.frame_ids
    # blend and parse on 85 samples' stacks (30 hold both), under render: blend on 45
    assert view.tree.samples_holding(frozenset({ids[BLEND], ids[PARSE]})) == 85
    assert render.samples_holding(frozenset({ids[BLEND]})) == 45
    assert render.samples_holding(frozenset({ids[PARSE]})) == 0


@settings(max_examples=100, deadline=None)
@given(stacks, st.integers(1, 4))
def test_the_hottest_children_are_the_first_children(raw, k):
    view = view_of(*((n, tuple(frames)) for n, frames in raw))
    for step in (-1, 1):
        full = view._stacks.tree(step)
        fresh = view._stacks.tree(step)
        assert full is not None and fresh is not None
        todo = [(full, fresh)]
        while todo:
            a, b = todo.pop()
            shown, more, samples = b.hottest(k)  # b's children not made yet
            expect = a.children
            assert [(c.frame, c.total_samples, c.self_samples) for c in shown] == [
                (c.frame, c.total_samples, c.self_samples) for c in expect[:k]
            ]
            assert more == len(expect[k:]) and samples == sum(c.total_samples for c in expect[k:])
            todo.extend(zip(expect[: len(shown)], shown, strict=True))
