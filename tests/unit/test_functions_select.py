"""The functions pane's selection (``ui.functions.select``): for every sort, either way,
with and without a text filter, the first rows are those of all the view's rows sorted as
the column says (ties broken by frame order), each with its counts and shares."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from livesym.profile import Profile, StackSample
from livesym.records import Frame
from livesym.ui.format import basename
from livesym.ui.functions import select
from livesym.ui.options import SORT_COLUMNS, ViewOptions

MAIN = Frame("main", "main", "/bin/app")


def _key(sort: str, row) -> tuple[object, ...]:  # type: ignore[no-untyped-def]
    f = row.frame
    return {
        "self": (-row.self_samples, -row.total_samples, f.order),
        "total": (-row.total_samples, -row.self_samples, f.order),
        "function": (f.label.casefold(), f.order),
        "module": (basename(f.module).casefold(), -row.self_samples, f.order),
    }[sort]


NAMES = st.sampled_from(["Alpha", "alpha", "beta", "Gamma", "delta", "eps"])
MODULES = st.sampled_from(["/lib/libA.so", "/lib/liba.so", "/bin/app", None])
ROWS = st.lists(st.tuples(NAMES, MODULES, st.integers(1, 30)), min_size=1, max_size=20)
TEXTS = st.sampled_from(["", "a", "LIB", "zzz"])


@settings(max_examples=80, deadline=None)
@given(ROWS, st.sampled_from(SORT_COLUMNS), st.booleans(), TEXTS, st.integers(1, 8))
def test_the_first_rows_are_all_rows_sorted_by_the_column(rows, sort, flipped, text, limit):
    profile = Profile()
    for name, module, n in rows:
        leaf = Frame(name, name, module)
        profile.add(StackSample(0.0, 1, "t", (leaf, MAIN)) for _ in range(n))
    view = profile.view()
    options = replace(ViewOptions(), sort=sort, flipped=flipped, text=text)
    shown, matching = select(view, options, limit=limit)

    def hay(r) -> str:  # type: ignore[no-untyped-def]
        return f"{r.frame.label}\n{r.frame.module or ''}".casefold()

    wanted = [r for r in view.functions if text.casefold() in hay(r)]
    wanted.sort(key=lambda r: _key(sort, r), reverse=flipped)
    assert shown == wanted[:limit]
    assert matching == (len(wanted) if text else len(view.functions))
